"""Open the store a database name points at: a ``postgresql://`` URL or a SQLite file path.

:func:`database_kind` says what is already there without changing it (no migration, no write), so a
command that replaces or fills a database (``narrative demo``) can refuse one it did not make.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from urllib.parse import quote

from narrative.errors import StoreError
from narrative.store.protocol import Store

__all__ = ["DEMO_KEY", "database_kind", "is_postgres_url", "open_store", "safe_name"]

#: The store_meta key ``narrative demo`` sets on a database it made.
DEMO_KEY = "demo"
_SQLITE_HEADER = b"SQLite format 3\x00"


def safe_name(db: str | Path) -> str:
    """The database's name for messages: a URL without its password."""
    return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", str(db))


def is_postgres_url(db: str | Path) -> bool:
    return str(db).startswith(("postgresql://", "postgres://"))


def open_store(db: str | Path, vector_precision: str = "float32", held_rows: int = 1_000_000) -> Store:
    """A migrated store: PostgreSQL for a URL (needs the ``postgres`` extra), else a SQLite file.

    ``vector_precision`` (float32 or float16) is how the SQLite store's in-process vector index holds vectors;
    ``held_rows`` how many memories and messages a PostgreSQL store holds in process for its searches (0 = no
    bound: see :class:`~narrative.store.postgres.PostgresStore`).
    """
    if is_postgres_url(db):
        from narrative.store.postgres import PostgresStore

        return PostgresStore(str(db), held_rows=held_rows)
    from narrative.store.sqlite import SqliteStore

    _refuse_foreign(Path(db))
    return SqliteStore(db, vector_precision=vector_precision)


def _refuse_foreign(path: Path) -> None:
    """A file of another program is not opened (opening migrates: it added our hundred tables to the other
    program's database).  An empty file, or a SQLite file without tables, is fine: it becomes a narrative file."""
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return
    except OSError:
        return
    if _sqlite_kind(path) != "foreign" or _no_tables(path):
        return
    raise StoreError(
        f"{path} is not a narrative database (another program's file, or not SQLite): nothing was changed;"
        " choose another --db / NARRATIVE_DB"
    )


def _no_tables(path: Path) -> bool:
    """A SQLite file with no table at all (made by ``sqlite3.connect`` and left empty)."""
    try:
        with path.open("rb") as file:
            if file.read(len(_SQLITE_HEADER)) != _SQLITE_HEADER:
                return False
        conn = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True)
        try:
            return bool(conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0)
        finally:
            conn.close()
    except (OSError, sqlite3.Error):
        return False


def database_kind(db: str | Path) -> str:
    """What ``db`` holds, read without changing it:

    ``missing``  no file (SQLite), or a PostgreSQL schema without narrative tables;
    ``demo``     a database ``narrative demo`` made (marked in ``store_meta``);
    ``empty``    a PostgreSQL narrative schema without any user;
    ``data``     a narrative database with data (or, on SQLite, any narrative file not marked as a demo);
    ``foreign``  something else: not a SQLite file, or a SQLite file of another program, or unreadable.
    """
    if is_postgres_url(db):
        return _postgres_kind(str(db))
    return _sqlite_kind(Path(db))


def _sqlite_kind(path: Path) -> str:
    if not path.exists():
        return "missing"
    if not path.is_file():
        return "foreign"
    try:
        with path.open("rb") as file:
            if file.read(len(_SQLITE_HEADER)) != _SQLITE_HEADER:
                return "foreign"
    except OSError:
        return "foreign"
    # read-only; without a -wal file every committed page is in the file itself, and ``immutable`` keeps SQLite
    # from creating -wal and -shm files beside it
    wal = Path(f"{path}-wal").exists()
    uri = f"file:{quote(str(path.resolve()))}?{'mode=ro' if wal else 'immutable=1'}"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error:
        return "foreign"
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "store_meta" in tables and conn.execute("SELECT 1 FROM store_meta WHERE key = ?", (DEMO_KEY,)).fetchone():
            return "demo"
        return "data" if "schema_migrations" in tables else "foreign"
    except sqlite3.Error:
        return "foreign"
    finally:
        conn.close()


def _postgres_kind(url: str) -> str:
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SET default_transaction_read_only = on")
            found = conn.execute("SELECT to_regclass('users'), to_regclass('store_meta')").fetchone()
            users, meta = found if found is not None else (None, None)
            if meta is not None:
                marked = conn.execute("SELECT 1 FROM store_meta WHERE key = %s", (DEMO_KEY,)).fetchone()
                if marked:
                    return "demo"
            if users is None:
                return "missing"
            return "data" if conn.execute("SELECT 1 FROM users LIMIT 1").fetchone() else "empty"
    except psycopg.Error as error:
        raise StoreError(f"cannot read {safe_name(url)}: {error}") from error
