"""The PostgreSQL connection: a psycopg 3 pool, named migrations, nested transactions.

The row classes of the SQLite store are written in the SQL both databases speak
(``?`` placeholders, ``INSERT ... RETURNING``-free inserts, ISO text timestamps);
this base runs them on PostgreSQL: it rewrites the few SQLite spellings once per
statement text (cached), gives rows that read by name and by index like
``sqlite3.Row``, and reports the id an insert made as ``lastrowid``.

A transaction binds one pooled connection to the calling thread until it ends;
a statement outside a transaction borrows a connection for itself (autocommit).
So threads of one process, and processes, write at the same time; the database
serialises what must be serialised (row locks, unique indexes).

Inside a transaction the connection is in pipeline mode: a statement is sent
without waiting for its answer, and the client waits only when it reads one
(rows, a row count, an inserted id) and at the end of each transaction or
savepoint block.  A turn's inserts and updates (message, sources, narrative,
storyline, routing decision, savepoints) so cost one round trip together
instead of one each.  An error of a statement whose answer nobody read is
raised at the end of the block that ran it at the latest, so a caller that
catches an error around ``transaction()`` (or a store method, each of which
is one) sees it exactly where it did before.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import psycopg
import psycopg.errors
from psycopg import pq
from psycopg.adapt import Dumper
from psycopg_pool import ConnectionPool

from narrative.errors import ConversationAlreadyActive, SealedNarrative, StoreError

MIGRATIONS_PACKAGE = "narrative.store.migrations.postgres"
#: Tables whose rows get their id from an identity column (an insert reports it as ``lastrowid``).
ID_TABLES = frozenset(
    {
        "storylines",
        "conversations",
        "messages",
        "narratives",
        "memories",
        "memory_events",
        "entities",
        "state_deltas",
        "uses",
        "routing_decisions",
        "api_keys",
        "passages",
        "conflicts",
        "storyline_bindings",
        "decision_reviews",
    }
)
MIGRATION_LOCK = 7_246_161  # advisory lock key: one process migrates at a time
USER_LOCK = 7_246_163  # advisory lock class (with the user's hash): one writer per user at a time


class Row(tuple[Any, ...]):
    """A result row read by position or by column name (as ``sqlite3.Row``)."""

    names: dict[str, int]

    def __new__(cls, values: Sequence[Any], names: dict[str, int]) -> Row:
        row = super().__new__(cls, values)
        row.names = names
        return row

    def __getitem__(self, key: Any) -> Any:
        if type(key) is str:
            return tuple.__getitem__(self, self.names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self.names)


def _row_factory(cursor: Any) -> Any:
    # the names from the result itself: ``cursor.description`` makes an object per column, for every statement
    result = cursor.pgresult
    names = {} if result is None else {result.fname(i).decode(): i for i in range(result.nfields)}
    return lambda values: Row(values, names)


class _BoolAsInt(Dumper):
    """Booleans are stored as 0/1 integers, as in the SQLite file."""

    oid = psycopg.postgres.types["int8"].oid

    def dump(self, obj: Any) -> bytes:
        return b"1" if obj else b"0"


class Result:
    """What an executed statement left: its rows, the rows it changed, the id it inserted.

    In a pipelined transaction the answer is read on first use (which waits for the server);
    otherwise it was read when the statement ran.  ``answered`` is told when a pipelined
    answer arrives (every statement sent before it has answered too).
    """

    def __init__(self, cursor: Any, returning: bool, answered: Callable[[], None] | None = None) -> None:
        self._cursor, self._returning, self._answered = cursor, returning, answered
        self._rows: list[Row] | None = None
        self._rowcount = -1
        self._lastrowid: int | None = None
        if answered is None:
            self._load()

    def _load(self) -> list[Row]:
        if self._rows is None:
            cursor = self._cursor
            try:
                rows: list[Row] = cursor.fetchall()  # in a pipeline: sends what is queued, reads up to here
            except psycopg.Error as error:
                result = cursor.pgresult
                if result is None or result.status != pq.ExecStatus.COMMAND_OK:
                    raise translate_error(error) from error
                rows = []  # a statement without rows (INSERT, UPDATE, DELETE)
            if self._answered is not None:
                self._answered()
            self._rowcount = cursor.rowcount
            self._lastrowid = int(rows[-1][0]) if self._returning and rows else None
            self._rows = [] if self._returning else rows
            self._cursor = self._answered = None
        return self._rows

    @property
    def rows(self) -> list[Row]:
        return self._load()

    @property
    def rowcount(self) -> int:
        self._load()
        return self._rowcount

    @property
    def lastrowid(self) -> int | None:
        self._load()
        return self._lastrowid

    def fetchone(self) -> Row | None:
        rows = self._load()
        return rows[0] if rows else None

    def fetchall(self) -> list[Row]:
        return self._load()

    def __iter__(self) -> Iterator[Row]:
        return iter(self._load())


_INSERT = re.compile(r"^\s*INSERT\s+(?:OR\s+IGNORE\s+)?INTO\s+(\w+)", re.IGNORECASE)


@functools.lru_cache(maxsize=2048)
def translate_sql(sql: str) -> tuple[str, bool]:
    """SQLite spelling → PostgreSQL spelling; True when the statement returns the inserted id."""
    text = sql.replace("%", "%%").replace("?", "%s")
    text = re.sub(r"(?<=[\s(])\+(?=[a-z])", "", text)  # '+col': SQLite's "not by this index" hint
    text = re.sub(r"(\w+) = %s COLLATE NOCASE", r"lower(\1) = lower(%s)", text)
    text = re.sub(r"\bunicode_lower\(", "lower(", text)  # the SQLite store's lower() for every alphabet
    text = re.sub(r"\bWHERE 1\b(?!\s*=)", "WHERE TRUE", text)
    text = re.sub(r"\bAND 0\b(?!\.)", "AND FALSE", text)
    text = re.sub(r"\binstr\(", "strpos(", text)  # the same (text, part) order; 0 when absent
    ignore = re.match(r"^\s*INSERT\s+OR\s+IGNORE\s+INTO", text, re.IGNORECASE) is not None
    if ignore:
        text = re.sub(r"^\s*INSERT\s+OR\s+IGNORE\s+INTO", "INSERT INTO", text, flags=re.IGNORECASE)
        text += " ON CONFLICT DO NOTHING"
    if text.strip().upper() == "PRAGMA DEFER_FOREIGN_KEYS = ON":
        return "SET CONSTRAINTS ALL DEFERRED", False
    match = _INSERT.match(sql)
    returning = match is not None and match.group(1) in ID_TABLES and "RETURNING" not in text.upper()
    if returning:
        text += " RETURNING id"
    return text, returning


_IN_LIST = re.compile(r"\b(NOT\s+)?IN\s*\(\s*\?(?:\s*,\s*\?)*\s*\)", re.IGNORECASE)


def collapse_in_lists(sql: str, params: Sequence[Any]) -> tuple[str, list[Any]]:
    """``x IN (?, ?, ...)`` → ``x = ANY(?)`` with the list's values as one array parameter (``NOT IN``: ``<> ALL``).

    One statement text whatever the list's length, so the driver converts it once and the server plans it
    once (prepared after a few runs) instead of parsing and planning every new length again.
    """
    if "?" not in sql or _IN_LIST.search(sql) is None:
        return sql, list(params)
    pieces: list[str] = []
    values: list[Any] = []
    used = last = 0
    for match in _IN_LIST.finditer(sql):
        before = sql[last : match.start()]
        count = before.count("?")
        values += params[used : used + count]
        used += count
        size = match.group(0).count("?")
        values.append(array_parameter(params[used : used + size]))
        used += size
        pieces.append(before + ("<> ALL(?)" if match.group(1) else "= ANY(?)"))
        last = match.end()
    pieces.append(sql[last:])
    values += params[used:]
    return "".join(pieces), values


def array_parameter(values: Sequence[Any]) -> Any:
    """An ``= ANY(?)`` / ``<> ALL(?)`` parameter: integers as one array literal (``'{1,2,3}'``, typed by the server
    from the column), anything else as a list.  The driver turns a list into an array value by value in Python:
    for a search's 200 candidate ids that took longer than the statement itself (0.57 against 0.15 ms)."""
    if all(type(v) is int for v in values):
        return "{" + ",".join(map(str, values)) + "}"
    return list(values)


def translate_error(error: psycopg.Error) -> Exception:
    """Constraint failures → the glossary's errors; everything else is a StoreError."""
    diag = getattr(error, "diag", None)
    constraint = getattr(diag, "constraint_name", None) or ""
    text = str(error)
    if constraint == "one_active_conversation_per_user" or "one_active_conversation_per_user" in text:
        return ConversationAlreadyActive("this user already has an active conversation")
    if "narrative is sealed" in text:
        return SealedNarrative("sealed narratives are immutable")
    return StoreError(text.strip())


def migration_names() -> list[str]:
    files = resources.files(MIGRATIONS_PACKAGE)
    return sorted(f.name for f in files.iterdir() if f.name.endswith(".sql"))


class PostgresBase:
    """Owns a connection pool.  Writes go through :meth:`transaction`; nested calls join it."""

    def __init__(self, url: str, pool_size: int = 4) -> None:
        self.path = url
        self._local = threading.local()
        self._lock = threading.RLock()  # in-process caches; a holder never waits for a pooled connection
        _reachable(url)  # one try first: an unreachable server is said at once, not after the pool's 30 s of retries
        try:
            self.pool = ConnectionPool(
                url,
                min_size=1,
                max_size=max(1, pool_size),
                kwargs={"autocommit": True},
                configure=self._configure,
                open=False,
            )
            self.pool.open(wait=True, timeout=30.0)
        except (psycopg.Error, Exception) as error:  # PoolTimeout is not a psycopg.Error
            raise StoreError(f"cannot open {_safe_url(url)}: {error}") from error
        self.migrate()

    @staticmethod
    def _configure(conn: psycopg.Connection[Any]) -> None:
        conn.row_factory = _row_factory
        conn.adapters.register_dumper(bool, _BoolAsInt)
        try:
            from pgvector.psycopg import register_vector

            register_vector(conn)
        except psycopg.ProgrammingError:  # the extension is not there yet (before the first migration)
            pass

    # --- lifecycle -----------------------------------------------------------

    def close(self) -> None:
        self.pool.close()

    def migrate(self) -> list[str]:
        """Apply every migration not yet recorded, each in its own transaction, one process at a time."""
        applied = []
        with self.pool.connection() as conn:
            try:
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
                )
            except psycopg.errors.UniqueViolation:  # another process created it at the same moment
                pass
            except psycopg.Error as error:
                raise StoreError(f"cannot prepare {_safe_url(self.path)}: {error}") from error
            for name in migration_names():
                sql = resources.files(MIGRATIONS_PACKAGE).joinpath(name).read_text("utf-8")
                if self._apply_migration(conn, name, sql):
                    applied.append(name)
        if applied:  # the vector type may be new: connections made before it must register it
            self.pool.check()
            with self.pool.connection() as conn:
                self._configure(conn)
        return applied

    def _apply_migration(self, conn: psycopg.Connection[Any], name: str, sql: str) -> bool:
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                done = conn.execute("SELECT 1 FROM schema_migrations WHERE name = %s", (name,)).fetchone()
                if done is None:
                    conn.execute(sql.encode("utf-8"))
                    conn.execute(
                        "INSERT INTO schema_migrations(name, applied_at) VALUES (%s, %s)",
                        (name, datetime.now(UTC).isoformat()),
                    )
            return done is None
        except psycopg.Error as error:
            raise StoreError(f"migration {name} failed: {error}") from error

    def applied_migrations(self) -> list[str]:
        return [r[0] for r in self._all("SELECT name FROM schema_migrations ORDER BY name")]

    def schema_sql(self) -> list[str]:
        """The schema as PostgreSQL describes it (used to compare fresh and upgraded databases)."""
        parts: list[str] = []
        queries = [
            "SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' '"
            " || COALESCE(column_default, '') FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name != 'schema_migrations'",
            "SELECT conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)"
            " FROM pg_constraint WHERE connamespace = current_schema()::regnamespace",
            "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema()",
            "SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
            " WHERE NOT t.tgisinternal AND c.relnamespace = current_schema()::regnamespace",
            "SELECT pg_get_functiondef(p.oid) FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace"
            " AND p.prokind = 'f' AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid"
            " AND d.deptype = 'e')",
        ]
        schema = self._run("SELECT current_schema()", ()).rows[0][0]
        for query in queries:
            parts += sorted(str(r[0]).replace(f"{schema}.", "") for r in self._run(query, ()).rows)
        return parts

    # --- transactions --------------------------------------------------------

    @property
    def in_transaction(self) -> bool:
        return getattr(self._local, "depth", 0) > 0

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All-or-nothing.  The outermost call commits; inner calls use savepoints."""
        local = self._local
        depth = getattr(local, "depth", 0)
        if depth == 0:
            pinned = getattr(local, "conn", None)
            if pinned is not None:  # inside pinned(): the thread's connection already
                yield from self._outermost(pinned)
                return
            with self.pool.connection() as conn:
                local.conn = conn
                try:
                    yield from self._outermost(conn)
                finally:
                    local.conn = None
            return
        name = f"sp{depth}"
        self._control(f"SAVEPOINT {name}")
        local.depth = depth + 1
        try:
            yield
            self._settle()  # the block's unread statements answer here: their errors belong to this block
        except BaseException:
            local.depth = depth
            try:
                self._settle(quietly=True)
                self._control(f"ROLLBACK TO SAVEPOINT {name}")
                self._control(f"RELEASE SAVEPOINT {name}")
                self._settle()
            finally:
                self._rolled_back()
            raise
        local.depth = depth
        self._control(f"RELEASE SAVEPOINT {name}")

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        """A store method's statements as one unit: a transaction of their own outside one, a savepoint directly
        inside a caller's transaction, and nothing more inside a savepoint block (a turn, a batch of turns).

        Every savepoint that writes gets a subtransaction id, and past 64 of them in one transaction PostgreSQL
        reads its subtransaction log to decide what each row is visible to: every statement after that slows
        down, more as the transaction grows.  A turn's store calls made ~15 savepoints, so importing one long
        conversation (one transaction) slowed down with its length (1,000 messages: 35 messages/s, 58 without).
        Inside a caller's savepoint block a failure still undoes the whole block (the turn), which is the unit a
        caller can catch: nothing in the write path catches a store error inside a turn and carries on.
        """
        if getattr(self._local, "depth", 0) < 2:
            with self.transaction():
                yield
            return
        yield

    @contextmanager
    def pinned(self) -> Iterator[None]:
        """Hold one pooled connection for this thread (statements stay autocommit) until the block ends."""
        local = self._local
        if getattr(local, "conn", None) is not None:
            yield
            return
        with self.pool.connection() as conn:
            local.conn = conn
            try:
                yield
            finally:
                local.conn = None

    def _outermost(self, conn: psycopg.Connection[Any]) -> Iterator[None]:
        local = self._local
        try:
            with conn.pipeline() as pipeline:
                local.pipeline, local.sent, local.answered = pipeline, 0, 0
                self._control("BEGIN")
                local.depth = 1
                try:
                    yield
                    self._control("COMMIT")  # sent behind what is queued: one wait for the rest and the commit
                    self._settle()
                except BaseException:
                    self._settle(quietly=True)  # leave the pipeline clean, whatever was queued
                    raise
                finally:
                    local.pipeline = None
        except BaseException as error:
            local.depth = 0
            try:
                conn.execute("ROLLBACK")
            except psycopg.Error:
                pass
            finally:
                self._rolled_back()
            if isinstance(error, psycopg.Error):
                raise translate_error(error) from error
            raise
        local.depth = 0

    def lock_user(self, user_id: str) -> None:
        """Serialise this user's writers until the transaction ends (a transaction-scoped advisory lock keyed
        by the user's name), so two processes never interleave inside one user's write path: one sealing a
        narrative link while the other extends it.  Other users' writers do not wait."""
        if not self.in_transaction:
            raise StoreError("lock_user is taken inside a transaction")
        self._run("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (USER_LOCK, user_id))

    def _settle(self, quietly: bool = False) -> None:
        """Wait for every statement sent in the pipeline and not yet answered (their errors raise here)."""
        local = self._local
        pipeline = getattr(local, "pipeline", None)
        if pipeline is None or local.answered >= local.sent:
            return
        local.answered = local.sent
        try:
            pipeline.sync()
        except psycopg.Error as error:
            if not quietly:
                raise translate_error(error) from error

    def _rolled_back(self) -> None:
        """Called after any rollback (of a transaction or a savepoint): in-process caches resync here."""

    def _control(self, statement: str) -> None:
        local = self._local
        try:
            local.conn.execute(statement)
        except psycopg.Error as error:
            raise StoreError(f"{statement} failed on {_safe_url(self.path)}: {error}") from error
        if getattr(local, "pipeline", None) is not None:
            local.sent += 1

    # --- statements ----------------------------------------------------------

    def _run(self, sql: str, params: Sequence[Any], returning: bool = False) -> Result:
        local = self._local
        conn = getattr(local, "conn", None)
        try:
            if conn is None:
                with self.pool.connection() as borrowed:
                    return Result(borrowed.execute(sql, tuple(params)), returning)
            cursor = conn.execute(sql, tuple(params))  # always parsed, so '%%' (escaped by translate_sql) is '%'
            if getattr(local, "pipeline", None) is None:
                return Result(cursor, returning)
            local.sent += 1
            number = local.sent
            return Result(cursor, returning, answered=lambda: self._answered_up_to(number))
        except psycopg.Error as error:
            raise translate_error(error) from error

    def _answered_up_to(self, number: int) -> None:
        local = self._local
        local.answered = max(getattr(local, "answered", 0), number)

    def _run_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """One statement for many parameter rows, sent together (one round trip, or none in a pipeline)."""
        if not rows:
            return
        text, _ = translate_sql(sql)
        local = self._local
        conn = getattr(local, "conn", None)
        try:
            if conn is None:
                with self.pool.connection() as borrowed, borrowed.cursor() as cursor:
                    cursor.executemany(text, [tuple(r) for r in rows])
                return
            with conn.cursor() as cursor:
                cursor.executemany(text, [tuple(r) for r in rows])
            if getattr(local, "pipeline", None) is not None:
                local.sent += 1
        except psycopg.Error as error:
            raise translate_error(error) from error

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> Result:
        sql, params = collapse_in_lists(sql, params)
        text, returning = translate_sql(sql)
        return self._run(text, params, returning)

    def _insert(self, sql: str, params: Sequence[Any]) -> int:
        with self._atomic():
            rowid = self._exec(sql, params).lastrowid
        if rowid is None:
            raise StoreError("insert returned no id")
        return int(rowid)

    def _one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        return self._exec(sql, params).fetchone()

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self._exec(sql, params).fetchall()

    def _all_of(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Row]]:
        """The rows of each statement, all sent before any answer is read (one wait, not one each): in a
        transaction, so they also read one snapshot."""
        with self._atomic():
            results = [self._exec(sql, params) for sql, params in statements]
        return [result.fetchall() for result in results]

    def count_rows(self, table: str, user_id: str | None = None) -> int:
        """Row count of one table (used by tests and delete checks)."""
        if not table.replace("_", "").isalnum():
            raise StoreError(f"bad table name {table!r}")
        if user_id is None:
            row = self._one(f"SELECT COUNT(*) FROM {table}")
        else:
            column = "id" if table == "users" else "user_id"
            row = self._one(f"SELECT COUNT(*) FROM {table} WHERE {column} = ?", (user_id,))
        return int(row[0]) if row else 0


def _reachable(url: str, timeout: int = 10) -> None:
    """Connect once (at most ``timeout`` seconds) and close; a StoreError naming why when that fails."""
    try:
        psycopg.connect(url, connect_timeout=timeout, autocommit=True).close()
    except psycopg.Error as error:
        reason = " ".join(str(error).split())
        raise StoreError(f"cannot open {_safe_url(url)}: {reason}") from error


def _safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url)
