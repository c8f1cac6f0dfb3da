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

import concurrent.futures
import threading
from collections.abc import Callable

import numpy as np

from narrative.store.filters import MemoryFilter
from narrative.store.postgres.integrity import PostgresIntegrity
from narrative.store.postgres.portability import PostgresPortability
from narrative.store.postgres.rows import PostgresRows
from narrative.store.postgres.search import HELD_ROWS, PostgresSearch
from narrative.store.postgres.vectors import PostgresVectors, plain_vector_search
from narrative.store.protocol import Ranked, searched_in_turn
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

#: Threads that send vector searches while the searching thread ranks by keyword (made as searches need them).
HELPER_THREADS = 16


class PostgresStore(  # type: ignore[misc]  # the PostgreSQL base replaces the SQLite one's connection methods
    PostgresVectors,
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

    def __init__(self, url: str, pool_size: int = 4, held_rows: int = HELD_ROWS) -> None:
        """``held_rows``: most memories and messages this process holds in memory for its searches (the keyword
        indexes, briefs and messages of the users it searched); past it, the least recently searched users are let
        go and read again on their next search.  0 = no bound."""
        self._init_search(held_rows)
        self._init_vectors()
        self._helpers: concurrent.futures.ThreadPoolExecutor | None = None  # made on first use
        self._helpers_lock = threading.Lock()
        PostgresSearch.__init__(self, url, pool_size=pool_size)

    def close(self) -> None:
        with self._helpers_lock:
            helpers, self._helpers = self._helpers, None
        if helpers is not None:
            helpers.shutdown(wait=True)
        super().close()

    def keyword_and_vector_search(
        self,
        user_id: str,
        words: str | None,
        vector: np.ndarray | None,
        model: str,
        limit: int = 50,
        where: MemoryFilter | None = None,
    ) -> tuple[Ranked, Ranked]:
        """(memories, passages) by BM25 over ``words`` and (memories, passages) by cosine to ``vector``, a pair
        empty when its input is None.

        The two run at once.  An unfiltered search sends, on one connection in one read-only pipelined
        transaction, the keyword index's catch-up and then the vector searches; it reads the catch-up's answer and
        ranks by keyword in process while the server walks the HNSW graph, then reads the vector answers.  A search
        by vector alone sends its vector searches right behind the catch-up (which its candidates' briefs need
        next) and waits for the server once.  A filtered one sends the vector searches from a helper thread on a
        pooled connection of its own (their filter is read first) and ranks by keyword meanwhile.  Inside a
        transaction, or on a connection this thread holds, the vector search must see what the transaction sees:
        one after the other.
        """
        if vector is None or getattr(self._local, "conn", None) is not None:
            return searched_in_turn(self, user_id, words, vector, model, limit, where)
        if plain_vector_search(vector, limit, where):
            return self._overlapped(user_id, words or "", vector, model, limit)
        if words is None:
            return searched_in_turn(self, user_id, words, vector, model, limit, where)
        pending = self._helper().submit(self.vector_search_memories_and_passages, user_id, vector, model, limit, where)
        try:
            keywords = self.keyword_search_memories_and_passages(user_id, words, where, limit)
        except BaseException:
            concurrent.futures.wait([pending])  # nothing of this search outlives it
            raise
        return keywords, pending.result()

    def _overlapped(
        self, user_id: str, words: str, vector: np.ndarray, model: str, limit: int
    ) -> tuple[Ranked, Ranked]:
        """:meth:`keyword_and_vector_search` unfiltered: no thread, one connection, the server searching by vector
        while this thread ranks by keyword (a helper thread took Python's lock from the ranking for every answer
        it read: on two cores the two searches took nearly their sum)."""
        finish: list[Callable[[], Ranked]] = []
        with self.pinned(), self._atomic():
            keywords = self._keyword_search_sending(
                user_id, words, limit, lambda: finish.append(self._send_vector_searches(user_id, vector, model, limit))
            )
        return keywords, finish[0]()

    def _helper(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._helpers_lock:
            if self._helpers is None:
                self._helpers = concurrent.futures.ThreadPoolExecutor(
                    max_workers=HELPER_THREADS, thread_name_prefix="narrative-pg-search"
                )
            return self._helpers
