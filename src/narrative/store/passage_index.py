"""The in-process indexes over passages (BM25 and, on SQLite, vectors), kept by the memory they belong to.

A passage belongs to one memory (its message's own conversation memory), and every change to a passage or
its vector is logged under that memory's id in ``memory_changes``.  So these indexes follow the same log as
the memory indexes: for each changed memory, every passage it had is dropped and the passages it has now are
read again.  Like the memory indexes they hold nothing the database does not, and can be rebuilt at any time.
This module never touches a database: the store reads the rows and hands them in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet

import numpy as np

from narrative.store.keyword_index import KeywordIndex
from narrative.store.vector_index import VectorIndex

__all__ = ["PassageKeywords", "PassageRow", "PassageVectors", "VectorRow"]

#: (passage id, memory id, user id, searchable text)
PassageRow = tuple[int, int, str, str]
#: (passage id, memory id, user id, vector)
VectorRow = tuple[int, int, str, np.ndarray]


class _ByMemory:
    """Which passages each memory has in an index (to drop them when the memory changes)."""

    def __init__(self) -> None:
        self.passages: dict[int, list[int]] = {}
        self.memory_of: dict[int, int] = {}

    def forget(self, memory_ids: Iterable[int]) -> list[int]:
        gone: list[int] = []
        for memory_id in memory_ids:
            for passage_id in self.passages.pop(memory_id, ()):
                self.memory_of.pop(passage_id, None)
                gone.append(passage_id)
        return gone

    def note(self, passage_id: int, memory_id: int) -> None:
        self.passages.setdefault(memory_id, []).append(passage_id)
        self.memory_of[passage_id] = memory_id

    def allowed(self, memory_ids: AbstractSet[int]) -> set[int]:
        """The passages of these memories."""
        return {p for m in memory_ids for p in self.passages.get(m, ())}


class PassageKeywords:
    """BM25 over passages, per user, refreshed by memory."""

    def __init__(self) -> None:
        self.index = KeywordIndex()
        self.owners = _ByMemory()

    def replace(self, memory_ids: Iterable[int], rows: Sequence[PassageRow]) -> None:
        """The passages of ``memory_ids`` are now ``rows`` (every passage of those memories, nothing else)."""
        self.index.remove(self.owners.forget(set(memory_ids)))
        self.add(rows)

    def drop_user(self, user_id: str, memory_ids: Iterable[int]) -> None:
        """Forget one user's passages (``memory_ids``: every memory of theirs whose passages are held)."""
        self.owners.forget(memory_ids)
        self.index.drop_user(user_id)

    def add(self, rows: Sequence[PassageRow]) -> None:
        for passage_id, memory_id, _, _ in rows:
            self.owners.note(passage_id, memory_id)
        self.index.upsert((p, user, text) for p, _, user, text in rows)

    def search(
        self, user_id: str, terms: Sequence[str], k: int, allowed_memories: AbstractSet[int] | None = None
    ) -> list[tuple[int, float]]:
        allowed = None if allowed_memories is None else self.owners.allowed(allowed_memories)
        if allowed is not None and not allowed:
            return []
        return self.index.search(user_id, terms, k, allowed=allowed)


class PassageVectors:
    """Cosine search over passage vectors, per user, refreshed by memory."""

    def __init__(self, dims: int) -> None:
        self.index = VectorIndex(dims)
        self.owners = _ByMemory()

    @property
    def dims(self) -> int:
        return self.index.dims

    def replace(self, memory_ids: Iterable[int], rows: Sequence[VectorRow]) -> None:
        self.index.remove(self.owners.forget(set(memory_ids)))
        self.add(rows)

    def add(self, rows: Sequence[VectorRow]) -> None:
        if not rows:
            return
        for passage_id, memory_id, _, _ in rows:
            self.owners.note(passage_id, memory_id)
        self.index.add([r[0] for r in rows], [r[2] for r in rows], np.vstack([r[3] for r in rows]))

    def search(
        self, user_id: str, query: np.ndarray, k: int, allowed_memories: AbstractSet[int] | None = None
    ) -> list[tuple[int, float]]:
        allowed = None if allowed_memories is None else self.owners.allowed(allowed_memories)
        if allowed is not None and not allowed:
            return []
        return self.index.search(user_id, query, k, allowed=allowed)
