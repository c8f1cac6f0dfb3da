"""Hybrid search: BM25 and vector similarity fused by reciprocal rank, then weighted by recency.

The order of work (each step is visible on every hit, so a result can say why):

1. candidates: the best ``pool`` memories by BM25 (FTS5) and by cosine similarity,
   both already restricted to the user and the filter;
2. fusion: ``fused = Σ 1 / (rrf_k + rank)`` over the lists a memory appears in;
3. a floor: a candidate needs evidence of its own — a query word in its text (BM25) or a cosine similarity at or
   above ``similarity_floor`` — so a query with nothing relevant returns nothing;
4. weighting (ITSERR): ``score = fused / fused_max · (w_semantic + w_recency · recency)`` with per-stream weights
   (``w_semantic + w_recency = 1``) and ``recency = 0.5 ** (age_days / half_life)``: recency scales how well a
   memory matched, it never makes an unmatched memory rank.  When the query names a time ("in May 2023", "last
   week"), the age is measured to that period instead of to now (a date belongs with its event);
5. one result per message: a memory that shows a message already shown by a better hit (the exchange, the turn
   and the decision extracted from it) is folded into that hit, which names it in ``also``.  Summaries of many
   messages (reflections, narrative links, closing memories) show no single message, so they fold nothing away.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

import numpy as np

from narrative.model import SUMMARY_STREAMS, MemoryItem, Message, Stream
from narrative.store.filters import MemoryFilter
from narrative.store.keyword_index import query_terms, terms
from narrative.store.protocol import Store
from narrative.text.lines import turn_line
from narrative.text.when import Period, named_period


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
    collapse: bool = True  # one result per message: fold a memory whose messages a better hit already shows
    similarity_floor: float = 0.0  # a vector-only candidate needs at least this cosine similarity
    min_score: float = 0.0  # drop hits scoring below this
    summary_weight: float = 0.5  # a summary of many messages needs twice the match to outrank the words themselves


DEFAULT_WEIGHTS = Weights(0.7, 0.3)


@dataclass(frozen=True)
class SearchHit:
    """One result and the reasons it was returned."""

    memory: MemoryItem
    score: float
    fused: float
    bm25_rank: int | None
    bm25_score: float | None
    vector_rank: int | None
    similarity: float | None
    recency: float
    weights: Weights
    also: tuple[int, ...] = ()  # memories folded into this hit: they show the same messages
    shown: tuple[int, ...] = ()  # the source messages this hit puts in front of a reader (none for a summary)
    text: str = ""  # what to show a reader: the memory's text, or only the turns in ``shown`` of an exchange
    floor: float = 0.0  # the similarity floor this hit passed
    period: str = ""  # the time the query named, which ``recency`` was measured to ("" = now)

    def why(self) -> dict[str, object]:
        """The explanation fields: ranks in each list, fused score, recency factor, weights."""
        parts = []
        if self.bm25_rank is not None:
            parts.append(f"keyword rank {self.bm25_rank}")
        if self.vector_rank is not None:
            parts.append(f"vector rank {self.vector_rank} (cosine {self.similarity:.3f}, {self.closeness()})")
        if self.also:
            parts.append("folds in " + ", ".join(f"#{i}" for i in self.also) + " (same messages)")
        return {
            "bm25_rank": self.bm25_rank,
            "bm25_score": None if self.bm25_score is None else round(self.bm25_score, 4),
            "vector_rank": self.vector_rank,
            "similarity": None if self.similarity is None else round(self.similarity, 4),
            "fused": round(self.fused, 6),
            "recency": round(self.recency, 4),
            "recency_to": self.period or "now",
            "semantic_weight": self.weights.semantic,
            "recency_weight": self.weights.recency,
            "score": round(self.score, 6),
            "closeness": self.closeness(),
            "also": list(self.also),
            "summary": "; ".join(parts) + self._time(),
        }

    def _time(self) -> str:
        if self.period:
            return f"; near {self.period} {self.recency:.2f}"
        return f"; recency {self.recency:.2f}"

    def closeness(self) -> str:
        """How close the hit was, in words: by its cosine similarity, or by shared query words alone."""
        if self.similarity is None:
            return "shares query words"
        if self.similarity >= max(0.6, self.floor):
            return "close"
        if self.similarity >= max(0.45, self.floor):
            return "related"
        return "loosely related" if self.similarity >= self.floor else "below the similarity floor"


def recency_factor(when: datetime, now: datetime, half_life_days: float, period: Period | None = None) -> float:
    """``0.5 ** (days / half_life)``: days since ``when``, or, when the query named a period, days from it."""
    days = period.distance_days(when) if period is not None else max(0.0, (now - when).total_seconds() / 86400.0)
    return float(0.5 ** (days / half_life_days)) if half_life_days > 0 else 1.0


def fuse(ranked_lists: Sequence[Sequence[int]], rrf_k: int, weights: Sequence[float] | None = None) -> dict[int, float]:
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
    period = named_period(query, now)
    if period is not None and period.relative:  # "last week" said on another day meant another week
        query = period.cut_from(query)
    keyword: list[tuple[int, float]] = []
    vector: list[tuple[int, float]] = []
    if params.mode is not SearchMode.VECTOR:
        keyword = store.keyword_search_memories(user_id, query, where, limit=params.pool)
    if params.mode is not SearchMode.KEYWORD and embed_query is not None:
        query_vector, model = embed_query(query)
        vector = store.vector_search(user_id, query_vector, model, k=params.pool, where=where)
    matched = {i for i, _ in keyword}
    vector = [(i, sim) for i, sim in vector if sim >= params.similarity_floor or i in matched]
    lists = [[i for i, _ in keyword], [i for i, _ in vector]]
    list_weights = [params.keyword_weight, params.vector_weight]
    fused = fuse(lists, params.rrf_k, list_weights)
    if not fused:
        return []
    searched = [params.mode is not SearchMode.VECTOR, params.mode is not SearchMode.KEYWORD and embed_query is not None]
    fused_max = sum(w for w, used in zip(list_weights, searched, strict=True) if used) / (params.rrf_k + 1)
    briefs = store.memory_briefs(user_id, list(fused))
    scored: dict[int, tuple[float, float, Weights]] = {}
    for memory_id, fused_score in fused.items():
        brief = briefs.get(memory_id)
        if brief is None:
            continue
        weights = params.stream_weights.get(brief[0].value, DEFAULT_WEIGHTS)
        recency = recency_factor(brief[1], now, params.half_life_days, period)
        total = weights.semantic + weights.recency
        scale = (weights.semantic + weights.recency * recency) / total if total > 0 else 1.0
        if brief[0] in SUMMARY_STREAMS:
            scale *= params.summary_weight
        scored[memory_id] = (fused_score / fused_max * scale, recency, weights)
    order = sorted(scored, key=lambda i: (-scored[i][0], -fused[i], i))
    order = [i for i in order if scored[i][0] >= params.min_score]
    shows, messages = shown_messages(store, user_id, query, order, briefs, params.k)
    sources = {i: briefs[i][2] for i in order}
    chosen, folded = collapsed(order, shows, params.k, sources) if params.collapse else (order[: params.k], {})
    bm25 = {i: (rank, value) for rank, (i, value) in enumerate(keyword, start=1)}
    cosine = {i: (rank, sim) for rank, (i, sim) in enumerate(vector, start=1)}
    hits = []
    for memory in store.get_memories(user_id, chosen):  # only the winners are loaded whole
        score, recency, weights = scored[memory.id]
        b_rank, b_score = bm25.get(memory.id, (None, None))
        v_rank, v_sim = cosine.get(memory.id, (None, None))
        shown = tuple(sorted(shows.get(memory.id, ())))
        hits.append(
            SearchHit(
                memory,
                score,
                fused[memory.id],
                b_rank,
                b_score,
                v_rank,
                v_sim,
                recency,
                weights,
                also=tuple(folded.get(memory.id, ())),
                floor=params.similarity_floor,
                shown=shown,
                text=shown_text(memory, shown, messages),
                period="" if period is None else period.label,
            )
        )
    return hits


def shown_messages(
    store: Store,
    user_id: str,
    query: str,
    order: Sequence[int],
    briefs: Mapping[int, tuple[Stream, datetime, tuple[int, ...]]],
    k: int,
) -> tuple[dict[int, frozenset[int]], dict[int, Message]]:
    """Which source messages each ranked memory puts in front of a reader, and the messages read to decide.

    A summary (reflection, narrative link, closing memory) shows none: it quotes no single message.  A memory made
    from one message shows it.  An exchange shows its own turn, and the turn it answers only when that turn holds
    some of the query's words — the reply belongs with the question that found it; a reply found by its own words
    does not need the turn before it.  When neither turn holds a query word (a match by meaning), both are shown.
    A turn's words include its speaker's name, as the exchange's text does: "what does Melanie do to de-stress"
    holds a word of Melanie's own turn, not only of the reply that thanks her by name.
    """
    head = order[: 4 * k + 20]  # enough for the collapse to fill k results
    pairs = [i for i in head if briefs[i][0] not in SUMMARY_STREAMS and len(briefs[i][2]) == 2]
    wanted = sorted({m for i in pairs for m in briefs[i][2]})
    messages = {m.id: m for m in store.get_messages(user_id, wanted)} if wanted else {}
    words = set(query_terms(query))
    shows: dict[int, frozenset[int]] = {}
    for memory_id in order:
        stream, _, sources = briefs[memory_id]
        if stream in SUMMARY_STREAMS:
            shows[memory_id] = frozenset()
        elif memory_id in pairs and all(m in messages for m in sources):
            earlier, later = sorted(sources)
            matched = [bool(words & set(terms(turn_line(messages[m])))) for m in (earlier, later)]
            shows[memory_id] = frozenset((later,) if matched == [False, True] else (earlier, later))
        else:
            shows[memory_id] = frozenset(sources)
    return shows, messages


def shown_text(memory: MemoryItem, shown: Sequence[int], messages: Mapping[int, Message]) -> str:
    """The memory's text, or, for an exchange that shows fewer turns than it holds, those turns alone."""
    if not shown or len(shown) == len(memory.message_ids) or not all(m in messages for m in shown):
        return memory.content
    return "\n".join(turn_line(messages[m]) for m in shown)


def collapsed(
    order: Sequence[int], shows: dict[int, frozenset[int]], k: int, sources: Mapping[int, Sequence[int]] | None = None
) -> tuple[list[int], dict[int, list[int]]]:
    """The best ``k`` ids such that no message is shown twice, and what each kept id absorbed.

    Walks the ranking once.  An id whose messages are all shown by better ids is folded into the best of them
    instead of being listed again; an id that shares only some is kept and shows only its new messages
    (``shows`` is updated in place).  A summary shows no message; it is folded only when every one of its
    ``sources`` is already on screen, since then it adds nothing the reader has not got.
    """
    chosen: list[int] = []
    folded: dict[int, list[int]] = {}
    owner: dict[int, int] = {}
    for memory_id in order:
        own = shows.get(memory_id, frozenset()) or frozenset((sources or {}).get(memory_id, ()))
        holders = [owner[m] for m in own if m in owner]
        if own and len(holders) == len(own):
            folded.setdefault(min(holders, key=chosen.index), []).append(memory_id)
            continue
        if len(chosen) == k:
            continue
        shows[memory_id] = shows.get(memory_id, frozenset()) - owner.keys()
        chosen.append(memory_id)
        owner.update(dict.fromkeys(shows[memory_id], memory_id))
    return chosen, folded
