"""PostgreSQL vector search reads only the asking user's rows: exact for small users, their own HNSW index for
large ones, whatever share of the table they hold (the plans are checked with EXPLAIN ANALYZE)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from conftest import pg_server
from narrative.errors import EmbeddingMismatch
from narrative.model import MemoryItem, Role, Source, Stream
from narrative.store.filters import MemoryFilter
from narrative.store.postgres import PostgresStore, vectors
from narrative.store.postgres.vectors import user_index_name

pytestmark = pytest.mark.postgres

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
MODEL = "m:384"
LIMIT = 40  # EXACT_LIMIT for these tests: a user above it gets an index


@pytest.fixture
def pg(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(vectors, "EXACT_LIMIT", LIMIT)
    server = pg_server()
    url = server.fresh_schema()
    store = PostgresStore(url)
    yield store
    store.close()
    server.release(url)


def fill(store: PostgresStore, user: str, count: int, seed: int) -> dict[int, np.ndarray]:
    """``count`` memories with random unit vectors (HNSW's hardest case) for ``user``."""
    store.ensure_user(user, NOW)
    with store.transaction():
        made = [
            store.insert_memory(
                MemoryItem(0, user, Stream.FACT, Source.AGENT, f"note {i}", importance=2, created_at=NOW)
            ).id
            for i in range(count)
        ]
    rows = np.random.default_rng(seed).standard_normal((count, 384)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    found = dict(zip(made, rows, strict=True))
    store.put_memory_vectors(user, MODEL, found)
    return found


def exact(rows: dict[int, np.ndarray], query: np.ndarray, k: int) -> list[int]:
    ids = list(rows)
    scores = np.vstack([rows[i] for i in ids]) @ (query / np.linalg.norm(query))
    return [ids[j] for j in np.argsort(-scores)[:k]]


def test_each_user_is_searched_through_their_own_rows_only(pg: PostgresStore) -> None:
    rng = np.random.default_rng(1)
    whale = fill(pg, "whale", 4059, seed=2)
    query = rng.standard_normal(384).astype(np.float32)

    alone = pg.explain_vector_search("whale", query, MODEL, k=10)  # 100 % of the rows
    assert alone["indexes"] == [user_index_name("whale")], alone["nodes"]
    assert 10 <= alone["rows_read"] <= len(whale)

    minnow = fill(pg, "minnow", 41, seed=3)  # 1 % of the rows, above the limit: an index of its own
    shrimp = fill(pg, "shrimp", 5, seed=4)  # a few rows: exact, through the primary key
    for user, rows in (("whale", whale), ("minnow", minnow)):
        plan = pg.explain_vector_search(user, query, MODEL, k=10)
        assert plan["indexes"] == [user_index_name(user)], plan["nodes"]
        assert all(node["type"] == "Index Scan" for node in plan["nodes"])
        assert plan["rows_read"] <= len(rows)
        found = [i for i, _ in pg.vector_search(user, query, MODEL, k=10)]
        assert len(set(found) & set(exact(rows, query, 10))) >= 9, user
    plan = pg.explain_vector_search("shrimp", query, MODEL, k=10)
    assert plan["indexes"] == ["memory_vectors_pkey"] and plan["rows_read"] == len(shrimp), plan["nodes"]
    assert [i for i, _ in pg.vector_search("shrimp", query, MODEL, k=3)] == exact(shrimp, query, 3)


def test_k_beyond_pgvector_s_ef_search_limit_still_answers(pg: PostgresStore) -> None:
    """ef_search stops at 1000; the iterative scan goes on until k rows are found (a search for 501 asks 1002)."""
    rows = fill(pg, "whale", 1200, seed=5)
    query = np.random.default_rng(6).standard_normal(384).astype(np.float32)
    hits = pg.vector_search("whale", query, MODEL, k=1100)
    assert len(hits) == 1100 and len({i for i, _ in hits}) == 1100
    assert pg.explain_vector_search("whale", query, MODEL, k=1100)["indexes"] == [user_index_name("whale")]
    assert hits[0][0] == exact(rows, query, 1)[0]


def test_inside_a_transaction_a_large_user_is_searched_exactly_until_the_index_exists(pg: PostgresStore) -> None:
    rows = fill(pg, "whale", 60, seed=7)
    query = np.random.default_rng(8).standard_normal(384).astype(np.float32)
    with pg.transaction():  # an index is built concurrently, which cannot happen inside a transaction
        assert [i for i, _ in pg.vector_search("whale", query, MODEL, k=5)] == exact(rows, query, 5)
    assert pg._index_state(user_index_name("whale")) is None
    pg.vector_search("whale", query, MODEL, k=5)
    assert pg._index_state(user_index_name("whale")) is True
    pg.delete_user("whale")  # the user's index goes with them
    assert pg._index_state(user_index_name("whale")) is None


def test_building_a_user_s_index_refreshes_the_statistics_of_what_a_search_reads_next(pg: PostgresStore) -> None:
    """Statistics taken while the tables were small (or never) made PostgreSQL read every row of a large user to
    find ten memories by key; the build of the user's index is the moment the user is known to have grown."""
    fill(pg, "whale", 60, seed=9)
    query = np.random.default_rng(10).standard_normal(384).astype(np.float32)
    pg.vector_search("whale", query, MODEL, k=5)  # builds the index
    for table in ("memory_vectors", "memories", "memory_sources", "messages", "passages", "memory_changes"):
        row = pg._one("SELECT reltuples FROM pg_class WHERE oid = ?::regclass", (table,))
        assert row is not None and row[0] >= 0, table  # -1: never analyzed
    memories = pg._one("SELECT reltuples FROM pg_class WHERE oid = 'memories'::regclass", ())
    assert memories is not None and memories[0] == 60


def test_another_model_is_refused_on_both_search_paths(pg: PostgresStore) -> None:
    """The foreign-model check rides in the indexed search's transaction (no round trip of its own) and still
    refuses, as the exact search's does."""
    fill(pg, "whale", 60, seed=9)  # above the limit: its own index
    fill(pg, "shrimp", 5, seed=10)  # exact
    query = np.random.default_rng(11).standard_normal(384).astype(np.float32)
    pg.vector_search("whale", query, MODEL, k=5)  # builds the index
    assert pg._index_state(user_index_name("whale")) is True
    for user in ("whale", "shrimp"):
        with pytest.raises(EmbeddingMismatch, match="made by m:384"):
            pg.vector_search(user, query, "other:384", k=5)
        assert len(pg.vector_search(user, query, MODEL, k=5)) == 5


def test_index_names_are_safe_for_any_user_id(pg: PostgresStore) -> None:
    """The indexed search writes the user id into its statement (so a prepared plan sees the partial index): quotes,
    backslashes, "?" and "%" stay what they are."""
    odd = 'o\'brien %s ? "x" \\ 100%'
    rows = fill(pg, odd, 45, seed=9)
    query = np.random.default_rng(10).standard_normal(384).astype(np.float32)
    assert pg.explain_vector_search(odd, query, MODEL, k=5)["indexes"] == [user_index_name(odd)]
    assert len(set(i for i, _ in pg.vector_search(odd, query, MODEL, k=5)) & set(exact(rows, query, 5))) >= 4
    assert [i for i, _ in pg.vector_search(odd, query, MODEL, k=5)] == [
        i for i, _ in pg.vector_search_memories_and_passages(odd, query, MODEL, k=5)[0]
    ]


def test_a_search_s_settled_plan_is_generic_and_still_goes_through_the_user_s_index(pg: PostgresStore) -> None:
    """An indexed search is planned once per connection, not per search: after a few runs the driver prepares it and
    PostgreSQL keeps a generic plan, which still reads the user's own index (the user id is in the statement)."""
    fill(pg, "whale", 60, seed=12)
    fill(pg, "minnow", 45, seed=13)
    rng = np.random.default_rng(14)
    with pg.pinned():  # one connection: prepared statements are a connection's own
        for _ in range(15):
            for user in ("whale", "minnow"):
                pg.vector_search_memories_and_passages(user, rng.standard_normal(384).astype(np.float32), MODEL, k=7)
        prepared = pg._all(
            "SELECT name, statement, generic_plans FROM pg_prepared_statements WHERE statement LIKE ?",
            ("%vector::vector(384) <=>%",),
        )
        assert len(prepared) == 2, prepared
        for name, statement, generic in prepared:
            assert generic > 0, statement
            user = "whale" if "'whale'" in statement else "minnow"
            value = "[" + ",".join(["0.05"] * 384) + "]"
            plan = pg._one(f"EXPLAIN (FORMAT JSON) EXECUTE {name}('{value}', '{MODEL}', '{value}')")
            assert plan is not None
            assert user_index_name(user) in str(plan[0]), plan[0]


def passages_for(store: PostgresStore, user: str, count: int, seed: int) -> dict[int, np.ndarray]:
    """``count`` passages (one message cut in ``count`` spans) with random unit vectors for ``user``."""
    conversation = store.insert_conversation(user, NOW)
    message = store.insert_message(user, conversation.id, Role.USER, "x" * count, NOW)
    owner = store.insert_memory(
        MemoryItem(0, user, Stream.CONVERSATION, Source.CONVERSATION, "x", importance=2, created_at=NOW)
    )
    made = store.insert_passages(user, message.id, owner.id, [(i, i + 1) for i in range(count)])
    rows = np.random.default_rng(seed).standard_normal((count, 384)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    found = {p.id: v for p, v in zip(made, rows, strict=True)}
    store.put_passage_vectors(user, MODEL, found)
    return found


def test_both_vector_searches_sent_together_answer_as_each_alone(pg: PostgresStore) -> None:
    """One wait for the memory and the passage search: on every path (exact for a small user, a large user's
    index, a large user this process has not searched yet, a filter) the answers are those of the two searches."""
    query = np.random.default_rng(5).standard_normal(384).astype(np.float32)
    for user, memories, passages in (("small", 30, 20), ("large", 300, 60), ("mixed", 300, 5)):
        fill(pg, user, memories, seed=len(user))
        passages_for(pg, user, passages, seed=memories + passages)
    fresh = PostgresStore(pg.path)  # a process that knows no user's index yet
    try:
        for store in (fresh, pg, fresh):
            for user in ("small", "large", "mixed"):
                alone = (pg.vector_search(user, query, MODEL, k=12), pg.passage_vector_search(user, query, MODEL, k=12))
                assert store.vector_search_memories_and_passages(user, query, MODEL, k=12) == alone, user
        where = MemoryFilter(streams=(Stream.FACT,))
        filtered = (
            pg.vector_search("large", query, MODEL, 7, where),
            pg.passage_vector_search("large", query, MODEL, 7, where),
        )
        assert fresh.vector_search_memories_and_passages("large", query, MODEL, 7, where) == filtered
        assert filtered[0] and not filtered[1]  # the passages belong to a conversation memory
        with pytest.raises(EmbeddingMismatch):
            fresh.vector_search_memories_and_passages("large", query, "other:384", k=5)
    finally:
        fresh.close()


def test_ef_search_grows_with_k_up_to_pgvector_s_maximum() -> None:
    assert [vectors.ef_search(k) for k in (1, 60, 200, 201, 1000, 1002)] == [200, 200, 200, 201, 1000, 1000]


def test_keyword_and_vector_search_at_once_answers_as_each_alone(pg: PostgresStore) -> None:
    """The vector searches go out from a helper thread while this one ranks by keyword: the same answers as each
    search alone, inside a transaction its own uncommitted rows (there one after the other), and no deadlock with a
    single pooled connection."""
    query = np.random.default_rng(9).standard_normal(384).astype(np.float32)
    fill(pg, "large", 120, seed=11)
    passages_for(pg, "large", 50, seed=12)
    alone = (
        pg.keyword_search_memories_and_passages("large", "note", None, 15),
        pg.vector_search_memories_and_passages("large", query, MODEL, 15),
    )
    assert alone[0][0] and alone[1][0] and alone[1][1]
    assert pg.keyword_and_vector_search("large", "note", query, MODEL, 15) == alone
    assert pg.keyword_and_vector_search("large", None, query, MODEL, 15) == (([], []), alone[1])
    assert pg.keyword_and_vector_search("large", "note", None, MODEL, 15) == (alone[0], ([], []))
    with pg.transaction():
        mine = pg.insert_memory(MemoryItem(0, "large", Stream.FACT, Source.AGENT, "note", importance=2, created_at=NOW))
        pg.put_memory_vectors("large", MODEL, {mine.id: query})
        keywords, vectors = pg.keyword_and_vector_search("large", "note", query, MODEL, 15)
        assert vectors[0][0][0] == mine.id and mine.id in {i for i, _ in keywords[0]}
    with pytest.raises(EmbeddingMismatch):  # raised in the helper thread, seen here
        pg.keyword_and_vector_search("large", "note", query, "other:384", 15)
    single = PostgresStore(pg.path, pool_size=1)  # a deadlock would end in the pool's own timeout, raised here
    try:
        assert single.keyword_and_vector_search("large", "note", query, MODEL, 15)[1][0][0][0] == mine.id
    finally:
        single.close()
