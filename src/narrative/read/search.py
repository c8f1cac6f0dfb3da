"""Hybrid search: BM25 and vector similarity fused by reciprocal rank, then weighted by recency.

The order of work (each step is visible on every hit, so a result can say why):

1. candidates: the best ``pool`` memories by BM25 (FTS5) and by cosine similarity,
   both already restricted to the user and the filter (a query that names a speaker is embedded so the name
   weighs no more than what is asked: :mod:`narrative.read.speakers`);
2. fusion: ``fused = Σ 1 / (rrf_k + rank)`` over the lists a memory appears in;
3. a floor: a candidate needs evidence of its own — a query word in its text (BM25) or a cosine similarity at or
   above ``similarity_floor`` — so a query with nothing relevant returns nothing;
4. weighting (ITSERR): ``score = fused / fused_max · (w_semantic + w_recency · recency)`` with per-stream weights
   (``w_semantic + w_recency = 1``) and ``recency = 0.5 ** (age_days / half_life)``: recency scales how well a
   memory matched, it never makes an unmatched memory rank.  When the query names a time ("in May 2023", "last
   week"), the age is measured to that period instead of to now (a date belongs with its event);
5. one result per message: a memory that shows a message already shown by a better hit (the exchange, the turn
   and the decision extracted from it) is folded into that hit, which names it in ``also``.  Summaries of many
   messages (reflections, narrative links, closing memories) show no single message, so they fold nothing away;
6. what a hit shows: its turns, a long one by an excerpt (:mod:`narrative.read.excerpts`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import TypeVar

import numpy as np

from narrative.model import SUMMARY_STREAMS, EventKind, MemoryItem, Message, Passage, Stream
from narrative.read.candidates import Candidates, Key, Unit
from narrative.read.conflicting import conflicts_of, with_conflicting
from narrative.read.excerpts import EXCERPT_TOKENS, excerpt_of
from narrative.read.showing import shown_by, shown_text
from narrative.read.speakers import query_vector_of, speaker_names, without_speakers
from narrative.store.filters import MemoryFilter
from narrative.store.keyword_index import query_terms
from narrative.store.protocol import Store
from narrative.text.lines import turn_line
from narrative.text.passages import more_tokens_than
from narrative.text.when import Period, named_period
from narrative.text.words import topic_text


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
    include_superseded: bool = False  # also what a later statement superseded
    as_of: datetime | None = None  # what was current at this time (instead of now)


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
    passage: Passage | None = None  # the passage that matched, when the hit is a passage of a message
    passages: tuple[Passage, ...] = ()  # the passage shown of each long message in ``shown``
    supersedes: tuple[MemoryItem, ...] = ()  # the memories this one superseded (not shown: no longer current)
    conflicts: tuple[int, ...] = ()  # current memories that disagree with this one (both are shown)
    conflict_reasons: tuple[str, ...] = ()

    def why(self) -> dict[str, object]:
        """The explanation fields: ranks in each list, fused score, recency factor, weights; the summary starts by
        saying so when the memory is no longer current (``include_superseded`` or ``as_of`` returned it)."""
        parts = [] if self.memory.valid_to is None else [superseded_note(self.memory)]
        if self.bm25_rank is not None:
            parts.append(f"keyword rank {self.bm25_rank}")
        if self.vector_rank is not None:
            parts.append(f"vector rank {self.vector_rank} (cosine {self.similarity:.3f}, {self.closeness()})")
        if self.passage is not None:
            parts.append(f"passage {self.passage.seq + 1} of message #{self.passage.message_id} matched")
        if self.also:
            parts.append("folds in " + ", ".join(f"#{i}" for i in self.also) + " (same messages)")
        for old in self.supersedes:
            parts.append(f"supersedes #{old.id}, {_quote(old.content)}, from {_day(old)}")
        for other, reason in zip(self.conflicts, self.conflict_reasons, strict=False):
            parts.append(f"conflicts with #{other} ({reason})")
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
            "passage": None if self.passage is None else _passage_dict(self.passage),
            "shown_passages": [_passage_dict(p) for p in self.passages],
            "supersedes": [
                {
                    "id": m.id,
                    "content": m.content,
                    "from": _day(m),
                    "valid_to": None if m.valid_to is None else m.valid_to.isoformat(),
                }
                for m in self.supersedes
            ],
            "conflicts": [{"id": i, "reason": r} for i, r in zip(self.conflicts, self.conflict_reasons, strict=False)],
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


def superseded_note(memory: MemoryItem) -> str:
    """What a memory a later one superseded says of itself: "superseded by #3 on 2024-05-02, no longer current"."""
    by = "" if memory.superseded_by is None else f" by #{memory.superseded_by}"
    on = "" if memory.valid_to is None else f" on {memory.valid_to.date().isoformat()}"
    return f"superseded{by}{on}, no longer current"


def _quote(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return repr(line if len(line) <= limit else line[: limit - 1] + "…")


def _day(memory: MemoryItem) -> str:
    return (memory.event_at or memory.created_at).date().isoformat()


def _passage_dict(passage: Passage) -> dict[str, int]:
    return {
        "id": passage.id,
        "message_id": passage.message_id,
        "part": passage.seq + 1,
        "start": passage.start,
        "end": passage.end,
    }


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


K = TypeVar("K", bound=Hashable)  # what :func:`collapsed` ranks: memory ids, or keys


def hybrid_search(
    store: Store,
    user_id: str,
    query: str,
    now: datetime,
    params: SearchParams,
    where: MemoryFilter | None = None,
    embed_query: Callable[[str], tuple[np.ndarray, str]] | None = None,
) -> list[SearchHit]:
    """Best ``params.k`` results for ``query`` (memories, and passages of messages) with their explanation."""
    with store.reading(user_id):  # one view of the user's memories for the whole search
        return _search(store, user_id, query, now, params, where, embed_query)


def _search(
    store: Store,
    user_id: str,
    query: str,
    now: datetime,
    params: SearchParams,
    where: MemoryFilter | None,
    embed_query: Callable[[str], tuple[np.ndarray, str]] | None,
) -> list[SearchHit]:
    period = named_period(query, now)
    if period is not None and period.relative:  # "last week" said on another day meant another week
        query = period.cut_from(query)
    if period is not None and period.spelled:  # "16.01.2024" also matches "January 16, 2024"
        query = f"{query} {period.spelled}"
    query_vector, model, names = None, "", frozenset[str]()
    if params.mode is not SearchMode.KEYWORD and embed_query is not None:
        names = speaker_names(store, user_id)
        query_vector, model = query_vector_of(query, names, embed_query)
    found = _candidates(store, user_id, query, params, where, query_vector, model)
    if query_vector is not None and embed_query is not None:
        # a store may give the names it holds before the search's read of what changed (PostgreSQL sends that read
        # with the vector search): when they changed meanwhile, the query's vector may have too
        now_named = speaker_names(store, user_id)
        if now_named != names and without_speakers(query, now_named) != without_speakers(query, names):
            query_vector, model = query_vector_of(query, now_named, embed_query)
            found = _candidates(store, user_id, query, params, where, query_vector, model)
    if not found.fused:
        return []
    _load_units(store, user_id, found)
    _merge_turns(store, user_id, found)
    _drop_not_current(store, user_id, found, params)
    scored = _scores(found, params, now, period)
    order = sorted(scored, key=lambda key: (-scored[key][0], -found.fused[key], key))
    order = [key for key in order if scored[key][0] >= params.min_score]
    shows, messages, emptied = shown_by(
        store, user_id, query, order, found, params.k, params.include_superseded, params.as_of
    )
    order = [key for key in order if key not in emptied]
    chosen, folded = _collapsed(order, shows, params.k, found) if params.collapse else (order[: params.k], {})
    chosen = with_conflicting(store, user_id, chosen, shows, found, scored, params.k, params.include_superseded)
    shown_passages = _passages_to_show(store, user_id, chosen, shows, found, query_vector, model)
    shown = _Shown(shows, messages, shown_passages, frozenset(query_terms(topic_text(query))))
    return _hits(store, user_id, chosen, folded, shown, found, scored, params, period)


def _candidates(
    store: Store,
    user_id: str,
    query: str,
    params: SearchParams,
    where: MemoryFilter | None,
    query_vector: np.ndarray | None,
    model: str,
) -> Candidates:
    """Each list's best ``pool`` (BM25 and cosine over memories, and over passages), past the similarity floor,
    fused by reciprocal rank within each kind: a passage ranks against passages, a memory against memories.

    The passages' keyword list holds only passages of messages cut into several: a message the model reads whole
    has every word in its conversation memory's keyword entry already, and a second entry for it alone would
    only add a bias toward short turns (chit-chat that shares a name or a common word).  Its vector is its own:
    a turn's meaning, not diluted by the turn it answers."""
    found = Candidates()
    weights = (params.keyword_weight, params.vector_weight)
    topic = topic_text(query)  # a text that shares only "instead" or "anyway" with the query is not about it
    searched = [params.mode is not SearchMode.VECTOR and bool(topic.strip()), query_vector is not None]
    found.fused_max = sum(w for w, used in zip(weights, searched, strict=True) if used) / (params.rrf_k + 1)
    keywords, vectors = store.keyword_and_vector_search(
        user_id, topic if searched[0] else None, query_vector, model, limit=params.pool, where=where
    )
    for kind, keyword, vector in (("m", keywords[0], vectors[0]), ("p", keywords[1], vectors[1])):
        matched = {i for i, _ in keyword}
        vector = [(i, sim) for i, sim in vector if sim >= params.similarity_floor or i in matched]
        if kind == "p":
            keyword, vector = _one_per_message(store, user_id, keyword, vector, found)
        fused = fuse([[i for i, _ in keyword], [i for i, _ in vector]], params.rrf_k, list(weights))
        found.keyword.update({(kind, i): (rank, value) for rank, (i, value) in enumerate(keyword, start=1)})
        found.vector.update({(kind, i): (rank, sim) for rank, (i, sim) in enumerate(vector, start=1)})
        found.fused.update({(kind, i): value for i, value in fused.items()})
    return found


def _one_per_message(
    store: Store,
    user_id: str,
    keyword: list[tuple[int, float]],
    vector: list[tuple[int, float]],
    found: Candidates,
) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """The passage lists ranked by message: each message at the rank of its best passage, under one passage (the
    one its better list ranked first), so a long reply's many passages do not push other messages down."""
    loaded = {p.id: p for p in store.get_passages(user_id, {i for i, _ in [*keyword, *vector]})}
    found.loaded.update(loaded)
    best: dict[int, tuple[int, int]] = {}  # message id → (best rank in either list, passage id)
    firsts: list[dict[int, tuple[int, float]]] = []
    for ranked in (keyword, vector):
        first: dict[int, tuple[int, float]] = {}  # message id → (passage id, score), at its first place
        for i, score in ranked:
            passage = loaded.get(i)
            if passage is None or passage.message_id in first:
                continue
            first[passage.message_id] = (i, score)
            rank = len(first)
            if passage.message_id not in best or rank < best[passage.message_id][0]:
                best[passage.message_id] = (rank, i)
        firsts.append(first)
    return tuple(  # type: ignore[return-value]
        [(best[m][1], score) for m, (_, score) in first.items()] for first in firsts
    )


def _load_units(store: Store, user_id: str, found: Candidates) -> None:
    """Stream, time and sources of every candidate (a passage: its message, and its memory's stream and time)."""
    wanted = [i for kind, i in found.fused if kind == "p"]
    passages = {i: found.loaded[i] for i in wanted if i in found.loaded}
    passages.update({p.id: p for p in store.get_passages(user_id, [i for i in wanted if i not in passages])})
    memory_ids = [i for kind, i in found.fused if kind == "m"] + [p.memory_id for p in passages.values()]
    briefs, conflicts = store.memory_briefs_and_conflicts(user_id, memory_ids)
    found.briefs.update(briefs)  # a passage's memory that is no candidate itself is read here too (see _merge_turns)
    found.conflicts.update((c.id, c) for c in conflicts)  # what the results will say they conflict with
    found.asked.update(memory_ids)
    for key in list(found.fused):
        kind, ident = key
        passage = passages.get(ident) if kind == "p" else None
        brief = briefs.get(passage.memory_id if passage is not None else ident)
        if brief is None or (kind == "p" and passage is None):
            del found.fused[key]
            continue
        stream, when, sources, valid_to = brief
        found.valid_to[passage.memory_id if passage is not None else ident] = valid_to
        if passage is not None:
            found.units[key] = Unit(passage.memory_id, stream, when, (passage.message_id,), passage)
        else:
            found.units[key] = Unit(ident, stream, when, sources)


def _merge_turns(store: Store, user_id: str, found: Candidates) -> None:
    """A passage is a way to reach its message's own memory: each memory is ranked by the better of its own
    evidence and its message's passage (both fused the same way), and when the passage's is better the hit
    shows that turn (that passage) alone, not the exchange.  One memory, one candidate."""
    passages = sorted((key for key in found.units if key[0] == "p"), key=lambda key: -found.fused[key])
    found.passages = [p for key in passages if (p := found.units[key].passage) is not None]
    missing = {found.units[key].memory_id for key in passages} - {i for kind, i in found.units if kind == "m"}
    unread = [i for i in missing if i not in found.asked]  # their briefs came with the candidates' (one read)
    briefs = {**found.briefs, **(store.memory_briefs(user_id, unread) if unread else {})}
    for key in passages:
        unit, raw = found.units.pop(key), found.fused.pop(key)
        keyword, vector = found.keyword.pop(key, None), found.vector.pop(key, None)
        anchor = ("m", unit.memory_id)
        if anchor not in found.units:
            brief = briefs.get(unit.memory_id)
            if brief is None:
                continue
            found.units[anchor], found.fused[anchor] = Unit(unit.memory_id, *brief[:3]), 0.0
            found.valid_to[unit.memory_id] = brief.valid_to
        if raw > found.fused[anchor] and found.units[anchor].passage is None:
            found.holds[unit.memory_id] = found.units[anchor].sources
            found.units[anchor], found.fused[anchor] = unit, raw
            found.keyword.pop(anchor, None)
            found.vector.pop(anchor, None)
            if keyword is not None:
                found.keyword[anchor] = keyword
            if vector is not None:
                found.vector[anchor] = vector


def _drop_not_current(store: Store, user_id: str, found: Candidates, params: SearchParams) -> None:
    """Leave out what a later statement superseded (unless asked for: ``include_superseded``, or ``as_of``
    a time, which keeps what was current then and drops what came after)."""
    if params.include_superseded and params.as_of is None:
        return
    for key, unit in list(found.units.items()):
        ends = [found.valid_to.get(unit.memory_id)]
        if unit.passage is not None:
            ends.append(unit.passage.valid_to)
        if params.as_of is not None:
            gone = unit.when > params.as_of or any(e is not None and e <= params.as_of for e in ends)
        else:
            gone = any(e is not None for e in ends)
        if gone:
            del found.units[key], found.fused[key]


def _scores(
    found: Candidates, params: SearchParams, now: datetime, period: Period | None
) -> dict[Key, tuple[float, float, Weights]]:
    """``fused · (w_semantic + w_recency · recency)`` per stream (summaries weighed down): score, recency, weights."""
    scored: dict[Key, tuple[float, float, Weights]] = {}
    for key, fused_score in found.fused.items():
        unit = found.units[key]
        weights = params.stream_weights.get(unit.stream.value, DEFAULT_WEIGHTS)
        recency = recency_factor(unit.when, now, params.half_life_days, period)
        total = weights.semantic + weights.recency
        scale = (weights.semantic + weights.recency * recency) / total if total > 0 else 1.0
        if unit.stream in SUMMARY_STREAMS and unit.passage is None:
            scale *= params.summary_weight
        scored[key] = (fused_score / found.fused_max * scale if found.fused_max else 0.0, recency, weights)
    return scored


def _collapsed(
    order: Sequence[Key], shows: dict[Key, frozenset[int]], k: int, found: Candidates
) -> tuple[list[Key], dict[Key, list[Key]]]:
    """The best ``k`` candidates showing no message twice and no memory twice (see :func:`collapsed`); a
    candidate whose memory a better hit already stands for joins that hit instead of being listed again."""
    chosen, folded = collapsed(order, shows, len(order), {key: found.units[key].sources for key in order})
    kept: list[Key] = []
    by_memory: dict[int, Key] = {}
    for key in chosen:
        holder = by_memory.get(found.units[key].memory_id)
        if holder is not None:
            shows[holder] = shows[holder] | shows[key]
            folded.setdefault(holder, []).extend([key, *folded.pop(key, [])])
            continue
        if len(kept) == k:
            folded.pop(key, None)
            continue
        kept.append(key)
        by_memory[found.units[key].memory_id] = key
    return kept, folded


@dataclass(frozen=True)
class _Shown:
    """What the results show: each result's messages, the messages read, the passage shown of each long message,
    and the query's words (what an excerpt of a long turn keeps)."""

    shows: dict[Key, frozenset[int]]
    messages: dict[int, Message]
    passages: dict[int, Passage]
    words: frozenset[str]


def _hits(
    store: Store,
    user_id: str,
    chosen: Sequence[Key],
    folded: dict[Key, list[Key]],
    view: _Shown,
    found: Candidates,
    scored: dict[Key, tuple[float, float, Weights]],
    params: SearchParams,
    period: Period | None,
) -> list[SearchHit]:
    """The winners, loaded whole, each with the text it shows (excerpts of long messages, not the whole)."""
    shows, messages, passages = view.shows, view.messages, view.passages
    turns = _turns_of_notes(chosen, folded, shows, found)
    wanted_ids = [found.units[key].memory_id for key in chosen] + [found.units[t].memory_id for t in turns.values()]
    loaded, superseded = store.memories_and_superseded(user_id, wanted_ids)
    memories = {m.id: m for m in loaded}
    if params.as_of is not None:  # what was current then reads as it read then
        memories = {i: as_it_was(store, user_id, m, params.as_of) if m.user_edited else m for i, m in memories.items()}
    # a result says the conflicts of its own memory and of the messages it shows (their own memories)
    on_screen = {m for key in chosen for m in shows.get(key, ())}
    owners = {m: {p.memory_id for p in ps} for m, ps in found.passages_of(store, user_id, on_screen).items()}
    conflicts: dict[int, list[tuple[int, str]]] = {}
    for conflict in conflicts_of(store, user_id, {*memories, *(i for ids in owners.values() for i in ids)}, found):
        conflicts.setdefault(conflict.memory_id, []).append((conflict.other_memory_id, conflict.reason))
        conflicts.setdefault(conflict.other_memory_id, []).append((conflict.memory_id, conflict.reason))
    wanted = sorted(on_screen - messages.keys())
    messages.update({m.id: m for m in store.get_messages(user_id, wanted)} if wanted else {})
    hits = []
    listed = {found.units[key].memory_id for key in chosen}
    for key in chosen:
        unit = found.units[key]
        memory = memories.get(unit.memory_id)
        if memory is None:
            continue
        score, recency, weights = scored[key]
        b_rank, b_score = found.keyword.get(key, (None, None))
        v_rank, v_sim = found.vector.get(key, (None, None))
        shown = tuple(sorted(shows.get(key, ())))
        mine = {memory.id, *(i for m in shown for i in owners.get(m, ()))}
        said = dict.fromkeys((i, r) for own in sorted(mine) for i, r in conflicts.get(own, ()) if i != memory.id)
        also = tuple(dict.fromkeys(found.units[f].memory_id for f in folded.get(key, ()) if f in found.units))
        turn = turns.get(key)  # a note whose turn was found too shows the turn, and what the turn corrected
        corrected = superseded.get(memory.id, []) + (
            [] if turn is None else superseded.get(found.units[turn].memory_id, [])
        )
        corrected.sort(key=lambda old: old.stream is Stream.FACT)  # the turns it corrected, then their notes
        hits.append(
            SearchHit(
                memory,
                score,
                found.fused[key],
                b_rank,
                b_score,
                v_rank,
                v_sim,
                recency,
                weights,
                also=tuple(i for i in also if i not in listed),
                floor=params.similarity_floor,
                shown=shown,
                text=_text(memory, shown, view, unit) if turn is None else _text_of_turn(shown, view),
                period="" if period is None else period.label,
                passage=unit.passage,
                passages=tuple(passages[m] for m in shown if m in passages),
                supersedes=tuple(dict.fromkeys(corrected)),
                conflicts=tuple(i for i, _ in said),
                conflict_reasons=tuple(r for _, r in said),
            )
        )
    return hits


def _turns_of_notes(
    chosen: Sequence[Key], folded: Mapping[Key, Sequence[Key]], shows: Mapping[Key, frozenset[int]], found: Candidates
) -> dict[Key, Key]:
    """For each chosen fact drawn from one message (Your Story's note of who the person is: "I live in Lisbon
    now"), the candidate folded into it that shows that message in full, when the search found one: the note
    then shows the turn ("Actually, I moved: I live in Lisbon now, not Berlin."), not the clause alone."""
    turns: dict[Key, Key] = {}
    for key in chosen:
        unit = found.units[key]
        if unit.stream is not Stream.FACT or unit.passage is not None or len(unit.sources) != 1:
            continue
        for other in folded.get(key, ()):
            if (
                other in found.units
                and found.units[other].stream is not Stream.FACT
                and unit.sources[0] in shows.get(other, frozenset())
            ):
                turns[key] = other
                break
    return turns


def _text_of_turn(shown: Sequence[int], view: _Shown) -> str:
    """The turns a note shows, as a hit on them shows them (a long one by an excerpt of its passage)."""
    if not all(m in view.messages for m in shown):
        return ""
    return "\n".join(_line(view.messages[m], view.passages.get(m), view.words) for m in shown)


def _passages_to_show(
    store: Store,
    user_id: str,
    chosen: Sequence[Key],
    shows: dict[Key, frozenset[int]],
    found: Candidates,
    query_vector: np.ndarray | None,
    model: str,
) -> dict[int, Passage]:
    """For each shown message cut into several passages: the one to show.  A passage hit shows itself; otherwise
    the message's best-ranked passage among the candidates, else its current passage closest to the query."""
    shown = {m for key in chosen for m in shows.get(key, ())}
    if not shown:
        return {}
    every = found.passages_of(store, user_id, shown)
    cut = {m: [p for p in ps if p.is_current] for m, ps in every.items() if len(ps) > 1}
    best: dict[int, Passage] = {}
    for passage in found.passages:
        if passage.message_id in cut and passage.message_id not in best and passage.is_current:
            best[passage.message_id] = passage
    for key in chosen:
        own = found.units[key].passage
        if own is not None and own.message_id in cut:
            best[own.message_id] = own  # a passage hit shows itself
    rest = [p for m, ps in cut.items() if m not in best for p in ps]
    if rest and query_vector is not None:
        vectors = store.passage_vectors_by_id(user_id, model, [p.id for p in rest])
        query = query_vector / max(float(np.linalg.norm(query_vector)), 1e-12)
        closeness = {p.id: float(np.dot(vectors[p.id], query)) for p in rest if p.id in vectors}
        for p in sorted(rest, key=lambda p: -closeness.get(p.id, -2.0)):
            best.setdefault(p.message_id, p)
    for p in rest:
        best.setdefault(p.message_id, p)
    return best


def as_it_was(store: Store, user_id: str, memory: MemoryItem, when: datetime) -> MemoryItem:
    """``memory`` with the text it had at ``when``: an edit made after it is read back from the history (an
    ``as_of`` search showed the text of a later edit as what was current then)."""
    for event in store.memory_events(user_id, memory.id):
        if event.kind is EventKind.EDITED and event.created_at > when and event.old_text != event.new_text:
            return replace(memory, content=event.old_text)
    return memory


def _text(memory: MemoryItem, shown: Sequence[int], view: _Shown, unit: Unit) -> str:
    """What a hit shows: its memory's text, or the turns it shows, each long message by an excerpt of one passage
    of it, and a turn longer than an excerpt by its excerpt (see :mod:`narrative.read.excerpts`); a memory edited
    by hand shows the edit."""
    if memory.user_edited:
        return memory.content  # the person's words are the memory now, not the turns the machine read
    messages, passages = view.messages, view.passages
    long = memory.stream is Stream.CONVERSATION and any(
        m in messages and more_tokens_than(messages[m].content, EXCERPT_TOKENS) for m in shown
    )
    if unit.passage is None and not long and not any(m in passages for m in shown):
        return shown_text(memory, shown, messages)
    if not all(m in messages for m in shown):
        return memory.content
    return "\n".join(_line(messages[m], passages.get(m), view.words) for m in shown)


def _line(message: Message, passage: Passage | None, words: Collection[str] = ()) -> str:
    """A turn as shown: the whole turn, or an excerpt of it (of one passage of it, with a pointer to the whole
    message) when it is longer than an excerpt: the pieces that hold the most of the query's ``words``."""
    if passage is None:
        return turn_line(replace(message, content=excerpt_of(message.content, words)))
    piece = excerpt_of(message.content[passage.start : passage.end], words)
    who = f"{message.speaker} " if message.speaker else ""
    return f"{who}(message #{message.id}, part {passage.seq + 1}): {piece}"


def collapsed(
    order: Sequence[K], shows: dict[K, frozenset[int]], k: int, sources: Mapping[K, Sequence[int]] | None = None
) -> tuple[list[K], dict[K, list[K]]]:
    """The best ``k`` ids such that no message is shown twice, and what each kept id absorbed.

    Walks the ranking once.  An id whose messages are all shown by better ids is folded into the best of them
    instead of being listed again; an id that shares only some is kept and shows only its new messages
    (``shows`` is updated in place).  A summary shows no message; it is folded only when every one of its
    ``sources`` is already on screen, since then it adds nothing the reader has not got.
    """
    chosen: list[K] = []
    folded: dict[K, list[K]] = {}
    owner: dict[int, K] = {}
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
