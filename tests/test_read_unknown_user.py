"""A read for a user nobody wrote for creates nothing (thirteenth session): no user row, no Your Story, no recorded
use; it answers as for a user with no memories (empty results, NotFound for an id it names).  Writes still make the
user.  On both stores, through the engine and through the command line."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import narrative
from conftest import FakeClock, Snapshot
from narrative.errors import InvalidTransition, NotFound
from narrative.interfaces.cli import main
from narrative.store.protocol import Store


def _alice_writes(mem: narrative.Memory) -> dict[str, int]:
    """Alice's data: a turn (conversation, message, storyline, entity, narrative link), a fact, a recorded use."""
    turn = mem.remember("We decided to use SQLite instead of Firebase because it works offline.", speaker="Alice")
    fact = mem.add_memory("I live in Berlin.")
    mem.search("Berlin")  # records a use: there is a use id to ask about
    use = mem.list_uses()[0]
    return {
        "memory": fact.id,
        "conversation": turn.message.conversation_id,
        "storyline": turn.storyline.id,
        "use": use.id,
        "narrative": mem.narrative_search()[0].id,
    }


def _reads_are_empty(mem: narrative.Memory, user: str) -> None:
    """Every read the engine offers, for ``user``: nothing found."""
    assert mem.search("Berlin", user=user) == []
    assert mem.search("Berlin", record=True, user=user) == []
    assert mem.recall("Berlin", user=user) == []
    block = mem.context("Where do I live?", user=user)
    assert block.memories == () and block.use_id is None
    assert mem.reasoning_context("Should we use Firebase?", user=user).use_id is None
    assert mem.list_memories(user=user) == []
    assert mem.count_memories(user=user) == 0
    assert mem.one_fact_once([1, 2, 3], user=user) == []
    assert mem.list_storylines(user=user) == []
    assert mem.routing_decisions(user=user) == []
    assert mem.list_conversations(user=user) == []
    assert mem.active_conversation(user=user) is None
    assert mem.messages(user=user) == []
    assert mem.pending_messages(user=user) == []
    assert mem.list_narratives(user=user) == []
    assert mem.narrative_search(user=user) == []
    assert mem.narrative_search(query="SQLite", user=user) == []
    assert mem.open_threads(user=user) == []
    assert mem.stale_threads(user=user) == []
    assert mem.list_uses(user=user) == []
    assert mem.list_bindings(user=user) == []
    assert mem.stale_goals(user=user) == []
    assert mem.decisions_to_review(user=user) == []
    assert mem.source_popularity(user=user) == []
    assert mem.preview_edits(user=user) == []
    assert mem.idle_check(user=user) is None
    assert mem.greet(user=user).kind == "fresh"
    assert sum(mem.describe(user=user)["counts"].values()) == 0
    exported = json.loads(mem.export(user=user))
    assert exported["user"] == user and set(exported["counts"].values()) == {0}
    assert mem.export("jsonl", user=user) == ""
    with pytest.raises(InvalidTransition):
        mem.get_memory_preview(user=user)


def _reads_by_id_are_not_found(mem: narrative.Memory, user: str, ids: dict[str, int]) -> None:
    """Alice's ids asked for as ``user``: the documented NotFound, as for another user's ids."""
    calls: list[Callable[[], Any]] = [
        lambda: mem.get_memory(ids["memory"], user=user),
        lambda: mem.memory_text(ids["memory"], user=user),
        lambda: mem.history(ids["memory"], user=user),
        lambda: mem.recall_chain(ids["memory"], user=user),
        lambda: mem.decision_chain(ids["memory"], user=user),
        lambda: mem.linked_memories(ids["memory"], user=user),
        lambda: mem.get_conversation(ids["conversation"], user=user),
        lambda: mem.messages(ids["conversation"], user=user),
        lambda: mem.get_conversation_archive(ids["conversation"], user=user),
        lambda: mem.get_storyline(ids["storyline"], user=user),
        lambda: mem.get_use(ids["use"], user=user),
        lambda: mem.explain(ids["use"], user=user),
        lambda: mem.narratives_after(ids["narrative"], user=user),
        lambda: mem.walk_back(ids["narrative"], user=user),
    ]
    for call in calls:
        with pytest.raises(NotFound):
            call()


def _users(store: Store) -> list[str]:
    return [u.id for u in store.list_users()]


def test_reads_for_an_unknown_user_find_nothing_and_store_nothing(
    mem: narrative.Memory, snapshot: Callable[[Store], Snapshot]
) -> None:
    ids = _alice_writes(mem)
    before, users = snapshot(mem.store), _users(mem.store)
    assert users == ["alice"]
    _reads_are_empty(mem, "bob")
    _reads_by_id_are_not_found(mem, "bob", ids)
    assert _users(mem.store) == users
    assert snapshot(mem.store) == before  # not a row: no user, no Your Story, no use


def test_the_reported_probe_leaves_no_user_behind(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        mem.add_memory("I live in Berlin.")
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        assert mem.search("Berlin", user="bob") == []
        assert [h.memory.content for h in mem.search("Berlin")] == ["I live in Berlin."]
        assert _users(mem.store) == ["alice"]


def test_the_probe_with_the_local_model_as_users_run_it(
    db: str, clock: FakeClock, minilm: Any, snapshot: Callable[[Store], Snapshot]
) -> None:
    """The default path: the real local model embeds the query (and the speakers' names are read for it)."""
    with narrative.Memory(db, user="alice", embedder=minilm, clock=clock, env={}) as mem:
        mem.remember("I live in Berlin and I work from home.", speaker="Alice")
        before = snapshot(mem.store)
        assert mem.search("Where does she live?", user="bob") == []
        assert not mem.context("Where do I live?", user="bob").memories
        assert mem.recall("Berlin", user="bob") == []
        assert [h.memory.id for h in mem.search("Where does she live?", record=False)]  # alice's is found
        assert _users(mem.store) == ["alice"]
        assert snapshot(mem.store) == before


def test_reads_of_a_fresh_memory_create_not_even_its_own_user(
    mem: narrative.Memory, snapshot: Callable[[Store], Snapshot]
) -> None:
    before = snapshot(mem.store)
    _reads_are_empty(mem, "alice")
    assert _users(mem.store) == []
    assert snapshot(mem.store) == before


def test_a_write_still_makes_the_user_and_recorded_reads_still_record(mem: narrative.Memory) -> None:
    _reads_are_empty(mem, "alice")
    mem.add_memory("I live in Berlin.")
    assert _users(mem.store) == ["alice"]
    assert [s.name for s in mem.list_storylines() if s.is_your_story] == ["Your Story"]
    assert mem.search("Berlin") and mem.list_uses()[0].kind.value == "recall"
    assert mem.search("nothing like it") == [] and len(mem.list_uses()) == 2  # a known user's empty search records
    assert mem.context("Where do I live?").use_id is not None
    assert mem.your_story().is_your_story  # made for alice with her first write, read back here


def test_the_command_line_reads_for_an_unknown_user_create_none(
    db: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("NARRATIVE_DB", "NARRATIVE_USER", "NARRATIVE_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        mem.add_memory("I live in Berlin.")
    for args in (["search", "Berlin"], ["memories"], ["storylines"], ["threads"], ["greet"], ["export"], ["uses"]):
        with pytest.raises(SystemExit) as stop:
            main(["--embedder", "none", "--db", db, "--user", "bob", *args])
        assert stop.value.code == 1, args
        assert "user 'bob' has no data" in capsys.readouterr().err, args
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        assert _users(mem.store) == ["alice"]
