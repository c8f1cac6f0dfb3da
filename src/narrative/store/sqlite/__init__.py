"""The embedded store: one SQLite file (WAL, FTS5) plus two in-process indexes.

Vectors live in SQLite as BLOBs (the source of truth); the index over them is
built lazily on the first vector search and rebuilt whenever another connection
has written to the file (``PRAGMA data_version``), so it can always be thrown
away and made again from the database.

Memory keyword search is answered by an in-process BM25 index
(:class:`~narrative.store.keyword_index.KeywordIndex`), built from the file on
first use and then kept current from the ``memory_changes`` log, which triggers
fill on every insert, delete and text update, whoever makes it.  After a
rollback the memories the index took from the rolled-back work are read again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from narrative.errors import EmbeddingMismatch, StoreError
from narrative.store.filters import MemoryFilter
from narrative.store.keyword_index import KeywordIndex, query_terms
from narrative.store.sqlite.conversations import ConversationRows
from narrative.store.sqlite.entities import EntityRows
from narrative.store.sqlite.memories import MemoryRows
from narrative.store.sqlite.narratives import NarrativeRows
from narrative.store.sqlite.portability import PortabilityRows
from narrative.store.sqlite.storylines import StorylineRows
from narrative.store.vector_index import VectorIndex

__all__ = ["SqliteStore"]


class SqliteStore(ConversationRows, MemoryRows, NarrativeRows, StorylineRows, EntityRows, PortabilityRows):
    """Every concept's rows in one file.  See :class:`narrative.store.protocol.Store`."""

    backend = "sqlite"

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self._index: VectorIndex | None = None
        self._index_model: str | None = None
        self._index_version: int | None = None
        self._index_lock = threading.Lock()
        self._keywords: KeywordIndex | None = None
        self._keywords_seq = 0
        self._keywords_pending: set[int] = set()  # taken inside a transaction not yet committed
        self._keywords_built_in_transaction = False
        self._keywords_lock = threading.RLock()

    # --- keyword index -------------------------------------------------------------

    def keyword_search_memories(
        self, user_id: str, query: str, where: MemoryFilter | None = None, limit: int = 50
    ) -> list[tuple[int, float]]:
        """(memory id, BM25 score; higher is better) best first, only this user's, only within ``where``."""
        terms = query_terms(query)
        if not terms or limit <= 0:
            return []
        allowed = None if where is None or where.is_open else self.memory_ids_matching(user_id, where)
        if allowed is not None and not allowed:
            return []
        return self._keyword_index().search(user_id, terms, limit, allowed=allowed)

    def _keyword_index(self) -> KeywordIndex:
        """The keyword index, caught up with the change log (built from the file the first time)."""
        with self._lock, self._keywords_lock:
            in_transaction = self.conn.in_transaction
            if not in_transaction:  # whatever was taken from earlier transactions is committed now
                self._keywords_pending.clear()
                self._keywords_built_in_transaction = False
            lowest, highest = self._memory_change_bounds()
            index = self._keywords
            if index is None or highest < self._keywords_seq or lowest > self._keywords_seq + 1:
                index = KeywordIndex()
                index.upsert(self._memory_texts())
                self._keywords, self._keywords_seq = index, highest
                self._keywords_built_in_transaction = in_transaction
            elif highest > self._keywords_seq:
                self._keywords_seq, changed = self._memory_changes_since(self._keywords_seq)
                self._refresh_keywords(index, changed)
                if in_transaction:
                    self._keywords_pending |= changed
            return index

    def _refresh_keywords(self, index: KeywordIndex, memory_ids: set[int]) -> None:
        rows = self._memory_texts(memory_ids)
        index.remove(memory_ids - {row[0] for row in rows})
        index.upsert(rows)

    def _rolled_back(self) -> None:
        """Work was undone: rewind the log position and re-read what the index took from that work."""
        with self._keywords_lock:
            index = self._keywords
            if index is None:
                return
            if self._keywords_built_in_transaction:
                self._keywords = None
                return
            try:
                _, highest = self._memory_change_bounds()
                self._keywords_seq = min(self._keywords_seq, highest)
                if self._keywords_pending:
                    self._refresh_keywords(index, set(self._keywords_pending))
            except StoreError:
                self._keywords = None  # rebuilt from the file on the next search

    # --- vector index --------------------------------------------------------------

    def _data_version(self) -> int:
        row = self._one("PRAGMA data_version")
        return int(row[0]) if row else 0

    def _ensure_index(self, model: str) -> VectorIndex | None:
        with self._index_lock:
            version = self._data_version()
            if self._index is not None and self._index_version == version and self._index_model == model:
                return self._index
            ids, users, models, matrix = self.memory_vectors()
            foreign = sorted({m for m in models if m != model})
            if foreign:
                raise EmbeddingMismatch(
                    f"stored vectors were made by {', '.join(foreign)} but the embedder is {model}:"
                    " run `narrative reindex`"
                )
            if not ids:
                self._index = None
                self._index_version = version
                return None
            index = VectorIndex(matrix.shape[1])
            index.add(ids, users, matrix)
            self._index, self._index_model, self._index_version = index, model, version
            return index

    def vector_search(
        self,
        user_id: str,
        query: np.ndarray,
        model: str,
        k: int = 50,
        where: MemoryFilter | None = None,
    ) -> list[tuple[int, float]]:
        """(memory id, cosine similarity) best first, only this user's, only within ``where``."""
        index = self._ensure_index(model)
        if index is None:
            return []
        allowed = None if where is None or where.is_open else self.memory_ids_matching(user_id, where)
        if allowed is not None and not allowed:
            return []
        return index.search(user_id, query, k, allowed=allowed)

    def put_memory_vectors(self, user_id: str, model: str, vectors: dict[int, np.ndarray]) -> None:
        super().put_memory_vectors(user_id, model, vectors)
        with self._index_lock:
            if self._index is not None and self._index_model == model and vectors:
                ids = list(vectors)
                self._index.remove(ids)
                self._index.add(ids, [user_id] * len(ids), np.vstack([vectors[i] for i in ids]))
                self._index_version = self._data_version()

    def delete_memories(self, user_id: str, memory_ids: Iterable[int]) -> int:
        ids = list(memory_ids)
        count = super().delete_memories(user_id, ids)
        with self._index_lock:
            if self._index is not None:
                self._index.remove(ids)
                self._index_version = self._data_version()
        return count

    def drop_index(self) -> None:
        """Forget the in-process index; the next search rebuilds it from the file."""
        with self._index_lock:
            self._index = None
            self._index_version = None

    def delete_conversation(self, user_id: str, conversation_id: int) -> None:
        super().delete_conversation(user_id, conversation_id)
        self.drop_index()

    def delete_user(self, user_id: str) -> None:
        super().delete_user(user_id)
        self.drop_index()

    def clear_vectors(self, user_id: str | None = None) -> None:
        """Remove stored vectors (before a reindex with another model)."""
        with self.transaction():
            if user_id is None:
                self._exec("DELETE FROM memory_vectors")
                self._exec("DELETE FROM storyline_vectors")
            else:
                self._exec("DELETE FROM memory_vectors WHERE user_id = ?", (user_id,))
                self._exec("DELETE FROM storyline_vectors WHERE user_id = ?", (user_id,))
        self.drop_index()
