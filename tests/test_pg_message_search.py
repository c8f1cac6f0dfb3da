"""PostgreSQL's keyword search over a user's messages keeps them in process and reads only what was written since:
its answers stay those of a search over every message, whatever other processes add or delete, and whatever a
transaction that rolls back added."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import pg_server
from narrative.errors import StoreError
from narrative.model import Role
from narrative.store.postgres import PostgresStore
from narrative.store.postgres.rows import rank_texts

pytestmark = pytest.mark.postgres

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
WORDS = "berlin lisbon moved flat rent garden tax bike train office sprint deadline friday coffee".split()
QUERIES = ["moved to lisbon", "rent of the flat", "sprint deadline friday", "bike", "garden tax office", "nothing"]


@pytest.fixture
def url() -> Any:
    server = pg_server()
    url = server.fresh_schema()
    yield url
    server.release(url)


def oracle(store: PostgresStore, user: str, query: str, limit: int = 20) -> list[tuple[int, float]]:
    """What the search answered before: BM25 over every message of the user, read now."""
    rows = store._all("SELECT id, content || ' ' || speaker FROM messages WHERE user_id = ?", (user,))
    return rank_texts(user, ((int(r[0]), str(r[1])) for r in rows), query, limit)


def found(store: PostgresStore, user: str, query: str, limit: int = 20) -> list[tuple[int, float]]:
    return [(m.id, score) for m, score in store.search_messages(user, query, limit)]


def same(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
    if [i for i, _ in a] != [i for i, _ in b]:
        return False
    return all(abs(x - y) < 1e-6 for (_, x), (_, y) in zip(a, b, strict=True))


def say(store: PostgresStore, user: str, rng: random.Random, step: int) -> int:
    conversation = store.active_conversation(user) or store.insert_conversation(user, NOW)
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9)))
    return store.insert_message(user, conversation.id, Role.USER, text, NOW + timedelta(minutes=step)).id


def test_answers_match_a_search_over_every_message_while_other_processes_write_and_delete(url: str) -> None:
    mine, other = PostgresStore(url), PostgresStore(url)  # two processes on one database
    try:
        rng = random.Random(5)
        for user in ("alice", "bob"):
            mine.ensure_user(user, NOW)
        written: dict[str, list[int]] = {"alice": [], "bob": []}
        for step in range(120):
            user = rng.choice(["alice", "alice", "bob"])
            writer = rng.choice([mine, other])
            roll = rng.random()
            if roll < 0.12 and written[user]:
                gone = rng.sample(written[user], min(len(written[user]), rng.randint(1, 3)))
                writer.delete_messages(user, gone)
                written[user] = [i for i in written[user] if i not in gone]
            else:
                written[user].append(say(writer, user, rng, step))
            if step % 3 == 0:
                query = rng.choice(QUERIES)
                assert same(found(mine, user, query), oracle(mine, user, query)), (step, user, query)
        for user in ("alice", "bob"):
            for query in QUERIES:
                for store in (mine, other):
                    assert same(found(store, user, query, 5), oracle(store, user, query, 5)), (user, query)
    finally:
        mine.close()
        other.close()


@pytest.fixture
def alice(url: str) -> Any:
    """A store with the user alice (who says things through :func:`said` and :func:`say`)."""
    store = PostgresStore(url)
    try:
        store.ensure_user("alice", NOW)
        yield store
    finally:
        store.close()


def said(store: PostgresStore, count: int, seed: int) -> random.Random:
    """``count`` messages of alice's; the generator that wrote them, to write more."""
    rng = random.Random(seed)
    for step in range(count):
        say(store, "alice", rng, step)
    return rng


def test_a_second_search_reads_only_the_messages_written_since(alice: PostgresStore) -> None:
    store = alice
    rng = said(store, 40, seed=1)
    read: list[int] = []
    original = store._all

    def counting(sql: str, params: Any = ()) -> list[Any]:
        rows = original(sql, params)
        if "UNION ALL SELECT 1, id" in sql:
            read.append(len(rows) - 1)  # the messages read, after the head row
        return rows

    store._all = counting  # type: ignore[method-assign]
    store.search_messages("alice", "lisbon")
    say(store, "alice", rng, 41)
    say(store, "alice", rng, 42)
    store.search_messages("alice", "lisbon")
    store.search_messages("alice", "berlin")
    assert read == [40, 2, 0]


def test_what_a_rolled_back_transaction_wrote_is_not_found_afterwards(alice: PostgresStore) -> None:
    store = alice
    said(store, 10, seed=2)
    store.search_messages("alice", "garden")
    conversation = store.active_conversation("alice")
    assert conversation is not None
    with pytest.raises(StoreError), store.transaction():
        ghost = store.insert_message("alice", conversation.id, Role.USER, "zanzibar ferry", NOW)
        assert [m.id for m, _ in store.search_messages("alice", "zanzibar")] == [ghost.id]  # its own writes
        raise StoreError("undo")
    assert store.search_messages("alice", "zanzibar") == []
    for query in QUERIES:
        assert same(found(store, "alice", query), oracle(store, "alice", query)), query


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("say"), st.lists(st.sampled_from(WORDS), min_size=1, max_size=6)),
        st.tuples(st.just("delete"), st.integers(0, 5)),
        st.tuples(st.just("undone"), st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)),
        st.tuples(st.just("search"), st.sampled_from(QUERIES)),
    ),
    max_size=14,
)


@pytest.fixture(scope="module")
def shared_url() -> Any:
    server = pg_server()
    url = server.fresh_schema()
    yield url
    server.release(url)


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(ops=OPS)
def test_any_sequence_of_writes_deletes_and_rollbacks_answers_as_a_search_over_every_message(
    shared_url: str, ops: list[tuple[str, Any]]
) -> None:
    """Index against oracle: whatever happened, the held index answers as BM25 over every message read now."""
    mine, other = PostgresStore(shared_url), PostgresStore(shared_url)
    user = f"u{uuid.uuid4().hex}"
    try:
        mine.ensure_user(user, NOW)
        conversation = mine.insert_conversation(user, NOW)
        written: list[int] = []
        for step, (kind, value) in enumerate(ops):
            writer = (mine, other)[step % 2]
            if kind == "say":
                when = NOW + timedelta(minutes=step)
                written.append(writer.insert_message(user, conversation.id, Role.USER, " ".join(value), when).id)
            elif kind == "delete" and written:
                writer.delete_messages(user, [written.pop(value % len(written))])
            elif kind == "undone":
                with pytest.raises(StoreError), mine.transaction():
                    mine.insert_message(user, conversation.id, Role.USER, " ".join(value), NOW)
                    mine.search_messages(user, value[0])  # the index takes the row from inside the transaction
                    raise StoreError("undo")
            mine.search_messages(user, value if kind == "search" else "lisbon")  # the index holds what it read
        for query in QUERIES:
            assert same(found(mine, user, query), oracle(mine, user, query)), query
    finally:
        mine.close()
        other.close()
