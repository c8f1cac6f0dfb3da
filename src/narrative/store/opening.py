"""Open the store a database name points at: a ``postgresql://`` URL or a SQLite file path."""

from __future__ import annotations

from pathlib import Path

from narrative.store.protocol import Store

__all__ = ["is_postgres_url", "open_store"]


def is_postgres_url(db: str | Path) -> bool:
    return str(db).startswith(("postgresql://", "postgres://"))


def open_store(db: str | Path, vector_precision: str = "float32") -> Store:
    """A migrated store: PostgreSQL for a URL (needs the ``postgres`` extra), else a SQLite file.

    ``vector_precision`` (float32 or float16) is how the SQLite store's in-process vector index holds vectors.
    """
    if is_postgres_url(db):
        from narrative.store.postgres import PostgresStore

        return PostgresStore(str(db))
    from narrative.store.sqlite import SqliteStore

    return SqliteStore(db, vector_precision=vector_precision)
