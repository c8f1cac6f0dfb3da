"""Hybrid search: BM25 and vector similarity fused by reciprocal rank, then weighted by recency.

The order of work (each step is visible on every hit, so a result can say why):

1. candidates: the best ``pool`` memories by BM25 (FTS5) and by cosine similarity,
   both already restricted to the user and the filter;
2. fusion: ``fused = Σ 1 / (rrf_k + rank)`` over the lists a memory appears in;
3. weighting (ITSERR): ``score = w_semantic · fused / fused_max + w_recency · recency``
   with per-stream weights, where ``recency = 0.5 ** (age_days / half_life)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

import numpy as np

from narrative.model import Memory
from narrative.store.filters import MemoryFilter
from narrative.store.protocol import Store


class SearchMode(StrEnum):
    HYBRID = "hybrid"
    KEYWORD = "keyword"
    VECTOR = "vector"


@dataclass(frozen=True)
class Weights:
    semantic: float
    recency: float


@dataclass(frozen=True)
class SearchParams:
    k: int = 10
    pool: int = 60
    rrf_k: int = 60
    half_life_days: float = 30.0
    mode: SearchMode = SearchMode.HYBRID
    stream_weights: Mapping[str, Weights] = field(default_factory=dict)
    keyword_weight: float = 1.0  # weighted RRF: how much a BM25 rank counts
    vector_weight: float = 1.0  # ... and a vector rank
    diversify: bool = True  # prefer hits whose source messages are not already covered


DEFAULT_WEIGHTS = Weights(0.7, 0.3)


@dataclass(frozen=True)
class SearchHit:
    """One result and the reasons it was returned."""

    memory: Memory
    score: float
    fused: float
    bm25_rank: int | None
    bm25_score: float | None
    vector_rank: int | None
    similarity: float | None
    recency: float
    weights: Weights

    def why(self) -> dict[str, object]:
        """The explanation fields: ranks in each list, fused score, recency factor, weights."""
        parts = []
        if self.bm25_rank is not None:
            parts.append(f"keyword rank {self.bm25_rank}")
        if self.vector_rank is not None:
            parts.append(f"vector rank {self.vector_rank} (cosine {self.similarity:.3f})")
        return {
            "bm25_rank": self.bm25_rank,
            "bm25_score": None if self.bm25_score is None else round(self.bm25_score, 4),
            "vector_rank": self.vector_rank,
            "similarity": None if self.similarity is None else round(self.similarity, 4),
            "fused": round(self.fused, 6),
            "recency": round(self.recency, 4),
            "semantic_weight": self.weights.semantic,
            "recency_weight": self.weights.recency,
            "score": round(self.score, 6),
            "summary": "; ".join(parts) + f"; recency {self.recency:.2f}",
        }


def recency_factor(when: datetime, now: datetime, half_life_days: float) -> float:
    age_days = max(0.0, (now - when).total_seconds() / 86400.0)
    return float(0.5 ** (age_days / half_life_days)) if half_life_days > 0 else 1.0


def fuse(
    ranked_lists: Sequence[Sequence[int]], rrf_k: int, weights: Sequence[float] | None = None
) -> dict[int, float]:
    """(Weighted) reciprocal rank fusion of id lists (rank 1 is best)."""
    fused: dict[int, float] = {}
    for index, ranked in enumerate(ranked_lists):
        weight = 1.0 if weights is None else weights[index]
        for rank, item in enumerate(ranked, start=1):
            fused[item] = fused.get(item, 0.0) + weight / (rrf_k + rank)
    return fused


def hybrid_search(
    store: Store,
    user_id: str,
    query: str,
    now: datetime,
    params: SearchParams,
    where: MemoryFilter | None = None,
    embed_query: Callable[[str], tuple[np.ndarray, str]] | None = None,
) -> list[SearchHit]:
    """Best ``params.k`` memories for ``query`` with their explanation."""
    keyword: list[tuple[int, float]] = []
    vector: list[tuple[int, float]] = []
    if params.mode is not SearchMode.VECTOR:
        keyword = store.keyword_search_memories(user_id, query, where, limit=params.pool)
    if params.mode is not SearchMode.KEYWORD and embed_query is not None:
        query_vector, model = embed_query(query)
        vector = store.vector_search(user_id, query_vector, model, k=params.pool, where=where)
    lists = [[i for i, _ in keyword], [i for i, _ in vector]]
    list_weights = [params.keyword_weight, params.vector_weight]
    fused = fuse(lists, params.rrf_k, list_weights)
    if not fused:
        return []
    fused_max = sum(w for w, ranked in zip(list_weights, lists, strict=True) if ranked) / (params.rrf_k + 1)
    briefs = store.memory_briefs(user_id, list(fused))
    bm25 = {i: (rank, score) for rank, (i, score) in enumerate(keyword, start=1)}
    cosine = {i: (rank, sim) for rank, (i, sim) in enumerate(vector, start=1)}
    scored: list[tuple[float, float, int, float, Weights]] = []
    for memory_id, fused_score in fused.items():
        brief = briefs.get(memory_id)
        if brief is None:
            continue
        weights = params.stream_weights.get(brief[0].value, DEFAULT_WEIGHTS)
        recency = recency_factor(brief[1], now, params.half_life_days)
        score = weights.semantic * fused_score / fused_max + weights.recency * recency
        scored.append((score, fused_score, memory_id, recency, weights))
    scored.sort(key=lambda item: (-item[0], -item[1], item[2]))
    order = [item[2] for item in scored]
    if params.diversify:
        order = diversified_ids(order, {i: briefs[i][2] for i in order}, params.k)
    chosen = {item[2]: item for item in scored if item[2] in set(order[: params.k])}
    hits = []
    for memory in store.get_memories(user_id, order[: params.k]):  # only the winners are loaded whole
        score, fused_score, _, recency, weights = chosen[memory.id]
        b_rank, b_score = bm25.get(memory.id, (None, None))
        v_rank, v_sim = cosine.get(memory.id, (None, None))
        hits.append(SearchHit(memory, score, fused_score, b_rank, b_score, v_rank, v_sim, recency, weights))
    return hits


def diversified_ids(order: Sequence[int], sources: Mapping[int, Sequence[int]], k: int) -> list[int]:
    """Best first, but an id whose source messages are all covered by better ones waits its turn.

    Overlapping conversation memories (an exchange shares a turn with the next
    one) would otherwise fill the top k with the same words twice.
    """
    chosen: list[int] = []
    waiting: list[int] = []
    covered: set[int] = set()
    for memory_id in order:
        own = set(sources.get(memory_id, ()))
        if own and own <= covered:
            waiting.append(memory_id)
            continue
        chosen.append(memory_id)
        covered |= own
        if len(chosen) == k:
            return chosen
    return (chosen + waiting)[:k]


def diversified(hits: Sequence[SearchHit], k: int) -> list[SearchHit]:
    """:func:`diversified_ids` over hits (kept for callers holding whole hits)."""
    by_id = {hit.memory.id: hit for hit in hits}
    order = diversified_ids([h.memory.id for h in hits], {h.memory.id: h.memory.message_ids for h in hits}, k)
    return [by_id[i] for i in order]
