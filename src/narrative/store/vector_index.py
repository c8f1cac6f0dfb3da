"""The in-process vector index the SQLite store keeps beside its vector BLOBs.

The database is the source of truth: the store reads ``(id, user, vector)``
rows and hands them to ``VectorIndex``; the index can be thrown away and
rebuilt from the database at any time (``rebuild``).  This class never touches
SQLite.

Layout: one shard per user, so a search can only ever see the asking user's
vectors.  A shard always keeps its live vectors in a contiguous float32 matrix
(grown by doubling, rows removed by moving the last row into the hole) and
answers exactly by a matrix-vector product and ``argpartition``.  Above
``hnsw_threshold`` vectors a shard also builds an HNSW graph (hnswlib, inner
product on normalised rows = cosine) and answers from it:

* without a filter: a plain k-NN query with ``ef = max(ef_search, k)``;
* with a filter that allows few ids (``<= exact_limit``): exactly, over the
  allowed rows only;
* with a larger filter: the graph is asked for ``k`` divided by the filter's
  selectivity times an oversampling factor, hits outside the filter are
  dropped, and if fewer than ``k`` remain the exact path answers instead.

Deleted ids are marked deleted in the graph; when deletions outnumber the live
vectors the graph is rebuilt from the matrix.  ``backend="exact"`` never builds
a graph, ``backend="hnsw"`` builds one from the first vector (for tests and
benchmarks), ``backend="auto"`` (the default) uses the threshold.

Vectors are L2-normalised on the way in, as are queries, so scores are cosine
similarities.  One re-entrant lock guards every mutation and search.

Memory (what a million vectors of 384 dimensions cost): each vector is held once
by the shard's matrix (float32: 1,536 bytes; ``precision="float16"``: 768 bytes,
exact-path scores then good to about 1e-3) and once by the graph, which keeps its
own float32 copy beside its links (about 1,800 bytes with M=16); where each id
lives (its shard and row) is one :class:`~narrative.store.id_map.IdMap` entry,
16 bytes, not Python objects.  The ids are any int64 ids of one id space (memories,
or another table's rows in a second instance).  ``bulk()`` defers graph building
while an index is loaded from the database, so each graph is built once, at its
final size.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import hnswlib
import numpy as np
import numpy.typing as npt

from narrative.errors import EmbeddingMismatch, ValidationError
from narrative.store.id_map import MISSING, IdMap

Backend = Literal["auto", "exact", "hnsw"]
Precision = Literal["float32", "float16"]
Matrix = npt.NDArray[np.float32]
Hits = list[tuple[int, float]]

_BACKENDS: tuple[Backend, ...] = ("auto", "exact", "hnsw")
_PRECISIONS: tuple[Precision, ...] = ("float32", "float16")
_INITIAL_ROWS = 16
_ROW_BITS = 40  # an IdMap value: shard number << _ROW_BITS | row
_ROW_MASK = (1 << _ROW_BITS) - 1
_CHUNK = 65_536  # rows converted to float32 at a time (float16 matrices, graph builds)


@dataclass(frozen=True)
class _Tuning:
    hnsw_threshold: int | None  # None: never build a graph
    exact_limit: int
    ef_search: int
    ef_construction: int
    m: int
    oversample: float
    seed: int
    dtype: Any = np.float32


def _normalised(vectors: Matrix) -> Matrix:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    out = np.array(vectors, dtype=np.float32, copy=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


def _similarities(rows: npt.NDArray[Any], query: Matrix) -> Matrix:
    """Row-by-query dot products with numpy's own loop, not BLAS (float16 rows: in float32, chunk by chunk).

    A BLAS matrix-vector product starts its thread pool for every call: on a
    2-core machine with another busy process that measured 8 ms at 10,000 x 384,
    against 1.4 ms for this single-threaded loop (1.0 ms when idle).
    """
    flat = query.reshape(-1)
    if rows.dtype == np.float32:
        scores: Matrix = np.einsum("ij,j->i", rows, flat)
        return scores
    out = np.empty(len(rows), dtype=np.float32)
    for start in range(0, len(rows), _CHUNK):
        out[start : start + _CHUNK] = np.einsum("ij,j->i", rows[start : start + _CHUNK].astype(np.float32), flat)
    return out


def _top(scores: Matrix, ids: npt.NDArray[np.int64], k: int) -> Hits:
    """The ``k`` best (id, score) pairs, best first, ties broken by the smaller id."""
    if k < len(scores):  # every row as good as the k-th, so that a tie at the cut also goes to the smaller id
        kth = np.partition(-scores, k - 1)[k - 1]
        chosen = np.flatnonzero(-scores <= kth)
        scores, ids = scores[chosen], ids[chosen]
    order = np.lexsort((ids, -scores))[:k]
    return [(int(ids[i]), float(scores[i])) for i in order]


class _Graph:
    """An hnswlib index over one user's vectors, labels = ids."""

    def __init__(self, dims: int, tuning: _Tuning, capacity: int) -> None:
        self._tuning = tuning
        self.index: Any = hnswlib.Index(space="ip", dim=dims)
        self.index.init_index(
            max_elements=max(capacity, _INITIAL_ROWS),
            M=tuning.m,
            ef_construction=tuning.ef_construction,
            random_seed=tuning.seed,
        )
        self.deleted: set[int] = set()

    def upsert(self, ids: npt.NDArray[np.int64], vectors: Matrix, new_labels: int) -> None:
        needed = int(self.index.get_current_count()) + new_labels
        capacity = int(self.index.get_max_elements())
        if needed > capacity:
            self.index.resize_index(max(needed, capacity * 2))
        self.index.add_items(vectors, ids, num_threads=-1)
        self.deleted.difference_update(ids.tolist())

    def remove(self, ident: int) -> None:
        self.index.mark_deleted(ident)
        self.deleted.add(ident)

    def query(self, query: Matrix, k: int) -> tuple[npt.NDArray[np.int64], Matrix]:
        self.index.set_ef(max(self._tuning.ef_search, k))
        labels, distances = self.index.knn_query(query, k=k, num_threads=1)
        ids = np.asarray(labels[0], dtype=np.int64)
        scores = (1.0 - np.asarray(distances[0], dtype=np.float32)).astype(np.float32)
        return ids, scores


class _Shard:
    """One user's vectors: a contiguous matrix (rows 0..size-1 live), and an HNSW graph when large enough."""

    def __init__(self, number: int, dims: int, tuning: _Tuning) -> None:
        self.number = number
        self._dims = dims
        self._tuning = tuning
        self.matrix: npt.NDArray[Any] = np.empty((_INITIAL_ROWS, dims), dtype=tuning.dtype)
        self.ids: npt.NDArray[np.int64] = np.empty(_INITIAL_ROWS, dtype=np.int64)
        self.size = 0
        self.graph: _Graph | None = None
        self.deferred = False  # loading in bulk: the graph is built once, at the end

    def __len__(self) -> int:
        return self.size

    # --- mutation ------------------------------------------------------------------------------------------------

    def append(self, ids: npt.NDArray[np.int64], vectors: Matrix) -> int:
        """Add rows for new ids; returns the first row they took."""
        first = self.size
        self.reserve(first + len(ids))
        self.matrix[first : first + len(ids)] = vectors
        self.ids[first : first + len(ids)] = ids
        self.size = first + len(ids)
        self._to_graph(ids, vectors, new_labels=len(ids))
        return first

    def overwrite(self, rows: npt.NDArray[np.int64], vectors: Matrix) -> None:
        """Replace the vectors of ids this shard holds (at ``rows``)."""
        self.matrix[rows] = vectors
        self._to_graph(self.ids[rows], vectors, new_labels=0)  # live ids: their graph labels exist

    def _to_graph(self, ids: npt.NDArray[np.int64], vectors: Matrix, new_labels: int) -> None:
        if self.graph is not None:
            known = sum(1 for ident in ids.tolist() if ident in self.graph.deleted) if new_labels else 0
            self.graph.upsert(ids, vectors, new_labels - known)  # a deleted label comes back in place
        elif not self.deferred:
            self.maybe_build_graph()

    def remove_row(self, row: int) -> int | None:
        """Drop a row (the last row moves into the hole); the id that moved, if any."""
        ident = int(self.ids[row])
        last = self.size - 1
        moved = None
        if row != last:
            moved = int(self.ids[last])
            self.matrix[row] = self.matrix[last]
            self.ids[row] = moved
        self.size = last
        if self.graph is not None:
            self.graph.remove(ident)
        return moved

    def settle(self) -> None:
        """After removals: drop or rebuild the graph when it no longer pays."""
        if self.graph is None:
            return
        threshold = self._tuning.hnsw_threshold
        if threshold is not None and threshold > 0 and len(self) < threshold // 2:
            self.graph = None
        elif len(self.graph.deleted) > max(len(self), 1024):
            self.graph = None
            self.maybe_build_graph()

    def reserve(self, rows: int) -> None:
        capacity = len(self.ids)
        if rows <= capacity:
            return
        capacity = max(rows, capacity * 2)
        matrix = np.empty((capacity, self._dims), dtype=self._tuning.dtype)
        matrix[: self.size] = self.matrix[: self.size]
        ids = np.empty(capacity, dtype=np.int64)
        ids[: self.size] = self.ids[: self.size]
        self.matrix, self.ids = matrix, ids

    def maybe_build_graph(self) -> None:
        threshold = self._tuning.hnsw_threshold
        size = len(self)
        if threshold is None or size == 0 or size < threshold or self.graph is not None:
            return
        graph = _Graph(self._dims, self._tuning, capacity=size)
        for start in range(0, size, _CHUNK):
            end = min(size, start + _CHUNK)
            graph.upsert(self.ids[start:end], self.matrix[start:end].astype(np.float32, copy=False), end - start)
        self.graph = graph

    # --- search --------------------------------------------------------------------------------------------------

    def search(self, query: Matrix, k: int, allowed: AbstractSet[int] | None, rows: npt.NDArray[np.int64]) -> Hits:
        """Best ``k``; with ``allowed``, only those ids (``rows``: where the allowed ids this shard holds are)."""
        size = len(self)
        if size == 0:
            return []
        if allowed is None:
            if self.graph is None:
                return self._exact(query, k)
            hits = self._from_graph(query, min(k, size), None)
            return hits if hits is not None else self._exact(query, k)
        if len(rows) == 0:
            return []
        if self.graph is None or len(rows) <= self._tuning.exact_limit:
            return self._exact_rows(query, k, rows)
        wanted = max(k, math.ceil(k * self._tuning.oversample * size / len(rows)))
        if wanted >= size:
            return self._exact_rows(query, k, rows)
        hits = self._from_graph(query, wanted, allowed, k)
        return hits if hits is not None else self._exact_rows(query, k, rows)

    def _from_graph(self, query: Matrix, fetch: int, allowed: AbstractSet[int] | None, k: int = 0) -> Hits | None:
        """Graph hits (filtered), or None when the graph could not give ``k`` of them."""
        assert self.graph is not None
        try:
            ids, scores = self.graph.query(query, fetch)
        except RuntimeError:  # hnswlib cannot always return ``fetch`` results once items are deleted
            return None
        if allowed is None:
            return [(int(i), float(s)) for i, s in zip(ids.tolist(), scores.tolist(), strict=True)]
        hits = [(i, s) for i, s in zip(ids.tolist(), scores.tolist(), strict=True) if i in allowed]
        if len(hits) < k:
            return None
        return [(int(i), float(s)) for i, s in hits[:k]]

    def _exact(self, query: Matrix, k: int) -> Hits:
        scores = _similarities(self.matrix[: self.size], query)
        return _top(scores, self.ids[: self.size], k)

    def _exact_rows(self, query: Matrix, k: int, rows: npt.NDArray[np.int64]) -> Hits:
        if len(rows) * 4 <= self.size:  # few: gather them
            return _top(_similarities(self.matrix[rows], query), self.ids[rows], k)
        scores = _similarities(self.matrix[: self.size], query)  # many: score all, keep the allowed
        return _top(scores[rows], self.ids[rows], k)


class VectorIndex:
    """Per-user cosine-similarity search over vectors the store owns.

    ``dims`` is the vector length every ``add`` and ``search`` must match
    (another length means another embedder: ``EmbeddingMismatch``).  The
    keyword arguments tune the hybrid; their defaults come from
    ``bench/vector_index.py`` on a 2-core machine (384 dims): exact search
    costs about 1 ms per 10,000 vectors of a user, an HNSW query well under
    1 ms, but building a graph costs roughly 5,000-10,000 vectors per second
    (at every rebuild from the database) and single adds become ~8x slower.
    A user's shard stays exact below 5,000 vectors (under 1 ms) and gets a
    graph from there: at 10,000 vectors exact search measured 1.0-1.4 ms (and
    8 ms through a BLAS matrix-vector product under load) against 0.23 ms for
    the graph at recall@10 0.999, and the ChromaDB comparison of the latency
    benchmark is won or lost on that millisecond.
    ``ef_search=64`` and ``ef_construction=64`` kept recall@10 at ~0.999 on
    clustered data; ``ef_construction=100`` built 2-3x slower for no gain.
    ``precision="float16"`` halves the matrix (see the module's notes).
    """

    def __init__(
        self,
        dims: int,
        *,
        backend: Backend = "auto",
        hnsw_threshold: int = 5_000,
        exact_limit: int = 2_048,
        ef_search: int = 64,
        ef_construction: int = 64,
        m: int = 16,
        oversample: float = 2.0,
        seed: int = 100,
        precision: Precision = "float32",
    ) -> None:
        if dims < 1:
            raise ValidationError("dims must be positive", field="dims")
        if backend not in _BACKENDS:
            raise ValidationError(f"backend must be one of {', '.join(_BACKENDS)}", field="backend")
        if precision not in _PRECISIONS:
            raise ValidationError(f"precision must be one of {', '.join(_PRECISIONS)}", field="precision")
        if hnsw_threshold < 0 or exact_limit < 0 or ef_search < 1 or ef_construction < 1 or m < 2 or oversample < 1:
            raise ValidationError("invalid vector index tuning")
        threshold = {"auto": hnsw_threshold, "exact": None, "hnsw": 0}[backend]
        self.dims = dims
        self.backend: Backend = backend
        self.precision: Precision = precision
        dtype = np.float16 if precision == "float16" else np.float32
        self._tuning = _Tuning(threshold, exact_limit, ef_search, ef_construction, m, oversample, seed, dtype)
        self._shards: dict[str, _Shard] = {}
        self._numbered: list[_Shard | None] = []  # by shard number (an IdMap value's high bits)
        self._where = IdMap()  # id -> shard number and row
        self._deferred = False
        self._lock = threading.RLock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._where)

    def __contains__(self, ident: object) -> bool:
        with self._lock:
            return ident in self._where

    def __repr__(self) -> str:
        return f"VectorIndex(dims={self.dims}, backend={self.backend!r}, vectors={len(self)})"

    def count(self, user_id: str) -> int:
        """How many vectors ``user_id`` has in the index."""
        with self._lock:
            shard = self._shards.get(user_id)
            return len(shard) if shard is not None else 0

    def reserve(self, user_id: str, rows: int) -> None:
        """Make room for ``rows`` vectors of ``user_id`` at once (a load from the database knows its counts)."""
        with self._lock:
            self._shard(user_id).reserve(rows)

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """Adds inside the block build no graph; each shard that needs one builds it once, at the end."""
        with self._lock:
            self._deferred = True
            for shard in self._shards.values():
                shard.deferred = True
            try:
                yield
            finally:
                self._deferred = False
                for shard in self._shards.values():
                    shard.deferred = False
                    shard.maybe_build_graph()

    def add(self, ids: Sequence[int], user_ids: Sequence[str], vectors: npt.ArrayLike) -> None:
        """Insert or replace vectors; an id added again (even for another user) replaces its old vector."""
        id_array, matrix = self._checked_rows(ids, user_ids, vectors)
        with self._lock:
            self._add_locked(id_array, list(user_ids), matrix)

    def remove(self, ids: Iterable[int]) -> None:
        """Forget these ids; unknown ids are ignored."""
        with self._lock:
            touched: set[int] = set()
            for ident in ids:
                place = self._where.pop(int(ident))
                if place != MISSING:
                    touched.add(self._remove_at(place))
            for number in touched:
                self._settle(number)

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._shards.clear()
            self._numbered.clear()
            self._where.clear()

    def rebuild(self, ids: Sequence[int], user_ids: Sequence[str], vectors: npt.ArrayLike) -> None:
        """Replace the whole content with these rows, atomically for concurrent searches."""
        id_array, matrix = self._checked_rows(ids, user_ids, vectors)
        with self._lock:
            self.clear()
            self._add_locked(id_array, list(user_ids), matrix)

    def search(self, user_id: str, query: npt.ArrayLike, k: int, allowed: AbstractSet[int] | None = None) -> Hits:
        """The ``k`` ids of ``user_id`` most similar to ``query`` as (id, cosine), best first.

        Only ``user_id``'s vectors are ever considered; with ``allowed``, only
        ids in that set.
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValidationError("k must be a non-negative integer", field="k")
        vector = np.asarray(query, dtype=np.float32)
        if vector.ndim == 2 and vector.shape[0] == 1:
            vector = vector[0]
        if vector.ndim != 1:
            raise ValidationError("query must be one vector", field="query")
        self._check_dims(vector.shape[0])
        if not np.all(np.isfinite(vector)):
            raise ValidationError("query contains NaN or infinity", field="query")
        if k == 0 or (allowed is not None and not allowed):
            return []
        vector = _normalised(vector)
        with self._lock:
            shard = self._shards.get(user_id)
            if shard is None:
                return []
            rows = np.empty(0, dtype=np.int64)
            if allowed is not None:
                places = self._where.get_many(np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
                mine = (places != MISSING) & ((places >> _ROW_BITS) == shard.number)
                rows = np.sort(places[mine] & _ROW_MASK)
            return shard.search(vector, k, allowed, rows)

    # --- internals -----------------------------------------------------------------------------------------------

    def _shard(self, user_id: str) -> _Shard:
        shard = self._shards.get(user_id)
        if shard is None:
            number = next((i for i, s in enumerate(self._numbered) if s is None), len(self._numbered))
            shard = _Shard(number, self.dims, self._tuning)
            shard.deferred = self._deferred
            if number == len(self._numbered):
                self._numbered.append(shard)
            else:
                self._numbered[number] = shard
            self._shards[user_id] = shard
        return shard

    def _remove_at(self, place: int) -> int:
        """Drop the row at an IdMap place; the shard's number."""
        number, row = place >> _ROW_BITS, place & _ROW_MASK
        shard = self._numbered[number]
        assert shard is not None
        moved = shard.remove_row(row)
        if moved is not None:
            self._where.set(moved, number << _ROW_BITS | row)
        return number

    def _check_dims(self, dims: int) -> None:
        if dims != self.dims:
            raise EmbeddingMismatch(f"vectors have {dims} dimensions, the index holds {self.dims}: run reindex")

    def _checked_rows(
        self, ids: Sequence[int], user_ids: Sequence[str], vectors: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.int64], Matrix]:
        if isinstance(user_ids, str):
            raise ValidationError("user_ids must be a sequence of user ids, one per vector", field="user_ids")
        id_array = np.asarray(ids, dtype=np.int64).reshape(-1)
        if len(user_ids) != len(id_array):
            raise ValidationError("ids and user_ids must have the same length", field="user_ids")
        matrix = np.asarray(vectors, dtype=np.float32)
        if len(id_array) == 0 and matrix.size == 0:
            return id_array, np.zeros((0, self.dims), dtype=np.float32)
        if matrix.ndim == 1 and len(id_array) == 1:
            matrix = matrix.reshape(1, -1)
        if matrix.ndim != 2 or matrix.shape[0] != len(id_array):
            raise ValidationError("vectors must be a matrix with one row per id", field="vectors")
        self._check_dims(matrix.shape[1])
        if not np.all(np.isfinite(matrix)):
            raise ValidationError("vectors contain NaN or infinity", field="vectors")
        return id_array, _normalised(matrix)

    def _add_locked(self, ids: npt.NDArray[np.int64], user_ids: list[str], matrix: Matrix) -> None:
        last: dict[int, int] = {}  # id -> position of its last occurrence in this call
        for position, ident in enumerate(ids.tolist()):
            last[ident] = position
        positions = np.fromiter(last.values(), dtype=np.int64, count=len(last))
        unique = ids[positions]
        places = self._where.get_many(unique)
        by_user: dict[str, list[int]] = {}
        moved: list[int] = []
        for offset, position in enumerate(positions.tolist()):
            user = user_ids[position]
            place = int(places[offset])
            shard = self._shards.get(user)
            if place != MISSING and (shard is None or place >> _ROW_BITS != shard.number):
                moved.append(int(unique[offset]))  # it belonged to another user: it leaves that shard first
            by_user.setdefault(user, []).append(position)
        self.remove(moved)
        for user, chosen in by_user.items():
            shard = self._shard(user)
            rows = np.asarray(chosen, dtype=np.int64)
            their_ids, their_vectors = ids[rows], matrix[rows]
            where = self._where.get_many(their_ids)
            known = where != MISSING
            if known.any():
                shard.overwrite(where[known] & _ROW_MASK, their_vectors[known])
            fresh = their_ids[~known]
            if len(fresh):
                first = shard.append(fresh, their_vectors[~known])
                places_of = (shard.number << _ROW_BITS) | np.arange(first, first + len(fresh), dtype=np.int64)
                self._where.set_many(fresh, places_of)

    def _settle(self, number: int) -> None:
        shard = self._numbered[number]
        if shard is None:
            return
        if len(shard) == 0:
            user = next(u for u, s in self._shards.items() if s is shard)
            del self._shards[user]
            self._numbered[number] = None
        else:
            shard.settle()
