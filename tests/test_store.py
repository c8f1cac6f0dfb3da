"""The SQLite store: migrations, pragmas, FTS5, the database-level rules, transactions.

These tests talk to the store directly (and, where the point is what the database
itself refuses, to its raw connection).
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from narrative.errors import ConversationAlreadyActive, SealedNarrative, StoreError
from narrative.model import ConversationStatus, LinkKind, LinkOrigin, MemoryItem, MemoryLink, Role, Source, Stream
from narrative.store.sqlite import SqliteStore
from narrative.store.sqlite.base import MIGRATIONS_PACKAGE, migration_names

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def at(seconds: int) -> datetime:
    return NOW + timedelta(seconds=seconds)


def memory(user: str, content: str, seconds: int = 0) -> MemoryItem:
    """A memory value for ``insert_memory`` (the store assigns the id)."""
    return MemoryItem(
        id=0,
        user_id=user,
        stream=Stream.FACT,
        source=Source.AGENT,
        content=content,
        importance=2,
        created_at=at(seconds),
    )


def test_a_new_database_file_and_its_wal_are_readable_by_the_owner_only(tmp_path: Path) -> None:
    """Issue 24 (item 11): files were created 0644 (with the usual umask), readable by every local user."""
    previous = os.umask(0o022)
    try:
        path = tmp_path / "private.db"
        store = SqliteStore(path)
        store.ensure_user("alice", datetime(2026, 3, 2, tzinfo=UTC))
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
        store.close()
    finally:
        os.umask(previous)
    assert modes == {"private.db": 0o600, "private.db-wal": 0o600, "private.db-shm": 0o600}
    shared = tmp_path / "shared.db"
    shared.touch(mode=0o640)  # an existing file keeps the mode its owner gave it
    SqliteStore(shared).close()
    assert stat.S_IMODE(shared.stat().st_mode) == 0o640


@pytest.fixture
def alice(store: SqliteStore) -> str:
    store.ensure_user("alice", NOW)
    return "alice"


def migration_sql(name: str) -> str:
    return resources.files(MIGRATIONS_PACKAGE).joinpath(name).read_text("utf-8")


# --- migrations -------------------------------------------------------------------------


@pytest.mark.sqlite_only  # the SQLite file's own rules; tests/test_postgres.py has PostgreSQL's
def test_migrations_are_recorded_by_name(store: SqliteStore) -> None:
    names = migration_names()
    assert names, "the sqlite backend ships at least one migration"
    assert names == sorted(names)
    assert names[0] == "0001_initial.sql"
    assert store.applied_migrations() == names
    rows = store.conn.execute("SELECT name, applied_at FROM schema_migrations ORDER BY name").fetchall()
    assert [r[0] for r in rows] == names
    assert all(datetime.fromisoformat(r[1]).tzinfo is not None for r in rows)


def test_opening_twice_applies_nothing_new(db_path: Path) -> None:
    first = SqliteStore(db_path)
    recorded = first.conn.execute("SELECT name, applied_at FROM schema_migrations").fetchall()
    first.close()

    second = SqliteStore(db_path)
    try:
        assert second.migrate() == []
        again = second.conn.execute("SELECT name, applied_at FROM schema_migrations").fetchall()
        assert [tuple(r) for r in again] == [tuple(r) for r in recorded]
    finally:
        second.close()


@pytest.mark.parametrize("already_applied", range(len(migration_names())))
def test_fresh_and_upgraded_databases_have_the_same_schema(tmp_path: Path, already_applied: int) -> None:
    """A file that already holds the first N migrations, upgraded on open, ends like a fresh one."""
    fresh = SqliteStore(tmp_path / "fresh.db")

    older = tmp_path / "older.db"
    raw = sqlite3.connect(older, isolation_level=None)
    raw.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for name in migration_names()[:already_applied]:
        raw.executescript(migration_sql(name))
        raw.execute("INSERT INTO schema_migrations VALUES (?, ?)", (name, NOW.isoformat()))
    raw.close()
    upgraded = SqliteStore(older)
    reopened = SqliteStore(older)
    try:
        assert upgraded.applied_migrations() == fresh.applied_migrations()
        assert upgraded.schema_sql() == fresh.schema_sql()
        assert reopened.schema_sql() == fresh.schema_sql()
    finally:
        for s in (fresh, upgraded, reopened):
            s.close()


def test_opening_while_another_connection_migrates(db_path: Path) -> None:
    """Two processes opening a new file at once: the second must wait, then find nothing to do."""
    name = migration_names()[0]
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("PRAGMA journal_mode = WAL")
    other.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    # The other opener is half-way through the first migration, holding the write lock.
    other.executescript(
        "BEGIN IMMEDIATE;\n"
        + migration_sql(name)
        + f"\nINSERT INTO schema_migrations VALUES ('{name}', '{NOW.isoformat()}');"
    )
    outcome: list[object] = []

    def open_store() -> None:
        try:
            opened = SqliteStore(db_path)
            outcome.append(opened.applied_migrations())
            opened.close()
        except Exception as error:
            outcome.append(error)

    thread = threading.Thread(target=open_store)
    thread.start()
    time.sleep(1.0)  # let it read schema_migrations and queue for the write lock
    other.execute("COMMIT")
    other.close()
    thread.join(timeout=60)
    assert outcome == [migration_names()]


@pytest.mark.sqlite_only  # the SQLite file's own rules; tests/test_postgres.py has PostgreSQL's
def test_wal_mode_and_foreign_keys(store: SqliteStore, db_path: Path) -> None:
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    other = SqliteStore(db_path)
    try:
        assert other.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert other.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    finally:
        other.close()


def test_foreign_keys_are_enforced(store: SqliteStore) -> None:
    with pytest.raises(StoreError):
        store.insert_conversation("nobody", NOW)  # no such user row
    assert store.count_rows("conversations") == 0


# --- full-text search -------------------------------------------------------------------


def test_keyword_search_over_memories(store: SqliteStore, alice: str) -> None:
    wal = store.insert_memory(memory(alice, "The store runs SQLite in WAL mode"))
    store.insert_memory(memory(alice, "Lunch was a tomato soup"))
    hits = store.keyword_search_memories(alice, "wal")
    assert [i for i, _ in hits] == [wal.id]
    assert store.keyword_search_memories(alice, "nothing-like-this") == []
    # porter stemming: "migrating" finds "migrations"
    running = store.insert_memory(memory(alice, "Running the migrations twice is safe"))
    assert [i for i, _ in store.keyword_search_memories(alice, "migrating")] == [running.id]


def test_keyword_search_ranks_by_bm25(store: SqliteStore, alice: str) -> None:
    once = store.insert_memory(memory(alice, "rust appears once among many other unrelated words here"))
    twice = store.insert_memory(memory(alice, "rust rust"))
    hits = store.keyword_search_memories(alice, "rust")
    assert [i for i, _ in hits] == [twice.id, once.id]
    assert hits[0][1] >= hits[1][1]  # higher is better


def test_keyword_search_survives_fts_syntax_in_the_query(store: SqliteStore, alice: str) -> None:
    found = store.insert_memory(memory(alice, "NOT everything is a query: AND, OR, NEAR are words"))
    for query in ["NOT", "AND OR", '"unbalanced', "near(", "*", "col:umn", "don't"]:
        store.keyword_search_memories(alice, query)  # never an FTS5 syntax error
    assert [i for i, _ in store.keyword_search_memories(alice, "near")] == [found.id]


@pytest.mark.sqlite_only  # the SQLite file's own rules; tests/test_postgres.py has PostgreSQL's
def test_deleted_memory_leaves_no_fts_hit(store: SqliteStore, alice: str) -> None:
    gone = store.insert_memory(memory(alice, "A zeppelin over the harbour"))
    kept = store.insert_memory(memory(alice, "Another zeppelin, kept"))
    assert {i for i, _ in store.keyword_search_memories(alice, "zeppelin")} == {gone.id, kept.id}
    assert store.delete_memories(alice, [gone.id]) == 1
    assert [i for i, _ in store.keyword_search_memories(alice, "zeppelin")] == [kept.id]
    raw = store.conn.execute("SELECT rowid FROM memories_fts WHERE memories_fts MATCH 'harbour'").fetchall()
    assert raw == []


def test_edited_memory_is_found_by_its_new_words_only(store: SqliteStore, alice: str) -> None:
    item = store.insert_memory(memory(alice, "The meeting is on Tuesday"))
    store.update_memory(alice, item.id, content="The meeting moved to Thursday")
    assert store.keyword_search_memories(alice, "tuesday") == []
    assert [i for i, _ in store.keyword_search_memories(alice, "thursday")] == [item.id]


def test_keyword_search_over_narratives(store: SqliteStore, alice: str) -> None:
    older = store.insert_narrative(alice, "We chose SQLite for the embedded store", [], None, "storage", at(1))
    newer = store.insert_narrative(alice, "SQLite needed WAL for readers", [], older.id, "storage", at(2))
    store.insert_narrative(alice, "Picked a logo colour", [], None, "design", at(3))
    assert [n.id for n in store.search_narratives(alice, "sqlite")] == [newer.id, older.id]
    assert [n.id for n in store.search_narratives(alice, "design")] != []  # topic is indexed too
    assert store.search_narratives(alice, "kubernetes") == []


def test_keyword_search_over_messages(store: SqliteStore, alice: str) -> None:
    conversation = store.insert_conversation(alice, NOW)
    hello = store.insert_message(alice, conversation.id, Role.USER, "Hello there", at(1))
    store.insert_message(alice, conversation.id, Role.ASSISTANT, "Hi! How can I help?", at(2), speaker="rock")
    found = store.search_messages(alice, "hello")
    assert [m.id for m, _ in found] == [hello.id]
    assert [m.speaker for m, _ in store.search_messages(alice, "rock")] == ["rock"]  # speaker is indexed


def test_links_are_stored_once_and_only_between_the_user_s_own_memories(store: SqliteStore, alice: str) -> None:
    store.ensure_user("bob", NOW)
    a, b, c = (store.insert_memory(memory(alice, f"alice note {i}", i)).id for i in range(3))
    theirs = store.insert_memory(memory("bob", "bob's note")).id

    def link(memory_id: int, linked_id: int, user: str = alice) -> MemoryLink:
        return MemoryLink(user, memory_id, linked_id, LinkKind.SAME_IDEA, LinkOrigin.RULE, NOW)

    assert store.insert_memory_links([link(b, a), link(c, a), link(b, a)]) == 2  # a repeat in one call: once
    assert store.insert_memory_links([link(c, a), link(c, b)]) == 1
    for bad in ([link(c, theirs)], [link(a, a)], [link(c, b), link(theirs, a, "bob")]):
        with pytest.raises(StoreError):
            store.insert_memory_links(bad)
    assert {(k.memory_id, k.linked_id) for k in store.memory_links(alice)} == {(b, a), (c, a), (c, b)}
    assert store.memory_links("bob") == []


def test_keyword_search_never_crosses_users(store: SqliteStore, alice: str) -> None:
    store.ensure_user("bob", NOW)
    store.insert_memory(memory(alice, "alice's secret plan"))
    store.insert_narrative(alice, "alice's secret arc", [], None, "secret", NOW)
    conversation = store.insert_conversation(alice, NOW)
    store.insert_message(alice, conversation.id, Role.USER, "my secret", NOW)
    assert store.keyword_search_memories("bob", "secret") == []
    assert store.search_narratives("bob", "secret") == []
    assert store.search_messages("bob", "secret") == []


# --- database-level rules ------------------------------------------------------------------


@pytest.mark.sqlite_only  # the SQLite file's own rules; tests/test_postgres.py has PostgreSQL's
def test_one_active_conversation_per_user_across_connections(store: SqliteStore, db_path: Path) -> None:
    store.ensure_user("alice", NOW)
    store.ensure_user("bob", NOW)
    other = SqliteStore(db_path)  # a second connection on the same file
    try:
        first = store.insert_conversation("alice", NOW)
        with pytest.raises(ConversationAlreadyActive):
            other.insert_conversation("alice", at(1))
        with pytest.raises(ConversationAlreadyActive):
            store.insert_conversation("alice", at(1))
        bobs = other.insert_conversation("bob", at(2))  # another user may have one
        assert store.count_rows("conversations") == 2
        assert store.active_conversation("bob") == bobs

        # once alice's conversation is no longer active, a new one is allowed, from either side
        store.update_conversation("alice", first.id, status=ConversationStatus.READY_TO_CLOSE)
        second = other.insert_conversation("alice", at(3))
        assert store.active_conversation("alice") == second
        # and reactivating the old one is refused by the index itself
        with pytest.raises(ConversationAlreadyActive):
            other.update_conversation("alice", first.id, status=ConversationStatus.ACTIVE)
        assert store.get_conversation("alice", first.id).status is ConversationStatus.READY_TO_CLOSE
    finally:
        other.close()


@pytest.mark.sqlite_only  # the SQLite file's own rules; tests/test_postgres.py has PostgreSQL's
def test_partial_unique_index_refuses_raw_sql(store: SqliteStore, alice: str) -> None:
    store.insert_conversation(alice, NOW)
    with pytest.raises(sqlite3.IntegrityError):
        store.conn.execute(
            "INSERT INTO conversations(user_id, status, started_at) VALUES (?, 'active', ?)", (alice, NOW.isoformat())
        )
    store.conn.execute(
        "INSERT INTO conversations(user_id, status, started_at) VALUES (?, 'archived', ?)", (alice, NOW.isoformat())
    )
    assert store.count_rows("conversations") == 2


@pytest.mark.sqlite_only  # the SQLite file's own rules; tests/test_postgres.py has PostgreSQL's
def test_sealed_narrative_refuses_raw_update(store: SqliteStore, alice: str) -> None:
    sealed = store.insert_narrative(alice, "Fixed and final", [], None, "t", NOW, sealed=True)
    for statement in (
        "UPDATE narratives SET summary = 'rewritten' WHERE id = ?",
        "UPDATE narratives SET memory_ids = '[1]' WHERE id = ?",
        "UPDATE narratives SET topic = 'other' WHERE id = ?",
        "UPDATE narratives SET sealed = 0 WHERE id = ?",
        "UPDATE narratives SET user_id = 'bob' WHERE id = ?",
    ):
        with pytest.raises(sqlite3.IntegrityError, match="sealed"):
            store.conn.execute(statement, (sealed.id,))
    assert store.get_narrative(alice, sealed.id) == sealed


def test_sealed_narrative_refuses_store_update(store: SqliteStore, alice: str) -> None:
    running = store.insert_narrative(alice, "Still being written", [], None, "t", NOW)
    assert not running.sealed
    changed = store.update_narrative(alice, running.id, summary="Written", topic="topic")
    assert (changed.summary, changed.topic) == ("Written", "topic")
    sealed = store.seal_narrative(alice, running.id, at(1))
    assert sealed.sealed and sealed.sealed_at == at(1)
    assert store.seal_narrative(alice, running.id, at(2)) == sealed  # sealing twice is a no-op
    with pytest.raises(SealedNarrative):
        store.update_narrative(alice, running.id, summary="Rewritten")
    assert store.get_narrative(alice, running.id) == sealed


def test_deleting_a_predecessor_unlinks_a_sealed_successor(store: SqliteStore, alice: str) -> None:
    """The trigger leaves previous_narrative_id alone, so ON DELETE SET NULL still works."""
    first = store.insert_narrative(alice, "First", [], None, "t", at(1), sealed=True)
    second = store.insert_narrative(alice, "Second", [], first.id, "t", at(2), sealed=True)
    store.delete_narratives(alice, [first.id])
    assert store.get_narrative(alice, second.id).previous_narrative_id is None


def test_user_delete_cascades_through_a_sealed_chain(store: SqliteStore, alice: str) -> None:
    first = store.insert_narrative(alice, "First", [], None, "t", at(1), sealed=True)
    store.insert_narrative(alice, "Second", [], first.id, "t", at(2), sealed=True)
    store.insert_memory(memory(alice, "a fact"))
    store.delete_user(alice)
    for table in ("narratives", "memories", "users"):
        assert store.count_rows(table) == 0


# --- transactions -------------------------------------------------------------------------


def test_failing_step_rolls_back_the_whole_transaction(store: SqliteStore, alice: str) -> None:
    with pytest.raises(RuntimeError), store.transaction():
        store.insert_memory(memory(alice, "written then undone: quokka"))
        store.insert_conversation(alice, NOW)
        raise RuntimeError("step two failed")
    assert store.count_rows("memories") == 0
    assert store.count_rows("conversations") == 0
    assert store.keyword_search_memories(alice, "quokka") == []


def test_database_refusal_rolls_back_earlier_steps(store: SqliteStore, alice: str) -> None:
    with pytest.raises(ConversationAlreadyActive), store.transaction():
        store.insert_memory(memory(alice, "undone"))
        store.insert_conversation(alice, NOW)
        store.insert_conversation(alice, at(1))  # the partial unique index refuses
    assert store.count_rows("memories") == 0
    assert store.count_rows("conversations") == 0
    # the connection is usable afterwards
    store.insert_conversation(alice, at(2))
    assert store.count_rows("conversations") == 1


def test_nested_transaction_rolls_back_only_its_savepoint(store: SqliteStore, alice: str) -> None:
    with store.transaction():
        outer = store.insert_memory(memory(alice, "outer before"))
        with pytest.raises(RuntimeError), store.transaction():
            store.insert_memory(memory(alice, "inner, undone"))
            raise RuntimeError("inner failed")
        with store.transaction():
            inner_ok = store.insert_memory(memory(alice, "inner, kept"))
        after = store.insert_memory(memory(alice, "outer after"))
    kept = {m.id for m in store.list_memories(alice)}
    assert kept == {outer.id, inner_ok.id, after.id}
    assert store.keyword_search_memories(alice, "undone") == []


def test_outer_failure_undoes_committed_savepoints(store: SqliteStore, alice: str) -> None:
    with pytest.raises(RuntimeError), store.transaction():
        with store.transaction():
            store.insert_memory(memory(alice, "inner released"))
        with store.transaction(), store.transaction():
            store.insert_memory(memory(alice, "two levels deep"))
        raise RuntimeError("outer failed")
    assert store.count_rows("memories") == 0
    with store.transaction():  # depth is back to zero: a new outer transaction begins
        store.insert_memory(memory(alice, "fresh"))
    assert store.count_rows("memories") == 1


@pytest.mark.sqlite_only  # the SQLite file's own rules; tests/test_postgres.py has PostgreSQL's
def test_uncommitted_writes_are_invisible_to_another_connection(store: SqliteStore, alice: str, db_path: Path) -> None:
    other = SqliteStore(db_path)
    try:
        with store.transaction():
            store.insert_memory(memory(alice, "pending"))
            assert other.count_rows("memories") == 0
        assert other.count_rows("memories") == 1
    finally:
        other.close()


@pytest.mark.sqlite_only  # the SQLite file's own rules; tests/test_postgres.py has PostgreSQL's
def test_a_locked_database_raises_store_error(store: SqliteStore, alice: str, db_path: Path) -> None:
    store.conn.execute("PRAGMA busy_timeout = 50")  # fail fast instead of waiting 30 s
    writer = sqlite3.connect(db_path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        with pytest.raises(StoreError, match="locked"):
            store.insert_conversation(alice, NOW)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert store.count_rows("conversations") == 0
    store.insert_conversation(alice, NOW)  # and the store recovers once the lock is gone


def test_count_rows_refuses_odd_table_names(store: SqliteStore) -> None:
    with pytest.raises(StoreError):
        store.count_rows("memories; DROP TABLE users")


def test_briefs_and_conflicts_read_together_are_those_read_alone(store: SqliteStore, alice: str) -> None:
    """A search reads its candidates' briefs and conflicts in one wait: the same as each read alone."""
    store.ensure_user("bob", NOW)
    a, b, c = (store.insert_memory(memory(alice, f"alice note {i}", i)).id for i in range(3))
    theirs = store.insert_memory(memory("bob", "bob's note")).id
    first = store.insert_conflict(alice, a, b, NOW, reason="both can't hold")
    second = store.insert_conflict(alice, c, a, NOW, reason="moved since")
    store.insert_conflict("bob", theirs, theirs, NOW)
    assert first is not None and second is not None
    for ids in ([a], [b, c], [c, a, b, a], [theirs, 10**9], []):
        briefs, conflicts = store.memory_briefs_and_conflicts(alice, ids)
        assert briefs == store.memory_briefs(alice, ids)
        assert conflicts == store.conflicts_of(alice, ids)
    assert store.memory_briefs_and_conflicts(alice, [a])[1] == [first, second]


@pytest.mark.sqlite_only
def test_a_user_s_memories_are_listed_newest_first_through_an_index(store: SqliteStore, alice: str) -> None:
    """Listing a user's memories newest first, all or one stream's, walks an index instead of reading and sorting
    every memory of the user (at a million: 219 ms for the newest twenty, 157 ms for the decisions a new decision
    may follow from, each turn that made one; under 0.1 ms now)."""
    from narrative.store.filters import MemoryFilter

    for i in range(30):
        store.insert_memory(memory(alice, f"note {i}", seconds=i))
    seen: list[tuple[str, list[Any]]] = []
    read = store._all

    def kept(sql: str, params: Sequence[Any] = ()) -> list[Any]:
        seen.append((sql, list(params)))
        return read(sql, params)

    store._all = kept  # type: ignore[method-assign]
    try:
        newest = store.list_memories(alice, MemoryFilter(limit=5))
        facts = store.list_memories(alice, MemoryFilter(streams=[Stream.FACT], limit=5))
    finally:
        store._all = read  # type: ignore[method-assign]
    assert [m.content for m in newest] == [m.content for m in facts] == [f"note {i}" for i in range(29, 24, -1)]
    listed = [(sql, params) for sql, params in seen if "ORDER BY COALESCE(m.event_at, m.created_at) DESC" in sql]
    plans = [
        " ".join(str(r[3]) for r in store.conn.execute("EXPLAIN QUERY PLAN " + sql, params)) for sql, params in listed
    ]
    assert len(plans) == 2
    assert "memories_user_time" in plans[0] and "TEMP B-TREE" not in plans[0]
    assert "memories_user_stream" in plans[1] and "TEMP B-TREE" not in plans[1]
