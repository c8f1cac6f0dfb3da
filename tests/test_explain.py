"""Uses as an audit trail: ``record_use`` validation, ``explain`` provenance, ``influence_chain``, outcomes, the CLI."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest

import narrative
from conftest import FakeClock, Snapshot
from narrative.errors import NotFound, ValidationError
from narrative.interfaces.cli import main as cli_main
from narrative.model import InfluenceType, Role, UseKind, UseReference
from narrative.read.explain import format_explanation
from narrative.store.sqlite import SqliteStore

Snap = Callable[[SqliteStore], Snapshot]


def seed(mem: narrative.Memory) -> list[narrative.model.MemoryItem]:
    mem.remember("We decided to use SQLite instead of Firebase because it works offline.", speaker="alice")
    mem.remember("Sounds right. Firebase needs a connection for most writes.", "assistant", speaker="Rook")
    mem.remember("I'm waiting on Priya to send the budget spreadsheet.", speaker="alice")
    return mem.list_memories(limit=100)


def move_on(mem: narrative.Memory) -> None:
    """Close the conversation and start another, so earlier messages are no longer the recent ones."""
    mem.close_conversation(mem.active_conversation().id)  # type: ignore[union-attr]
    mem.start_conversation()
    mem.remember("A quick word about the weather tomorrow.")


def decision(memories: list[narrative.model.MemoryItem]) -> narrative.model.MemoryItem:
    return next(m for m in memories if m.stream.value == "decision")


# --- record_use --------------------------------------------------------------------------------------------


def test_record_use_accepts_tuples_dicts_and_references(mem: narrative.Memory) -> None:
    a, b, c, d = seed(mem)[:4]
    use = mem.record_use(
        "classification",
        "fix the database thing",
        [
            (a.id, "disambiguation", 0.9, "names the database"),
            {"memory_id": b.id, "influence_type": "pattern_match", "score": 0.5},
            (c.id, "entity_reference"),
            UseReference(d.id, InfluenceType.INTENT_VERIFICATION, 0.1, "checks the reading"),
        ],
    )
    assert use.kind is UseKind.CLASSIFICATION and use.query == "fix the database thing"
    assert [(r.memory_id, r.influence_type.value, r.score, r.reasoning, r.rank) for r in use.references] == [
        (a.id, "disambiguation", 0.9, "names the database", 1),
        (b.id, "pattern_match", 0.5, "", 2),
        (c.id, "entity_reference", 0.0, "", 3),
        (d.id, "intent_verification", 0.1, "checks the reading", 4),
    ]
    assert use.conversation_id == mem.active_conversation().id  # type: ignore[union-attr]
    assert mem.list_uses(1)[0] == use


@pytest.mark.parametrize(
    ("kind", "query", "make_refs", "error"),
    [
        ("classification", "q", lambda m: [(999_999, "disambiguation", 0.5, "")], NotFound),
        ("classification", "q", lambda m: [(m.id, "retrieval"), (999_999, "retrieval")], NotFound),
        ("classification", "q", lambda m: [(m.id, "hunch", 0.5, "")], ValidationError),
        ("classification", "q", lambda m: [(m.id, "disambiguation", "high", "")], ValidationError),
        ("classification", "q", lambda m: [(m.id, "disambiguation", math.nan, "")], ValidationError),
        ("classification", "q", lambda m: [(m.id, "disambiguation", True, "")], ValidationError),
        ("classification", "q", lambda m: [(m.id, "disambiguation", 0.5, 7)], ValidationError),
        ("classification", "q", lambda m: [(m.id, "disambiguation"), (m.id, "pattern_match")], ValidationError),
        ("classification", "q", lambda m: [m.id], ValidationError),
        ("classification", "q", lambda m: [("1", "disambiguation")], ValidationError),
        ("classification", "q", lambda m: [{"memory_id": m.id}], ValidationError),
        ("guessing", "q", lambda m: [(m.id, "disambiguation")], ValidationError),
        ("classification", "", lambda m: [(m.id, "disambiguation")], ValidationError),
    ],
)
def test_record_use_refuses_bad_input_and_stores_nothing(
    mem: narrative.Memory,
    snapshot: Snap,
    kind: str,
    query: str,
    make_refs: Callable[..., list[object]],
    error: type[Exception],
) -> None:
    memory = seed(mem)[0]
    before = snapshot(mem.store)  # type: ignore[arg-type]
    with pytest.raises(error):
        mem.record_use(kind, query, make_refs(memory))
    assert snapshot(mem.store) == before  # type: ignore[arg-type]


def test_another_users_memory_is_not_found(mem: narrative.Memory) -> None:
    bobs = mem.add_memory("Bob's private note", user="bob")
    seed(mem)
    with pytest.raises(NotFound):
        mem.record_use("classification", "q", [(bobs.id, "disambiguation")])
    assert mem.list_uses() == []


# --- explain ---------------------------------------------------------------------------------------------


def test_explain_gives_the_memories_why_and_their_messages(mem: narrative.Memory) -> None:
    memories = seed(mem)
    chosen = decision(memories)
    use = mem.record_use("classification", "which database?", [(chosen.id, "disambiguation", 0.8, "names SQLite")])
    found = mem.explain(use.id)
    assert found["use"]["id"] == use.id and found["use"]["kind"] == "classification"
    (entry,) = found["memories"]
    assert entry["memory_id"] == chosen.id and entry["influence_type"] == "disambiguation"
    assert entry["why"] == "names SQLite" and entry["score"] == 0.8
    source = mem.messages(chosen.conversation_id)[0]
    assert entry["message_ids"] == [source.id] and entry["conversation_id"] == source.conversation_id
    (message,) = entry["messages"]
    assert message == {
        "message_id": source.id,
        "position": source.position,
        "role": "user",
        "speaker": "alice",
        "conversation_id": source.conversation_id,
        "created_at": source.created_at.isoformat(),
        "text": source.content,
    }
    assert "1 memories (1 disambiguation)" in found["summary"]
    text = format_explanation(found)
    assert f"from message #{source.id} (position {source.position}" in text and "why: names SQLite" in text


def test_explain_a_context_and_long_messages_are_snipped(mem: narrative.Memory) -> None:
    mem.remember("The compost rota: " + "turn the bins every third day and log it on the board. " * 10)
    move_on(mem)  # the rota is no longer a recent message
    block = mem.context("compost rota", 1000)
    assert block.use_id is not None and block.memories
    found = mem.explain(block.use_id)
    assert found["use"]["kind"] == "context"
    assert [e["memory_id"] for e in found["memories"]] == [r.memory.id for r in block.memories]
    snippet = found["memories"][0]["messages"][0]["text"]
    assert len(snippet) <= 160 and snippet.endswith("…")


def test_explain_unknown_use(mem: narrative.Memory) -> None:
    with pytest.raises(NotFound):
        mem.explain(12345)


# --- influence chain -------------------------------------------------------------------------------------------


def test_influence_chain_lists_every_later_use_newest_first(mem: narrative.Memory) -> None:
    memories = seed(mem)
    chosen = decision(memories)
    assert mem.influence_chain(chosen.id) == []
    move_on(mem)
    mem.search("SQLite Firebase")  # recorded as a recall
    block = mem.context("SQLite or Firebase?", 2000)
    mine = mem.record_use("verification", "use SQLite?", [(chosen.id, "intent_verification", 0.7, "")])
    chain = mem.influence_chain(chosen.id)
    assert [u.kind for u in chain] == [UseKind.VERIFICATION, UseKind.CONTEXT, UseKind.RECALL]
    assert chain[0].id == mine.id and chain[1].id == block.use_id
    assert [u.id for u in mem.influence_chain(chosen.id, limit=2)] == [mine.id, block.use_id]
    with pytest.raises(NotFound):
        mem.influence_chain(999_999)
    with pytest.raises(ValidationError):
        mem.influence_chain(chosen.id, limit=0)


def test_list_uses_is_newest_first(mem: narrative.Memory) -> None:
    chosen = decision(seed(mem))
    ids = [mem.record_use("classification", f"q{i}", [(chosen.id, "retrieval")]).id for i in range(3)]
    assert [u.id for u in mem.list_uses()] == ids[::-1]
    assert [u.id for u in mem.list_uses(2)] == ids[:0:-1]
    assert [u.id for u in mem.list_uses(2, offset=2)] == ids[:1]


# --- learning from outcomes -------------------------------------------------------------------------------------


def test_a_correction_is_recorded_and_told_to_the_active_conversation(mem: narrative.Memory) -> None:
    chosen = decision(seed(mem))
    judged = mem.record_use("classification", "fix the database thing", [(chosen.id, "disambiguation", 0.9, "")])
    active = mem.active_conversation()
    assert active is not None
    count = len(mem.messages(active.id))
    outcome = mem.learn_from_outcome(judged.id, "corrected", "she meant the Firebase export")
    assert outcome.kind is UseKind.OUTCOME and outcome.outcome == "corrected"
    assert outcome.meta["use_id"] == judged.id and outcome.meta["correction"] == "she meant the Firebase export"
    assert [(r.memory_id, r.influence_type) for r in outcome.references] == [(chosen.id, InfluenceType.DISAMBIGUATION)]
    messages = mem.messages(active.id)
    assert len(messages) == count + 1
    note = messages[-1]
    assert note.id == outcome.meta["message_id"] and note.role is Role.SYSTEM and note.speaker == "narrative"
    assert note.meta["type"] == "system_learning" and note.meta["use_id"] == judged.id
    assert "corrected" in note.content and "she meant the Firebase export" in note.content
    assert f"#{chosen.id}" in note.content
    explained = mem.explain(judged.id)
    assert [o["use_id"] for o in explained["outcomes"]] == [outcome.id]
    assert explained["outcomes"][0]["correction"] == "she meant the Firebase export"
    assert mem.explain(outcome.id)["original"]["id"] == judged.id
    assert mem.influence_chain(chosen.id)[0].id == outcome.id


def test_without_an_active_conversation_only_the_use_is_stored(mem: narrative.Memory) -> None:
    chosen = decision(seed(mem))
    judged = mem.record_use("classification", "database?", [(chosen.id, "disambiguation")])
    conversation = mem.active_conversation()
    assert conversation is not None
    mem.close_conversation(conversation.id)
    assert mem.active_conversation() is None
    count = len(mem.messages())
    outcome = mem.learn_from_outcome(judged.id, "approved")
    assert outcome.outcome == "approved" and "message_id" not in outcome.meta
    assert len(mem.messages()) == count


@pytest.mark.parametrize(
    ("outcome", "correction", "use_id", "error"),
    [
        ("maybe", None, None, ValidationError),
        ("corrected", None, None, ValidationError),
        ("corrected", "   ", None, ValidationError),
        ("approved", None, 999_999, NotFound),
    ],
)
def test_bad_outcomes_store_nothing(
    mem: narrative.Memory,
    snapshot: Snap,
    outcome: str,
    correction: str | None,
    use_id: int | None,
    error: type[Exception],
) -> None:
    chosen = decision(seed(mem))
    judged = mem.record_use("classification", "database?", [(chosen.id, "disambiguation")])
    before = snapshot(mem.store)  # type: ignore[arg-type]
    with pytest.raises(error):
        mem.learn_from_outcome(use_id or judged.id, outcome, correction)
    assert snapshot(mem.store) == before  # type: ignore[arg-type]


def test_an_outcome_cannot_be_judged(mem: narrative.Memory) -> None:
    chosen = decision(seed(mem))
    judged = mem.record_use("classification", "database?", [(chosen.id, "disambiguation")])
    verdict = mem.learn_from_outcome(judged.id, "rejected")
    with pytest.raises(ValidationError):
        mem.learn_from_outcome(verdict.id, "approved")


# --- the CLI -----------------------------------------------------------------------------------------------------


def test_cli_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "cli.db")
    with narrative.Memory(db, user="alice", embedder="none", clock=FakeClock(), env={}) as mem:
        seed(mem)
        unused = mem.add_memory("a note nobody has asked about")
    base = ["--db", db, "--user", "alice", "--embedder", "none"]

    def run(*args: str) -> str:
        cli_main([*base, *args])
        return capsys.readouterr().out

    reasoned = json.loads(run("reason", "SQLite or Firebase?", "--kind", "verification", "--json"))
    use_id = reasoned["use_id"]
    assert reasoned["kind"] == "verification" and reasoned["memories"]
    assert "[disambiguation, " in run("reason", "SQLite or Firebase?")
    assert f"use #{use_id}" in run("uses")
    assert json.loads(run("explain", str(use_id), "--json"))["use"]["id"] == use_id
    assert "from message #" in run("explain", str(use_id))
    assert f"use #{use_id}" in run("influence", str(reasoned["memories"][0]["memory_id"]))
    assert "has not been used yet" in run("influence", str(unused.id))
    out = run("outcome", str(use_id), "corrected", "--correction", "the other database")
    assert "outcome" in out and "system message #" in out
    assert json.loads(run("uses", "--limit", "1", "--json"))[0]["outcome"] == "corrected"
