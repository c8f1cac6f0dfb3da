"""The SQLite connection: WAL, foreign keys, named migrations, nested transactions."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from narrative.errors import ConversationAlreadyActive, SealedNarrative, StoreError, ValidationError

MIGRATIONS_PACKAGE = "narrative.store.migrations.sqlite"


def to_text(value: datetime | None) -> str | None:
    """Timestamps are stored as ISO-8601 text in UTC."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat()


def to_time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def to_time_required(value: str) -> datetime:
    return datetime.fromisoformat(value)


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def loads(value: str | None, default: Any = None) -> Any:
    return default if value is None else json.loads(value)


def finite_vector(vector: Any) -> np.ndarray:
    """A flat float32 array of finite numbers (a NaN or an infinity would poison every search), or ValidationError."""
    values = np.asarray(vector, dtype=np.float32).reshape(-1)
    if values.size == 0 or not np.isfinite(values).all():
        raise ValidationError("a vector must hold finite numbers (no NaN or infinity)", field="vector")
    return values


def vector_blob(vector: Any) -> bytes:
    """A vector as the float32 bytes the file stores, refused unless every number is finite."""
    return finite_vector(vector).tobytes()


#: Tables whose ids are never given twice (migrations 0013, 0014): a new row's id is above every id they hold or lost.
FLOORED = (
    "conversations",
    "messages",
    "storylines",
    "uses",
    "storyline_bindings",
    "api_keys",
    "entities",
    "narratives",
)


def next_id(table: str) -> str:
    """SQL for a new row's id in a :data:`FLOORED` table: above its ids and above every id it has deleted."""
    if table not in FLOORED:
        raise StoreError(f"ids of {table!r} are not floored")
    return (
        f"(SELECT MAX(COALESCE((SELECT MAX(id) FROM {table}), 0),"
        f" COALESCE((SELECT last_id FROM id_floors WHERE name = '{table}'), 0)) + 1)"
    )


def placeholders(values: Sequence[Any]) -> str:
    return ",".join("?" for _ in values)


#: The SQL name of :func:`unicode_lower`, which every connection of the store has (SQLite's own ``lower``
#: folds A-Z only, so ``lower('MÜNCHEN')`` is ``'mÜnchen'``).
UNICODE_LOWER = "unicode_lower"
#: Where ``str.lower`` and PostgreSQL's ``lower`` part: PostgreSQL lowers letter by letter, so a final capital
#: sigma is ``σ`` (never ``ς``) and a dotted capital I is a plain ``i`` (not ``i`` + U+0307).
_LETTER_BY_LETTER = {ord("Σ"): "σ", ord("İ"): "i"}


def unicode_lower(value: Any) -> Any:
    """Text lowercased as PostgreSQL's ``lower`` does in a UTF-8 database (docs/decisions.md, issue 14's
    "icontains"); any
    other value (NULL, a number, bytes) as it is."""
    if not isinstance(value, str):
        return value
    if "Σ" in value or "İ" in value:  # rare; translate costs ~15 times a plain lower on a line of text
        value = value.translate(_LETTER_BY_LETTER)
    return value.lower()


def _create_private(path: str) -> None:
    """Create a new database file readable by its owner only (0600): SQLite gives its -wal and -shm files the
    same mode.  An existing file keeps the mode it has."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    except OSError as error:
        raise StoreError(f"cannot create {path}: {error.strerror or error}") from error


def migration_names() -> list[str]:
    files = resources.files(MIGRATIONS_PACKAGE)
    return sorted(f.name for f in files.iterdir() if f.name.endswith(".sql"))


def translate(error: sqlite3.Error) -> Exception:
    """Map constraint failures to the glossary's errors; everything else is a StoreError."""
    text = str(error)
    if "one_active_conversation_per_user" in text or ("UNIQUE" in text and "conversations.user_id" in text):
        return ConversationAlreadyActive("this user already has an active conversation")
    if "narrative is sealed" in text:
        return SealedNarrative("sealed narratives are immutable")
    return StoreError(text)


class SqliteBase:
    """Owns one connection.  Writes go through :meth:`transaction`; nested calls join it."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            _create_private(self.path)
        self._lock = threading.RLock()
        self._depth = 0
        self._owner = 0  # the thread whose transaction is open (the lock serialises them)
        try:
            self.conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
        except sqlite3.Error as error:
            raise StoreError(f"cannot open {self.path}: {error}") from error
        self.conn.row_factory = sqlite3.Row
        # deterministic: SQLite may compute it once for a constant argument; a new name, so the built-in lower
        # (and anything planned around it) is untouched
        self.conn.create_function(UNICODE_LOWER, 1, unicode_lower, deterministic=True)
        try:
            self.conn.execute("PRAGMA foreign_keys = ON")
            self.conn.execute("PRAGMA busy_timeout = 30000")
            self.conn.execute("PRAGMA secure_delete = ON")  # deleted text is zeroed, not left in free pages
            if self.path != ":memory:":
                self.conn.execute("PRAGMA journal_mode = WAL")
                self.conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as error:
            self.conn.close()
            raise StoreError(f"cannot open {self.path}: {error} (is it a narrative database?)") from error
        try:
            self.migrate()
        except StoreError:
            self.conn.close()
            raise

    # --- lifecycle -----------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    def migrate(self) -> list[str]:
        """Apply every migration not yet recorded, each in its own transaction.

        The applied names are read inside the write transaction, so two processes
        opening a new file at once apply each migration exactly once.
        """
        with self._lock:
            try:
                self.conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
                )
            except sqlite3.Error as error:
                raise StoreError(f"cannot prepare {self.path}: {error}") from error
            applied = []
            for name in migration_names():
                sql = resources.files(MIGRATIONS_PACKAGE).joinpath(name).read_text("utf-8")
                if self._apply_migration(name, sql):
                    applied.append(name)
            return applied

    def _apply_migration(self, name: str, sql: str) -> bool:
        statements = [s for s in _split_sql(sql) if s.strip()]
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            raise StoreError(f"cannot migrate {self.path}: {error}") from error
        try:
            done = self.conn.execute("SELECT 1 FROM schema_migrations WHERE name = ?", (name,)).fetchone()
            if done is None:
                for statement in statements:
                    self.conn.execute(statement)
                self.conn.execute(
                    "INSERT INTO schema_migrations(name, applied_at) VALUES (?, ?)",
                    (name, to_text(datetime.now(UTC))),
                )
            self.conn.execute("COMMIT")
            return done is None
        except sqlite3.Error as error:
            self.conn.execute("ROLLBACK")
            raise StoreError(f"migration {name} failed: {error}") from error

    def _new_id(self, table: str) -> str:
        """SQL for a new row's id in a :data:`FLOORED` table (PostgreSQL's identity never gives one twice)."""
        return next_id(table)

    @contextmanager
    def _id_floors_kept(self) -> Iterator[None]:
        """Deletes inside leave the id floors as they were: a deleted user's ids, or the starter storylines an
        import replaces, are free again (a user deleted starts afresh; a restore takes its own ids back)."""
        floors = self._all("SELECT name, last_id FROM id_floors")
        yield
        self._exec("DELETE FROM id_floors")
        for name, last_id in floors:
            self._exec("INSERT INTO id_floors(name, last_id) VALUES (?, ?)", (name, last_id))

    def applied_migrations(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT name FROM schema_migrations ORDER BY name")]

    def schema_sql(self) -> list[str]:
        """The schema as SQLite records it (used to compare fresh and upgraded files)."""
        rows = self.conn.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name != 'schema_migrations' ORDER BY name"
        )
        return [r[0] for r in rows]

    # --- transactions --------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All-or-nothing.  The outermost call commits; inner calls use savepoints."""
        with self._lock:
            depth = self._depth
            name = f"sp{depth}"
            self._control("BEGIN IMMEDIATE" if depth == 0 else f"SAVEPOINT {name}")
            self._depth += 1
            self._owner = threading.get_ident()
            try:
                yield
            except BaseException:
                self._depth -= 1
                try:
                    if depth == 0:
                        self._control("ROLLBACK")
                    else:
                        self._control(f"ROLLBACK TO {name}")
                        self._control(f"RELEASE {name}")
                finally:
                    self._rolled_back()
                raise
            self._depth -= 1
            try:
                self._control("COMMIT" if depth == 0 else f"RELEASE {name}")
            except StoreError:
                if depth == 0 and self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise

    @property
    def in_transaction(self) -> bool:
        """True inside a :meth:`transaction` block of this thread."""
        return self._depth > 0 and self._owner == threading.get_ident()

    def _atomic(self) -> AbstractContextManager[None]:
        """A store method's statements as one unit: its own transaction, or a savepoint inside the caller's (cheap
        here; PostgreSQL's differs, see there)."""
        return self.transaction()

    def lock_user(self, user_id: str) -> None:
        """Serialise this user's writers until the transaction ends: on SQLite every write transaction
        (``BEGIN IMMEDIATE``) already holds the file's one write lock, so there is nothing more to take."""
        if not self.conn.in_transaction:
            raise StoreError("lock_user is taken inside a transaction")

    def _rolled_back(self) -> None:
        """Called after any rollback (of a transaction or a savepoint): in-process caches resync here."""

    def _control(self, statement: str) -> None:
        """Run a transaction-control statement, reporting failures (e.g. a locked file) as StoreError."""
        try:
            self.conn.execute(statement)
        except sqlite3.Error as error:
            raise StoreError(f"{statement} failed on {self.path}: {error}") from error

    # --- small helpers -------------------------------------------------------

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        with self._lock:
            try:
                return self.conn.execute(sql, params)
            except sqlite3.Error as error:
                raise translate(error) from error
            except OverflowError:  # an integer beyond SQLite's 64 bits (the engine checks ids first)
                raise ValidationError("a number is outside the 64-bit integer range") from None
            except UnicodeEncodeError:  # text with lone surrogates (the engine checks text first)
                raise ValidationError("text is not valid Unicode (a lone surrogate)") from None

    def _insert(self, sql: str, params: Sequence[Any]) -> int:
        with self.transaction():
            cursor = self._exec(sql, params)
            rowid = cursor.lastrowid
        if rowid is None:
            raise StoreError("insert returned no id")
        return int(rowid)

    def _one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        with self._lock:
            row: sqlite3.Row | None = self._exec(sql, params).fetchone()
            return row

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return list(self._exec(sql, params).fetchall())

    def _all_of(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[sqlite3.Row]]:
        """The rows of each statement (PostgreSQL sends them together and waits once; here they run in turn)."""
        return [self._all(sql, params) for sql, params in statements]

    def count_rows(self, table: str, user_id: str | None = None) -> int:
        """Row count of one table (used by tests and delete checks)."""
        if not table.replace("_", "").isalnum():
            raise StoreError(f"bad table name {table!r}")
        if user_id is None:
            row = self._one(f"SELECT COUNT(*) FROM {table}")
        else:
            row = self._one(f"SELECT COUNT(*) FROM {table} WHERE user_id = ?", (user_id,))
        return int(row[0]) if row else 0

    # --- facts about the database itself (store_meta) ----------------------------------

    def get_meta(self, key: str) -> str | None:
        """A value about the database itself (not about a user), e.g. ``demo``; None when unset."""
        row = self._one("SELECT value FROM store_meta WHERE key = ?", (key,))
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction():
            self._exec(
                "INSERT INTO store_meta(key, value) VALUES (?, ?)"
                " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )


def _split_sql(sql: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies whole."""
    statements: list[str] = []
    buffer: list[str] = []
    for line in sql.splitlines():
        stripped = line.strip()
        if stripped.startswith("--") and not buffer:
            continue
        buffer.append(line)
        joined = "\n".join(buffer)
        if stripped.endswith(";") and sqlite3.complete_statement(joined):
            statements.append(joined)
            buffer = []
    if "".join(buffer).strip():
        statements.append("\n".join(buffer))
    return statements


_WORD = re.compile(r"[\w']+", re.UNICODE)


#: Words too common to help BM25; dropped from keyword queries unless nothing else is left.
STOPWORDS = frozenset(
    """a about after again all am an and any are as at be been before being both but by can could did do does
    doing for from had has have having he her here hers him his how i if in into is it its just me more most my
    no nor not of off on once only or other our ours out over own same she should so some such than that the
    their theirs them then there these they this those through to too under until up very was we were what
    when where which while who whom why will with would you your yours s t don didn doesn isn wasn""".split()
)


def fts_terms(text: str) -> list[str]:
    """The query's content words (stopwords dropped unless nothing else is left), in order, once each."""
    words = [w.strip("'") for w in _WORD.findall(text.lower())]
    words = [w for w in words if w]
    content = [w for w in words if w not in STOPWORDS]
    return list(dict.fromkeys(content or words))


def fts_query(text: str | list[str]) -> str:
    """Turn free text (or chosen terms) into a safe FTS5 query: words quoted, joined by OR (BM25 ranks)."""
    terms = fts_terms(text) if isinstance(text, str) else text
    if not terms:
        return '""'
    return " OR ".join(f'"{w}"' for w in terms)
