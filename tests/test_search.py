"""The read path: hybrid search (BM25 + vectors, weighted reciprocal rank fusion, per-stream recency weights,
diversification by provenance), its filters, user isolation, explanations and use recording.

Mechanics run on the deterministic hashing embedder; where meaning matters the real MiniLM model is used
(loaded once for the module).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

import narrative
from conftest import FakeClock
from narrative.model import EntityType, MemoryItem, UseKind
from narrative.providers.embed import Embedder, MiniLMEmbedder, embed_one
from narrative.read.candidates import Candidates
from narrative.read.search import (
    DEFAULT_WEIGHTS,
    SearchHit,
    SearchParams,
    Weights,
    collapsed,
    fuse,
    hybrid_search,
    recency_factor,
)

MODES = ("hybrid", "keyword", "vector")
WHY_KEYS = {
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
}


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    """The real local model, loaded on first use and shared by every test of the module."""
    embedder = MiniLMEmbedder()
    embedder.embed_batch(["warm up"])
    return embedder


@pytest.fixture
def hmem(db_path: Path, clock: FakeClock) -> Iterator[narrative.Memory]:
    """Alice's memory with the hashing embedder (cheap, deterministic vectors)."""
    memory = narrative.Memory(db_path, user="alice", embedder="hashing", clock=clock, env={})
    yield memory
    memory.close()


@pytest.fixture
def smem(db_path: Path, clock: FakeClock, minilm: MiniLMEmbedder) -> Iterator[narrative.Memory]:
    """Alice's memory with the real MiniLM model."""
    memory = narrative.Memory(db_path, user="alice", embedder=minilm, clock=clock, env={})
    yield memory
    memory.close()


def contents(hits: list[SearchHit]) -> list[str]:
    return [h.memory.content for h in hits]


def query_embedder(embedder: Embedder) -> Callable[[str], tuple[np.ndarray, str]]:
    return lambda text: (embed_one(embedder, text), embedder.identity)


# --- fusion ---------------------------------------------------------------------------------------------


def test_fuse_sums_reciprocal_ranks() -> None:
    fused = fuse([[1, 2, 3], [3, 4]], rrf_k=60)
    assert fused[1] == pytest.approx(1 / 61)
    assert fused[3] == pytest.approx(1 / 63 + 1 / 61)
    assert fused[4] == pytest.approx(1 / 62)
    assert max(fused, key=fused.__getitem__) == 3  # in both lists beats first in one


def test_fuse_weights_scale_each_list() -> None:
    fused = fuse([[1, 2], [2, 1]], rrf_k=10, weights=[2.0, 0.5])
    assert fused[1] == pytest.approx(2.0 / 11 + 0.5 / 12)
    assert fused[2] == pytest.approx(2.0 / 12 + 0.5 / 11)
    assert fused[1] > fused[2]  # the heavier list decides
    silenced = fuse([[1, 2], [2, 1]], rrf_k=10, weights=[0.0, 1.0])
    assert silenced[2] > silenced[1]


def test_rrf_k_trades_top_ranks_for_agreement() -> None:
    lists = [[7, 1, 2, 3, 4], [5, 6, 8, 4]]  # 7 is first in one list; 4 is fourth-ish in both
    small, large = fuse(lists, rrf_k=1), fuse(lists, rrf_k=60)
    assert small[7] > small[4]  # a small k rewards being on top of one list
    assert large[4] > large[7]  # a large k rewards appearing in both


def test_hybrid_ranks_a_memory_found_by_both_lists_above_one_found_by_vectors_only(
    smem: narrative.Memory,
) -> None:
    for text in (
        "My puppy loves chasing tennis balls in the park.",
        "The dog food delivery arrives on Tuesday.",
        "Invoice for the dog sitter was paid.",
        "We repainted the kitchen a pale green.",
        "Quarterly tax forms are due next month.",
    ):
        smem.add_memory(text)
    puppy, invoice = "My puppy loves chasing tennis balls in the park.", "Invoice for the dog sitter was paid."
    vector = {h.memory.content: h for h in smem.search("young dog playing fetch", 5, mode="vector", record=False)}
    assert puppy in vector and invoice not in vector  # by meaning alone the invoice is below the floor
    hybrid = smem.search("young dog playing fetch", 5, record=False)
    by_text = {h.memory.content: h for h in hybrid}
    puppy_rank, invoice_rank = by_text[puppy].vector_rank, by_text[invoice].vector_rank
    assert puppy_rank is not None and invoice_rank is not None
    assert puppy_rank < invoice_rank  # closer in meaning ...
    assert by_text[puppy].bm25_rank is None  # ... but no shared word
    assert by_text[invoice].bm25_rank is not None
    order = contents(hybrid)
    assert order.index(invoice) < order.index(puppy)  # found by both lists wins
    both = [h for h in hybrid if h.bm25_rank is not None and h.vector_rank is not None]
    one = [h for h in hybrid if (h.bm25_rank is None) != (h.vector_rank is None)]
    assert both and one and min(h.score for h in both) > max(h.score for h in one)


def test_hybrid_keyword_and_vector_weights(hmem: narrative.Memory) -> None:
    for text in ("apple pie recipe", "apple orchard visit", "pie chart of sales", "banana bread"):
        hmem.add_memory(text)
    embed = query_embedder(hmem.embedder)  # type: ignore[arg-type]
    now = hmem.clock()

    def order(**params: float) -> list[str]:
        p = SearchParams(k=4, collapse=False, **params)  # type: ignore[arg-type]
        return contents(hybrid_search(hmem.store, "alice", "apple pie", now, p, None, embed))

    vector_only = contents(hmem.search("apple pie", 4, mode="vector", record=False))
    assert order(keyword_weight=0.0)[: len(vector_only)] == vector_only
    assert order()[0] == "apple pie recipe"


def test_default_fusion_counts_a_keyword_rank_as_a_vector_rank(tmp_path: Path) -> None:
    """Plain reciprocal rank fusion by default (docs/decisions.md, thirteenth session): the 1.3 weight once
    measured for BM25 no longer held on LoCoMo and cost paraphrased questions on assistant chats."""
    settings = narrative.Settings.resolve(env={}, db=str(tmp_path / "m.db"))
    assert settings.keyword_weight == settings.vector_weight == 1.0
    # 1 leads the keyword list and 2 the vector list: with equal weights neither is ahead
    fused = fuse([[1, 2], [2, 1]], settings.rrf_k, [settings.keyword_weight, settings.vector_weight])
    assert fused[1] == pytest.approx(fused[2])


def test_hits_from_one_list_only_explain_themselves(hmem: narrative.Memory) -> None:
    zebras = {hmem.add_memory(f"zebra migration notes, part {i}").id for i in range(3)}
    kites = {hmem.add_memory(f"kites over the beach, day {i}").id for i in range(3)}
    embedder = hmem.embedder
    assert embedder is not None

    def embed_elsewhere(_text: str) -> tuple[np.ndarray, str]:  # the vector side looks at kites
        return embed_one(embedder, "kites over the beach"), embedder.identity

    params = SearchParams(k=10, pool=3, collapse=False)
    hits = hybrid_search(hmem.store, "alice", "zebra migration", hmem.clock(), params, None, embed_elsewhere)
    assert {h.memory.id for h in hits} == zebras | kites
    for hit in hits:
        why = hit.why()
        summary = str(why["summary"])
        if hit.memory.id in zebras:  # keyword only
            assert why["vector_rank"] is None and why["similarity"] is None and why["bm25_rank"] is not None
            assert "keyword rank" in summary and "vector rank" not in summary
        else:  # vector only
            assert why["bm25_rank"] is None and why["bm25_score"] is None and why["vector_rank"] is not None
            assert "vector rank" in summary and "keyword rank" not in summary
    fused_max = 1 / (params.rrf_k + 1) * 2
    top = max(hits, key=lambda h: h.fused)
    assert top.fused == pytest.approx(fused_max / 2)  # one list's first place is half of both lists' first


# --- filters --------------------------------------------------------------------------------------------


@pytest.fixture
def filtered(hmem: narrative.Memory, clock: FakeClock) -> dict[str, MemoryItem]:
    """One 'lighthouse' memory per filter dimension, in two conversations and two storylines."""
    first = hmem.start_conversation("first")
    hmem.close_conversation(first.id)
    second = hmem.start_conversation("second")
    trip = hmem.create_storyline("Coastal trip")
    old_event = clock.now - timedelta(days=90)
    made = {
        "first": hmem.add_memory("lighthouse keeper stories", conversation_id=first.id),
        "second": hmem.add_memory("lighthouse photos at dusk", conversation_id=second.id, stream="research"),
        "trip": hmem.add_memory("lighthouse tour booked", storyline_id=trip.id, stream="decision"),
        "agent": hmem.add_memory("lighthouse lamp facts", source="extraction"),
        "old": hmem.add_memory("lighthouse visit long ago", event_at=old_event),
    }
    hmem.store.insert_entity("alice", EntityType.TASK, "book the lighthouse tour", clock(), memory_id=made["trip"].id)
    hmem.store.insert_entity("alice", EntityType.PERSON, "the keeper", clock(), memory_id=made["first"].id)
    return made


def found(mem: narrative.Memory, mode: str, **filters: object) -> set[int]:
    return {h.memory.id for h in mem.search("lighthouse", 20, mode=mode, record=False, **filters)}  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", MODES)
def test_filters_by_conversation_storyline_stream_source(
    hmem: narrative.Memory, filtered: dict[str, MemoryItem], mode: str
) -> None:
    ids = {name: m.id for name, m in filtered.items()}
    assert found(hmem, mode) == set(ids.values())  # cross-session: every conversation
    assert found(hmem, mode, conversation_id=filtered["first"].conversation_id) == {ids["first"]}
    both = [filtered["first"].conversation_id, filtered["second"].conversation_id]
    assert found(hmem, mode, conversation_ids=both) == {ids["first"], ids["second"]}
    assert found(hmem, mode, storyline_id=filtered["trip"].storyline_id) == {ids["trip"]}
    assert found(hmem, mode, streams=["research", "decision"]) == {ids["second"], ids["trip"]}
    assert found(hmem, mode, sources=["extraction"]) == {ids["agent"]}


@pytest.mark.parametrize("mode", MODES)
def test_filter_by_entity_type(hmem: narrative.Memory, filtered: dict[str, MemoryItem], mode: str) -> None:
    assert found(hmem, mode, entity_types=["task"]) == {filtered["trip"].id}
    assert found(hmem, mode, entity_types=["task", "person"]) == {filtered["trip"].id, filtered["first"].id}
    assert found(hmem, mode, entity_types=["waiting_on"]) == set()


@pytest.mark.parametrize("mode", MODES)
def test_filter_by_time_uses_event_time_then_creation_time(
    hmem: narrative.Memory, filtered: dict[str, MemoryItem], clock: FakeClock, mode: str
) -> None:
    old = filtered["old"]
    assert old.event_at is not None and old.created_at > old.event_at
    cutoff = old.event_at + timedelta(days=1)
    recent = found(hmem, mode, since=cutoff)
    assert old.id not in recent and len(recent) == len(filtered) - 1  # created recently, happened long ago
    assert found(hmem, mode, until=cutoff) == {old.id}
    created = filtered["agent"].created_at  # no event time: the creation time counts
    assert found(hmem, mode, since=created, until=created) == {filtered["agent"].id}
    assert found(hmem, mode, since=clock.now + timedelta(days=1)) == set()


def test_isolated_session_search_never_leaks_other_sessions(hmem: narrative.Memory) -> None:
    one = hmem.start_conversation("Gadamer chapter")
    hmem.add_memory("horizon fusion is key to my reading", conversation_id=one.id, stream="research")
    hmem.close_conversation(one.id)
    two = hmem.start_conversation("Ricoeur article")
    hmem.add_memory("distanciation versus horizon", conversation_id=two.id, stream="research")
    for mode in MODES:
        isolated = hmem.search("horizon", 10, mode=mode, conversation_id=two.id, record=False)
        assert {h.memory.conversation_id for h in isolated} == {two.id}
        across = hmem.search("horizon", 10, mode=mode, record=False)
        assert {h.memory.conversation_id for h in across} == {one.id, two.id}


# --- user isolation -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_bob_never_sees_alices_memories(hmem: narrative.Memory, mode: str) -> None:
    alice = hmem.add_memory("The spare key is under the blue flowerpot.")
    assert hmem.search("spare key flowerpot", 5, mode=mode, user="bob", record=False) == []
    bobs = hmem.add_memory("The spare key is under the blue flowerpot.", user="bob")  # identical text
    for who, own in (("bob", bobs), ("alice", alice)):
        hits = hmem.search("spare key flowerpot", 5, mode=mode, user=who, record=False)
        assert [h.memory.id for h in hits] == [own.id]
        assert all(h.memory.user_id == who for h in hits)


def test_the_vector_index_answers_per_user(hmem: narrative.Memory) -> None:
    mine = {hmem.add_memory(f"note {i} about sailing").id for i in range(3)}
    theirs = {hmem.add_memory(f"note {i} about sailing", user="bob").id for i in range(2)}
    embedder = hmem.embedder
    assert embedder is not None
    query = embed_one(embedder, "sailing")
    as_alice = {i for i, _ in hmem.store.vector_search("alice", query, embedder.identity, k=50)}
    as_bob = {i for i, _ in hmem.store.vector_search("bob", query, embedder.identity, k=50)}
    assert as_alice == mine and as_bob == theirs
    assert hmem.store.vector_search("carol", query, embedder.identity, k=50) == []


def test_a_second_engine_for_bob_on_the_same_file(db_path: Path, hmem: narrative.Memory, clock: FakeClock) -> None:
    hmem.add_memory("Alice's passport number is in the drawer.")
    with narrative.Memory(db_path, user="bob", embedder="hashing", clock=clock, env={}) as bob:
        for mode in MODES:
            assert bob.search("passport drawer", 5, mode=mode, record=False) == []


# --- recency and stream weights --------------------------------------------------------------------------


def test_recency_factor_halves_per_half_life() -> None:
    now = datetime(2026, 1, 31, tzinfo=UTC)
    assert recency_factor(now, now, 30) == 1.0
    assert recency_factor(now - timedelta(days=30), now, 30) == pytest.approx(0.5)
    assert recency_factor(now - timedelta(days=60), now, 30) == pytest.approx(0.25)
    assert recency_factor(now - timedelta(days=10), now, 10) == pytest.approx(0.5)
    assert recency_factor(now + timedelta(days=5), now, 30) == 1.0  # the future is not fresher than now
    assert recency_factor(now - timedelta(days=400), now, 0) == 1.0  # no half-life: no decay


def test_recency_on_hits_follows_the_configured_half_life(db_path: Path, clock: FakeClock) -> None:
    with narrative.Memory(
        db_path, user="alice", embedder="none", clock=clock, env={}, recency_half_life_days=10
    ) as mem:
        mem.add_memory("tidal chart", event_at=clock.now - timedelta(days=10))
        mem.add_memory("tidal almanac", event_at=clock.now - timedelta(days=20))
        why = {h.memory.content: h.why() for h in mem.search("tidal", 5, record=False)}
    assert why["tidal chart"]["recency"] == pytest.approx(0.5, abs=1e-3)
    assert why["tidal almanac"]["recency"] == pytest.approx(0.25, abs=1e-3)


@pytest.mark.parametrize("mode", MODES)
def test_newer_beats_older_more_in_the_conversation_stream(hmem: narrative.Memory, clock: FakeClock, mode: str) -> None:
    text = "We talked about the harbour festival."
    old_at = clock.now - timedelta(days=60)
    made = {
        (stream, age): hmem.add_memory(text, stream=stream, event_at=old_at if age == "old" else clock.now)
        for stream in ("conversation", "research")
        for age in ("old", "new")
    }
    hits = {h.memory.id: h for h in hmem.search("harbour festival", 10, mode=mode, record=False)}
    score = {key: hits[m.id].score for key, m in made.items()}
    assert hits[made["conversation", "new"].id].weights == Weights(0.5, 0.5)
    assert hits[made["research", "old"].id].weights == Weights(0.8, 0.2)
    conversation_gap = score["conversation", "new"] - score["conversation", "old"]
    research_gap = score["research", "new"] - score["research", "old"]
    assert conversation_gap > 0 and research_gap > 0
    assert conversation_gap > research_gap + 0.1
    assert hits[made["conversation", "old"].id].recency == pytest.approx(0.25, abs=1e-3)


def test_unknown_streams_fall_back_to_the_default_weights(hmem: narrative.Memory) -> None:
    memory = hmem.add_memory("a fact about kelp forests")
    params = SearchParams(k=5, stream_weights={})
    hits = hybrid_search(hmem.store, "alice", "kelp", hmem.clock(), params)
    assert [h.memory.id for h in hits] == [memory.id] and hits[0].weights == DEFAULT_WEIGHTS


# --- explanations and uses ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_every_hit_explains_itself(hmem: narrative.Memory, mode: str) -> None:
    hmem.add_memory("Copper kettle whistles at dawn.", stream="conversation")
    hmem.add_memory("Copper prices rose in March.", stream="research")
    hmem.add_memory("Unrelated note about kites.")
    hits = hmem.search("copper kettle", 10, mode=mode, record=False)
    assert hits
    for hit in hits:
        why = hit.why()
        assert set(why) >= WHY_KEYS
        assert why["score"] == pytest.approx(hit.score, abs=1e-6)
        assert why["fused"] == pytest.approx(hit.fused, abs=1e-6)
        assert (why["semantic_weight"], why["recency_weight"]) == (hit.weights.semantic, hit.weights.recency)
        assert 0.0 <= float(why["recency"]) <= 1.0  # type: ignore[arg-type]
        summary = str(why["summary"])
        assert "recency" in summary
        if mode == "keyword":
            assert why["vector_rank"] is None and why["similarity"] is None and why["bm25_rank"] is not None
        if mode == "vector":
            assert why["bm25_rank"] is None and why["bm25_score"] is None and why["vector_rank"] is not None
            assert f"cosine {hit.similarity:.3f}" in summary
        if why["bm25_rank"] is not None:
            assert f"keyword rank {why['bm25_rank']}" in summary
        if why["vector_rank"] is not None:
            assert f"vector rank {why['vector_rank']}" in summary
    if mode == "hybrid":
        top = hits[0].why()
        assert top["bm25_rank"] is not None and top["vector_rank"] is not None
        assert hits[0].memory.content == "Copper kettle whistles at dawn."


def test_search_records_a_recall_use_with_the_why_summary(hmem: narrative.Memory) -> None:
    hmem.add_memory("The violin lesson moved to Wednesday.")
    hmem.add_memory("Violin strings need replacing.")
    before = len(hmem.list_uses())
    hits = hmem.search("violin lesson", 5)
    uses = hmem.list_uses()
    assert len(uses) == before + 1
    use = uses[0]
    assert use.kind is UseKind.RECALL and use.query == "violin lesson"
    assert [r.memory_id for r in use.references] == [h.memory.id for h in hits]
    for rank, (ref, hit) in enumerate(zip(use.references, hits, strict=True), start=1):
        assert ref.reasoning == hit.why()["summary"]
        assert ref.score == pytest.approx(hit.score, abs=1e-6)
        assert ref.rank == rank


def test_search_with_record_false_records_nothing(hmem: narrative.Memory) -> None:
    hmem.add_memory("The violin lesson moved to Wednesday.")
    hmem.search("violin", 5, record=False)
    hmem.search("violin", 5, mode="vector", record=False)
    assert hmem.list_uses() == []


# --- one result per message -----------------------------------------------------------------------------


def test_collapsed_folds_what_is_shown_and_trims_what_overlaps() -> None:
    shows = {
        1: frozenset({10, 11}),
        2: frozenset({11, 12}),
        3: frozenset({11}),
        4: frozenset({20}),
        5: frozenset(),
        6: frozenset({10, 12}),
    }
    chosen, folded = collapsed([1, 2, 3, 4, 5, 6], shows, 4)
    assert chosen == [1, 2, 4, 5]  # 3 and 6 show nothing new
    assert folded == {1: [3, 6]}  # folded into the best hit that shows one of their messages
    assert shows[2] == frozenset({12})  # 2 shows only its new message
    assert shows[5] == frozenset()  # a summary folds nothing and is never folded


def test_overlapping_exchanges_show_each_message_once(hmem: narrative.Memory) -> None:
    turns = [
        hmem.add_message("Should we plant the tomatoes in April?", speaker="Ana"),
        hmem.add_message("Tomatoes in April risk frost; wait until May.", role="assistant"),
        hmem.add_message("Then tomatoes in May, and beans first.", speaker="Ana"),
    ]
    ids = [t.id for t in turns]
    exchange_a = hmem.add_memory(
        "Ana: tomatoes in April or May? / Tomatoes risk frost in April; tomatoes in May.",
        stream="conversation",
        message_ids=ids[:2],
    )
    exchange_b = hmem.add_memory(
        "Tomatoes in May then. / Tomatoes in May, and beans first.", stream="conversation", message_ids=ids[1:]
    )
    echo = hmem.add_memory(
        "tomatoes, beans, seeds, compost, a trowel, gloves and May", stream="conversation", message_ids=ids[1:2]
    )
    other = hmem.add_memory("Seed catalogue: tomatoes, beans, squash, peppers and herbs", stream="conversation")
    everything = hmem.search("tomatoes May", 10, mode="keyword", record=False)
    assert {h.memory.id for h in everything} == {exchange_a.id, exchange_b.id, other.id}
    shower = next(h for h in everything if ids[1] in h.shown)
    assert shower.memory.id in {exchange_a.id, exchange_b.id}
    assert echo.id in shower.also  # the echo's only message is shown by a better hit: folded into it
    assert f"folds in #{echo.id}" in str(shower.why()["summary"])
    shown = [m for h in everything for m in h.shown]
    assert sorted(shown) == sorted(set(shown)) and set(ids) <= set(shown)  # every message once
    trimmed = next(h for h in everything if h.memory.id in {exchange_a.id, exchange_b.id} and h is not shower)
    assert len(trimmed.shown) == 1  # the other exchange shows only what the better one did not
    assert trimmed.text == next(
        f"{t.speaker}: {t.content}" if t.speaker else t.content for t in turns if t.id == trimmed.shown[0]
    )


def test_a_broad_summary_does_not_push_specific_memories_down(hmem: narrative.Memory) -> None:
    turns = [
        hmem.add_message(f"Note {i}: the greenhouse heater needs a new thermostat part {i}.", speaker="Ana")
        for i in range(6)
    ]
    summary = hmem.add_memory(
        "Ana talked about the greenhouse heater and its thermostat all week.",
        stream="reflection",
        message_ids=[t.id for t in turns],
    )
    specific = [hmem.add_memory(t.content, stream="conversation", message_ids=[t.id]) for t in turns[:4]]
    hits = hmem.search("greenhouse heater thermostat", 7, record=False)
    assert {h.memory.id for h in hits} == {summary.id, *(m.id for m in specific)}  # nothing specific pushed out
    assert [h.memory.id for h in hits].index(summary.id) == len(hits) - 1  # the summary comes after the words
    assert not hits[-1].shown and all(h.shown for h in hits[:-1])
    more = [hmem.add_memory(t.content, stream="conversation", message_ids=[t.id]) for t in turns[4:]]
    hits = hmem.search("greenhouse heater thermostat", 7, record=False)
    assert {h.memory.id for h in hits} == {m.id for m in specific + more}  # every message it sums up is shown
    assert any(summary.id in h.also for h in hits)


def test_a_query_with_nothing_relevant_returns_nothing(smem: narrative.Memory) -> None:
    for text in (
        "We decided to go with SQLite because it works offline.",
        "The garden has 24 beds in four rows.",
        "My sister's wedding is in June in Porto.",
    ):
        smem.add_memory(text)
    assert smem.search("nothingmatchesthisxyz", 10, record=False) == []
    assert smem.search("qwzx vbnm plokij", 10, mode="vector", record=False) == []
    hits = smem.search("offline database choice", 10, record=False)
    assert hits and "SQLite" in hits[0].memory.content
    assert hits[0].why()["closeness"] in {"close", "related", "loosely related"}


def test_min_score_drops_weaker_hits_and_is_checked(hmem: narrative.Memory) -> None:
    for text in ("kelp forest survey", "kelp recipes", "forest walk", "survey results"):
        hmem.add_memory(text)
    everything = hmem.search("kelp forest survey", 10, record=False)
    cut = (everything[0].score + everything[-1].score) / 2
    strong = hmem.search("kelp forest survey", 10, min_score=cut, record=False)
    assert strong and len(strong) < len(everything) and all(h.score >= cut for h in strong)
    assert all(0.0 <= h.score <= 1.0 for h in everything)
    with pytest.raises(narrative.ValidationError):
        hmem.search("kelp", 10, min_score=1.5)


def test_an_exchange_shows_the_turn_whose_speaker_the_query_names(tmp_path: Path) -> None:
    """A turn's words include its speaker's name: a question about Melanie keeps Melanie's own turn on screen,
    not only the reply that thanks her by name."""
    from narrative.read.showing import shown_messages

    with narrative.Memory(tmp_path / "s.db", user="u", embedder="none", env={}) as mem:
        mem.remember("I've been running farther lately, it clears my head.", speaker="Melanie")
        mem.remember("Cool, Melanie! Keep it up!", speaker="Caroline")
        exchange = next(m for m in mem.list_memories() if len(m.message_ids) == 2)
        briefs = mem.store.memory_briefs("u", [exchange.id])
        shows, _ = shown_messages(mem.store, "u", "How does Melanie unwind?", [exchange.id], briefs, 10)
    assert shows[exchange.id] == frozenset(exchange.message_ids)


def test_a_time_the_query_names_replaces_now_for_recency(hmem: narrative.Memory, clock: FakeClock) -> None:
    """A date belongs with its event: asked about March 2024, what was said then outranks the same words said
    lately; asked without a date, the recent one comes first.  Recency still only scales a match."""
    march = hmem.add_memory("We agreed on the harbour budget.", event_at=datetime(2024, 3, 12, tzinfo=UTC))
    lately = hmem.add_memory("We agreed on the harbour budget again.", event_at=clock.now - timedelta(days=2))
    kelp = hmem.add_memory("A note about kelp forests.", event_at=datetime(2024, 3, 20, tzinfo=UTC))

    plain = hmem.search("harbour budget", 5, record=False)
    assert [h.memory.id for h in plain[:2]] == [lately.id, march.id]
    assert plain[0].why()["recency_to"] == "now"

    dated = hmem.search("harbour budget in March 2024", 5, record=False)
    assert [h.memory.id for h in dated[:2]] == [march.id, lately.id]  # the kelp note was said then, but shares nothing
    assert kelp.id not in [h.memory.id for h in dated[:2]]
    why = dated[0].why()
    assert why["recency"] == 1.0 and why["recency_to"] == "March 2024"
    assert "near March 2024 1.00" in str(why["summary"])


def test_relative_time_words_are_not_matched_as_words(hmem: narrative.Memory, clock: FakeClock) -> None:
    """ "Last week" in a memory said months ago meant another week: a question about last week is not about it."""
    old = hmem.add_memory("Last week we fixed the pump.", event_at=clock.now - timedelta(days=120))
    recent = hmem.add_memory("We fixed the pump and the hose.", event_at=clock.now - timedelta(days=8))
    hits = hmem.search("what did we fix last week", 5, mode="keyword", record=False)
    assert [h.memory.id for h in hits[:2]] == [recent.id, old.id]
    plain = {h.memory.id: h.bm25_score for h in hmem.search("what did we fix", 5, mode="keyword", record=False)}
    assert {h.memory.id: h.bm25_score for h in hits} == plain  # the words "last" and "week" were not asked for
    assert hits[0].why()["recency_to"] == "last week"


def test_a_large_k_answers_alike_on_both_stores(db: str) -> None:
    """Issue 24 (F9): ``search(k=501)`` asked PostgreSQL for hnsw.ef_search = 1002 (past its 1,000) and failed."""
    with narrative.Memory(db, user="alice", embedder="hashing", env={}) as mem:
        made = {mem.add_memory(f"note {i} about the garden and the bicycle").id for i in range(5)}
        for k in (501, 1_000, 5_000):
            for mode in ("vector", "hybrid"):
                assert {h.memory.id for h in mem.search("garden bicycle", k, mode=mode, record=False)} == made
        embedder = mem.embedder
        assert embedder is not None
        query = embedder.embed_batch(["garden"])[0]
        assert len(mem.store.vector_search("alice", query, embedder.identity, k=100_000)) == 5


def test_equal_vectors_come_back_smaller_id_first_on_both_stores(db: str) -> None:
    """The same note saved several times has one vector: SQLite's index put the smaller id first, PostgreSQL's
    top-N sort put them in the order of its heap (rows whose vector was written again moved to its end)."""
    with narrative.Memory(db, user="alice", embedder="hashing", env={}) as mem:
        ids = [mem.add_memory("The greenhouse door sticks in the rain.").id for _ in range(8)]
        for memory_id in ids[:4]:  # each vector written again
            mem.edit_memory(memory_id, content="The greenhouse door sticks.")
            mem.edit_memory(memory_id, content="The greenhouse door sticks in the rain.")
        embedder = mem.embedder
        assert embedder is not None
        query = embedder.embed_batch(["greenhouse door"])[0]
        assert [i for i, _ in mem.store.vector_search("alice", query, embedder.identity, k=3)] == ids[:3]
        assert [i for i, _ in mem.store.vector_search("alice", query, embedder.identity, k=10)] == ids


def test_a_word_that_carries_no_topic_is_no_evidence(mem: narrative.Memory) -> None:
    """A keyword-only match on a filler word ("instead", "actually") does not make a hit: the text is not about
    the query.  A topic word still does, with or without fillers around it."""
    tea = mem.add_memory("I switched to green tea instead of coffee in the mornings.")
    assert mem.search("what should we use instead?") == []
    assert mem.search("actually, anyway") == []
    assert [h.memory.id for h in mem.search("what about the tea instead?")] == [tea.id]


def test_a_search_reads_each_message_s_passages_once(hmem: narrative.Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Which passages a shown message has was asked four times a search (what is current, which memories a hit
    stands for, which passage to show, what the hits conflict with): on PostgreSQL a round trip each.  Now the
    first step reads them and the others ask only for messages not read yet; what the search returns is the
    same as when every step reads them itself."""
    long = " ".join(f"Paragraph {i} about the heron colony and its nests by the river." for i in range(120))
    hmem.remember(long, "assistant")
    hmem.remember("Where do the herons nest?")
    hmem.remember("I saw the herons by the river this morning.")
    with monkeypatch.context() as each_step:  # every step reads for itself, as before
        each_step.setattr(
            Candidates,
            "passages_of",
            lambda self, store, user_id, ids: store.passages_of_messages(user_id, set(ids)),
        )
        before = [(h.memory.id, h.text) for h in hmem.search("herons nest river", 10, record=False)]
    asked: list[int] = []
    store = hmem.store
    original = store.passages_of_messages

    def counting(user_id: str, message_ids: object) -> object:
        ids = list(message_ids)  # type: ignore[call-overload]
        asked.append(len(ids))
        return original(user_id, ids)

    monkeypatch.setattr(store, "passages_of_messages", counting)
    after = [(h.memory.id, h.text) for h in hmem.search("herons nest river", 10, record=False)]
    assert after == before
    assert 1 <= len(asked) <= 2, asked


def test_the_count_of_hits_is_limit_as_in_every_interface(mem: narrative.Memory) -> None:
    """A probe porting a mem0 call: ``mem.search(q, limit=2)`` was refused ("unexpected keyword argument 'limit'")
    though the README's table writes ``mem.search(query, limit, …)`` and HTTP and MCP call the count ``limit``."""
    for i in range(5):
        mem.add_memory(f"Tomato bed {i} needs water.")
    assert len(mem.search("tomato water", limit=2)) == 2
    assert len(mem.search("tomato water", 3)) == 3  # k, positionally, as before
    assert len(mem.recall("tomato water", limit=1)) == 1
    assert len(mem.search("tomato water", k=2, limit=2)) == 2
    with pytest.raises(narrative.ValidationError, match="limit or k"):
        mem.search("tomato water", k=2, limit=3)
    with pytest.raises(narrative.ValidationError, match="limit or k"):
        mem.recall("tomato water", 4, limit=1)
