"""Noun phrases: a name a person would give a topic ("Bed measurements", "Sister's wedding", "Garden app").

A phrase is a run of content words as written (no stopwords, pronouns, weekdays, verbs in -ed, or filler in it;
punctuation ends it).  The phrase that names a text's topic is the one holding the most of its topic tags,
the earliest on a tie, cut to its last words (English puts the head noun last: "the raised garden beds" →
"Raised garden beds").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from narrative.text import patterns as P
from narrative.text.words import FILLER_WORDS

__all__ = ["naming_phrase", "phrases"]

_PIECE = re.compile(r"[A-Za-z][A-Za-z'’-]*[A-Za-z]|[A-Za-z]|\S")
#: Verbs a run of content words often starts with ("send the bed measurements" is about the measurements).
_VERBS = frozenset(
    """want wants need needs plan plans planning go going use using send sending think make making get getting like
    love try trying work works working buy call tell ask say know see look looking take give come find keep start
    help let feel mean put set move bring write read meet talk remember forget choose pick decide deciding
    wonder hope guess""".split()
)


def _word(piece: str) -> str | None:
    """The key of a content word (None for anything that ends a phrase)."""
    low = piece.lower().replace("’", "'")
    low = low[:-2] if low.endswith("'s") else low
    if not low[:1].isalpha() or low in FILLER_WORDS or low in _VERBS or low in ("let's", "i'm", "it's"):
        return None
    return P.tag_key(low)


def phrases(text: str) -> list[list[tuple[str, str]]]:
    """The runs of content words of ``text``, each word as (surface form, key)."""
    runs: list[list[tuple[str, str]]] = [[]]
    for piece in _PIECE.findall(text):
        key = _word(piece)
        if key is None:
            if runs[-1]:
                runs.append([])
            continue
        runs[-1].append((piece, key))
    return [run for run in runs if run]


def naming_phrase(text: str, tags: Iterable[str], words: int = 3) -> str | None:
    """The phrase of ``text`` that holds the most topic words of ``tags`` (at most ``words`` words, capitalised
    as a name), or None when no phrase holds any.  On a tie the earliest phrase wins, and within a phrase the
    window that ends latest (its head noun)."""
    wanted = {k for tag in tags for w in P.words(tag) if (k := P.tag_key(w.lower())) is not None}
    candidates = [
        (len({key for _, key in run[start : start + words]} & wanted), -index, start, run[start : start + words])
        for index, run in enumerate(phrases(text))
        for start in range(max(1, len(run) - words + 1))
    ]
    if not candidates:
        return None
    score, _, _, window = max(candidates, key=lambda c: c[:3])
    if score == 0:
        return None
    name = " ".join(surface for surface, _ in window)
    return name[:1].upper() + name[1:]
