"""Storyline bindings (NarraNexus): bind, update, history, what a routed turn carries, stale goals, the greeting and
the context, deletes, and a model's judgement of a conversation's goals (with the fallback when it answers badly)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import narrative
from conftest import FakeClock
from llm_server import Reply, ScriptedLLMServer, scripted_llm_server
from narrative.errors import NotFound, ValidationError
from narrative.model import BindingKind
from test_export import canonical

llm_server = pytest.fixture(scripted_llm_server)


@pytest.fixture
def garden(mem: narrative.Memory) -> int:
    """A storyline of alice's own, with one turn routed to it."""
    storyline = mem.create_storyline("Garden app", keywords=("garden", "plot"))
    return storyline.id


# --- bind, update, complete ---------------------------------------------------------------------------------------


def test_bind_update_and_complete_move_a_binding_to_history(mem: narrative.Memory, garden: int) -> None:
    job = mem.bind(garden, "job", "Import the bed measurements", payload={"rows": 24})
    assert (job.kind, job.status, job.payload, job.active) == (BindingKind.JOB, "running", {"rows": 24}, True)
    assert job.touched_by == "bound" and job.completed_at is None
    paused = mem.update_binding(job.id, status="paused", payload={"rows": 24, "done": 10})
    assert (paused.status, paused.payload, paused.touched_by) == ("paused", {"rows": 24, "done": 10}, "updated by hand")
    assert paused.touched_at > job.touched_at
    done = mem.complete_binding(job.id)
    assert done.status == "done" and done.completed_at is not None and not done.active
    assert mem.list_bindings(garden) == []  # live ones only
    assert [b.id for b in mem.list_bindings(garden, history=True)] == [job.id]
    back = mem.update_binding(job.id, status="running")  # a live status brings it back
    assert back.completed_at is None and [b.id for b in mem.list_bindings()] == [job.id]


def test_binding_the_same_name_again_updates_the_live_one(mem: narrative.Memory, garden: int) -> None:
    first = mem.bind(garden, "toolset", "map tools", payload={"tools": ["draw"]})
    again = mem.bind(garden, "toolset", "Map  Tools", payload={"tools": ["draw", "measure"]})
    assert again.id == first.id and again.payload == {"tools": ["draw", "measure"]}
    assert again.touched_by == "bound again"
    mem.complete_binding(first.id)
    fresh = mem.bind(garden, "toolset", "map tools")  # the old one is history: a new live one
    assert fresh.id != first.id and len(mem.list_bindings(garden, history=True)) == 1


@pytest.mark.parametrize(
    ("kind", "status", "field"),
    [("goal", "done", "status"), ("job", "achieved", "status"), ("robot", None, "kind"), ("toolset", "", "status")],
)
def test_statuses_belong_to_their_kind(
    mem: narrative.Memory, garden: int, kind: str, status: str | None, field: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        mem.bind(garden, kind, "anything", status=status)
    assert caught.value.field == field
    assert mem.list_bindings(history=True) == [] and mem.list_bindings() == []


def test_payloads_must_be_plain_json_objects(mem: narrative.Memory, garden: int) -> None:
    for bad in ({"x": float("nan")}, {"x": object()}, {"x": "y" * 60_000}):
        with pytest.raises(ValidationError):
            mem.bind(garden, "module", "chat history", payload=bad)
    with pytest.raises(ValidationError):
        mem.complete_binding(mem.bind(garden, "goal", "Ship it").id, status="ongoing")  # not a final status


def test_another_users_storyline_and_binding_are_not_found(mem: narrative.Memory, garden: int) -> None:
    mine = mem.bind(garden, "goal", "Ship the garden app")
    with pytest.raises(NotFound):
        mem.bind(garden, "goal", "Borrowed", user="bob")
    for call in (mem.update_binding, mem.complete_binding, mem.delete_binding):
        with pytest.raises(NotFound):
            call(mine.id, user="bob")
    assert mem.list_bindings(user="bob") == []


# --- what a routed turn carries ------------------------------------------------------------------------------------


def test_a_routed_turn_carries_its_storylines_bindings_and_the_auxiliary_names(mem: narrative.Memory) -> None:
    garden = mem.remember("I want to build a community garden app with a plot map.", speaker="alice")
    wedding = mem.remember("Completely different topic: my sister's wedding speech in Porto.", speaker="alice")
    assert garden.storyline.id != wedding.storyline.id
    tools = mem.bind(garden.storyline.id, "toolset", "garden map tools", payload={"tools": ["draw_plot_map"]})
    goal = mem.bind(wedding.storyline.id, "goal", "Write the wedding speech")
    turn = mem.remember("The speech needs three stories from our childhood.", speaker="alice")
    assert turn.storyline.id == wedding.storyline.id  # a follow-up in the same storyline
    assert [b.id for b in turn.bindings] == [goal.id]
    name = garden.storyline.name
    assert turn.auxiliary == [{"storyline_id": garden.storyline.id, "storyline": name, "bindings": [tools.name]}]
    data = json.loads(json.dumps(turn.to_dict()))
    assert data["bindings"][0]["name"] == goal.name and data["auxiliary"] == turn.auxiliary
    assert f"bound goal #{goal.id}: Write the wedding speech (ongoing)" in turn.describe()


# --- goals touched, goals gone stale ----------------------------------------------------------------------------


def test_a_turn_that_names_a_goal_touches_it_and_says_why(mem: narrative.Memory, clock: FakeClock) -> None:
    first = mem.remember("Let's plan the community garden app and its plot map.", speaker="alice")
    goal = mem.bind(first.storyline.id, "goal", "Launch the garden app before spring")
    other = mem.bind(first.storyline.id, "goal", "Find a sponsor for the seeds")
    clock.advance(minutes=10)
    turn = mem.remember("The garden app needs a launch date before spring planting.", speaker="alice")
    assert turn.storyline.id == first.storyline.id
    touched = {b.id: b for b in mem.list_bindings(kind="goal")}
    assert touched[goal.id].touched_at == turn.message.created_at
    assert touched[goal.id].touched_by == f"message #{turn.message.id} names it (app, garden, launch, spring)"
    assert touched[other.id].touched_at == other.touched_at  # not named: not touched


def test_stale_goals_are_the_ongoing_ones_nothing_touched(mem: narrative.Memory, garden: int, clock: FakeClock) -> None:
    quiet = mem.bind(garden, "goal", "Launch before spring")
    paused = mem.bind(garden, "goal", "Find a sponsor", status="paused")
    mem.bind(garden, "job", "Import beds")  # jobs are not goals
    clock.advance(days=6)
    fresh = mem.bind(garden, "goal", "Draw the map")
    assert mem.stale_goals() == []  # 6 days < 7
    clock.advance(days=2)
    stale = mem.stale_goals()
    assert [r.goal.id for r in stale] == [quiet.id]  # paused is quiet on purpose; the job is no goal
    why = stale[0].why()
    assert why["quiet_days"] == 8 and why["touched_by"] == "bound" and "7 days" in why["rule"]
    assert [r.goal.id for r in mem.stale_goals(days=1)] == [quiet.id, fresh.id]
    mem.update_binding(quiet.id, payload={"note": "picked back up"})
    assert [r.goal.id for r in mem.stale_goals()] == []
    assert paused.status == "paused"


def test_an_archived_storylines_goals_are_not_reminded(mem: narrative.Memory, garden: int, clock: FakeClock) -> None:
    mem.bind(garden, "goal", "Launch before spring")
    clock.advance(days=30)
    assert len(mem.stale_goals()) == 1
    mem.archive_storyline(garden)
    assert mem.stale_goals() == [] and len(mem.list_bindings()) == 1  # still alive: its storyline exists


def test_the_greeting_and_the_context_show_bindings_and_stale_goals(mem: narrative.Memory, clock: FakeClock) -> None:
    turn = mem.remember("Let's plan the community garden app and its plot map.", speaker="alice")
    mem.bind(turn.storyline.id, "job", "Import the bed measurements", status="running")
    mem.bind(turn.storyline.id, "goal", "Find a sponsor for the seeds")
    mem.close_conversation()
    mem.confirm_memory()
    clock.advance(days=9)
    hello = mem.greet()
    assert "Goals gone quiet (untouched for 7 days or more):" in hello.text
    assert "Find a sponsor for the seeds" in hello.text and hello.text.rstrip().endswith("pick up?")
    assert [g.goal.name for g in hello.stale_goals] == ["Find a sponsor for the seeds"]
    assert hello.to_dict()["stale_goals"][0]["why"]["quiet_days"] == 9
    block = mem.context("the garden app", 2000, record=False)
    assert block.storyline is not None and block.storyline.id == turn.storyline.id
    assert f'<bindings storyline="{block.storyline.name}">' in block.text
    assert "- job: Import the bed measurements (running)" in block.text
    assert "- stale goal: Find a sponsor for the seeds" in block.text
    info = {s.name: s for s in block.sections}
    assert info["bindings"].shown == 2 and info["reminders"].shown == 1


def test_without_bindings_the_context_has_no_agenda_sections(mem: narrative.Memory) -> None:
    mem.remember("Let's plan the community garden app.", speaker="alice")
    block = mem.context("garden", 2000, record=False)
    assert "<bindings" not in block.text and "<reminders>" not in block.text
    assert {s.name: s.tokens for s in block.sections}["bindings"] == 0


# --- deletes --------------------------------------------------------------------------------------------------------


def test_bindings_go_with_their_storyline_and_their_user(mem: narrative.Memory, garden: int) -> None:
    mem.bind(garden, "goal", "Launch before spring")
    kept = mem.bind(mem.your_story().id, "module", "journal")
    mem.delete_storyline(garden)  # its memories move to Your Story; its bindings do not
    assert [b.id for b in mem.list_bindings()] == [kept.id]
    assert mem.store.count_rows("storyline_bindings", "alice") == 1
    mem.delete_user("alice")
    assert mem.store.count_rows("storyline_bindings", "alice") == 0


def test_bindings_survive_export_and_import_with_their_payload_verbatim(
    mem: narrative.Memory, garden: int, databases: Any
) -> None:
    payload = {"tools": ["draw"], "memory_id": 123456, "nested": {"conversation_id": 999}}
    mem.bind(garden, "toolset", "map tools", payload=payload)
    mem.complete_binding(mem.bind(garden, "job", "Import beds").id)
    text = mem.export("json")
    with narrative.Memory(databases.fresh(), user="alice", embedder="none", clock=FakeClock(), env={}) as other:
        other.import_data(text)
        again = other.export("json")
        assert canonical(json.loads(again)) == canonical(json.loads(text))  # ids are fresh on PostgreSQL
        if mem.store.backend == "sqlite":
            assert again == text  # byte for byte
        [tools] = other.list_bindings()
        assert tools.payload == payload  # ids inside a payload are the agent's own: never renumbered
        assert [b.name for b in other.list_bindings(history=True)] == ["Import beds"]


# --- with a model ---------------------------------------------------------------------------------------------------
#
# The scripted server answers every request with one reply (its fallback): the write and close steps find it out of
# shape and keep their heuristics, and only the step whose answer it is uses it.


@pytest.fixture
def model_mem(db_path: Path, llm_server: ScriptedLLMServer, clock: FakeClock) -> Iterator[narrative.Memory]:
    llm_server.set_fallback(Reply.json({}))
    memory = narrative.Memory(
        db_path, user="maya", embedder="none", clock=clock, env={}, llm="ollama", llm_url=llm_server.url, llm_model="t"
    )
    yield memory
    memory.close()


def _goals_then_close(mem: narrative.Memory, server: ScriptedLLMServer, answer: Any) -> tuple[int, int]:
    turn = mem.remember("Today I drafted the opening of Lena's toast.", speaker="maya")
    toast = mem.bind(turn.storyline.id, "goal", "Write the wedding speech")
    sponsor = mem.bind(turn.storyline.id, "goal", "Find a sponsor")
    mem.close_conversation()
    server.set_fallback(Reply.json(answer))
    before = len(server.chat_requests)
    mem.confirm_memory()
    asked = [
        r.body for r in server.chat_requests[before:] if r.body and "long-running goals" in str(r.body["messages"])
    ]
    assert len(asked) == 1 and asked[0] is not None
    assert "Write the wedding speech" in asked[0]["messages"][1]["content"]
    return toast.id, sponsor.id


def test_a_model_says_which_goals_a_conversation_moved_and_achieved(
    model_mem: narrative.Memory, llm_server: ScriptedLLMServer, db_path: Path
) -> None:
    turn = model_mem.remember("Today I drafted the opening of Lena's toast.", speaker="maya")
    toast = model_mem.bind(turn.storyline.id, "goal", "Write the wedding speech")
    sponsor = model_mem.bind(turn.storyline.id, "goal", "Find a sponsor")
    judged = {
        "goals": [
            {"id": toast.id, "touched": True, "status": "achieved", "reason": "the toast is finished"},
            {"id": sponsor.id, "touched": False, "status": "ongoing", "reason": ""},
        ]
    }
    model_mem.close_conversation()
    llm_server.set_fallback(Reply.json(judged))
    model_mem.confirm_memory()
    [done] = model_mem.list_bindings(history=True)
    assert (done.id, done.status, done.touched_by) == (toast.id, "achieved", "model: the toast is finished")
    assert done.touched_at == turn.message.created_at  # the time of the storyline's last message
    [still] = model_mem.list_bindings(kind="goal")
    assert still.id == sponsor.id and still.touched_by == "bound"


@pytest.mark.parametrize(
    "answer",
    [
        {"goals": [{"id": 999999, "touched": True, "status": "achieved", "reason": "made up"}]},
        {"goals": [{"id": 1, "touched": True, "status": "finished", "reason": "not a status"}]},
        {"goals": "all done"},
        {"nothing": True},
    ],
)
def test_an_answer_out_of_shape_changes_no_goal(
    model_mem: narrative.Memory, llm_server: ScriptedLLMServer, answer: Any
) -> None:
    toast, sponsor = _goals_then_close(model_mem, llm_server, answer)
    goals = model_mem.list_bindings(kind="goal")
    assert {b.id for b in goals} == {toast, sponsor} and all(b.touched_by == "bound" for b in goals)
