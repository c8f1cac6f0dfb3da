"""Salience: how much a sentence says (numbers, names, tags, signals), and the best ones compressed into key points."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from narrative.text import patterns as P
from narrative.write.extract.cues import caseless, clip

_FILLER_PREFIX = caseless(
    r"^(?:(?:wow|woah|whoa|woohoo|yay|oh|yeah|yes|yep|hey|hi|hello|ok|okay|so|well|aw+|haha|lol|omg|btw|hmm|um)"
    r"\b[,!.]?\s*)+"
)


# --- key points and themes ---------------------------------------------------------------------


def _strip_filler(sentence: str, people: Sequence[str]) -> str:
    """Drop leading interjections and a leading vocative ("Wow, Caroline! …" → "…")."""
    stripped = _FILLER_PREFIX.sub("", sentence).strip()
    head = re.match(r"([A-Z][a-z]+)[,!]\s+", stripped)
    if head and head.group(1) in people:
        stripped = stripped[head.end() :]
    return stripped[:1].upper() + stripped[1:] if stripped else ""


def compress(scored: Sequence[tuple[int, str]], max_words: int, people: Sequence[str]) -> str:
    """Best-scoring sentences first until the word budget is used, then put back in turn order."""
    ranked = sorted((i for i, (score, _) in enumerate(scored) if score > 0), key=lambda i: (-scored[i][0], i))
    chosen: dict[int, str] = {}
    used = 0
    for i in ranked:
        text = _strip_filler(scored[i][1], people)
        n = len(text.split())
        if used + n <= max_words:
            chosen[i] = text
            used += n
        elif not chosen:
            chosen[i] = clip(text, max_words)
            break
    return " ".join(chosen[i] for i in sorted(chosen))


def score_sentence(sentence: str, small: bool, signal: bool, tags: Iterable[str]) -> int:
    """2 for an entity/decision/research/life event, +1 per number (≤ 2), +1 per turn tag (≤ 3), +1 names."""
    if small and not signal:
        return 0
    low = sentence.lower()
    score = 2 if signal else 0
    score += min(2, len(re.findall(r"\d+", sentence)))
    score += min(3, sum(t in low for t in tags))
    caps = [w for w in P.words(sentence)[1:] if w[:1].isupper() and P.name_ok(w)]
    return score + (1 if caps else 0)
