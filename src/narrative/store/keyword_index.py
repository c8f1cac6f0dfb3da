"""The in-process BM25 index the SQLite store keeps beside FTS5 for memory search.

FTS5 scores every row that matches any query term, so a query made of common
words costs tens of milliseconds at 100k memories.  This index answers the
same question from postings held in memory: one numpy gather-and-add per query
term, then a partial sort.  As with the vector index the database is the
source of truth: the store feeds ``(id, user, text)`` rows in, from the file
at first use and then from the ``memory_changes`` log, and the index can be
thrown away and rebuilt at any time.  This class never touches SQLite.

Terms are made the way the FTS5 table makes them (``porter unicode61``):
lower-cased, diacritics removed, split on anything that is not a letter or a
digit, Porter-stemmed.  Stopwords count towards a memory's length but get no
postings, because queries never ask for them.

Scoring is Okapi BM25 (k1 = 1.2, b = 0.75) with the always-positive idf
``ln(1 + (N - df + 0.5) / (df + 0.5))``, computed per user: one user's memories
never change the ranking of another's.

Memory: a row costs its postings (4 + 2 bytes per distinct term), its length,
id and liveness (13 bytes) and one :class:`~narrative.store.id_map.IdMap` entry
(16 bytes); no text and no per-row Python object is kept.  The ids are any int64
ids of one id space (memories, or another table's rows in a second instance).
The top ``k`` of a million scores is found without sorting them: the k-th best
score among one posting list's rows is a lower bound of the k-th best overall,
so only the rows at or above it are ranked.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet

import numpy as np
import numpy.typing as npt

from narrative.store.filters import MemoryFilter
from narrative.store.id_map import MISSING, IdMap
from narrative.store.keyword_topk import Hits, Layout, Scratch, idf, layouts_of, part, pruned_top, top
from narrative.store.porter import stem

_SLOT_BITS = 32  # an IdMap value: shard number << _SLOT_BITS | slot
_SLOT_MASK = (1 << _SLOT_BITS) - 1

_TOKEN = re.compile(r"[^\W_]+")
QUERY_STOPWORDS = frozenset(
    """a about after again all am an and any are as at be been before being both but by can could did do does
    doing for from had has have having he her here hers him his how i if in into is it its just me more most my
    no nor not of off on once only or other our ours out over own same she should so some such than that the
    their theirs them then there these they this those through to too under until up very was we were what
    when where which while who whom why will with would you your yours""".split()
)


def _fold(text: str) -> str:
    """Lower case without diacritics (FTS5's ``remove_diacritics``)."""
    text = text.lower()
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def words(text: str) -> list[str]:
    """The text's tokens as FTS5's unicode61 tokenizer makes them (before stemming)."""
    return _TOKEN.findall(_fold(text))


def terms(text: str) -> list[str]:
    """Every token of ``text``, stemmed (stopwords included): what a memory's length counts."""
    return [stem(word) for word in words(text)]


def query_terms(text: str) -> list[str]:
    """The distinct stemmed content words of a query (all words when every one is a stopword)."""
    tokens = words(text)
    content = [w for w in tokens if w not in QUERY_STOPWORDS] or tokens
    return list(dict.fromkeys(stem(w) for w in content))


def keyword_request(
    query: str, limit: int, where: MemoryFilter | None, matching: Callable[[MemoryFilter], set[int]]
) -> tuple[list[str], set[int] | None] | None:
    """A keyword search's terms and the memory ids its filter allows (None: no filter), or None when nothing can
    match: no searchable term, no room (``limit`` ≤ 0), or a filter that allows no memory."""
    terms = query_terms(query)
    if not terms or limit <= 0:
        return None
    allowed = None if where is None or where.is_open else matching(where)
    if allowed is not None and not allowed:
        return None
    return terms, allowed


#: A filtered search first ranks this many times ``limit`` hits without the filter (at least ``_FIRST_WINDOW``),
#: then four times as many, up to ``_LAST_WINDOW``; past that it reads every id the filter allows.
_WIDEN = 4
_FIRST_WINDOW = 64
_LAST_WINDOW = 4096


def search_within(
    search: Callable[[int, set[int] | None], list[tuple[int, float]]],
    limit: int,
    allowed_among: Callable[[list[int]], set[int]],
    allowed_all: Callable[[], set[int]],
) -> list[tuple[int, float]]:
    """The best ``limit`` hits a filter allows, the same as ``search(limit, allowed_all())`` gives.

    Reading every id a filter allows costs a row per memory it allows: the write path's search of current
    conversation memories read all of a user's (every turn of a 1,000-message conversation read the ids of
    the ones before it, and a user with 100,000 memories read 100,000 ids a turn).  Instead the search ranks a
    window of hits without the filter and asks the filter about those ids only (``allowed_among``).  Hits come
    best first with ties broken by the smaller id, filtered or not, so the first ``limit`` allowed hits of the
    window are the answer once there are ``limit`` of them, or once the window held every hit there is.
    Otherwise the window grows; a filter that allows too few of the best hits is read whole after all.
    """
    window = max(limit * _WIDEN, _FIRST_WINDOW)
    while window <= _LAST_WINDOW:
        hits = search(window, None)
        allowed = allowed_among([i for i, _ in hits]) if hits else set()
        kept = [hit for hit in hits if hit[0] in allowed]
        if len(kept) >= limit or len(hits) < window:
            return kept[:limit]
        window *= _WIDEN
    every = allowed_all()
    return search(limit, every) if every else []


class _Postings:
    """One term's rows (slots, ascending) and how often the term occurs in each."""

    __slots__ = ("counts", "df_at", "layout", "slots")

    def __init__(self) -> None:
        self.slots = array("i")
        self.counts = array("H")  # a term's occurrences in one text, capped at 65,535
        self.layout: Layout | None = None  # kept for long lists: the rows grouped by length bucket
        self.df_at = (-1, 0, 0)  # (shard removals, rows) when the live rows were counted, and their number


class _Shard:
    """One user's rows: slots (dense row numbers), their lengths, liveness and the postings."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.ids = array("q")
        self.lengths = array("f")
        self.alive = bytearray()
        self.postings: dict[str, _Postings] = {}
        self.live = 0
        self.total_length = 0.0
        self.dead = 0
        self.removals = 0  # ever: a posting's count of live rows is good while this stays the same
        self.scratch = Scratch(0)  # per-slot work space of the pruned search

    def add(self, row_id: int, text: str) -> int:
        """Index a text; returns its slot."""
        tokens = words(text)
        counts = Counter(stem(word) for word in tokens if word not in QUERY_STOPWORDS)
        slot = len(self.ids)
        self.ids.append(row_id)
        self.lengths.append(float(len(tokens)))
        self.alive.append(1)
        for term, count in counts.items():
            posting = self.postings.get(term)
            if posting is None:
                posting = self.postings[term] = _Postings()
            posting.slots.append(slot)
            posting.counts.append(min(count, 65_535))
        self.live += 1
        self.total_length += len(tokens)
        return slot

    def remove(self, slot: int) -> None:
        self.alive[slot] = 0
        self.live -= 1
        self.total_length -= self.lengths[slot]
        self.dead += 1
        self.removals += 1

    def compact(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Drop dead slots from every posting list (after many removals); (ids, new slots) of the live rows."""
        keep = np.frombuffer(self.alive, dtype=np.uint8).astype(bool)
        new_slot = np.cumsum(keep) - 1
        for term in list(self.postings):
            posting = self.postings[term]
            slots = np.frombuffer(posting.slots, dtype=np.int32)
            counts = np.frombuffer(posting.counts, dtype=np.uint16)
            mask = keep[slots]
            if not mask.any():
                del self.postings[term]
                continue
            posting.slots = array("i", new_slot[slots[mask]].astype(np.int32).tobytes())
            posting.counts = array("H", counts[mask].tobytes())
            posting.layout = None
        ids = np.frombuffer(self.ids, dtype=np.int64)[keep]
        self.ids = array("q", ids.tobytes())
        self.lengths = array("f", np.frombuffer(self.lengths, dtype=np.float32)[keep].tobytes())
        self.alive = bytearray(b"\x01" * len(ids))
        self.dead = 0
        self.removals += 1
        self.scratch = Scratch(0)
        return ids.astype(np.int64), np.arange(len(ids), dtype=np.int64)

    def weighted(self, query: Sequence[str]) -> list[tuple[float, _Postings]]:
        """(idf, postings) of each query term some live row holds, in query order."""
        found: list[tuple[float, _Postings]] = []
        if not self.live:
            return found
        for term in query:
            posting = self.postings.get(term)
            if posting is None:
                continue
            df = self._live_rows(posting)
            if df > 0:
                found.append((idf(self.live, df), posting))
        return found

    def _live_rows(self, posting: _Postings) -> int:
        if not self.dead:
            return len(posting.slots)
        removals, rows, df = posting.df_at
        if removals != self.removals or rows != len(posting.slots):
            alive = np.frombuffer(self.alive, dtype=np.uint8)
            df = int(np.count_nonzero(alive[np.frombuffer(posting.slots, dtype=np.int32)]))
            posting.df_at = (self.removals, len(posting.slots), df)
        return df

    @property
    def average(self) -> float:
        return self.total_length / self.live

    def scores(self, found: list[tuple[float, _Postings]]) -> npt.NDArray[np.float32]:
        """BM25 of every slot (0 where nothing matches, and for dead rows)."""
        total = np.zeros(len(self.ids), dtype=np.float32)
        lengths = np.frombuffer(self.lengths, dtype=np.float32)
        for weight, posting in found:
            slots = np.frombuffer(posting.slots, dtype=np.int32)
            counts = np.frombuffer(posting.counts, dtype=np.uint16)
            total[slots] += part(lengths.take(slots), counts, self.average, weight)
        if self.dead:
            total *= np.frombuffer(self.alive, dtype=np.uint8)
        return total

    def scores_of(self, found: list[tuple[float, _Postings]], slots: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """BM25 of the given slots (ascending) alone, looked up in each posting list: the same values as
        :meth:`scores`."""
        total = np.zeros(len(slots), dtype=np.float32)
        lengths = np.frombuffer(self.lengths, dtype=np.float32)
        for weight, posting in found:
            held = np.frombuffer(posting.slots, dtype=np.int32)
            at = np.minimum(np.searchsorted(held, slots), len(held) - 1)
            hit = held[at] == slots
            counts = np.frombuffer(posting.counts, dtype=np.uint16)[at[hit]]
            total[hit] += part(lengths[slots[hit]], counts, self.average, weight)
        total *= np.frombuffer(self.alive, dtype=np.uint8)[slots]
        return total

    def pruned(self, found: list[tuple[float, _Postings]], k: int, keep: npt.NDArray[np.bool_], keep_from: int) -> Hits:
        """The top ``k`` by scoring length buckets, best bound first (see :mod:`keyword_topk`)."""
        lengths = np.frombuffer(self.lengths, dtype=np.float32)
        terms = [(weight, layouts_of(posting, lengths, keep_from)) for weight, posting in found]
        if len(self.scratch.scores) < len(self.ids):
            self.scratch = Scratch(len(self.ids) + len(self.ids) // 8)
        ids = np.frombuffer(self.ids, dtype=np.int64)
        return pruned_top(terms, lengths, keep, self.scratch, self.average, ids, k)


def _best_slots(scores: npt.NDArray[np.float32], found: list[tuple[float, _Postings]], k: int) -> npt.NDArray[np.int64]:
    """Slots that may hold the ``k`` best positive scores (all of those, and some ties or more besides).

    Any ``k`` rows' scores bound the k-th best score from below; rows of the rarest term with at least
    ``k`` rows score high, so a few thousand of them give a floor that few rows reach.
    """
    lists = sorted((np.frombuffer(p.slots, dtype=np.int32) for _, p in found if len(p.slots) >= k), key=len)
    if lists:
        sample = scores[lists[0][:: max(1, len(lists[0]) // (32 * k))]]
        sample = sample[sample > 0]
        if len(sample) >= k:
            floor = np.partition(sample, len(sample) - k)[len(sample) - k]
            return np.flatnonzero(scores >= floor)
    return np.flatnonzero(scores > 0)


class KeywordIndex:
    """Per-user BM25 over texts keyed by int64 ids.  One lock guards every change and search."""

    def __init__(self, prune_from: int = 20_000, keep_layouts_from: int = 2_048) -> None:
        self.prune_from = prune_from  # query postings from which whole length buckets are skipped
        self.keep_layouts_from = keep_layouts_from  # a posting list this long keeps its rows grouped by length
        self._shards: dict[str, _Shard] = {}
        self._numbered: list[_Shard | None] = []
        self._where = IdMap()  # id -> shard number << 32 | slot
        self._lock = threading.RLock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._where)

    def __contains__(self, row_id: object) -> bool:
        with self._lock:
            return row_id in self._where

    def upsert(self, rows: Iterable[tuple[int, str, str]]) -> None:
        """Add or replace ``(id, user id, text)`` rows (an id given twice: its last row).

        The old rows go first, then the new ones, and their places are recorded in one call: an id below the
        highest held is merged in with a sort of the whole map, and rows in no order (a user loaded from a
        database table) would sort it once a row."""
        latest = {int(row_id): (user_id, text) for row_id, user_id, text in rows}
        with self._lock:
            for row_id in latest:
                self._remove_one(row_id)  # may compact a shard: only rows already placed move
            places = [self._add_one(row_id, user_id, text) for row_id, (user_id, text) in latest.items()]
            self._where.set_many(
                np.fromiter(latest, dtype=np.int64, count=len(latest)), np.asarray(places, dtype=np.int64)
            )

    def _add_one(self, row_id: int, user_id: str, text: str) -> int:
        shard = self._shard(user_id)
        return shard.number << _SLOT_BITS | shard.add(row_id, text)

    def remove(self, row_ids: Iterable[int]) -> None:
        with self._lock:
            for row_id in row_ids:
                self._remove_one(row_id)

    def drop_user(self, user_id: str) -> int:
        """Forget every row of one user at once (their shard goes whole); returns how many rows went."""
        with self._lock:
            shard = self._shards.pop(user_id, None)
            if shard is None:
                return 0
            alive = np.frombuffer(shard.alive, dtype=np.uint8).astype(bool)
            ids = np.frombuffer(shard.ids, dtype=np.int64)[alive]
            self._where.pop_many(ids.tolist())
            self._numbered[shard.number] = None
            return int(ids.size)

    def _shard(self, user_id: str) -> _Shard:
        shard = self._shards.get(user_id)
        if shard is None:
            number = next((i for i, s in enumerate(self._numbered) if s is None), len(self._numbered))
            shard = _Shard(number)
            if number == len(self._numbered):
                self._numbered.append(shard)
            else:
                self._numbered[number] = shard
            self._shards[user_id] = shard
        return shard

    def _remove_one(self, row_id: int) -> None:
        place = self._where.pop(int(row_id))
        if place == MISSING:
            return
        shard = self._numbered[place >> _SLOT_BITS]
        assert shard is not None
        shard.remove(place & _SLOT_MASK)
        if shard.live == 0:
            del self._shards[next(u for u, s in self._shards.items() if s is shard)]
            self._numbered[shard.number] = None
        elif shard.dead > max(1024, shard.live):
            ids, slots = shard.compact()
            self._where.set_many(ids, shard.number << _SLOT_BITS | slots)

    def search(self, user_id: str, query: Sequence[str], k: int, allowed: AbstractSet[int] | None = None) -> Hits:
        """The ``k`` best (id, BM25) pairs for stemmed ``query`` terms, best first (ties: smaller id)."""
        with self._lock:
            shard = self._shards.get(user_id)
            if shard is None or k <= 0 or not query:
                return []
            found = shard.weighted(query)
            if not found:
                return []
            ids = np.frombuffer(shard.ids, dtype=np.int64)
            postings = sum(len(posting.slots) for _, posting in found)
            if allowed is not None:
                places = self._where.get_many(np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
                slots = np.unique(places[(places != MISSING) & ((places >> _SLOT_BITS) == shard.number)] & _SLOT_MASK)
                if len(slots) * 16 < postings or postings < self.prune_from:  # score the allowed rows alone
                    scores = shard.scores_of(found, slots)
                    return top(slots[scores > 0], scores[scores > 0], ids, k)
                keep = np.zeros(len(ids), dtype=bool)
                keep[slots] = True
                keep &= np.frombuffer(shard.alive, dtype=np.uint8).view(bool)
                return shard.pruned(found, k, keep, self.keep_layouts_from)
            if postings < self.prune_from:
                scores = shard.scores(found)
                candidates = _best_slots(scores, found, k).astype(np.int64)
                return top(candidates, scores[candidates], ids, k)
            keep = np.frombuffer(shard.alive, dtype=np.uint8).view(bool)
            return shard.pruned(found, k, keep, self.keep_layouts_from)
