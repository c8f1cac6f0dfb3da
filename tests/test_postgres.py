"""The PostgreSQL store's own guarantees: what the database itself enforces, many writers, many processes.

The shared suites (``store`` and ``mem`` fixtures) already run every store- and
engine-level test on PostgreSQL; these tests cover what only a server has:
migrations into a bare schema, raw SQL refused by the schema, concurrent writers,
and a second process whose writes this process's in-process index must see.
"""

from __future__ import annotations

import multiprocessing
import socket
import subprocess
import sys
import textwrap
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import psycopg
import pytest

from conftest import pg_server
from narrative.errors import StoreError
from narrative.model import MemoryItem, Role, Source, Stream
from narrative.store.postgres import PostgresStore
from narrative.store.postgres import base as pg_base

pytestmark = pytest.mark.postgres

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def memory(user: str, content: str, seconds: int = 0) -> MemoryItem:
    return MemoryItem(
        id=0,
        user_id=user,
        stream=Stream.FACT,
        source=Source.AGENT,
        content=content,
        importance=2,
        created_at=NOW + timedelta(seconds=seconds),
    )


@pytest.fixture
def url() -> Any:
    server = pg_server()
    fresh = server.fresh_schema()
    yield fresh
    server.release(fresh)


@pytest.fixture
def pg(url: str) -> Any:
    store = PostgresStore(url)
    store.ensure_user("alice", NOW)
    yield store
    store.close()


def raw(url: str) -> Any:
    return psycopg.connect(url, autocommit=True)


# --- statements ------------------------------------------------------------------------


def test_an_in_list_is_one_array_parameter_whatever_its_length(pg: PostgresStore) -> None:
    """``IN (?, ?, ...)`` goes out as ``= ANY(?)`` (``NOT IN``: ``<> ALL``): one statement text for every length,
    which the driver converts once and the server prepares once, and the same rows."""
    made = [pg.insert_memory(memory("alice", f"note {i}")).id for i in range(5)]
    texts = set()
    for size in (1, 3, 5):
        sql = f"SELECT id FROM memories WHERE user_id = ? AND id IN ({','.join('?' * size)}) AND id NOT IN (?, ?)"
        params = ["alice", *made[:size], -1, made[0]]
        texts.add(pg_base.collapse_in_lists(sql, params)[0])
        assert sorted(row[0] for row in pg._all(sql, params)) == made[1:size]
    assert texts == {"SELECT id FROM memories WHERE user_id = ? AND id = ANY(?) AND id <> ALL(?)"}


# --- migrations -------------------------------------------------------------------------


@pytest.mark.parametrize("already_applied", [0, 1])
def test_fresh_and_upgraded_schemas_are_equal(monkeypatch: pytest.MonkeyPatch, already_applied: int) -> None:
    """A schema that holds the first N migrations, upgraded on open, ends like a fresh one."""
    server = pg_server()
    fresh_url, older_url = server.bare_schema(), server.bare_schema()
    fresh = PostgresStore(fresh_url)
    names = pg_base.migration_names()
    with monkeypatch.context() as patch:
        patch.setattr(pg_base, "migration_names", lambda: names[:already_applied])
        PostgresStore(older_url).close()
    upgraded = PostgresStore(older_url)
    try:
        assert upgraded.applied_migrations() == fresh.applied_migrations() == names
        assert upgraded.schema_sql() == fresh.schema_sql()
        assert upgraded.migrate() == []  # nothing left to apply
    finally:
        for store in (fresh, upgraded):
            store.close()
        server.drop(fresh_url)
        server.drop(older_url)


def test_every_key_and_unique_constraint_includes_the_user(pg: PostgresStore, url: str) -> None:
    """Ready to distribute on user_id: no primary key or unique index of a user table leaves it out.

    (The migration record, the store's own facts (store_meta) and the memory change log hold no user data:
    see docs/scaling.md.)"""
    with raw(url) as conn:
        rows = conn.execute(
            "SELECT c.relname, i.indexrelid::regclass::text, ARRAY(SELECT a.attname FROM pg_attribute a"
            " WHERE a.attrelid = c.oid AND a.attnum = ANY(i.indkey)) FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indrelid WHERE c.relnamespace = current_schema()::regnamespace"
            " AND (i.indisunique OR i.indisprimary)"
            " AND c.relname NOT IN ('schema_migrations', 'store_meta', 'memory_changes', 'memory_changes_pruned')"
        ).fetchall()
    assert rows
    for table, index, columns in rows:
        key = "id" if table == "users" else "user_id"
        assert key in columns, f"{index} on {table} leaves out the user: {columns}"


# --- what the schema refuses on its own ---------------------------------------------------


def test_partial_unique_index_refuses_a_second_active_conversation(pg: PostgresStore, url: str) -> None:
    pg.insert_conversation("alice", NOW)
    with raw(url) as conn, pytest.raises(psycopg.errors.UniqueViolation, match="one_active_conversation"):
        conn.execute("INSERT INTO conversations(user_id, status, started_at) VALUES ('alice', 'active', '2026-03-02')")


def test_sealed_link_trigger_refuses_raw_updates(pg: PostgresStore, url: str) -> None:
    link = pg.insert_narrative("alice", "what happened", [], None, "topic", NOW, sealed=True)
    with raw(url) as conn, pytest.raises(psycopg.errors.CheckViolation, match="narrative is sealed"):
        conn.execute("UPDATE narratives SET summary = 'rewritten' WHERE id = %s", (link.id,))


def test_deleting_a_user_leaves_no_row_vector_or_search_entry(pg: PostgresStore) -> None:
    conversation = pg.insert_conversation("alice", NOW)
    message = pg.insert_message("alice", conversation.id, Role.USER, "the harbour at dawn", NOW)
    kept = pg.insert_memory(memory("alice", "the harbour at dawn"))
    pg.put_memory_vectors("alice", "m:384", {kept.id: np.ones(384, dtype=np.float32)})
    assert pg.keyword_search_memories("alice", "harbour") and message.position == 1
    pg.delete_user("alice")
    for table in ("memories", "messages", "conversations", "memory_vectors", "storylines", "memory_sources"):
        assert pg.count_rows(table, "alice") == 0
    assert pg.keyword_search_memories("alice", "harbour") == []
    assert pg.vector_search("alice", np.ones(384, dtype=np.float32), "m:384") == []


# --- many writers ----------------------------------------------------------------------------


def _write_messages(url: str, conversation_id: int, count: int, tag: str) -> None:
    store = PostgresStore(url, pool_size=2)
    try:
        for i in range(count):
            store.insert_message("alice", conversation_id, Role.USER, f"{tag} {i}", NOW)
    finally:
        store.close()


def test_positions_have_no_gap_or_duplicate_under_concurrent_writers(pg: PostgresStore, url: str) -> None:
    """Threads and processes append for one user at once: positions are exactly 1..N."""
    conversation = pg.insert_conversation("alice", NOW)
    threads = [threading.Thread(target=_write_messages, args=(url, conversation.id, 15, f"t{i}")) for i in range(3)]
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_write_messages, args=(url, conversation.id, 15, f"p{i}")) for i in range(2)]
    for worker in [*threads, *processes]:
        worker.start()  # type: ignore[attr-defined]  # a Thread or a Process: both start()
    for thread in threads:
        thread.join()
    for process in processes:
        process.join(120)
        assert process.exitcode == 0
    messages = pg.list_messages("alice")
    assert [m.position for m in messages] == list(range(1, 5 * 15 + 1))
    assert len({m.content for m in messages}) == 75
    assert pg.get_conversation("alice", conversation.id).message_count == 75


# --- other processes' writes ------------------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime
    import numpy as np
    from narrative.model import MemoryItem, Source, Stream
    from narrative.store.postgres import PostgresStore

    store = PostgresStore(sys.argv[1])
    made = store.insert_memory(MemoryItem(id=0, user_id="alice", stream=Stream.FACT, source=Source.AGENT,
                               content=sys.argv[2], importance=2, created_at=datetime.now(UTC)))
    vector = np.zeros(384, dtype=np.float32)
    vector[int(sys.argv[3])] = 1.0
    store.put_memory_vectors("alice", "m:384", {made.id: vector})
    print(made.id)
    store.close()
    """
)


def test_a_second_process_writes_are_seen_before_answering(pg: PostgresStore, url: str) -> None:
    """This process's keyword index is built; another process writes; the next search sees it."""
    pg.insert_memory(memory("alice", "a quiet morning"))
    assert pg.keyword_search_memories("alice", "lighthouse") == []  # the index exists now
    done = subprocess.run(
        [sys.executable, "-c", _WRITER, url, "the lighthouse keeper waved", "7"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    made = int(done.stdout.strip())
    assert [hit[0] for hit in pg.keyword_search_memories("alice", "lighthouse")] == [made]
    query = np.zeros(384, dtype=np.float32)
    query[7] = 1.0
    assert pg.vector_search("alice", query, "m:384", k=1)[0][0] == made


def test_a_commit_that_lands_out_of_order_is_not_missed(pg: PostgresStore, url: str) -> None:
    """A transaction that took an earlier change number but committed later still reaches the index."""
    other = PostgresStore(url)
    try:
        assert pg.keyword_search_memories("alice", "anything") == []
        started, release = threading.Event(), threading.Event()

        def slow_writer() -> None:
            with other.transaction():
                other.insert_memory(memory("alice", "the slow tortoise"))
                started.set()
                release.wait(30)

        thread = threading.Thread(target=slow_writer)
        thread.start()
        started.wait(30)
        pg.insert_memory(memory("alice", "the quick hare"))  # a later change number, committed first
        assert len(pg.keyword_search_memories("alice", "hare")) == 1
        release.set()
        thread.join()
        assert len(pg.keyword_search_memories("alice", "tortoise")) == 1
    finally:
        other.close()


def test_a_prune_of_an_entry_committed_out_of_order_rebuilds_the_index(pg: PostgresStore, url: str) -> None:
    """The log is pruned past an entry of a transaction that was running at this index's last catch-up,
    while later entries stay: the index sees the prune marks and rebuilds (it would miss the entry)."""
    other = PostgresStore(url)
    try:
        started, release = threading.Event(), threading.Event()

        def slow_writer() -> None:
            with other.transaction():
                other.insert_memory(memory("alice", "the slow tortoise"))
                started.set()
                release.wait(30)

        thread = threading.Thread(target=slow_writer)
        thread.start()
        started.wait(30)
        pg.insert_memory(memory("alice", "the quick hare"))  # a later change number, committed first
        assert len(pg.keyword_search_memories("alice", "hare")) == 1  # caught up while the tortoise is running
        release.set()
        thread.join()
        pg.insert_memory(memory("alice", "a third note"))
        newest = pg._one("SELECT MAX(seq) FROM memory_changes")
        assert newest is not None
        assert pg.prune_memory_changes(keep=int(newest[0]) - pg._keywords_seq) >= 1  # the tortoise's entry goes
        assert pg._one("SELECT seq, xid FROM memory_changes_pruned") is not None
        assert len(pg.keyword_search_memories("alice", "tortoise")) == 1
        assert len(pg.keyword_search_memories("alice", "third")) == 1
    finally:
        other.close()


def test_the_change_log_prunes_itself_and_scrub_prunes_it(pg: PostgresStore) -> None:
    with pg.transaction():
        pg._exec("INSERT INTO memory_changes(memory_id) SELECT 0 FROM generate_series(1, 24000)")
    assert pg.count_rows("memory_changes") <= 11000  # every 1,000th entry keeps the newest 10,000
    assert pg.scrub_deleted(keep_changes=10)["pruned_changes"] > 0
    assert pg.count_rows("memory_changes") == 10
    with pytest.raises(StoreError), pg.transaction():
        pg.scrub_deleted()


# --- vectors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["exact", "hnsw"])
def test_recall_under_the_user_filter(pg: PostgresStore, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """Many users share the table; one user's top 10 matches an exact search (random vectors: HNSW's worst
    case).  Small users are searched exactly; the limit is lowered here so the user's own HNSW index runs too."""
    from narrative.store.postgres import vectors as pg_vectors

    if path == "hnsw":
        monkeypatch.setattr(pg_vectors, "EXACT_LIMIT", 10)
    rng = np.random.default_rng(7)
    mine: dict[int, np.ndarray] = {}
    for user in [f"u{i}" for i in range(20)]:
        pg.ensure_user(user, NOW)
        with pg.transaction():
            made = [pg.insert_memory(memory(user, f"note {i}")) for i in range(60)]
        vectors = {m.id: rng.standard_normal(384).astype(np.float32) for m in made}
        pg.put_memory_vectors(user, "m:384", vectors)
        if user == "u3":
            mine = vectors
    ids = list(mine)
    matrix = np.vstack([mine[i] / np.linalg.norm(mine[i]) for i in ids])
    recalls = []
    for _ in range(10):
        query = rng.standard_normal(384).astype(np.float32)
        exact = {ids[j] for j in np.argsort(-(matrix @ (query / np.linalg.norm(query))))[:10]}
        found = {hit[0] for hit in pg.vector_search("u3", query, "m:384", k=10)}
        recalls.append(len(found & exact) / 10)
    assert float(np.mean(recalls)) >= (1.0 if path == "exact" else 0.9), recalls


def test_an_import_draws_fresh_ids_from_the_sequences(url: str) -> None:
    """A copy of a user takes ids no other row has, and every identity sequence is past them afterwards."""
    import narrative

    with narrative.Memory(url, user="alice", embedder="hashing", env={}) as mem:
        mem.remember("we planted tomatoes by the shed", speaker="alice")
        mem.add_memory("the shed key hangs by the door")
        mem.import_data(mem.export("json"), user="carol")
        store: Any = mem.store
        for table in ("storylines", "conversations", "messages", "memories"):
            row = store._one(f"SELECT COUNT(*), COUNT(DISTINCT id), MAX(id) FROM {table}")
            assert row is not None and row[0] == row[1], table  # no id twice, across users
            sequence = store._one(f"SELECT pg_sequence_last_value(pg_get_serial_sequence('{table}', 'id'))")
            assert sequence is not None and int(sequence[0]) >= int(row[2]), table
        assert mem.add_memory("after the import", user="carol").id > int(row[2])
        assert mem.search("shed key", user="carol", record=False)


# --- opening by URL, the CLI ---------------------------------------------------------------


def test_every_role_protocol_is_met_by_both_stores(pg: PostgresStore, tmp_path: Any) -> None:
    from narrative.store import protocol
    from narrative.store.sqlite import SqliteStore

    roles = [getattr(protocol, name) for name in protocol.__all__ if name != "Store"]
    role_methods = set().union(*(set(vars(role)) for role in roles))
    assert {m for m in vars(protocol.Store) if not m.startswith("_")} <= role_methods | {"backend"}
    sqlite = SqliteStore(tmp_path / "x.db")
    try:
        for role in [*roles, protocol.Store]:
            assert isinstance(pg, role) and isinstance(sqlite, role), role.__name__
    finally:
        sqlite.close()


def test_memory_and_the_cli_open_a_url(url: str) -> None:
    from click.testing import CliRunner

    import narrative
    from narrative.interfaces.cli import _register, cli

    with narrative.Memory(url, user="maya", embedder="none", env={}) as mem:
        assert mem.store.backend == "postgres"
        mem.remember("The lighthouse keeper waved at dawn.")
    _register()
    runner = CliRunner()
    migrated = runner.invoke(cli, ["--db", url, "--embedder", "none", "--json", "migrate"])
    assert migrated.exit_code == 0, migrated.output
    assert '"backend": "postgres"' in migrated.output and "0001_initial.sql" in migrated.output
    found = runner.invoke(cli, ["--db", url, "--user", "maya", "--embedder", "none", "search", "lighthouse"])
    assert found.exit_code == 0 and "lighthouse keeper" in found.output


def test_serve_workers_needs_a_shared_database(tmp_path: Any) -> None:
    from click.testing import CliRunner

    from narrative.interfaces.cli import _register, cli

    _register()
    done = CliRunner().invoke(cli, ["--db", str(tmp_path / "one.db"), "--embedder", "none", "serve", "--workers", "2"])
    assert done.exit_code != 0 and "postgresql://" in done.output


def test_serve_workers_answer_over_one_database(url: str) -> None:
    """Two worker processes: a message sent through one is found through the API (whichever worker answers)."""
    import http.client
    import json
    import os
    import time

    import narrative

    with narrative.Memory(url, user="maya", embedder="none", env={}) as mem:
        key = mem.create_api_key(label="test")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NARRATIVE_")}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "narrative.interfaces.cli",
            "--db",
            url,
            "--embedder",
            "none",
            "serve",
            "--port",
            str(port),
            "--workers",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def call(method: str, path: str, body: str | None = None) -> tuple[int, str]:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.read().decode()
        finally:
            conn.close()

    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if call("GET", "/api/v1/me")[0] == 200:
                    break
            except OSError:
                assert server.poll() is None, server.stderr.read() if server.stderr else ""
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.3)
        for text in ("The harbour crane broke down.", "We fixed the harbour crane on Monday."):
            assert call("POST", "/api/v1/messages", json.dumps({"content": text}))[0] == 201
        for _ in range(4):  # both workers, most likely: each must see the latest write
            status, text = call("GET", "/api/v1/search?q=harbour%20crane&record=false")
            assert status == 200 and "on Monday" in text
    finally:
        server.terminate()
        server.wait(30)
        if server.stderr is not None:
            server.stderr.close()


def test_mcp_http_workers_answer_over_one_database(url: str) -> None:
    """``narrative mcp --transport http --workers 2``: stateless workers; a memory added through one call is
    found by the next, whichever worker answers either."""
    import asyncio
    import os
    import time

    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NARRATIVE_")}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "narrative.interfaces.cli",
            "--db",
            url,
            "--user",
            "mcpw",
            "--embedder",
            "none",
            "mcp",
            "--transport",
            "http",
            "--port",
            str(port),
            "--workers",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )

    async def call(tool: str, arguments: dict[str, Any]) -> str:
        async with (
            streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool(tool, arguments)
            assert not result.is_error, result
            return " ".join(getattr(part, "text", "") for part in result.content)

    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert server.poll() is None, server.stderr.read() if server.stderr else ""
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.3)
        asyncio.run(call("remember", {"text": "The ferry timetable changes in May."}))
        for _ in range(4):  # each call is a new session: either worker may answer it
            assert "ferry timetable" in asyncio.run(call("search_memories", {"query": "ferry timetable"}))
    finally:
        server.terminate()
        server.wait(30)
        if server.stderr is not None:
            server.stderr.close()


# --- round trips: a transaction's statements are pipelined ----------------------------------------------


def test_statements_nobody_reads_are_sent_without_waiting(pg: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside a transaction a write whose answer is not read costs no wait; the block's end waits once."""
    waits: list[str] = []
    sync = psycopg.Pipeline.sync

    def counted(self: psycopg.Pipeline) -> None:
        waits.append("sync")
        sync(self)

    monkeypatch.setattr(psycopg.Pipeline, "sync", counted)
    with pg.transaction():
        assert pg._local.conn.pgconn.pipeline_status != psycopg.pq.PipelineStatus.OFF
        for i in range(20):
            pg._exec("UPDATE users SET created_at = created_at WHERE id = ?", (f"nobody-{i}",))
        assert waits == []
        row = pg._one("SELECT COUNT(*) FROM users")  # a read waits for everything before it
        assert row is not None and row[0] == 1
    assert len(waits) <= 1


def test_an_error_of_an_unread_statement_belongs_to_its_block(pg: PostgresStore) -> None:
    """A failed write in a savepoint block raises at that block's end; the outer transaction goes on."""
    with pg.transaction():
        with pytest.raises(StoreError), pg.transaction():
            pg._exec("INSERT INTO users(id, created_at) VALUES (?, ?)", ("alice", NOW.isoformat()))  # exists
        pg._exec("INSERT INTO users(id, created_at) VALUES (?, ?)", ("bob", NOW.isoformat()))
    assert pg.count_rows("users") == 2
    with pytest.raises(StoreError), pg.transaction():
        pg._exec("INSERT INTO users(id, created_at) VALUES (?, ?)", ("carol", NOW.isoformat()))
        pg._exec("INSERT INTO users(id, created_at) VALUES (?, ?)", ("alice", NOW.isoformat()))
    assert pg.count_rows("users") == 2  # all or nothing
    with pytest.raises(RuntimeError), pg.transaction():
        pg._exec("INSERT INTO users(id, created_at) VALUES (?, ?)", ("dave", NOW.isoformat()))
        raise RuntimeError("undo")
    assert pg.count_rows("users") == 2
    assert pg._exec("UPDATE users SET created_at = created_at WHERE id = ?", ("bob",)).rowcount == 1


def test_an_error_found_at_commit_rolls_back_and_is_raised(pg: PostgresStore) -> None:
    """The COMMIT is sent with the block's last statements: a foreign key checked only at commit still fails the
    transaction with a StoreError, nothing of it stays, and the store answers the next statement."""
    made = pg.insert_memory(memory("alice", "the plan for the garden")).id
    with pytest.raises(StoreError), pg.transaction():
        pg._exec("PRAGMA DEFER_FOREIGN_KEYS = ON")  # SET CONSTRAINTS ALL DEFERRED: checked at COMMIT
        pg._exec("UPDATE memories SET superseded_by = ? WHERE id = ?", (10**9, made))
        assert pg._one("SELECT 1") is not None  # everything so far answered: only the COMMIT can fail
        pg._exec("INSERT INTO users(id, created_at) VALUES (?, ?)", ("erin", NOW.isoformat()))
    assert pg.get_memory("alice", made).superseded_by is None
    assert pg.count_rows("users") == 1
    with pg.transaction():
        pg._exec("INSERT INTO users(id, created_at) VALUES (?, ?)", ("erin", NOW.isoformat()))
    assert pg.count_rows("users") == 2


def test_a_long_transaction_reads_its_own_change_entries_once(pg: PostgresStore, monkeypatch: Any) -> None:
    """A batch of facts searches after each one (is it a correction?) inside one transaction.  Every catch-up of the
    keyword index used to read again every entry the transaction had written, and the memories they name: a batch
    of 2,000 facts took 10.7 ms a fact where 500 took 3.4."""
    pg.keyword_search_memories("alice", "warm up")
    refreshed: list[int] = []
    original = pg._refresh_keywords

    def counting(index: Any, memory_ids: set[int]) -> None:
        refreshed.append(len(memory_ids))
        original(index, memory_ids)

    monkeypatch.setattr(pg, "_refresh_keywords", counting)
    with pg.transaction():
        for i in range(30):
            pg.insert_memory(memory("alice", f"zebra note {i}"))
            assert len(pg.keyword_search_memories("alice", "zebra", limit=100)) == i + 1
    assert max(refreshed) == 1, refreshed
    assert len(pg.keyword_search_memories("alice", "zebra", limit=100)) == 30


def test_a_search_on_another_thread_leaves_a_running_transaction_s_rows_in_the_index(pg: PostgresStore) -> None:
    """One process, one keyword index, two threads: the other thread's searches (before the writer's first, which
    does not find the uncommitted memory, after a later write committed elsewhere, and after the writer's first)
    never make the writer miss its own writes."""
    pg.keyword_search_memories("alice", "warm up")
    other = PostgresStore(pg.path)  # another process
    steps = {name: threading.Event() for name in ("inserted", "searched", "read", "searched again", "done")}
    seen: list[int] = []

    def writer() -> None:
        try:
            with pg.transaction():
                pg.insert_memory(memory("alice", "okapi sighting"))
                pg.count_rows("memories")  # the insert has reached the server; no search yet
                steps["inserted"].set()
                steps["searched"].wait()
                seen.append(len(pg.keyword_search_memories("alice", "okapi")))
                steps["read"].set()
                steps["searched again"].wait()
                seen.append(len(pg.keyword_search_memories("alice", "okapi")))
                pg.insert_memory(memory("alice", "second okapi"))
                seen.append(len(pg.keyword_search_memories("alice", "okapi")))
        finally:  # whatever happened, the main thread's waits end
            for step in ("inserted", "read", "done"):
                steps[step].set()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        steps["inserted"].wait()
        assert pg.keyword_search_memories("alice", "okapi") == []  # not committed yet
        other.insert_memory(memory("alice", "a later note, committed"))
        assert len(pg.keyword_search_memories("alice", "later note")) == 1  # read past the writer's entry
        steps["searched"].set()
        steps["read"].wait()
        pg.keyword_search_memories("alice", "okapi")  # (what it sees of a running transaction is not settled here)
        steps["searched again"].set()
        steps["done"].wait()
    finally:
        for step in steps.values():
            step.set()
        thread.join()
        other.close()
    assert seen == [1, 1, 2]
    assert len(pg.keyword_search_memories("alice", "okapi")) == 2


def test_a_user_read_into_the_keyword_index_is_built_after_its_connection_is_given_back(
    pg: PostgresStore, monkeypatch: Any
) -> None:
    """A user's first search in a process reads their memories into the in-process keyword index (about a second
    for 100,000).  The connection goes back to the pool before that build: with a pool of one, another thread's
    statement runs while the build goes on (it waited for the pool's timeout while the build held the connection),
    and a catch-up waits for the build (it holds the lock), so no change is applied to a half-built user."""
    for i in range(20):
        pg.insert_memory(memory("alice", f"heron note {i}", seconds=i))
    single = PostgresStore(pg.path, pool_size=1)
    building, go_on = threading.Event(), threading.Event()
    original = type(single)._add_user

    def slow(self: Any, *args: Any) -> None:
        building.set()
        go_on.wait()
        original(self, *args)

    monkeypatch.setattr(type(single), "_add_user", slow)
    found: list[list[tuple[int, float]]] = []

    def search() -> None:
        try:
            found.append(single.keyword_search_memories("alice", "heron", None, 50))
        finally:
            building.set()  # a search that failed before the build does not leave the main thread waiting

    thread = threading.Thread(target=search)
    thread.start()
    try:
        building.wait()
        assert single.count_rows("memories", "alice") == 20  # the only pooled connection is free
        pg.insert_memory(memory("alice", "heron at dusk"))  # committed while the build goes on
    finally:
        go_on.set()
        thread.join()
    try:
        assert len(found[0]) in (20, 21)  # the build read its rows before or after that commit
        assert len(single.keyword_search_memories("alice", "heron", None, 50)) == 21  # caught up after the build
    finally:
        single.close()


def test_an_unreachable_server_is_named_at_once() -> None:
    """One connection is tried before the pool starts: the reason (refused) is the error, not the pool's
    "initialization incomplete after 30.0 sec" after 30 s of retries."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(StoreError) as raised:
        PostgresStore(f"postgresql://someone:secret@127.0.0.1:{port}/nothing")
    said = str(raised.value)
    assert "refused" in said.lower() and "initialization incomplete" not in said and "secret" not in said
