"""Word keys (the unit of overlap between two texts) and verbs' past forms."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from narrative.text import patterns as P

__all__ = ["FILLER_WORDS", "new_words", "past_forms", "restated_in", "topic_text", "word_keys"]

#: Words that carry no topic of their own (discourse words, hedges, fillers): a text sharing only these with a
#: query is not about it ("instead", "actually", "anyway"), so they are no keyword evidence for search.
FILLER_WORDS = frozenset(
    """instead also actually really maybe perhaps probably yet even already anyway anyhow though although however
    rather quite okay ok yes yeah yep nope please thanks thank sure just basically literally somehow something
    anything everything nothing thing things stuff""".split()
)


_FILLER = re.compile(r"(?<![\w'-])(?:" + "|".join(sorted(FILLER_WORDS)) + r")(?![\w'-])", re.IGNORECASE)


def topic_text(text: str) -> str:
    """``text`` without its filler words (:data:`FILLER_WORDS`), everything else as it was: what keyword search
    may match on (empty when only fillers are left)."""
    rest = _FILLER.sub(" ", text)
    return rest if any(ch.isalnum() for ch in rest) else ""


_IRREGULAR: dict[str, tuple[str, ...]] = {
    "send": ("sent",), "write": ("wrote", "written"), "draw": ("drew", "drawn"), "buy": ("bought",),
    "make": ("made",), "do": ("did", "done"), "pay": ("paid",), "read": ("read",), "meet": ("met",),
    "bring": ("brought",), "get": ("got", "gotten"), "find": ("found",), "take": ("took", "taken"),
    "give": ("gave", "given"), "go": ("went", "gone"), "tell": ("told",), "speak": ("spoke", "spoken"),
    "build": ("built",), "think": ("thought",), "leave": ("left",), "sell": ("sold",), "put": ("put",),
    "set": ("set",), "run": ("ran",), "begin": ("began", "begun"), "choose": ("chose", "chosen"),
    "ring": ("rang", "rung"), "see": ("saw", "seen"), "fly": ("flew", "flown"), "hold": ("held",),
    "sit": ("sat",), "teach": ("taught",), "catch": ("caught",), "fight": ("fought",), "lend": ("lent",),
    "spend": ("spent",), "win": ("won",), "book": ("booked",), "fix": ("fixed",),
}  # fmt: skip
_VOWELS = frozenset("aeiou")
#: Words a retelling adds around what was said ("Maya decided …", "Still open: waiting on …", "… was answered"):
#: they are not part of the fact, so they do not make a summary say more than its source.
_FRAMING = frozenset(
    "said asked answered decided settled realized realised still open waiting left nothing involved carried "
    "people note noted mentioned told wait source play decision verdict final deadline due cited annotated quoted "
    "recalled once twice times".split()
)


def word_keys(text: str) -> set[str]:
    """Content-word keys of a text (lowercase, singular), the unit of overlap."""
    return set(_word_keys(text))


@functools.lru_cache(maxsize=4096)
def _word_keys(text: str) -> frozenset[str]:
    keys = set()
    for word in P.words(text):
        key = P.tag_key(word.lower())
        if key is not None:
            keys.add(key)
    return frozenset(keys)


def past_forms(verb: str) -> tuple[str, ...]:
    """Past-tense forms of a verb (irregular table, else the regular spellings)."""
    verb = verb.lower()
    if verb in _IRREGULAR:
        return _IRREGULAR[verb]
    forms = [verb + "d" if verb.endswith("e") else verb + "ed"]
    if len(verb) > 2 and verb.endswith("y") and verb[-2] not in _VOWELS:
        forms.append(verb[:-1] + "ied")
    if len(verb) >= 3 and verb[-1] not in _VOWELS | {"w", "x", "y"} and verb[-2] in _VOWELS and verb[-3] not in _VOWELS:
        forms.append(verb + verb[-1] + "ed")
    return tuple(forms)


def new_words(text: str, said: Iterable[str], *, names: Iterable[str] = ()) -> set[str]:
    """The content words of ``text`` that none of ``said`` holds (a word's first five letters are enough:
    "measurements" and "measured", "planted" and "planting"), the words a retelling adds set aside (the
    speakers' ``names``, "decided", "still open", "asked", …)."""
    ignore = _FRAMING | {key for name in names for key in _word_keys(name)}
    held: set[str] = set()
    for sentence in said:
        held |= _word_keys(sentence)
    stems = {key[:5] for key in held}
    return {key for key in _word_keys(text) - ignore if key not in held and key[:5] not in stems}


def restated_in(summary: str, sentences: Iterable[str], *, names: Iterable[str] = ()) -> str | None:
    """The one sentence of ``sentences`` that ``summary`` only restates, or None.

    A summary restates a sentence when that sentence holds every content word of the summary
    (:func:`new_words`: framing and names aside).  None when no single sentence does: the summary joins several
    sentences, or says something none of them says (a summary of nothing but framing restates nothing either).
    """
    names = list(names)
    ignore = _FRAMING | {key for name in names for key in _word_keys(name)}
    if not set(_word_keys(summary)) - ignore:
        return None
    return next((s for s in sentences if not new_words(summary, [s], names=names)), None)
