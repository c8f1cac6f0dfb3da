"""The close path: close → preview → confirm | edit | redirect | split | resume, on real SQLite.

Every refused step raises and leaves the database exactly as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import narrative
from conftest import FakeClock
from llm_server import Reply, ScriptedLLMServer, scripted_llm_server
from narrative.errors import ConversationAlreadyActive, InvalidTransition, NotFound, ValidationError
from narrative.model import ConversationStatus, DeltaType, EntityType, Source, Stream
from narrative.write import lifecycle
from narrative.write.preview import Preview

Snap = Callable[[Any], dict[str, list[tuple[Any, ...]]]]
llm_server = pytest.fixture(scripted_llm_server)

TURNS = [
    ("user", "We decided to use Postgres instead of MySQL because the team knows it well."),
    ("assistant", "Good call. What is the first step?"),
    ("user", "I need to write the migration scripts by Friday. I'm waiting on Priya to send the schema dump."),
    ("assistant", "Noted: migrations first, and Priya's schema dump is the blocker."),
    ("user", "Should we keep the old reporting views?"),
]


def talk(mem: narrative.Memory, turns: list[tuple[str, str]] = TURNS, title: str = "db move") -> int:
    conversation = mem.start_conversation(title)
    for role, text in turns:
        mem.remember(text, role, speaker="alex" if role == "user" else "rook")
    return conversation.id


def assert_refused(mem: narrative.Memory, snapshot: Snap, error: type[Exception], step: Callable[[], object]) -> None:
    before = snapshot(mem.store)
    with pytest.raises(error):
        step()
    assert snapshot(mem.store) == before


def reviewed(mem: narrative.Memory, conversation_id: int) -> list[narrative.model.MemoryItem]:
    return [
        m for m in mem.list_memories(conversation_id=conversation_id, stream="narrative", limit=100) if m.user_reviewed
    ]


# --- close: active → ready_to_close, with a preview and nothing final -------------------------------


def test_close_moves_to_ready_and_keeps_a_preview_without_storing_anything_final(
    mem: narrative.Memory, snapshot: Snap
) -> None:
    cid = talk(mem)
    before = snapshot(mem.store)
    preview = mem.close_conversation()
    after = snapshot(mem.store)
    assert {t for t in before if before[t] != after[t]} == {"conversations"}  # only the status and the preview
    conversation = mem.get_conversation(cid)
    assert conversation.status is ConversationStatus.READY_TO_CLOSE and conversation.closed_at is not None
    assert mem.store.get_preview("alice", cid) == preview.to_dict()
    assert mem.get_memory_preview(cid).to_dict() == preview.to_dict()
    assert mem.get_memory_preview().conversation_id == cid  # the one waiting for review


def test_preview_extracts_entities_deltas_narrative_and_destination(mem: narrative.Memory) -> None:
    cid = talk(mem)
    preview = mem.close_conversation(cid)
    kinds = {e.entity_type for e in preview.kept}
    assert {EntityType.DECISION, EntityType.TASK, EntityType.WAITING_ON, EntityType.QUESTION_OPENED} <= kinds
    assert all(e.entity_ids for e in preview.entities)  # reused from the write path, not re-extracted
    extracted = preview.extracted()
    assert extracted["decisions"][0]["why"] == "the team knows it well"
    assert extracted["waiting_on"][0]["who"] == "Priya"
    changes = preview.changes()
    assert [d["who"] for d in changes["new_waiting_ons"]] == ["Priya"]
    assert len(changes["new_open_threads"]) == 2  # the task and the question
    # meaning, not transcript: the decision and why, what stays open; no assistant line retold
    text = preview.narrative
    assert "Alex decided to use Postgres instead of MySQL, because the team knows it well" in text
    assert "Still open:" in text and "Priya" in text
    assert "Good call" not in text and "What is the first step" not in text
    assert 2 <= text.count(". ") + 1 <= 4
    storyline = mem.store.get_storyline("alice", preview.destination.storyline_id)
    assert preview.destination == preview.suggestion and storyline.name == preview.destination.name
    assert 0.0 <= preview.destination.confidence <= 1.0 and "messages" in preview.destination.reason
    assert "Memory from conversation" in preview.text() and "[confirm]" in preview.text()
    assert Preview.from_dict(preview.to_dict()).to_dict() == preview.to_dict()


def test_a_conversation_with_only_small_talk_goes_to_your_story(mem: narrative.Memory) -> None:
    mem.start_conversation()
    mem.remember("Hi there!", speaker="alex")
    mem.remember("Hello! How are you?", "assistant", speaker="rook")
    preview = mem.close_conversation()
    assert preview.destination.name == "Your Story"
    assert 2 <= len(preview.narrative.split(". ")) <= 4


def test_closing_when_nothing_is_active_is_refused(mem: narrative.Memory, snapshot: Snap) -> None:
    mem.your_story()  # the user exists: refusals below must not even bootstrap it
    assert_refused(mem, snapshot, InvalidTransition, mem.close_conversation)
    cid = talk(mem)
    mem.close_conversation(cid)
    assert_refused(mem, snapshot, InvalidTransition, mem.close_conversation)
    assert_refused(mem, snapshot, InvalidTransition, lambda: mem.close_conversation(cid))  # already closing
    assert_refused(mem, snapshot, NotFound, lambda: mem.close_conversation(999))


def test_messages_the_write_path_never_saw_are_extracted_at_close(mem: narrative.Memory) -> None:
    mem.add_message("We decided to ship on Friday because QA signed off.", speaker="alex")
    mem.add_message("I'm waiting on Dana to send the release notes.", speaker="alex")
    preview = mem.close_conversation()
    found = {e.entity_type: e for e in preview.kept}
    assert found[EntityType.WAITING_ON].entity_ids == [] and found[EntityType.WAITING_ON].data["who"] == "Dana"
    result = mem.confirm_memory()
    stored = {e.entity_type for e in mem.store.list_entities("alice", memory_id=result.memories[0].id)}
    assert {EntityType.DECISION, EntityType.WAITING_ON} <= stored


# --- confirm -----------------------------------------------------------------------------------------


def test_confirm_stores_the_memory_applies_deltas_and_archives(mem: narrative.Memory, clock: FakeClock) -> None:
    cid = talk(mem)
    preview = mem.close_conversation(cid)
    result = mem.confirm_memory(cid)
    conversation = mem.get_conversation(cid)
    assert conversation.status is ConversationStatus.ARCHIVED and conversation.archived_at is not None
    assert conversation.compression_model == "heuristic" and conversation.compression_passes == 1
    assert conversation.compression_duration_ms is not None and conversation.compression_duration_ms >= 0
    assert mem.store.get_preview("alice", cid) is None
    [memory] = result.memories
    assert (memory.stream, memory.source) == (Stream.NARRATIVE, Source.NARRATIVE)
    assert memory.user_reviewed and not memory.user_edited and memory.content == preview.narrative
    assert memory.storyline_id == preview.destination.storyline_id and memory.conversation_id == cid
    assert set(memory.message_ids) == {m.id for m in mem.messages(cid)}  # provenance: the whole transcript
    attached = mem.store.list_entities("alice", memory_id=memory.id)
    assert {e.id for e in attached} == {i for e in preview.entities for i in e.entity_ids}
    assert all(e.storyline_id == memory.storyline_id for e in attached)
    deltas = mem.store.list_state_deltas("alice", conversation_id=cid)
    assert sorted(d.delta_type for d in deltas) == sorted(d.delta_type for d in preview.deltas)
    assert all(d.applied and d.applied_at is not None and d.memory_id == memory.id for d in deltas)
    assert all(n.sealed for n in mem.list_narratives() if n.conversation_id == cid)  # running links sealed
    assert result.end is not None and result.end.sealed
    archive = mem.get_conversation_archive(cid)
    assert [m.id for m in archive["memories"]] == [memory.id]
    assert [m.content for m in archive["messages"]] == [text for _, text in TURNS]
    assert mem.search("Postgres", k=5, mode="keyword")  # findable
    assert result.to_dict()["status"] == "archived" and "archived" in result.text()


def test_confirm_is_refused_twice_without_a_preview_and_for_an_active_conversation(
    mem: narrative.Memory, snapshot: Snap
) -> None:
    mem.your_story()
    assert_refused(mem, snapshot, InvalidTransition, mem.confirm_memory)  # nothing ready
    cid = talk(mem)
    assert_refused(mem, snapshot, InvalidTransition, lambda: mem.confirm_memory(cid))  # still active
    lifecycle.close(mem.store, "alice", cid, mem.clock())  # closed behind the preview's back
    assert_refused(mem, snapshot, InvalidTransition, lambda: mem.confirm_memory(cid))
    mem.resume_conversation(cid)
    mem.close_conversation(cid)
    mem.confirm_memory(cid)
    assert_refused(mem, snapshot, InvalidTransition, lambda: mem.confirm_memory(cid))  # twice
    assert_refused(mem, snapshot, InvalidTransition, lambda: mem.get_memory_preview(cid))
    assert_refused(mem, snapshot, InvalidTransition, lambda: mem.edit_preview(cid, "x"))
    assert len(reviewed(mem, cid)) == 1


def test_a_missing_preview_is_recomputed_when_asked_for(mem: narrative.Memory) -> None:
    cid = talk(mem)
    lifecycle.close(mem.store, "alice", cid, mem.clock())
    assert mem.get_memory_preview(cid).narrative
    assert mem.confirm_memory(cid).memories


def test_confirm_with_edited_narrative_and_destination(mem: narrative.Memory) -> None:
    cid = talk(mem)
    target = mem.create_storyline("Infrastructure")
    proposed = mem.close_conversation(cid).narrative
    result = mem.confirm_memory(cid, edited_narrative="We moved to Postgres.", destination_storyline_id=target.id)
    [memory] = result.memories
    assert memory.content == "We moved to Postgres." and memory.user_edited and memory.original_content == proposed
    assert memory.storyline_id == target.id


# --- review: edit, redirect, resume ------------------------------------------------------------------


def test_edit_keeps_the_original_and_marks_the_memory_edited(mem: narrative.Memory) -> None:
    cid = talk(mem)
    proposed = mem.close_conversation(cid).narrative
    edited = mem.edit_preview(cid, "Alex chose Postgres; the migration waits on Priya.")
    assert edited.user_edited and edited.original_narrative == proposed
    again = mem.edit_preview(cid, "Second wording.")
    assert again.original_narrative == proposed  # the first proposal is what is kept
    [memory] = mem.confirm_memory(cid).memories
    assert (memory.content, memory.user_edited, memory.original_content) == ("Second wording.", True, proposed)


def test_edit_can_drop_over_extracted_entities(mem: narrative.Memory, snapshot: Snap) -> None:
    cid = talk(mem)
    preview = mem.close_conversation(cid)
    question = next(e for e in preview.entities if e.entity_type is EntityType.QUESTION_OPENED)
    edited = mem.edit_preview(cid, remove_entities=[question.key])
    assert question.key not in {e.key for e in edited.kept} and not edited.user_edited
    assert_refused(mem, snapshot, ValidationError, lambda: mem.edit_preview(cid, remove_entities=["e99"]))
    assert_refused(mem, snapshot, ValidationError, lambda: mem.edit_preview(cid, "   "))
    mem.confirm_memory(cid)
    assert not [e for e in mem.store.list_entities("alice", conversation_id=cid) if e.id in question.entity_ids]
    assert all(d.data.get("key") != question.key for d in mem.store.list_state_deltas("alice", conversation_id=cid))


def test_redirect_changes_the_destination_and_refuses_bad_targets(mem: narrative.Memory, snapshot: Snap) -> None:
    cid = talk(mem)
    suggested = mem.close_conversation(cid).suggestion
    your_story = mem.your_story()
    redirected = mem.redirect_preview(cid, your_story.id)
    assert redirected.destination.storyline_id == your_story.id and redirected.suggestion == suggested
    assert "chosen by you" in redirected.text()
    old = mem.create_storyline("Old stuff")
    mem.archive_storyline(old.id)
    assert_refused(mem, snapshot, NotFound, lambda: mem.redirect_preview(cid, 9999))
    assert_refused(mem, snapshot, InvalidTransition, lambda: mem.redirect_preview(cid, old.id))
    with pytest.raises(InvalidTransition) as refused:  # no interface unarchives: the message names no such step
        mem.redirect_preview(cid, old.id)
    assert "unarchive" not in str(refused.value) and "choose another" in str(refused.value)
    [memory] = mem.confirm_memory(cid).memories
    assert memory.storyline_id == your_story.id


def test_resume_goes_back_to_active_and_drops_the_preview(mem: narrative.Memory, snapshot: Snap) -> None:
    cid = talk(mem)
    before = snapshot(mem.store)
    mem.close_conversation(cid)
    resumed = mem.resume_conversation(cid)
    assert resumed.status is ConversationStatus.ACTIVE and resumed.closed_at is None
    assert mem.store.get_preview("alice", cid) is None
    assert snapshot(mem.store) == before  # nothing was stored by the round trip
    mem.remember("One more thing: the views can go.", speaker="alex")  # talking continues


def test_resume_is_refused_for_archived_and_when_another_is_active(mem: narrative.Memory, snapshot: Snap) -> None:
    cid = talk(mem)
    mem.close_conversation(cid)
    mem.confirm_memory(cid)
    assert_refused(mem, snapshot, InvalidTransition, lambda: mem.resume_conversation(cid))
    second = talk(mem, title="second")
    mem.close_conversation(second)
    talk(mem, title="third")
    assert_refused(mem, snapshot, ConversationAlreadyActive, lambda: mem.resume_conversation(second))


# --- split -----------------------------------------------------------------------------------------


def test_split_makes_several_memories_linking_to_one_archive(mem: narrative.Memory) -> None:
    cid = talk(mem)
    work = mem.create_storyline("Work")
    preview = mem.close_conversation(cid)
    waiting = next(e for e in preview.kept if e.entity_type is EntityType.WAITING_ON)
    result = mem.split_memory(
        cid,
        [
            {"narrative": "The database moves to Postgres.", "storyline_id": work.id},
            {"narrative": "Priya owes the schema dump.", "storyline_id": None, "entity_ids": [waiting.key]},
        ],
    )
    first, second = result.memories
    assert (first.storyline_id, second.storyline_id) == (work.id, mem.your_story().id)
    assert first.conversation_id == second.conversation_id == cid
    assert first.message_ids == second.message_ids == tuple(m.id for m in mem.messages(cid))
    assert mem.get_conversation(cid).status is ConversationStatus.ARCHIVED
    assert {m.id for m in mem.get_conversation_archive(cid)["memories"]} == {first.id, second.id}
    on_second = mem.store.list_entities("alice", memory_id=second.id)
    assert [e.entity_type for e in on_second] == [EntityType.WAITING_ON]
    assert len(mem.store.list_entities("alice", memory_id=first.id)) == len(result.entities) - 1
    assert first.user_edited and first.original_content == preview.narrative


def test_split_refuses_bad_parts_and_changes_nothing(mem: narrative.Memory, snapshot: Snap) -> None:
    cid = talk(mem)
    mem.close_conversation(cid)
    ok = {"narrative": "fine", "storyline_id": None}
    for parts in (
        [ok],
        [ok, {"narrative": "", "storyline_id": None}],
        [ok, {"narrative": "x", "storyline_id": "work"}],
        [ok, {"narrative": "x", "storyline_id": None, "entity_ids": [424242]}],
        [ok, "not a part"],
    ):
        assert_refused(mem, snapshot, ValidationError, lambda p=parts: mem.split_memory(cid, p))  # type: ignore[misc]
    unknown = {"narrative": "x", "storyline_id": 999}
    assert_refused(mem, snapshot, NotFound, lambda: mem.split_memory(cid, [ok, unknown]))


# --- after the fact ----------------------------------------------------------------------------------


def test_edit_memory_changes_entities_after_archival(mem: narrative.Memory, snapshot: Snap) -> None:
    cid = talk(mem)
    mem.close_conversation(cid)
    [memory] = mem.confirm_memory(cid).memories
    question = next(
        e for e in mem.store.list_entities("alice", memory_id=memory.id) if e.entity_type is EntityType.QUESTION_OPENED
    )
    updated = mem.edit_memory(
        memory.id,
        content="Postgres it is.",
        entities_to_remove=[question.id],
        entities_to_add=[{"type": "person", "name": "Priya", "data": {"relation": "dba"}}],
    )
    assert updated.user_edited and updated.original_content == memory.content
    names = {(e.entity_type, e.name) for e in mem.store.list_entities("alice", memory_id=memory.id)}
    assert (EntityType.PERSON, "Priya") in names and (EntityType.QUESTION_OPENED, question.name) not in names
    assert_refused(
        mem,
        snapshot,
        ValidationError,
        lambda: mem.edit_memory(memory.id, entities_to_add=[{"type": "planet", "name": "x"}]),
    )
    stray = mem.add_memory("unrelated")
    mem.edit_memory(stray.id, entities_to_add=[{"type": "task", "name": "water plants"}])
    stray_entity = mem.store.list_entities("alice", memory_id=stray.id)[0]
    assert_refused(mem, snapshot, NotFound, lambda: mem.edit_memory(memory.id, entities_to_remove=[stray_entity.id]))


# --- the demo and the LLM ----------------------------------------------------------------------------


def test_the_demo_closes_and_confirms_every_session(db_path: Path, clock: FakeClock) -> None:
    from narrative import demo

    with narrative.Memory(db_path, user="maya", embedder="none", clock=clock, env={}) as mem:
        made = demo.load(mem)
        for cid in made["conversations"]:
            conversation = mem.get_conversation(cid)
            assert conversation.status is ConversationStatus.ARCHIVED
            [memory] = reviewed(mem, cid)
            assert memory.created_at == conversation.archived_at  # the demo's own clock (``at=``)
        first = reviewed(mem, made["conversations"][0])[0].content
        assert first.startswith("Maya decided to go with SQLite instead of Firebase, because it works offline")


@pytest.fixture
def llm_mem(db_path: Path, clock: FakeClock, llm_server: ScriptedLLMServer) -> Iterator[narrative.Memory]:
    memory = narrative.Memory(
        db_path,
        user="alice",
        embedder="none",
        clock=clock,
        env={},
        llm="ollama",
        llm_url=llm_server.url,
        llm_model="llama3.2",
    )
    yield memory
    memory.close()


def test_the_llm_passes_are_used_when_they_answer(llm_mem: narrative.Memory, llm_server: ScriptedLLMServer) -> None:
    mem = llm_mem
    mem.add_message("We picked the blue logo. Jo will send the print files.", speaker="alex")
    work = mem.create_storyline("Branding")
    llm_server.script(
        Reply.json(
            {
                "people": [{"name": "Jo", "relation": "designer"}],
                "insights": [{"insight": "simple logos print better", "context": "print"}],
            }
        ),
        Reply.text("Alex settled on the blue logo. The print files are with Jo."),
        Reply.json({"suggested_destination": "Branding", "confidence": 0.8, "reasoning": "it is about the logo"}),
    )
    preview = mem.close_conversation()
    assert preview.narrative == "Alex settled on the blue logo. The print files are with Jo."
    assert preview.destination.storyline_id == work.id and preview.destination.confidence == 0.8
    assert "it is about the logo" in preview.destination.reason
    assert any(e.entity_type is EntityType.INSIGHT and e.data.get("extracted_by") == "llm" for e in preview.kept)
    assert preview.model == "ollama:llama3.2" or "llama3.2" in preview.model
    assert preview.passes == 4
    prompts = [r.body["messages"][1]["content"] for r in llm_server.chat_requests if r.body]
    assert "Jo will send the print files" in prompts[0]
    result = mem.confirm_memory()
    assert result.conversation.compression_passes == 4 and result.conversation.compression_model == preview.model
    assert any(e.entity_type is EntityType.INSIGHT for e in result.entities)


def test_a_failing_llm_falls_back_to_the_rules(llm_mem: narrative.Memory, llm_server: ScriptedLLMServer) -> None:
    mem = llm_mem
    mem.add_message("We decided to move the launch because the venue cancelled.", speaker="alex")
    llm_server.script(
        Reply.error(500), Reply.malformed(), Reply.json({"suggested_destination": "Nowhere", "confidence": 0.9})
    )
    preview = mem.close_conversation()
    assert preview.model == "heuristic" and preview.passes == 1
    assert preview.narrative.startswith("Alex decided to move the launch")
    assert preview.destination.name == "Your Story"


def test_closing_records_the_time_given(mem: narrative.Memory, clock: FakeClock) -> None:
    cid = talk(mem)
    at = clock.now + timedelta(hours=2)
    preview = mem.close_conversation(cid, at=at)
    assert preview.computed_at == at and mem.get_conversation(cid).closed_at == at
    result = mem.confirm_memory(cid, at=at)
    assert result.conversation.archived_at == at and result.memories[0].created_at == at
    assert all(d.delta_type in DeltaType for d in result.deltas)


# --- the CLI -----------------------------------------------------------------------------------------


def test_cli_close_review_and_confirm(mem: narrative.Memory, db: str) -> None:
    import json

    from click.testing import CliRunner

    from narrative.interfaces.cli import _register, cli

    _register()
    talk(mem)
    work = mem.create_storyline("Work")
    mem.close()
    runner = CliRunner()

    def run(*args: str) -> Any:
        done = runner.invoke(cli, ["--db", db, "--user", "alice", "--embedder", "none", *args])
        assert done.exit_code == 0, done.output
        return done.output

    closed = run("close")
    assert "[confirm]" not in closed and "narrative confirm" in closed and "narrative resume" in closed
    shown = json.loads(run("preview", "--json"))
    assert shown["conversation_id"] == 1 and shown["extracted"]["decisions"]
    key = shown["entities"][0]["key"]
    edited = json.loads(run("edit", "--narrative", "Postgres it is.", "--remove", key, "--json"))
    assert edited["narrative"] == "Postgres it is." and edited["removed"] == [key]
    assert json.loads(run("redirect", str(work.id), "--json"))["destination"]["storyline_id"] == work.id
    asked = runner.invoke(cli, ["--db", db, "--user", "alice", "--embedder", "none", "resume"], input="n\n")
    assert asked.exit_code == 1 and "discards your edits" in asked.output  # asked, and said no: nothing changed
    assert "narrative confirm" in run("preview")
    assert "resumed conversation #1" in run("resume", "--yes")
    run("close")
    done = json.loads(
        run("split", "--part", f"{work.id}:Postgres for the team.", "--part", ":Priya owes a dump.", "--json")
    )
    assert [m["storyline_id"] for m in done["memories"]] == [work.id, 1]  # empty id: Your Story (#1)
    assert done["status"] == "archived"
    archive = run("archive", "1")
    assert "Postgres for the team." in archive and "[1] alex:" in archive
    bad = runner.invoke(
        cli, ["--db", db, "--user", "alice", "--embedder", "none", "split", "--part", "oops", "--part", "x:y"]
    )
    assert bad.exit_code != 0


def test_cli_confirm_with_options(mem: narrative.Memory, db: str) -> None:
    import json

    from click.testing import CliRunner

    from narrative.interfaces.cli import _register, cli

    _register()
    talk(mem)
    mem.close()
    runner = CliRunner()
    base = ["--db", db, "--user", "alice", "--embedder", "none"]
    assert runner.invoke(cli, [*base, "close", "--json"]).exit_code == 0
    done = runner.invoke(cli, [*base, "confirm", "--to", "1", "--narrative", "Moved to Postgres.", "--json"])
    assert done.exit_code == 0, done.output
    [memory] = json.loads(done.output)["memories"]
    assert memory == {
        "id": memory["id"],
        "storyline_id": 1,
        "content": "Moved to Postgres.",
        "user_edited": True,
        "existing": False,
    }


def test_confirm_refuses_a_destination_deleted_since_the_preview(mem: narrative.Memory, snapshot: Snap) -> None:
    cid = talk(mem)
    work = mem.create_storyline("Work")
    mem.close_conversation(cid)
    mem.redirect_preview(cid, work.id)
    mem.delete_storyline(work.id)
    assert_refused(mem, snapshot, NotFound, lambda: mem.confirm_memory(cid))
    assert mem.get_conversation(cid).status is ConversationStatus.READY_TO_CLOSE
    mem.redirect_preview(cid, mem.your_story().id)
    assert mem.confirm_memory(cid).memories
