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
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from narrative.store.porter import stem

K1 = 1.2
B = 0.75
Hits = list[tuple[int, float]]

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


@dataclass
class _Postings:
    slots: array[int] = field(default_factory=lambda: array("i"))
    counts: array[float] = field(default_factory=lambda: array("f"))
    live: int = 0  # document frequency among live memories


class _Shard:
    """One user's memories: slots (dense row numbers), their lengths and the postings."""

    def __init__(self) -> None:
        self.slot_of: dict[int, int] = {}
        self.ids = array("q")
        self.lengths = array("f")
        self.alive = bytearray()
        self.doc_terms: list[tuple[str, ...]] = []
        self.postings: dict[str, _Postings] = {}
        self.live = 0
        self.total_length = 0.0
        self.dead = 0

    def add(self, memory_id: int, text: str) -> None:
        tokens = words(text)
        counts = Counter(stem(word) for word in tokens if word not in QUERY_STOPWORDS)
        slot = len(self.ids)
        self.slot_of[memory_id] = slot
        self.ids.append(memory_id)
        self.lengths.append(float(len(tokens)))
        self.alive.append(1)
        self.doc_terms.append(tuple(counts))
        for term, count in counts.items():
            posting = self.postings.get(term)
            if posting is None:
                posting = self.postings[term] = _Postings()
            posting.slots.append(slot)
            posting.counts.append(float(count))
            posting.live += 1
        self.live += 1
        self.total_length += len(tokens)

    def remove(self, memory_id: int) -> bool:
        slot = self.slot_of.pop(memory_id, None)
        if slot is None:
            return False
        self.alive[slot] = 0
        for term in self.doc_terms[slot]:
            self.postings[term].live -= 1
        self.doc_terms[slot] = ()
        self.live -= 1
        self.total_length -= self.lengths[slot]
        self.dead += 1
        return True

    def compact(self) -> None:
        """Drop dead slots from every posting list (after many removals)."""
        keep = np.frombuffer(self.alive, dtype=np.uint8).astype(bool)
        new_slot = np.cumsum(keep) - 1
        for term in list(self.postings):
            posting = self.postings[term]
            slots = np.frombuffer(posting.slots, dtype=np.int32)
            counts = np.frombuffer(posting.counts, dtype=np.float32)
            mask = keep[slots]
            if not mask.any():
                del self.postings[term]
                continue
            posting.slots = array("i", new_slot[slots[mask]].astype(np.int32).tobytes())
            posting.counts = array("f", counts[mask].tobytes())
        ids = np.frombuffer(self.ids, dtype=np.int64)[keep]
        self.ids = array("q", ids.tobytes())
        self.lengths = array("f", np.frombuffer(self.lengths, dtype=np.float32)[keep].tobytes())
        self.alive = bytearray(b"\x01" * len(ids))
        self.doc_terms = [t for t, k in zip(self.doc_terms, keep, strict=True) if k]
        self.slot_of = {int(memory_id): slot for slot, memory_id in enumerate(ids)}
        self.dead = 0

    def scores(self, query: Sequence[str]) -> npt.NDArray[np.float32]:
        """BM25 of every slot for the query terms (0 where nothing matches)."""
        total = np.zeros(len(self.ids), dtype=np.float32)
        if not self.live:
            return total
        lengths = np.frombuffer(self.lengths, dtype=np.float32)
        average = self.total_length / self.live
        for term in query:
            posting = self.postings.get(term)
            if posting is None or posting.live <= 0:
                continue
            idf = math.log(1.0 + (self.live - posting.live + 0.5) / (posting.live + 0.5))
            slots = np.frombuffer(posting.slots, dtype=np.int32)
            counts = np.frombuffer(posting.counts, dtype=np.float32)
            norm = K1 * (1.0 - B + B * lengths[slots] / average)
            total[slots] += idf * counts * (K1 + 1.0) / (counts + norm)
        if self.dead:
            total *= np.frombuffer(self.alive, dtype=np.uint8)
        return total


class KeywordIndex:
    """Per-user BM25 over memory texts.  One lock guards every change and search."""

    def __init__(self) -> None:
        self._shards: dict[str, _Shard] = {}
        self._user_of: dict[int, str] = {}
        self._lock = threading.RLock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._user_of)

    def __contains__(self, memory_id: object) -> bool:
        with self._lock:
            return memory_id in self._user_of

    def upsert(self, rows: Iterable[tuple[int, str, str]]) -> None:
        """Add or replace ``(memory id, user id, text)`` rows."""
        with self._lock:
            for memory_id, user_id, text in rows:
                self._remove_one(memory_id)
                self._shards.setdefault(user_id, _Shard()).add(memory_id, text)
                self._user_of[memory_id] = user_id

    def remove(self, memory_ids: Iterable[int]) -> None:
        with self._lock:
            for memory_id in memory_ids:
                self._remove_one(memory_id)

    def _remove_one(self, memory_id: int) -> None:
        user_id = self._user_of.pop(memory_id, None)
        if user_id is None:
            return
        shard = self._shards[user_id]
        shard.remove(memory_id)
        if shard.dead > max(1024, shard.live):
            shard.compact()

    def search(self, user_id: str, query: Sequence[str], k: int, allowed: AbstractSet[int] | None = None) -> Hits:
        """The ``k`` best (memory id, BM25) pairs for stemmed ``query`` terms, best first (ties: smaller id)."""
        with self._lock:
            shard = self._shards.get(user_id)
            if shard is None or k <= 0 or not query:
                return []
            scores = shard.scores(query)
            all_ids = np.frombuffer(shard.ids, dtype=np.int64)
            if allowed is None:  # one partial sort over every slot, then drop the non-matches
                candidates = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
                candidates = candidates[scores[candidates] > 0]
            else:
                candidates = np.flatnonzero(scores)
                keep = np.isin(all_ids[candidates], np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
                candidates = candidates[keep]
                if k < len(candidates):
                    candidates = candidates[np.argpartition(-scores[candidates], k - 1)[:k]]
            values, ids = scores[candidates], all_ids[candidates]
            order = np.lexsort((ids, -values))
            return [(int(ids[i]), float(values[i])) for i in order]
