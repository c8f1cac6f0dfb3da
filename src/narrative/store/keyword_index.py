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

import math
import re
import threading
import unicodedata
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet

import numpy as np
import numpy.typing as npt

from narrative.store.id_map import MISSING, IdMap
from narrative.store.porter import stem

K1 = 1.2
B = 0.75
Hits = list[tuple[int, float]]
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


class _Postings:
    """One term's rows (slots) and how often the term occurs in each."""

    __slots__ = ("counts", "slots")

    def __init__(self) -> None:
        self.slots = array("i")
        self.counts = array("H")  # a term's occurrences in one text, capped at 65,535


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
        ids = np.frombuffer(self.ids, dtype=np.int64)[keep]
        self.ids = array("q", ids.tobytes())
        self.lengths = array("f", np.frombuffer(self.lengths, dtype=np.float32)[keep].tobytes())
        self.alive = bytearray(b"\x01" * len(ids))
        self.dead = 0
        return ids.astype(np.int64), np.arange(len(ids), dtype=np.int64)

    def scores(self, query: Sequence[str]) -> tuple[npt.NDArray[np.float32], list[tuple[float, npt.NDArray[np.int32]]]]:
        """BM25 of every slot for the query terms (0 where nothing matches), and (idf, slots) of each term found."""
        total = np.zeros(len(self.ids), dtype=np.float32)
        found: list[tuple[float, npt.NDArray[np.int32]]] = []
        if not self.live:
            return total, found
        lengths = np.frombuffer(self.lengths, dtype=np.float32)
        alive = np.frombuffer(self.alive, dtype=np.uint8)
        average = self.total_length / self.live
        for term in query:
            posting = self.postings.get(term)
            if posting is None:
                continue
            slots = np.frombuffer(posting.slots, dtype=np.int32)
            df = len(slots) if not self.dead else int(np.count_nonzero(alive[slots]))
            if df <= 0:
                continue
            idf = math.log(1.0 + (self.live - df + 0.5) / (df + 0.5))
            counts = np.frombuffer(posting.counts, dtype=np.uint16).astype(np.float32)
            part = lengths[slots]  # in place from here: a posting list may hold a quarter of a million rows
            part *= K1 * B / average
            part += K1 * (1.0 - B)
            part += counts
            np.divide(counts, part, out=part)  # tf / (tf + k1 (1 - b + b len / avg))
            part *= idf * (K1 + 1.0)
            total[slots] += part
            found.append((idf, slots))
        if self.dead:
            total *= alive
        return total, found


def _best_slots(
    scores: npt.NDArray[np.float32], found: list[tuple[float, npt.NDArray[np.int32]]], k: int
) -> npt.NDArray[np.int64]:
    """Slots that may hold the ``k`` best positive scores (all of those, and some ties or more besides).

    Any ``k`` rows' scores bound the k-th best score from below; rows of the rarest term with at least
    ``k`` rows score high, so a few thousand of them give a floor that few rows reach.
    """
    lists = sorted((slots for _, slots in found if len(slots) >= k), key=len)
    if lists:
        sample = scores[lists[0][:: max(1, len(lists[0]) // (32 * k))]]
        sample = sample[sample > 0]
        if len(sample) >= k:
            floor = np.partition(sample, len(sample) - k)[len(sample) - k]
            return np.flatnonzero(scores >= floor)
    return np.flatnonzero(scores > 0)


def _top(
    candidates: npt.NDArray[np.int64], scores: npt.NDArray[np.float32], ids: npt.NDArray[np.int64], k: int
) -> Hits:
    """The ``k`` best candidates, best first, ties broken by the smaller id (however many rows tie)."""
    values = scores[candidates]
    if k < len(candidates):
        kth = np.partition(values, len(values) - k)[len(values) - k]
        above, tied = candidates[values > kth], candidates[values == kth]
        need = k - len(above)
        if len(tied) > need:  # keep the tied rows with the smallest ids
            tied = tied[np.argpartition(ids[tied], need - 1)[:need]]
        candidates = np.concatenate([above, tied])
        values = scores[candidates]
    chosen = ids[candidates]
    order = np.lexsort((chosen, -values))
    return [(int(chosen[i]), float(values[i])) for i in order]


class KeywordIndex:
    """Per-user BM25 over texts keyed by int64 ids.  One lock guards every change and search."""

    def __init__(self) -> None:
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
        """Add or replace ``(id, user id, text)`` rows."""
        with self._lock:
            for row_id, user_id, text in rows:
                self._remove_one(row_id)
                shard = self._shard(user_id)
                slot = shard.add(row_id, text)
                self._where.set(row_id, shard.number << _SLOT_BITS | slot)

    def remove(self, row_ids: Iterable[int]) -> None:
        with self._lock:
            for row_id in row_ids:
                self._remove_one(row_id)

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
            scores, found = shard.scores(query)
            all_ids = np.frombuffer(shard.ids, dtype=np.int64)
            if allowed is None:
                candidates = _best_slots(scores, found, k)
            else:
                places = self._where.get_many(np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
                candidates = places[(places != MISSING) & ((places >> _SLOT_BITS) == shard.number)] & _SLOT_MASK
                candidates = candidates[scores[candidates] > 0]
            return _top(candidates.astype(np.int64), scores, all_ids, k)
