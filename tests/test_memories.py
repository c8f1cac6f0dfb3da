"""Memories through the facade: add, get, list, edit, validation, provenance, isolation, keyword search."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

import narrative
from narrative.errors import NotFound, ValidationError
from narrative.model import DecisionDetails, InfluenceType, Source, Stream, UseKind

Snap = Callable[[Any], dict[str, list[tuple[Any, ...]]]]


# --- add / get / list / edit ----------------------------------------------------------------------


def test_add_and_get(mem: narrative.Memory) -> None:
    added = mem.add_memory(
        "  Alice prefers tea over coffee.  ",
        stream="fact",
        source="conversation",
        importance=4,
        emotions=["calm"],
    )
    assert added.id > 0
    assert added.user_id == "alice"
    assert added.content == "Alice prefers tea over coffee."  # trimmed
    assert (added.stream, added.source, added.importance) == (Stream.FACT, Source.CONVERSATION, 4)
    assert added.emotions == ("calm",)
    assert not added.user_edited and added.original_content is None
    assert mem.get_memory(added.id) == added


def test_defaults(mem: narrative.Memory) -> None:
    added = mem.add_memory("Something to remember.")
    assert (added.stream, added.source, added.importance) == (Stream.FACT, Source.AGENT, 2)
    assert added.message_ids == () and added.positions == ()
    assert added.created_at.tzinfo is not None


def test_details_roundtrip(mem: narrative.Memory) -> None:
    details = DecisionDetails(
        decision="Ship on Friday",
        rationale="QA signed off",
        alternatives_considered=("Monday", "next sprint"),
        decision_type="scope",
        confidence=0.8,
    )
    added = mem.add_memory("We ship on Friday.", stream="decision", details=details)
    assert mem.get_memory(added.id).details == details


def test_list_is_newest_first_and_filters(mem: narrative.Memory) -> None:
    a = mem.add_memory("first", stream="fact")
    b = mem.add_memory("second", stream="decision")
    c = mem.add_memory("third", stream="fact")
    assert [m.id for m in mem.list_memories()] == [c.id, b.id, a.id]
    assert [m.id for m in mem.list_memories(stream="fact")] == [c.id, a.id]
    assert [m.id for m in mem.list_memories(limit=1, offset=1)] == [b.id]
    assert mem.list_memories(stream="research") == []


def test_list_by_conversation(mem: narrative.Memory) -> None:
    message = mem.add_message("We should use SQLite.")
    inside = mem.add_memory("Use SQLite.", conversation_id=message.conversation_id)
    mem.add_memory("Unrelated.")
    assert [m.id for m in mem.list_memories(conversation_id=message.conversation_id)] == [inside.id]


def test_edit_keeps_the_original(mem: narrative.Memory) -> None:
    added = mem.add_memory("The meeting is on Tuesday.", importance=2)
    edited = mem.edit_memory(added.id, content="The meeting is on Thursday.")
    assert edited.content == "The meeting is on Thursday."
    assert edited.user_edited
    assert edited.original_content == "The meeting is on Tuesday."
    again = mem.edit_memory(added.id, content="The meeting is on Friday.")
    assert again.original_content == "The meeting is on Tuesday."  # the first original stays
    assert mem.get_memory(added.id) == again


def test_edit_importance_and_emotions_only(mem: narrative.Memory) -> None:
    added = mem.add_memory("A plain fact.")
    edited = mem.edit_memory(added.id, importance=5, emotions=["proud"])
    assert (edited.importance, edited.emotions) == (5, ("proud",))
    assert not edited.user_edited and edited.original_content is None
    with pytest.raises(ValidationError, match="nothing to change"):  # nothing asked: refused, as every interface does
        mem.edit_memory(added.id)
    assert mem.get_memory(added.id) == edited


def test_edit_is_searchable_by_the_new_words(mem: narrative.Memory) -> None:
    added = mem.add_memory("The meeting is on Tuesday.")
    mem.edit_memory(added.id, content="The meeting is on Thursday.")
    assert [h.memory.id for h in mem.search("thursday", mode="keyword")] == [added.id]
    assert mem.search("tuesday", mode="keyword") == []


def test_a_turn_edited_by_hand_is_shown_as_edited_wherever_search_finds_it(db: str) -> None:
    """A memory made from a turn is found through the turn too (its passages keep the words said); a hit on it
    showed the turn, so after "My cat is called Tom." was edited to "… Felix", a search for Tom showed "Tom"."""
    with narrative.Memory(db, user="alice", env={}) as mem:  # the real local model: passages are searched
        turn = mem.remember("My cat is called Tom.")
        own = next(m for m in turn.memories if m.message_ids == (turn.message.id,))
        mem.edit_memory(own.id, content="My cat is called Felix.")
        for query in ("what is my cat called", "Tom"):
            hits = [h for h in mem.search(query, 5, record=False) if h.memory.id == own.id]
            assert hits and all(h.text == "My cat is called Felix." for h in hits), query


@pytest.mark.parametrize(
    "changes",
    [{"content": ""}, {"content": "  "}, {"importance": 0}, {"importance": 6}, {"importance": True}],
)
def test_edit_validation_leaves_the_database_unchanged(
    mem: narrative.Memory, snapshot: Snap, changes: dict[str, Any]
) -> None:
    added = mem.add_memory("Stays as it is.")
    before = snapshot(mem.store)
    with pytest.raises(ValidationError):
        mem.edit_memory(added.id, **changes)
    assert snapshot(mem.store) == before


def test_an_edit_that_changes_nothing_is_refused_as_the_cli_and_http_refuse_it(
    mem: narrative.Memory, snapshot: Snap
) -> None:
    added = mem.add_memory("Stays as it is.")
    before = snapshot(mem.store)
    with pytest.raises(ValidationError, match="nothing to change"):
        mem.edit_memory(added.id)
    assert snapshot(mem.store) == before


def test_edit_unknown_memory_is_not_found(mem: narrative.Memory) -> None:
    with pytest.raises(NotFound):
        mem.edit_memory(999, content="nothing there")


# --- validation: each error leaves the database unchanged ----------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"content": ""}, "content"),
        ({"content": " \t\n"}, "content"),
        ({"content": "x" * 100_001}, "content"),
        ({"importance": 0}, "importance"),
        ({"importance": 6}, "importance"),
        ({"importance": True}, "importance"),
        ({"importance": "3"}, "importance"),
        ({"importance": 2.5}, "importance"),
        ({"stream": "diary"}, "stream"),
        ({"source": "rumour"}, "source"),
        ({"message_ids": [999]}, "message_ids"),
    ],
)
def test_add_validation(mem: narrative.Memory, snapshot: Snap, kwargs: dict[str, Any], field: str) -> None:
    mem.add_message("one real message")  # alice, a conversation and a message exist
    before = snapshot(mem.store)
    arguments: dict[str, Any] = {"content": "A valid memory."} | kwargs
    with pytest.raises(ValidationError) as caught:
        mem.add_memory(**arguments)
    assert caught.value.field == field
    assert snapshot(mem.store) == before


def test_add_with_one_unknown_message_among_known_ones_writes_nothing(mem: narrative.Memory, snapshot: Snap) -> None:
    real = mem.add_message("real")
    before = snapshot(mem.store)
    with pytest.raises(ValidationError):
        mem.add_memory("half real provenance", message_ids=[real.id, real.id + 100])
    assert snapshot(mem.store) == before


@pytest.mark.parametrize("reference", ["conversation_id", "storyline_id"])
def test_add_with_an_unknown_reference_is_not_found(mem: narrative.Memory, snapshot: Snap, reference: str) -> None:
    mem.add_memory("alice exists")
    before = snapshot(mem.store)
    dangling: dict[str, Any] = {reference: 999}
    with pytest.raises(NotFound):
        mem.add_memory("dangling", **dangling)
    assert snapshot(mem.store) == before


# --- provenance -----------------------------------------------------------------------------------------


def test_provenance_message_ids_and_positions(mem: narrative.Memory) -> None:
    messages = [mem.add_message(text) for text in ("Let's pick a database.", "SQLite?", "Yes, SQLite.")]
    added = mem.add_memory("We picked SQLite.", message_ids=[messages[2].id, messages[0].id])
    assert added.message_ids == (messages[0].id, messages[2].id)  # in message order
    assert added.positions == (1, 3)
    assert mem.get_memory(added.id).positions == (1, 3)
    assert mem.store.memories_from_messages("alice", [messages[2].id]) == [added.id]
    assert mem.store.memories_from_messages("alice", [messages[1].id]) == []


def test_provenance_positions_span_conversations(mem: narrative.Memory, clock: Any) -> None:
    first = mem.add_message("In the first conversation.")
    from narrative.write import lifecycle

    lifecycle.close(mem.store, "alice", None, clock())
    mem.start_conversation()  # explicit: a message alone is refused while the first waits for review
    second = mem.add_message("In the second conversation.")
    added = mem.add_memory("Spans two conversations.", message_ids=[first.id, second.id])
    assert added.positions == (1, 2)


def test_provenance_refuses_another_users_message(mem: narrative.Memory, snapshot: Snap) -> None:
    bobs = mem.add_message("bob's message", user="bob")
    mem.add_memory("alice exists")
    before = snapshot(mem.store)
    with pytest.raises(ValidationError):
        mem.add_memory("stolen provenance", message_ids=[bobs.id])
    assert snapshot(mem.store) == before


# --- user isolation ---------------------------------------------------------------------------------------


def test_bob_cannot_see_alices_memories(mem: narrative.Memory) -> None:
    secret = mem.add_memory("Alice's surprise party is on Saturday.")
    with pytest.raises(NotFound):
        mem.get_memory(secret.id, user="bob")
    assert mem.list_memories(user="bob") == []
    assert mem.search("surprise party", mode="keyword", user="bob") == []
    assert mem.search("surprise party", user="bob") == []
    with pytest.raises(NotFound):
        mem.edit_memory(secret.id, content="spoiled", user="bob")
    assert mem.get_memory(secret.id) == secret
    assert [h.memory.id for h in mem.search("surprise party", mode="keyword")] == [secret.id]


def test_each_user_lists_only_their_own(mem: narrative.Memory) -> None:
    mine = mem.add_memory("alice's")
    bobs = mem.add_memory("bob's", user="bob")
    assert [m.id for m in mem.list_memories()] == [mine.id]
    assert [m.id for m in mem.list_memories(user="bob")] == [bobs.id]
    assert bobs.user_id == "bob"


def test_a_second_facade_for_bob_on_the_same_file(mem: narrative.Memory, db_path: Any, clock: Any) -> None:
    secret = mem.add_memory("Only alice knows this.")
    bob = narrative.Memory(db_path, user="bob", embedder="none", clock=clock, env={})
    try:
        with pytest.raises(NotFound):
            bob.get_memory(secret.id)
        assert bob.list_memories() == []
        assert bob.search("alice knows", mode="keyword") == []
    finally:
        bob.close()


# --- keyword search and uses ---------------------------------------------------------------------------------


def test_keyword_search_explains_each_hit(mem: narrative.Memory) -> None:
    sqlite = mem.add_memory("We store memories in SQLite with FTS5.", stream="decision")
    mem.add_memory("Lunch was tomato soup.")
    hits = mem.search("sqlite storage", mode="keyword")
    assert [h.memory.id for h in hits] == [sqlite.id]
    why = hits[0].why()
    for key in (
        "bm25_rank",
        "bm25_score",
        "vector_rank",
        "similarity",
        "fused",
        "recency",
        "semantic_weight",
        "recency_weight",
        "score",
        "summary",
    ):
        assert key in why
    assert why["bm25_rank"] == 1
    assert why["vector_rank"] is None and why["similarity"] is None  # keyword mode: no vectors
    assert why["fused"] == pytest.approx(mem.settings.keyword_weight / (mem.settings.rrf_k + 1), abs=1e-6)
    assert why["recency"] == pytest.approx(1.0, abs=1e-3)  # written a second ago on the fake clock
    assert (why["semantic_weight"], why["recency_weight"]) == (0.7, 0.3)  # the decision stream's weights
    assert "keyword rank 1" in str(why["summary"])


def test_keyword_search_orders_and_limits(mem: narrative.Memory) -> None:
    for i in range(5):
        mem.add_memory(f"note {i} about gardening")
    hits = mem.search("gardening", k=3, mode="keyword")
    assert len(hits) == 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert [h.why()["bm25_rank"] for h in hits] == sorted(h.why()["bm25_rank"] for h in hits)  # type: ignore[type-var]


def test_recency_lowers_old_memories(mem: narrative.Memory, clock: Any) -> None:
    old = mem.add_memory("Plans for the garden shed.")
    clock.advance(days=mem.settings.recency_half_life_days)
    new = mem.add_memory("Plans for the garden shed.")
    hits = {h.memory.id: h for h in mem.search("garden shed", mode="keyword")}
    assert hits[old.id].recency == pytest.approx(0.5, abs=1e-3)
    assert hits[new.id].recency == pytest.approx(1.0, abs=1e-3)
    assert mem.search("garden shed", mode="keyword")[0].memory.id == new.id


def test_search_filters_by_stream(mem: narrative.Memory) -> None:
    fact = mem.add_memory("The roof leaks.", stream="fact")
    decision = mem.add_memory("We fix the roof in May.", stream="decision")
    assert [h.memory.id for h in mem.search("roof", mode="keyword", streams=["decision"])] == [decision.id]
    assert [h.memory.id for h in mem.search("roof", mode="keyword", streams=["fact"])] == [fact.id]


def test_hybrid_without_an_embedder_is_keyword_only(mem: narrative.Memory) -> None:
    added = mem.add_memory("Keyword-only mode still finds this.")
    assert mem.embedder is None
    hits = mem.search("keyword finds")
    assert [h.memory.id for h in hits] == [added.id]
    assert hits[0].vector_rank is None


def test_search_records_a_use(mem: narrative.Memory, clock: Any) -> None:
    first = mem.add_memory("The cat is called Miso.")
    second = mem.add_memory("Miso likes the window seat, Miso sleeps there.")
    conversation = mem.start_conversation()
    hits = mem.search("miso", mode="keyword")
    (use,) = mem.store.list_uses("alice")
    recorded = mem.store.get_use("alice", use.id)
    assert recorded == use
    assert recorded.kind is UseKind.RECALL
    assert recorded.query == "miso"
    assert recorded.conversation_id == conversation.id
    assert [r.memory_id for r in recorded.references] == [h.memory.id for h in hits]
    assert {r.memory_id for r in recorded.references} == {first.id, second.id}
    assert [r.rank for r in recorded.references] == [1, 2]
    assert all(r.influence_type is InfluenceType.RETRIEVAL for r in recorded.references)
    assert recorded.references[0].score == pytest.approx(hits[0].score, abs=1e-6)
    assert recorded.references[0].reasoning == hits[0].why()["summary"]
    assert [u.id for u in mem.store.uses_of_memory("alice", first.id)] == [use.id]
    with pytest.raises(NotFound):
        mem.store.get_use("bob", use.id)


def test_search_without_recording(mem: narrative.Memory) -> None:
    mem.add_memory("Not recorded.")
    mem.search("recorded", mode="keyword", record=False)
    assert mem.store.list_uses("alice") == []


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "x", "k": 0}, "k"),
        ({"query": "x", "mode": "psychic"}, "mode"),
        ({"query": "x", "streams": ["diary"]}, "streams"),
    ],
)
def test_search_validation(mem: narrative.Memory, snapshot: Snap, kwargs: dict[str, Any], field: str) -> None:
    mem.add_memory("alice exists")
    before = snapshot(mem.store)
    with pytest.raises(ValidationError) as caught:
        mem.search(**kwargs)
    assert caught.value.field == field
    assert snapshot(mem.store) == before


def test_search_with_only_punctuation_finds_nothing(mem: narrative.Memory) -> None:
    mem.add_memory("Something.")
    assert mem.search("?!...", mode="keyword") == []


def test_search_since_until(mem: narrative.Memory, clock: Any) -> None:
    early = mem.add_memory("Budget review, early.")
    clock.advance(days=10)
    late = mem.add_memory("Budget review, late.")
    cutoff = early.created_at + timedelta(days=5)
    assert [h.memory.id for h in mem.search("budget", mode="keyword", since=cutoff)] == [late.id]
    assert [h.memory.id for h in mem.search("budget", mode="keyword", until=cutoff)] == [early.id]
