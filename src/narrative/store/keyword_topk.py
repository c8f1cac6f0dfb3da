"""Top-k BM25 without scoring every matching memory: the keyword index's pruned search.

A memory's BM25 for a query term depends on the term's idf, how often the term
occurs in the memory and the memory's length, and the length is the memory's
own, whichever term is looked at.  So every term's postings are grouped by a
*length bucket* (each length below 128 words its own bucket, then steps of an
eighth of an octave), and within a bucket no memory can score above

    sum over the query terms found in the bucket of  idf (k1 + 1) tf / (tf + k1 (1 - b + b L / avg))

with ``tf`` the term's largest count in the bucket and ``L`` the bucket's
shortest length.  Buckets are scored whole, best bound first, each memory's
score computed exactly as the exhaustive scorer computes it (the same float32
operations, the terms added in query order), until the k-th best score found
so far is above the bound of every bucket left: no memory in those can reach
the top ``k``, nor tie with it, so the answer, ties broken by the smaller id,
is the exhaustive one.

A term's postings grouped by bucket (a :class:`Layout`) are kept for long
posting lists and made again once the rows appended since (scored from a
small layout made per query) pass an eighth of it.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

K1 = 1.2
B = 0.75
Hits = list[tuple[int, float]]
_MARGIN = 1.0 + 1e-3  # a bound's float64 value against float32 sums of many parts: stays an upper bound


def _bucket_edges() -> npt.NDArray[np.float32]:
    edges = list(range(128))
    edge = 128.0
    while edge < 2.0**32:
        edges.append(int(edge))
        edge *= 2.0**0.125
    return np.asarray(edges, dtype=np.float32)


EDGES = _bucket_edges()  # the shortest length of each bucket
BUCKETS = len(EDGES)


def part(
    lengths: npt.NDArray[np.float32], counts: npt.NDArray[np.uint16], average: float, idf: float
) -> npt.NDArray[np.float32]:
    """One term's BM25 for rows of these lengths and counts (``lengths`` is overwritten and returned)."""
    tf = counts.astype(np.float32)
    lengths *= K1 * B / average  # in place: a posting list may hold a quarter of a million rows
    lengths += K1 * (1.0 - B)
    lengths += tf
    np.divide(tf, lengths, out=lengths)  # tf / (tf + k1 (1 - b + b len / avg))
    lengths *= idf * (K1 + 1.0)
    return lengths


class Layout:
    """Some of a term's postings ordered by (length bucket, slot), with where each bucket starts."""

    __slots__ = ("counts", "covered", "largest", "slots", "starts")

    def __init__(
        self, slots: npt.NDArray[np.int32], counts: npt.NDArray[np.uint16], lengths: npt.NDArray[np.float32]
    ) -> None:
        self.covered = len(slots)
        buckets = np.searchsorted(EDGES, lengths[slots], side="right") - 1
        order = np.argsort(buckets, kind="stable")  # slots stay ascending within a bucket
        self.slots = slots[order]
        self.counts = counts[order]
        ordered = buckets[order]
        present, first = np.unique(ordered, return_index=True)
        self.starts = np.zeros(BUCKETS + 1, dtype=np.int64)  # bucket b's rows: starts[b]:starts[b + 1]
        sizes = np.zeros(BUCKETS, dtype=np.int64)
        sizes[present] = np.diff(np.append(first, len(ordered)))
        np.cumsum(sizes, out=self.starts[1:])
        self.largest = np.zeros(BUCKETS, dtype=np.float64)  # the largest count in each bucket (0: none)
        if len(ordered):
            self.largest[present] = np.maximum.reduceat(self.counts, first)


class PostingSource(Protocol):
    slots: array[int]
    counts: array[int]
    layout: Layout | None


def layouts_of(posting: PostingSource, lengths: npt.NDArray[np.float32], keep_from: int) -> list[Layout]:
    """The term's postings as layouts: the kept one (made or made again when due) and the rows appended since."""
    slots = np.frombuffer(posting.slots, dtype=np.int32)
    counts = np.frombuffer(posting.counts, dtype=np.uint16)
    kept = posting.layout
    if len(slots) < keep_from:
        posting.layout = None
        return [Layout(slots, counts, lengths)]
    if kept is None or len(slots) - kept.covered > max(keep_from, kept.covered // 8):
        kept = posting.layout = Layout(slots, counts, lengths)
    if kept.covered == len(slots):
        return [kept]
    return [kept, Layout(slots[kept.covered :], counts[kept.covered :], lengths)]


Terms = Sequence[tuple[float, list[Layout]]]


def term_bounds(terms: Terms, average: float) -> npt.NDArray[np.float64]:
    """The highest score each term can give a row of each length bucket (0 where it has none): terms x buckets."""
    bounds = np.zeros((len(terms), BUCKETS), dtype=np.float64)
    length_part = K1 * (1.0 - B + B * EDGES.astype(np.float64) / average)
    for row, (idf, layouts) in enumerate(terms):
        largest = layouts[0].largest if len(layouts) == 1 else np.maximum.reduce([lay.largest for lay in layouts])
        bounds[row] = idf * (K1 + 1.0) * largest / (largest + length_part)
    return bounds


class Scratch:
    """Per-slot work space of a shard, all zeros between searches: a float per slot and a mark per slot."""

    def __init__(self, size: int) -> None:
        self.scores = np.zeros(size, dtype=np.float32)
        self.marks = np.zeros(size, dtype=bool)


class _Query:
    """One pruned search: the terms' layouts, their bounds and the shard's arrays."""

    def __init__(self, terms: Terms, lengths: npt.NDArray[np.float32], scratch: Scratch, average: float) -> None:
        self.terms = terms
        self.lengths = lengths
        self.scratch = scratch
        self.average = average
        self.bounds = term_bounds(terms, average)

    def pieces(self, term: int, bucket: int) -> list[tuple[Layout, int, int]]:
        return [
            (lay, int(lay.starts[bucket]), int(lay.starts[bucket + 1]))
            for lay in self.terms[term][1]
            if lay.starts[bucket + 1] > lay.starts[bucket]
        ]

    def essential(self, bucket: int, floor: float) -> list[int]:
        """The terms that give a bucket's rows: all but those whose bounds there add up to less than ``floor``
        (the last one is the term bounded highest)."""
        column = self.bounds[:, bucket]
        order = np.argsort(column, kind="stable")
        below = int(np.searchsorted(np.cumsum(column[order]) * _MARGIN, floor, side="left")) if floor > 0 else 0
        return [int(term) for term in order[below:] if column[term] > 0]

    def score(
        self, buckets: npt.NDArray[np.int64], floor: float, only: int | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Every row of these buckets that may reach ``floor``, with its exact score (terms added in query order).

        In each bucket the terms whose bounds add up to less than ``floor`` are *non-essential*: a row holding
        only those cannot reach it, so rows come from the other terms' postings, and the non-essential terms'
        postings are only looked at where they hold one of those rows.  With ``only``, that term alone gives
        the rows.
        """
        essential: list[list[npt.NDArray[np.int32]]] = [[] for _ in self.terms]
        essential_counts: list[list[npt.NDArray[np.uint16]]] = [[] for _ in self.terms]
        other: list[list[tuple[Layout, int, int]]] = [[] for _ in self.terms]
        for bucket in buckets:
            skipped = set(range(len(self.terms))) - ({only} if only is not None else set(self.essential(bucket, floor)))
            for term in range(len(self.terms)):
                for lay, start, end in self.pieces(term, bucket):
                    if term in skipped:
                        other[term].append((lay, start, end))
                    else:
                        essential[term].append(lay.slots[start:end])
                        essential_counts[term].append(lay.counts[start:end])
        rows = [np.concatenate(pieces) if len(pieces) > 1 else pieces[0] for pieces in essential if pieces]
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        marks, scores = self.scratch.marks, self.scratch.scores
        for slots in rows:
            marks.put(slots, True)
        for term, (idf, _) in enumerate(self.terms):  # in query order: the same float32 sums as every row's
            if essential[term]:
                slots, counts = np.concatenate(essential[term]), np.concatenate(essential_counts[term])
                scores[slots] += part(self.lengths.take(slots), counts, self.average, idf)
            if other[term]:
                slots = np.concatenate([lay.slots[start:end] for lay, start, end in other[term]])
                counts = np.concatenate([lay.counts[start:end] for lay, start, end in other[term]])
                hit = marks.take(slots)
                slots = slots[hit]
                scores[slots] += part(self.lengths.take(slots), counts[hit], self.average, idf)
        return self._collect(rows)

    def _collect(self, rows: list[npt.NDArray[np.int32]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Each row once with its score, the scratch cleared: the first list holding a row takes it."""
        marks, scores = self.scratch.marks, self.scratch.scores
        found_slots, found_scores = [], []
        for slots in rows:
            values = scores.take(slots)
            scores.put(slots, 0.0)
            marks.put(slots, False)
            first = values > 0  # every part is positive, so a row already taken reads 0
            found_slots.append(slots[first])
            found_scores.append(values[first])
        return np.concatenate(found_slots).astype(np.int64), np.concatenate(found_scores)


class _Pool:
    """The rows found so far that may be in the top ``k``, and the k-th best score among them (the floor)."""

    def __init__(self, keep: npt.NDArray[np.bool_], k: int) -> None:
        self.keep, self.k = keep, k
        self.slots = np.zeros(0, dtype=np.int64)
        self.scores = np.zeros(0, dtype=np.float32)
        self.floor = 0.0

    def add(self, slots: npt.NDArray[np.int64], scores: npt.NDArray[np.float32]) -> None:
        chosen = self.keep[slots] & (scores >= self.floor)
        self.slots = np.concatenate([self.slots, slots[chosen]])
        self.scores = np.concatenate([self.scores, scores[chosen]])
        if len(self.scores) >= self.k:
            self.floor = max(self.floor, float(kth_largest(self.scores, self.k)))
            high = self.scores >= self.floor  # every row tied with the k-th stays: the smaller ids win ties
            self.slots, self.scores = self.slots[high], self.scores[high]


def pruned_top(
    terms: Terms,
    lengths: npt.NDArray[np.float32],
    keep: npt.NDArray[np.bool_],
    scratch: Scratch,
    average: float,
    ids: npt.NDArray[np.int64],
    k: int,
) -> Hits:
    """The ``k`` best rows among those ``keep`` marks: buckets best bound first, while one may still reach the
    top ``k``.  ``scratch`` is all zeros and is left so.

    The rows of the best bucket that hold its highest-bounded term are scored first: their k-th best score
    is the first floor, and when that term alone gives the bucket's rows under it, the bucket is done.
    """
    query = _Query(terms, lengths, scratch, average)
    bounds = query.bounds.sum(axis=0) * _MARGIN
    order = np.argsort(-bounds, kind="stable")
    order = order[bounds[order] > 0]
    if not len(order):
        return []
    sizes = np.zeros(BUCKETS, dtype=np.int64)  # postings in each bucket, every term's
    for _, layouts in terms:
        for lay in layouts:
            sizes += np.diff(lay.starts)
    pool = _Pool(keep, k)
    best = query.essential(int(order[0]), 0.0)[-1]
    pool.add(*query.score(order[:1], 0.0, only=best))
    done = 1
    if query.essential(int(order[0]), pool.floor) != [best]:  # score the bucket again, from the floor found
        pool, done = _reset(pool), 0
    batch = max(4096, int(sizes.sum()) // 64)
    while done < len(order) and bounds[order[done]] >= pool.floor:
        taken = done + 1
        size = int(sizes[order[done]])
        while taken < len(order) and size < batch and bounds[order[taken]] >= pool.floor:
            size += int(sizes[order[taken]])
            taken += 1
        pool.add(*query.score(order[done:taken], pool.floor))
        done, batch = taken, batch * 2
    return top(pool.slots, pool.scores, ids, k)


def _reset(pool: _Pool) -> _Pool:
    """An empty pool that keeps the floor (its rows will be scored again)."""
    fresh = _Pool(pool.keep, pool.k)
    fresh.floor = pool.floor
    return fresh


def kth_largest(values: npt.NDArray[np.float32], k: int) -> np.float32:
    """The k-th largest of ``values`` (``k <= len(values)``) without partitioning all of them: numpy's
    partition is slow on many equal values, which BM25 scores of short texts are."""
    while len(values) > 4096:
        best = values.max()
        if np.count_nonzero(values == best) >= k:
            return np.float32(best)
        step = len(values) // 1024
        sample = np.sort(values[::step])
        guess = sample[max(0, len(sample) - 1 - 4 * k // step)]  # about 4k values at or above it, if spread
        high = values >= guess
        if not k <= np.count_nonzero(high) < len(values):
            break
        values = values[high]
    return np.float32(np.partition(values, len(values) - k)[len(values) - k])


def idf(live: int, df: int) -> float:
    return math.log(1.0 + (live - df + 0.5) / (df + 0.5))


def top(candidates: npt.NDArray[np.int64], values: npt.NDArray[np.float32], ids: npt.NDArray[np.int64], k: int) -> Hits:
    """The ``k`` best candidates (slots, with their scores), best first, ties broken by the smaller id."""
    if k < len(candidates):
        kth = kth_largest(values, k)
        above, tied = values > kth, values == kth
        need = k - int(np.count_nonzero(above))
        tied_slots = candidates[tied]
        if len(tied_slots) > need:  # keep the tied rows with the smallest ids
            tied_slots = tied_slots[np.argpartition(ids[tied_slots], need - 1)[:need]]
        values = np.concatenate([values[above], np.full(len(tied_slots), kth, dtype=values.dtype)])
        candidates = np.concatenate([candidates[above], tied_slots])
    chosen = ids[candidates]
    order = np.lexsort((chosen, -values))
    return [(int(chosen[i]), float(values[i])) for i in order]
