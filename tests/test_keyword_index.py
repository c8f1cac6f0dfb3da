"""The in-process BM25 keyword index: FTS5's terms, BM25 order, and staying current with the file."""

from __future__ import annotations

import math
import random
import sqlite3
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from narrative.model import MemoryItem, Source, Stream
from narrative.store import keyword_index
from narrative.store.filters import MemoryFilter
from narrative.store.id_map import IdMap
from narrative.store.keyword_index import (
    QUERY_STOPWORDS,
    KeywordIndex,
    query_terms,
    search_within,
    terms,
    words,
)
from narrative.store.porter import stem
from narrative.store.sqlite import SqliteStore

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

TEXTS = [
    "Caresses, ponies and ties: the cats agreed the plastered motoring was troubled.",
    "Hopping, tanned and falling, she was hissing and fizzed while failing at filing.",
    "Relational conditional rational valenci hesitanci digitizer conformabli radicalli.",
    "Differentli vileli analogousli vietnamization predication operator feudalism.",
    "Decisiveness hopefulness callousness formaliti sensitiviti sensibiliti triplicate.",
    "Formative formalize electriciti electrical hopeful goodness revival allowance inference.",
    "Airliner gyroscopic adjustable defensible irritant replacement adjustment dependent adoption.",
    "Homologou communism activate angulariti homologous effective bowdlerize probate rate cease.",
    "Controlling rolled generalization archeology happily skies dying lying agreement.",
    "Café naïve résumé Zürich — Maya's garden-app, 3D printers & the 2026 marathon!",
    "I decided to adopt the rescue dog because the shelter called; Sam is waiting on the vet.",
]


def fts_terms(texts: list[str]) -> list[list[str]]:
    """Each text's terms as SQLite's own ``porter unicode61`` tokenizer makes them."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(c, tokenize='porter unicode61')")
    db.executemany("INSERT INTO f(rowid, c) VALUES (?, ?)", list(enumerate(texts, 1)))
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'instance')")
    found: dict[int, list[tuple[int, str]]] = {}
    for term, doc, _column, offset in db.execute("SELECT term, doc, col, offset FROM v"):
        found.setdefault(doc, []).append((offset, term))
    return [[term for _, term in sorted(found.get(i, []))] for i in range(1, len(texts) + 1)]


def test_terms_are_the_ones_fts5_makes() -> None:
    assert [terms(text) for text in TEXTS] == fts_terms(TEXTS)


@pytest.mark.parametrize(
    ("word", "expected"),
    [("caresses", "caress"), ("ponies", "poni"), ("agreed", "agre"), ("hopping", "hop"), ("filing", "file"),
     ("happy", "happi"), ("relational", "relat"), ("replacement", "replac"), ("adoption", "adopt"),
     ("generalization", "gener"), ("it", "it")],
)  # fmt: skip
def test_porter_examples(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_query_terms_drop_stopwords_unless_nothing_is_left() -> None:
    assert query_terms("What did Maya decide about the garden?") == ["maya", "decid", "garden"]
    assert query_terms("what is it") == ["what", "is", "it"]


def test_bm25_prefers_rare_terms_and_short_memories() -> None:
    index = KeywordIndex()
    index.upsert([(1, "u", "garden garden plans"), (2, "u", "garden"), (3, "u", "plans for the long garden path")])
    index.upsert([(i, "u", f"plans number {i}") for i in range(10, 30)])
    hits = index.search("u", query_terms("garden plans"), 3)
    assert [h[0] for h in hits] == [1, 2, 3]
    assert hits[0][1] > hits[1][1] > hits[2][1] > 0


def test_users_never_see_each_other_and_scores_are_per_user() -> None:
    index = KeywordIndex()
    index.upsert([(1, "alice", "the rescue dog"), (2, "bob", "the rescue dog"), (3, "bob", "rescue plans")])
    assert [h[0] for h in index.search("alice", ["rescu"], 10)] == [1]
    assert [h[0] for h in index.search("bob", ["rescu"], 10)] == [3, 2]  # the shorter memory first
    assert index.search("carol", ["rescu"], 10) == []


def test_dropping_a_user_forgets_their_rows_only_and_they_can_come_back() -> None:
    index = KeywordIndex()
    index.upsert([(i, "alice" if i % 2 else "bob", f"rescue dog {i}") for i in range(1, 2001)])
    index.remove([1, 3])  # dead slots in the shard that goes
    bob = index.search("bob", ["rescu"], 5000)
    assert index.drop_user("alice") == 998 and index.drop_user("alice") == 0
    assert len(index) == 1000 and 5 not in index and 4 in index
    assert index.search("alice", ["rescu"], 10) == [] and index.search("bob", ["rescu"], 5000) == bob
    index.upsert([(5, "alice", "rescue cat"), (7, "carol", "rescue cat")])  # the shard's number is taken again
    assert [h[0] for h in index.search("alice", ["rescu"], 10)] == [5]
    assert [h[0] for h in index.search("carol", ["rescu"], 10)] == [7]
    assert index.search("bob", ["rescu"], 5000) == bob


def pruning() -> KeywordIndex:
    """An index that takes the pruned path for every query and keeps every term's layout (tiny tails)."""
    return KeywordIndex(prune_from=0, keep_layouts_from=1)


@pytest.mark.parametrize("make", [KeywordIndex, pruning])
def test_replace_remove_and_compaction_keep_answers_right(make: type[KeywordIndex]) -> None:
    index = make()
    index.upsert([(i, "u", f"note {i} about the garden") for i in range(3000)])
    index.upsert([(5, "u", "now about the marathon")])
    assert [h[0] for h in index.search("u", ["marathon"], 5)] == [5]
    assert 5 not in {h[0] for h in index.search("u", ["garden"], 5000)}
    index.remove(range(0, 2900))  # more dead than live: the shard compacts
    found = {h[0] for h in index.search("u", ["garden"], 5000)}
    assert found == set(range(2900, 3000))
    assert len(index) == 100


def test_allowed_ids_filter_before_the_top_k() -> None:
    index = KeywordIndex()
    index.upsert([(i, "u", "garden " * (1 + i % 3)) for i in range(1, 50)])
    hits = index.search("u", ["garden"], 3, allowed={7, 8, 40})
    assert sorted(h[0] for h in hits) == [7, 8, 40]


# --- inside the store -----------------------------------------------------------------------


def memory(user: str, content: str, stream: Stream = Stream.FACT) -> MemoryItem:
    return MemoryItem(
        id=0, user_id=user, stream=stream, source=Source.AGENT, content=content, importance=2, created_at=NOW
    )


@pytest.fixture
def alice(store: SqliteStore) -> str:
    store.ensure_user("alice", NOW)
    return "alice"


def ids(hits: list[tuple[int, float]]) -> list[int]:
    return [memory_id for memory_id, _ in hits]


@pytest.mark.sqlite_only  # FTS5 is the oracle
def test_the_store_answers_like_fts5_for_distinct_memories(store: SqliteStore, alice: str) -> None:
    made = [store.insert_memory(memory(alice, text)).id for text in TEXTS]
    for query in ("adoption of the rescue dog", "garden marathon", "cats and ponies", "electrical revival"):
        from_index = ids(store.keyword_search_memories(alice, query, limit=5))
        from_fts = ids(store._fts_keyword_search(alice, query, limit=5))
        assert from_index == from_fts, query
    assert ids(store.keyword_search_memories(alice, "rescue", limit=5)) == [made[-1]]


def test_writes_updates_and_deletes_show_up_at_once(store: SqliteStore, alice: str) -> None:
    first = store.insert_memory(memory(alice, "the tomato seedlings"))
    assert ids(store.keyword_search_memories(alice, "tomato")) == [first.id]
    second = store.insert_memory(memory(alice, "more tomato talk"))
    assert set(ids(store.keyword_search_memories(alice, "tomato"))) == {first.id, second.id}
    store.update_memory(alice, first.id, content="the pepper seedlings")
    assert ids(store.keyword_search_memories(alice, "tomato")) == [second.id]
    assert ids(store.keyword_search_memories(alice, "pepper")) == [first.id]
    store.delete_memories(alice, [second.id])
    assert store.keyword_search_memories(alice, "tomato") == []


def test_a_rolled_back_memory_leaves_the_index(store: SqliteStore, alice: str) -> None:
    kept = store.insert_memory(memory(alice, "the kayak trip"))
    assert ids(store.keyword_search_memories(alice, "kayak")) == [kept.id]
    with pytest.raises(RuntimeError), store.transaction():
        store.insert_memory(memory(alice, "a second kayak"))
        store.update_memory(alice, kept.id, content="the canoe trip")
        assert len(store.keyword_search_memories(alice, "kayak")) == 1  # seen inside the transaction
        raise RuntimeError("undo")
    assert ids(store.keyword_search_memories(alice, "kayak")) == [kept.id]
    assert store.keyword_search_memories(alice, "canoe") == []
    again = store.insert_memory(memory(alice, "the third kayak"))  # reuses the rolled-back log position
    assert set(ids(store.keyword_search_memories(alice, "kayak"))) == {kept.id, again.id}


def test_another_connection_s_writes_are_seen(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    reader, writer = SqliteStore(path), SqliteStore(path)
    reader.migrate()
    writer.migrate()
    reader.ensure_user("alice", NOW)
    gone = reader.insert_memory(memory("alice", "the violin lesson"))
    assert ids(reader.keyword_search_memories("alice", "violin")) == [gone.id]
    made = writer.insert_memory(memory("alice", "a second violin"))
    writer.delete_memories("alice", [gone.id])
    assert ids(reader.keyword_search_memories("alice", "violin")) == [made.id]
    reader.close()
    writer.close()


def test_a_pruned_change_log_rebuilds_the_index(store: SqliteStore, alice: str) -> None:
    old = store.insert_memory(memory(alice, "the harbour walk"))
    assert ids(store.keyword_search_memories(alice, "harbour")) == [old.id]
    new = store.insert_memory(memory(alice, "another harbour"))
    store._exec("DELETE FROM memory_changes")  # e.g. pruned by maintenance
    store.insert_memory(memory(alice, "unrelated"))
    assert set(ids(store.keyword_search_memories(alice, "harbour"))) == {old.id, new.id}


def test_filters_and_user_deletion(store: SqliteStore, alice: str) -> None:
    store.ensure_user("bob", NOW)
    decision = store.insert_memory(memory(alice, "we chose the blue tent", Stream.DECISION))
    store.insert_memory(memory(alice, "the blue tent smells"))
    bobs = store.insert_memory(memory("bob", "my blue tent"))
    only = MemoryFilter(streams=[Stream.DECISION])
    assert ids(store.keyword_search_memories(alice, "blue tent", only)) == [decision.id]
    assert ids(store.keyword_search_memories("bob", "blue tent")) == [bobs.id]
    store.delete_user("bob")
    assert store.keyword_search_memories("bob", "blue tent") == []


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(["garden", "plans", "trip", "lisbon", "notes", "maya"]), max_size=6), max_size=80
    ),
    st.lists(st.sampled_from(["garden", "plan", "trip", "lisbon", "note", "maya"]), min_size=1, max_size=3),
    st.integers(1, 30),
    st.sets(st.integers(0, 79), max_size=20),
)
def test_the_top_k_is_the_brute_force_top_k(
    texts: list[list[str]], query: list[str], k: int, removed: set[int]
) -> None:
    """Many zero scores and many ties: the k best by (score, smaller id) whatever shortcut finds them."""
    index = KeywordIndex()
    index.upsert([(i, "u", " ".join(words)) for i, words in enumerate(texts)])
    index.remove(removed)
    everything = index.search("u", query, 10_000)
    assert index.search("u", query, k) == everything[:k]
    assert all(score > 0 for _, score in everything)
    assert [h for h in everything if h[0] in removed] == []
    assert everything == sorted(everything, key=lambda h: (-h[1], h[0]))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(["garden", "plans", "trip", "lisbon", "notes", "maya"]), max_size=6), max_size=80
    ),
    st.lists(st.sampled_from(["garden", "plan", "trip", "lisbon", "note", "maya"]), min_size=1, max_size=3),
    st.integers(1, 30),
    st.sets(st.integers(0, 79), max_size=80),
    st.sampled_from([(1, 2), (2, 8), (64, 4096)]),
)
def test_a_filter_asked_about_the_best_hits_answers_like_the_filter_read_whole(
    texts: list[list[str]], query: list[str], k: int, allowed: set[int], windows: tuple[int, int]
) -> None:
    """The window of unfiltered hits grows until it holds ``k`` allowed ones or every hit, and past the last
    window the filter is read whole: in every case the answer is the filtered search's, ties and all."""
    index = KeywordIndex()
    index.upsert([(i, "u", " ".join(words)) for i, words in enumerate(texts)])
    asked: list[int] = []
    read_whole: list[bool] = []

    def among(ids: list[int]) -> set[int]:
        asked.append(len(ids))
        return set(ids) & allowed

    def every() -> set[int]:
        read_whole.append(True)
        return set(allowed)

    patch = pytest.MonkeyPatch()
    patch.setattr(keyword_index, "_FIRST_WINDOW", windows[0])
    patch.setattr(keyword_index, "_LAST_WINDOW", windows[1])
    try:
        found = search_within(lambda n, only: index.search("u", query, n, allowed=only), k, among, every)
    finally:
        patch.undo()
    expected = index.search("u", query, k, allowed=allowed) if allowed else []
    assert found == expected
    assert all(n <= max(windows[1], k * 4) for n in asked)
    if windows == (64, 4096):
        assert not read_whole  # eighty texts never outgrow the first window


# --- the pruned search against a brute-force oracle ---------------------------------------------------

VOCAB = ["garden", "trip", "lisbon", "maya", "sam", "kayak"]


def brute_force(texts: dict[int, str], query: list[str], k: int, allowed: set[int] | None) -> list[tuple[int, float]]:
    """Every live text scored on its own, with the index's float32 arithmetic, terms added in query order."""
    f32 = np.float32
    lengths = {i: len(words(text)) for i, text in texts.items()}
    counts = {i: Counter(stem(w) for w in words(text) if w not in QUERY_STOPWORDS) for i, text in texts.items()}
    if not texts:
        return []
    live, average = len(texts), sum(lengths.values()) / len(texts)
    weights = {}
    for term in query:
        df = sum(1 for c in counts.values() if c[term])
        if df:
            weights[term] = math.log(1.0 + (live - df + 0.5) / (df + 0.5))
    scored = []
    for i in texts:
        total = f32(0.0)
        for term, weight in weights.items():
            tf = f32(min(counts[i][term], 65_535))
            if tf:
                x = f32(lengths[i]) * f32(1.2 * 0.75 / average) + f32(1.2 * 0.25)
                total = f32(total + f32(tf / f32(x + tf)) * f32(weight * 2.2))
        if total > 0 and (allowed is None or i in allowed):
            scored.append((i, float(total)))
    return sorted(scored, key=lambda hit: (-hit[1], hit[0]))[:k]


text_strategy = st.builds(
    lambda content, filler: " ".join(content + ["the"] * filler),
    st.lists(st.sampled_from(VOCAB), max_size=5),
    st.one_of(st.integers(0, 6), st.sampled_from([140, 400])),  # lengths of their own buckets, and long ones
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(text_strategy, max_size=60),
    st.lists(text_strategy, max_size=25),
    st.sets(st.integers(0, 84), max_size=15),
    st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4, unique=True),
    st.integers(1, 40),
    st.one_of(st.none(), st.sets(st.integers(0, 99), max_size=40)),
)
def test_the_pruned_top_k_is_the_brute_force_top_k(
    first: list[str], later: list[str], removed: set[int], query: list[str], k: int, allowed: set[int] | None
) -> None:
    """Whole length buckets skipped, kept layouts with rows appended since, replacements, removals, the
    ``allowed`` filter, many ties: the same hits and the same float32 scores as scoring every text."""
    index = pruning()
    texts = dict(enumerate(first))
    index.upsert([(i, "u", text) for i, text in texts.items()])
    index.search("u", query, k)  # keeps a layout per term: what comes next lands in tails
    replaced = {i % max(1, len(first)): text for i, text in enumerate(later[:5])}
    added = {60 + i: text for i, text in enumerate(later)}
    texts |= replaced | added
    index.upsert([(i, "u", text) for i, text in (replaced | added).items()])
    index.remove(removed)
    texts = {i: text for i, text in texts.items() if i not in removed}
    assert index.search("u", query, k, allowed=allowed) == brute_force(texts, query, k, allowed)
    assert index.search("u", query, k) == brute_force(texts, query, k, None)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 60), st.sampled_from(["u", "v"]), text_strategy), max_size=40),
        min_size=1,
        max_size=4,
    ),
    st.sets(st.integers(0, 60), max_size=15),
    st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3, unique=True),
)
def test_upserts_in_any_order_and_with_repeats_answer_like_the_last_rows(
    batches: list[list[tuple[int, str, str]]], removed: set[int], query: list[str]
) -> None:
    """Batches of rows in any id order (a user read from a table comes in heap order), an id twice in a batch
    (its last row counts), ids moving between users: each user's answers are brute force over the last rows."""
    index = KeywordIndex(prune_from=0, keep_layouts_from=1)
    last: dict[int, tuple[str, str]] = {}
    for batch in batches:
        index.upsert(batch)
        last.update({row_id: (user, text) for row_id, user, text in batch})
    index.remove(removed)
    for row_id in removed:
        last.pop(row_id, None)
    assert len(index) == len(last)
    terms = [stem(w) for w in query]
    for user in ("u", "v"):
        texts = {i: text for i, (owner, text) in last.items() if owner == user}
        assert index.search(user, terms, 100) == brute_force(texts, terms, 100, None)


def test_a_batch_below_the_highest_id_is_placed_in_one_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """A user loaded after another with higher ids, rows in no order: their places were merged into the id map
    one row at a time, each a sort of the whole map (28.5 s for 100,000 memories on PostgreSQL, now 1.4)."""
    index = KeywordIndex()
    index.upsert([(1_000_000 + i, "first", f"note {i}") for i in range(100)])
    calls: list[int] = []
    original = IdMap.set_many

    def counting(self: IdMap, idents: Any, values: Any) -> None:
        calls.append(len(np.asarray(idents).reshape(-1)))
        original(self, idents, values)

    monkeypatch.setattr(IdMap, "set_many", counting)
    rows = [(i, "second", f"garden note {i}") for i in range(500)]
    random.Random(3).shuffle(rows)
    index.upsert(rows)
    assert calls == [500]
    assert [h[0] for h in index.search("second", ["garden"], 600)] == list(range(500))
