"""The embedded store: one SQLite file (WAL, FTS5) plus an in-process vector index.

Vectors live in SQLite as BLOBs (the source of truth); the index over them is
built lazily on the first vector search and rebuilt whenever another connection
has written to the file (``PRAGMA data_version``), so it can always be thrown
away and made again from the database.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from narrative.errors import EmbeddingMismatch
from narrative.store.filters import MemoryFilter
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
