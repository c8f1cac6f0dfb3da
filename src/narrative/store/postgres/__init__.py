"""The PostgreSQL store: many processes over one database, vectors in pgvector.

Opened by URL (``postgresql://user@host/db``) wherever a database is named.  The
row SQL is shared with the SQLite store (see :mod:`narrative.store.postgres.base`);
:mod:`~narrative.store.postgres.rows` and :mod:`~narrative.store.postgres.search`
hold what PostgreSQL does its own way.  Guarantees are the database's: a partial
unique index (one active conversation per user), the user's row lock (gap-free
message positions under concurrent writers), a trigger (sealed links are
immutable) and cascading foreign keys (deletes leave nothing behind).
"""

from __future__ import annotations

from narrative.store.postgres.integrity import PostgresIntegrity
from narrative.store.postgres.portability import PostgresPortability
from narrative.store.postgres.rows import PostgresRows
from narrative.store.postgres.search import PostgresSearch
from narrative.store.sqlite.bindings import BindingRows
from narrative.store.sqlite.conversations import ConversationRows
from narrative.store.sqlite.entities import EntityRows
from narrative.store.sqlite.events import MemoryEventRows
from narrative.store.sqlite.integrity import IntegrityRows
from narrative.store.sqlite.links import LinkRows
from narrative.store.sqlite.memories import MemoryRows
from narrative.store.sqlite.narratives import NarrativeRows
from narrative.store.sqlite.passages import PassageRows
from narrative.store.sqlite.portability import PortabilityRows
from narrative.store.sqlite.storylines import StorylineRows

__all__ = ["PostgresStore"]


class PostgresStore(  # type: ignore[misc]  # the PostgreSQL base replaces the SQLite one's connection methods
    PostgresSearch,
    PostgresRows,
    PostgresPortability,
    PostgresIntegrity,
    ConversationRows,
    MemoryRows,
    MemoryEventRows,
    PassageRows,
    NarrativeRows,
    StorylineRows,
    EntityRows,
    BindingRows,
    LinkRows,
    PortabilityRows,
    IntegrityRows,
):
    """Every concept's rows in one PostgreSQL database.  See :class:`narrative.store.protocol.Store`."""

    backend = "postgres"

    def __init__(self, url: str, pool_size: int = 4) -> None:
        self._init_search()
        PostgresSearch.__init__(self, url, pool_size=pool_size)
