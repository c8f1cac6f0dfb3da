"""The embedded store: one SQLite file (WAL, FTS5) plus two in-process indexes.

Vectors live in SQLite as BLOBs (the source of truth); the index over them is
built lazily on the first vector search and then kept current from the
``memory_changes`` log, which triggers fill on every vector insert, replace and
delete, whoever makes it, so it can always be thrown away and made again from
the database and never misses another process's commit.

Memory keyword search is answered by an in-process BM25 index
(:class:`~narrative.store.keyword_index.KeywordIndex`), built from the file on
first use and then kept current from the same log (memory inserts, deletes and
text updates).  After a
rollback the memories the index took from the rolled-back work are read again.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import numpy as np

from narrative.errors import EmbeddingMismatch, StoreError, ValidationError
from narrative.store.filters import MemoryFilter
from narrative.store.keyword_index import KeywordIndex, keyword_request, query_terms, search_within
from narrative.store.passage_index import PassageKeywords, PassageVectors
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
from narrative.store.vector_index import Precision, VectorIndex

__all__ = ["SqliteStore"]


class SqliteStore(
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
    """Every concept's rows in one file.  See :class:`narrative.store.protocol.Store`."""

    backend = "sqlite"

    def __init__(self, path: str | Path, vector_precision: str = "float32") -> None:
        super().__init__(path)
        if vector_precision not in ("float32", "float16"):
            raise ValidationError("vector_precision must be float32 or float16", field="vector_precision")
        self.vector_precision: Precision = "float16" if vector_precision == "float16" else "float32"
        self._index: VectorIndex | None = None
        self._passage_vectors: PassageVectors | None = None
        self._index_model: str | None = None
        self._index_seq = 0
        self._index_read_in_transaction = False
        self._index_lock = threading.Lock()
        self._keywords: KeywordIndex | None = None
        self._passage_keywords = PassageKeywords()
        self._keywords_seq = 0
        self._keywords_pending: set[int] = set()  # taken inside a transaction not yet committed
        self._keywords_built_in_transaction = False
        self._keywords_lock = threading.RLock()

    # --- keyword index -------------------------------------------------------------

    def keyword_search_memories(
        self, user_id: str, query: str, where: MemoryFilter | None = None, limit: int = 50
    ) -> list[tuple[int, float]]:
        """(memory id, BM25 score; higher is better) best first, only this user's, only within ``where`` (the
        filter is asked about the best hits, not read whole: :func:`search_within`)."""
        terms = query_terms(query)
        if not terms or limit <= 0:
            return []

        def search(count: int, allowed: set[int] | None) -> list[tuple[int, float]]:
            return self._keyword_index().search(user_id, terms, count, allowed=allowed)

        if where is None or where.is_open:
            return search(limit, None)
        return search_within(
            search,
            limit,
            lambda ids: self.memory_ids_matching(user_id, where, among=ids),
            lambda: self.memory_ids_matching(user_id, where),
        )

    def keyword_search_passages(
        self, user_id: str, query: str, where: MemoryFilter | None = None, limit: int = 50
    ) -> list[tuple[int, float]]:
        """(passage id, BM25 score) best first, only this user's, only passages whose memory is within ``where``."""
        request = keyword_request(query, limit, where, lambda w: self.memory_ids_matching(user_id, w))
        if request is None:
            return []
        terms, allowed = request
        self._keyword_index()
        with self._keywords_lock:
            return self._passage_keywords.search(user_id, terms, limit, allowed)

    def keyword_search_memories_and_passages(
        self, user_id: str, query: str, where: MemoryFilter | None = None, limit: int = 50
    ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """What :meth:`keyword_search_memories` and :meth:`keyword_search_passages` return, with one catch-up of
        the index and one read of the filter's ids."""
        request = keyword_request(query, limit, where, lambda w: self.memory_ids_matching(user_id, w))
        if request is None:
            return [], []
        terms, allowed = request
        index = self._keyword_index()
        with self._keywords_lock:
            return index.search(user_id, terms, limit, allowed=allowed), self._passage_keywords.search(
                user_id, terms, limit, allowed
            )

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
                for rows in self._memory_text_chunks():
                    index.upsert(rows)
                self._passage_keywords = PassageKeywords()
                self._passage_keywords.add(self.passage_texts_of())
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
        self._passage_keywords.replace(memory_ids, self.passage_texts_of(memory_ids))

    def _rolled_back(self) -> None:
        """Work was undone: rewind the log position and re-read what the index took from that work."""
        with self._index_lock:
            if self._index_read_in_transaction:  # it may hold vectors that were never committed
                self._index, self._index_model, self._index_read_in_transaction = None, None, False
                self._passage_vectors = None
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

    def _ensure_index(self, model: str) -> VectorIndex | None:
        """The vector index for ``model``, caught up with the change log (built from the file the first time).

        Every vector insert, replace and delete (by any connection) adds a row to ``memory_changes``,
        so the index re-reads exactly the memories changed since it last looked.
        """
        with self._lock, self._index_lock:
            in_transaction = self.conn.in_transaction
            lowest, highest = self._memory_change_bounds()
            index, seq = self._index, self._index_seq
            stale = self._index_model != model or highest < seq or lowest > seq + 1
            if stale or (index is None and highest > seq):
                self._index, self._index_model, self._index_seq = self._build_index(model), model, highest
                self._passage_vectors = self._build_passage_index(model)
            elif highest > seq and index is not None:
                seq, changed = self._memory_changes_since(self._index_seq)
                try:
                    self._refresh_vectors(index, model, changed)
                    self._refresh_passage_vectors(model, changed)
                except StoreError:
                    self._index, self._index_model, self._passage_vectors = None, None, None
                    raise
                self._index_seq = seq
            self._index_read_in_transaction = in_transaction
            return self._index

    def _build_index(self, model: str) -> VectorIndex | None:
        """The index of every stored vector, read in chunks into shards sized up front (graphs built once, last)."""
        chunks = self.memory_vector_chunks()
        first = next(chunks, None)
        if first is None:
            return None
        index = VectorIndex(first[3].shape[1], precision=self.vector_precision)
        for user, count in self.memory_vector_counts().items():
            index.reserve(user, count)
        with index.bulk():
            for ids, users, models, matrix in itertools.chain([first], chunks):
                _refuse_foreign(models, model)
                index.add(ids, users, matrix)
        return index

    def _build_passage_index(self, model: str) -> PassageVectors | None:
        rows = self.passage_vector_rows()
        _refuse_foreign([r[3] for r in rows], model)
        if not rows:
            return None
        passages = PassageVectors(len(rows[0][4]))
        passages.add([(r[0], r[1], r[2], r[4]) for r in rows])
        return passages

    def _refresh_passage_vectors(self, model: str, memory_ids: set[int]) -> None:
        rows = self.passage_vector_rows(memory_ids)
        _refuse_foreign([r[3] for r in rows], model)
        if self._passage_vectors is None:
            if not rows:
                return
            self._passage_vectors = PassageVectors(len(rows[0][4]))
        if any(len(r[4]) != self._passage_vectors.dims for r in rows):
            raise EmbeddingMismatch("stored vectors have several lengths: run `narrative reindex`")
        self._passage_vectors.replace(memory_ids, [(r[0], r[1], r[2], r[4]) for r in rows])

    def passage_vector_search(
        self, user_id: str, query: np.ndarray, model: str, k: int = 50, where: MemoryFilter | None = None
    ) -> list[tuple[int, float]]:
        """(passage id, cosine similarity) best first, only this user's, only passages whose memory is within
        ``where``."""
        self._ensure_index(model)
        passages = self._passage_vectors
        if passages is None:
            return []
        allowed = None if where is None or where.is_open else self.memory_ids_matching(user_id, where)
        if allowed is not None and not allowed:
            return []
        return passages.search(user_id, query, k, allowed)

    def vector_search_memories_and_passages(
        self, user_id: str, query: np.ndarray, model: str, k: int = 50, where: MemoryFilter | None = None
    ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """:meth:`vector_search` and :meth:`passage_vector_search` (in process here: nothing to send together)."""
        return self.vector_search(user_id, query, model, k, where), self.passage_vector_search(
            user_id, query, model, k, where
        )

    def reading(self, user_id: str) -> AbstractContextManager[None]:
        """Nothing to bring up to date: this process's indexes follow every write to the file as it commits."""
        return nullcontext()

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
        empty when its input is None (in process here: one after the other)."""
        return searched_in_turn(self, user_id, words, vector, model, limit, where)

    def _refresh_vectors(self, index: VectorIndex, model: str, memory_ids: set[int]) -> None:
        rows = self._vectors_of(memory_ids)
        _refuse_foreign([m for _, _, m, _ in rows], model)
        if any(len(r[3]) != index.dims for r in rows):
            raise EmbeddingMismatch("stored vectors have several lengths: run `narrative reindex`")
        index.remove(memory_ids)
        if rows:
            index.add([r[0] for r in rows], [r[1] for r in rows], np.vstack([r[3] for r in rows]))

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

    def drop_index(self) -> None:
        """Forget the in-process index; the next search rebuilds it from the file."""
        with self._index_lock:
            self._index, self._index_model, self._index_seq = None, None, 0
            self._passage_vectors = None

    def delete_conversation(self, user_id: str, conversation_id: int) -> None:
        super().delete_conversation(user_id, conversation_id)
        self.drop_index()

    def delete_user(self, user_id: str) -> None:
        super().delete_user(user_id)
        self.drop_index()

    def clear_vectors(self, user_id: str | None = None) -> None:
        """Remove stored vectors (before a reindex with another model)."""
        with self._atomic():
            if user_id is None:
                self._exec("DELETE FROM memory_vectors")
                self._exec("DELETE FROM storyline_vectors")
                self._exec("DELETE FROM passage_vectors")
            else:
                self._exec("DELETE FROM memory_vectors WHERE user_id = ?", (user_id,))
                self._exec("DELETE FROM storyline_vectors WHERE user_id = ?", (user_id,))
                self._exec("DELETE FROM passage_vectors WHERE user_id = ?", (user_id,))
        self.drop_index()


def _refuse_foreign(models: Iterable[str], model: str) -> None:
    foreign = sorted({m for m in models if m != model})
    if foreign:
        raise EmbeddingMismatch(
            f"stored vectors were made by {', '.join(foreign)} but the embedder is {model}: run `narrative reindex`"
        )
