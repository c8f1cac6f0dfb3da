"""Decision chains and the decision audit (ITSERR): links by rule (with the rule as the reason), links by hand, the
chain walked both ways, what is due for review and why, reviews, and a model's links and questions (with the
fallbacks when it answers badly)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import narrative
from conftest import CLOCK_START, FakeClock
from llm_server import Reply, ScriptedLLMServer, scripted_llm_server
from narrative.errors import InvalidTransition, NotFound, ValidationError
from narrative.model import DecisionDetails, LinkKind, LinkOrigin, MemoryItem

llm_server = pytest.fixture(scripted_llm_server)

SQLITE = "We decided to go with SQLite instead of Firebase because it works offline and costs nothing."


def decision(mem: narrative.Memory, text: str, **details: Any) -> MemoryItem:
    """A decision memory made by the write path (the heuristic extractor reads ``text``)."""
    turn = mem.remember(text, speaker="alice")
    made = [m for m in turn.memories if m.stream.value == "decision"]
    assert made, f"no decision extracted from {text!r}"
    return made[0]


def by_hand(mem: narrative.Memory, what: str, days_ago: int, clock: FakeClock, **details: Any) -> MemoryItem:
    return mem.add_memory(
        what,
        stream="decision",
        details=DecisionDetails(decision=what, **details),
        event_at=clock.now - timedelta(days=days_ago),
    )


# --- links by rule ------------------------------------------------------------------------------------------------


def test_a_decision_that_says_it_builds_on_an_earlier_one_is_linked(mem: narrative.Memory) -> None:
    sqlite = decision(mem, SQLITE)
    beds = decision(mem, "Since we went with SQLite, we decided to keep each bed as a row in a beds table.")
    [link] = mem.store.memory_links("alice", [beds.id])
    assert (link.memory_id, link.linked_id, link.kind, link.origin) == (
        beds.id,
        sqlite.id,
        LinkKind.BUILDS_ON,
        LinkOrigin.RULE,
    )
    assert link.reason == f"says “Since we went” and names sqlite, what #{sqlite.id} chose"
    chain = mem.decision_chain(beds.id)
    assert [s.memory.id for s in chain.earlier] == [sqlite.id] and chain.later == () and chain.stands
    assert f"#{beds.id} builds on #{sqlite.id}" in chain.text()
    assert [s.memory.id for s in mem.decision_chain(sqlite.id).later] == [beds.id]


@pytest.mark.parametrize(
    ("later", "reason"),
    [
        ("We decided to use Postgres instead of SQLite because several people write at once.", "rejects sqlite"),
        ("We decided to switch to Firebase because the free plan now syncs offline.", "chooses firebase"),
        ("We changed our minds about SQLite: we decided to drop it.", "says “changed our minds”"),
    ],
)
def test_a_decision_that_undoes_an_earlier_one_reverses_it(mem: narrative.Memory, later: str, reason: str) -> None:
    sqlite = decision(mem, SQLITE)
    newer = decision(mem, later)
    [link] = mem.store.memory_links("alice", [newer.id])
    assert (link.linked_id, link.kind) == (sqlite.id, LinkKind.REVERSES)
    assert link.reason.startswith(reason)
    chain = mem.decision_chain(sqlite.id)
    assert not chain.stands and [s.memory.id for s in chain.later] == [newer.id]
    assert "(reversed)" in chain.text().splitlines()[0]


def test_unrelated_or_repeated_decisions_are_not_linked(mem: narrative.Memory) -> None:
    decision(mem, SQLITE)
    decision(mem, "We decided to plant tomatoes in the south beds because they get the most sun.")
    decision(mem, SQLITE)  # the same decision said again
    assert mem.store.memory_links("alice") == []


# --- links by hand --------------------------------------------------------------------------------------------------


def test_a_link_by_hand_and_what_it_refuses(mem: narrative.Memory, clock: FakeClock) -> None:
    older = by_hand(mem, "plant tomatoes", 3, clock)
    newer = by_hand(mem, "water in the evening", 1, clock)
    note = mem.add_memory("the hose is green")
    made = mem.link_decision(newer.id, older.id, "builds_on", reason="tomatoes need evening water")
    assert (made.origin, made.reason) == (LinkOrigin.USER, "tomatoes need evening water")
    assert [s.memory.id for s in mem.decision_chain(newer.id).earlier] == [older.id]
    with pytest.raises(ValidationError):
        mem.link_decision(note.id, older.id)  # not a decision
    with pytest.raises(ValidationError):
        mem.link_decision(newer.id, newer.id)
    with pytest.raises(ValidationError):
        mem.link_decision(newer.id, older.id, "same_work")
    with pytest.raises(InvalidTransition):
        mem.link_decision(older.id, newer.id)  # the earlier one cannot build on the later one
    with pytest.raises(NotFound):
        mem.link_decision(newer.id, older.id, user="bob")
    with pytest.raises(ValidationError):
        mem.decision_chain(note.id)


def test_a_link_by_hand_of_the_other_kind_replaces_the_first(mem: narrative.Memory, clock: FakeClock) -> None:
    """A decision builds on an earlier one or reverses it, not both: with both links kept, the chain said
    "#2 builds on #1" beside "(reversed)"."""
    older = by_hand(mem, "plant tomatoes", 3, clock)
    newer = by_hand(mem, "water in the evening", 1, clock)
    mem.link_decision(newer.id, older.id, "builds_on")
    mem.link_decision(newer.id, older.id, "reverses", reason="no tomatoes after all")
    chain = mem.decision_chain(older.id)
    assert not chain.stands
    assert [(s.memory.id, s.via.kind) for s in chain.later] == [(newer.id, LinkKind.REVERSES)]
    assert mem.get_memory(older.id).superseded_by == newer.id
    mem.link_decision(newer.id, older.id, "builds_on", reason="it builds on it after all")
    chain = mem.decision_chain(older.id)
    assert chain.stands
    assert [(s.memory.id, s.via.kind) for s in chain.later] == [(newer.id, LinkKind.BUILDS_ON)]
    assert mem.get_memory(older.id).superseded_by is None  # current again
    assert [e.kind.value for e in mem.history(older.id)][-2:] == ["superseded", "restored"]


def test_a_chain_is_walked_both_ways_to_its_ends(mem: narrative.Memory, clock: FakeClock) -> None:
    a = by_hand(mem, "build a garden app", 9, clock)
    b = by_hand(mem, "draw a plot map", 6, clock)
    c = by_hand(mem, "store beds as rows", 3, clock)
    d = by_hand(mem, "drop the plot map", 1, clock)
    mem.link_decision(b.id, a.id)
    mem.link_decision(c.id, b.id)
    mem.link_decision(d.id, b.id, "reverses", reason="nobody used it")
    chain = mem.decision_chain(c.id)
    assert [(s.memory.id, s.steps) for s in chain.earlier] == [(b.id, 1), (a.id, 2)]
    assert [s.stands for s in chain.earlier] == [False, True]  # b was reversed by d
    middle = mem.decision_chain(b.id)
    assert not middle.stands and {s.memory.id for s in middle.later} == {c.id, d.id}
    assert middle.to_dict()["later"][0]["link"]["kind"] in {"builds_on", "reverses"}


# --- the audit ------------------------------------------------------------------------------------------------------


def test_what_is_due_for_review_and_why(mem: narrative.Memory, clock: FakeClock) -> None:
    loose = by_hand(mem, "use SQLite", 15, clock, rationale="it works offline", alternatives_considered=("Firebase",))
    firm = by_hand(mem, "sign the lease", 15, clock, reversible=False)
    built = by_hand(mem, "draw the plot map", 15, clock)
    later = by_hand(mem, "measure the beds first", 2, clock)
    mem.link_decision(later.id, built.id)  # built on: revisited
    due = mem.decisions_to_review()
    assert [d.memory.id for d in due] == [loose.id]
    item = due[0]
    assert (item.rule, item.days, item.revisited) == ("reversible", 15, False)
    assert item.question == (
        f"On {(clock.now - timedelta(days=15)).date().isoformat()} you decided “use SQLite” because it works "
        "offline, over Firebase. Does it still stand?"
    )
    assert item.to_dict()["alternatives"] == ["Firebase"] and item.why()["reversible"] is True
    clock.advance(days=16)  # 31 days: every decision made then is due by age, the firm one too
    aged = {d.memory.id: d for d in mem.decisions_to_review()}
    assert set(aged) == {loose.id, firm.id, built.id, later.id}
    assert aged[firm.id].rule == "age" and "never reviewed" in aged[firm.id].reason
    assert aged[later.id].rule == "reversible" and aged[later.id].days == 18


def test_a_review_restarts_the_clock_or_ends_the_audit(mem: narrative.Memory, clock: FakeClock) -> None:
    kept = by_hand(mem, "use SQLite", 40, clock)
    gone = by_hand(mem, "use push notifications", 40, clock)
    assert {d.memory.id for d in mem.decisions_to_review()} == {kept.id, gone.id}
    review = mem.review_decision(kept.id, "kept", note="offline still matters")
    assert (review.outcome.value, review.note) == ("kept", "offline still matters")
    mem.review_decision(gone.id, "reversed")
    assert mem.decisions_to_review() == []
    clock.advance(days=31)
    [again] = mem.decisions_to_review()
    assert again.memory.id == kept.id and again.last_review is not None and "kept at a review" in again.reason
    with pytest.raises(ValidationError):
        mem.review_decision(kept.id, "maybe")
    with pytest.raises(ValidationError):
        mem.review_decision(mem.add_memory("a plain fact").id)


def test_a_reversed_decision_is_never_offered(mem: narrative.Memory, clock: FakeClock) -> None:
    old = by_hand(mem, "use SQLite", 40, clock)
    new = by_hand(mem, "use Postgres", 1, clock)
    mem.link_decision(new.id, old.id, "reverses")
    assert [d.memory.id for d in mem.decisions_to_review()] == []


def test_the_greeting_and_the_context_offer_decisions_for_review(mem: narrative.Memory, clock: FakeClock) -> None:
    mem.remember("Let's plan the community garden app.", speaker="alice")
    by_hand(mem, "use SQLite", 20, clock, rationale="it works offline")
    mem.close_conversation()
    mem.confirm_memory()
    hello = mem.greet()
    assert "Decisions to review:" in hello.text and "you decided “use SQLite” because it works offline" in hello.text
    assert hello.to_dict()["decisions_to_review"][0]["why"]["rule"] == "reversible"
    block = mem.context("what did we decide?", 2000, record=False)
    assert "- review decision #" in block.text and "Does it still stand?" in block.text


# --- with a model ---------------------------------------------------------------------------------------------------


@pytest.fixture
def model_mem(db_path: Path, llm_server: ScriptedLLMServer) -> Iterator[narrative.Memory]:
    llm_server.set_fallback(Reply.json({}))
    memory = narrative.Memory(
        db_path,
        user="alice",
        embedder="none",
        clock=FakeClock(CLOCK_START),
        env={},
        llm="openai",
        llm_url=llm_server.url,
        llm_model="t",
    )
    yield memory
    memory.close()


def _asked(server: ScriptedLLMServer, opening: str) -> list[str]:
    return [
        str(r.body["messages"][1]["content"])
        for r in server.chat_requests
        if r.body and str(r.body["messages"][0]["content"]).startswith(opening)
    ]


def test_a_model_links_decisions_by_meaning(model_mem: narrative.Memory, llm_server: ScriptedLLMServer) -> None:
    sqlite = model_mem.add_memory(SQLITE, stream="decision")
    llm_server.set_fallback(
        Reply.json({"links": [{"id": sqlite.id, "kind": "reverses", "reason": "a hosted database replaces it"}]})
    )
    hosted = model_mem.add_memory("We will move the data to a hosted database next month.", stream="decision")
    [link] = model_mem.store.memory_links("alice", [hosted.id])
    assert (link.linked_id, link.kind, link.origin, link.reason) == (
        sqlite.id,
        LinkKind.REVERSES,
        LinkOrigin.LLM,
        "a hosted database replaces it",
    )
    [asked] = _asked(llm_server, "You trace how one decision influenced others")
    assert "hosted database" in asked and str(sqlite.id) in asked


@pytest.mark.parametrize(
    "answer",
    [
        {"links": [{"id": 999999, "kind": "builds_on", "reason": "not a candidate"}]},
        {"links": [{"id": 1, "kind": "inspires", "reason": "no such kind"}]},
        {"links": "many"},
    ],
)
def test_a_bad_link_answer_falls_back_to_the_rules(
    model_mem: narrative.Memory, llm_server: ScriptedLLMServer, answer: dict[str, Any]
) -> None:
    sqlite = model_mem.add_memory(SQLITE, stream="decision", details=DecisionDetails("go with SQLite"))
    llm_server.set_fallback(Reply.json(answer))
    beds = model_mem.add_memory(
        "Since we went with SQLite, we keep each bed as a row.",
        stream="decision",
        details=DecisionDetails("keep each bed as a row"),
    )
    [link] = model_mem.store.memory_links("alice", [beds.id])
    assert (link.linked_id, link.kind, link.origin) == (sqlite.id, LinkKind.BUILDS_ON, LinkOrigin.RULE)


def test_a_model_words_the_audit_question_and_a_bad_wording_is_not_used(
    model_mem: narrative.Memory, llm_server: ScriptedLLMServer
) -> None:
    clock = model_mem.clock
    assert isinstance(clock, FakeClock)
    by_hand(model_mem, "use SQLite", 20, clock, rationale="it works offline", alternatives_considered=("Firebase",))
    worded = "Three weeks ago you picked SQLite over Firebase because it works offline; does that still hold?"
    llm_server.set_fallback(Reply.text(worded))
    [due] = model_mem.decisions_to_review()
    assert due.question == worded and "reversible" in due.reason
    [asked] = _asked(llm_server, "You help a person review a decision")
    assert "it works offline" in asked
    for bad in ("Sure! Here is a question.", '{"question": "still SQLite?"}', "Do you like pizza?"):
        llm_server.set_fallback(Reply.text(bad))
        [fixed] = model_mem.decisions_to_review()
        assert fixed.question.endswith("Does it still stand?")
