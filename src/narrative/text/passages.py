"""Passages: the pieces of a message that an embedding model reads whole.

MiniLM reads at most 256 word pieces; everything after that is invisible to it.  A message that fits is one
passage (the whole message).  A longer one is cut on its own structure, coarsest first:

1. fenced code blocks (```` ``` ````) stay whole blocks, apart from the prose around them;
2. paragraphs (blank lines) and list items (lines starting with ``-``, ``*``, ``+``, ``1.``, ``1)``) and headings;
3. a block still too long is cut into sentences (prose) or lines (code);
4. a sentence or line still too long is cut between words.

Consecutive small pieces are packed back together up to the target size, so a list of short items is one
passage, not ten.  Each passage is a character span ``[start, end)`` of the message (surrounding whitespace
trimmed): the text is never copied or changed, so a passage can always be shown in place and pointed to.

Sizes are counted with the approximate BPE counter (:class:`ApproxTokenCounter` rules, re-implemented here
to keep this module free of providers): it errs on the high side for prose, and the target leaves room for
word pieces, which split code and rare words finer than BPE does.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "ONE_PASSAGE_TOKENS",
    "TARGET_TOKENS",
    "Span",
    "approx_tokens",
    "excerpt",
    "more_tokens_than",
    "split_passages",
]

#: A message of at most this many (approximate) tokens is one passage: the model reads it whole.
ONE_PASSAGE_TOKENS = 200
#: A longer message is cut into passages of at most about this many tokens.
TARGET_TOKENS = 160

_PIECES = re.compile(r"(\s+)|([A-Za-z]+)|([0-9]+)|([!-/:-@\[-`{-~]+)|(.)", re.DOTALL)
_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?(?:^[ \t]*\1[ \t]*$|\Z)", re.DOTALL | re.MULTILINE)
_BLOCK_BREAK = re.compile(r"\n[ \t]*\n+")
_ITEM = re.compile(r"^[ \t]*(?:[-*+•]|\d{1,3}[.)]|#{1,6})\s", re.MULTILINE)
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n+")


@dataclass(frozen=True)
class Span:
    """One passage: characters ``[start, end)`` of its message."""

    start: int
    end: int


def approx_tokens(text: str) -> int:
    """Tokens ``text`` would cost a BPE-style tokenizer, estimated on the high side (see tokens.py's rules)."""
    total = 0
    for match in _PIECES.finditer(text):
        total += _cost(match)
    return total


def more_tokens_than(text: str, limit: int) -> bool:
    """``approx_tokens(text) > limit``, reading no further than the piece that crosses ``limit`` (a long message
    asked whether it is longer than an excerpt is not counted to its end)."""
    total = 0
    for match in _PIECES.finditer(text):
        total += _cost(match)
        if total > limit:
            return True
    return False


def _cost(match: re.Match[str]) -> int:
    """What one piece costs: a whitespace run, a word, digits, punctuation, or another character."""
    space, word, digits, punct, _other = match.groups()
    if space is not None:
        return 1 if "\n" in space or len(space) > 1 else 0
    if word is not None:
        return 1 if len(word) <= 7 else 1 + (len(word) - 4) // 4
    if digits is not None:
        return -(-len(digits) // 3)
    if punct is not None:
        return -(-len(punct) // 3)
    return 2 if ord(match.group(0)) > 0xFFFF else 1


class _Costs:
    """:func:`approx_tokens` of any span of one text in constant time: the text's pieces are read once, and a span
    from one piece's start to another's costs the pieces between them (reading the span alone finds the same
    pieces). A span that starts or ends inside a piece is read on its own."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at: dict[int, int] = {}  # a piece's start (and the text's end) → its index
        self.before = [0]  # cost of the pieces before each index
        for index, match in enumerate(_PIECES.finditer(text)):
            self.at[match.start()] = index
            self.before.append(self.before[-1] + _cost(match))
        self.at[len(text)] = len(self.before) - 1

    def __call__(self, start: int, end: int) -> int:
        first, last = self.at.get(start), self.at.get(end)
        if first is None or last is None:
            return approx_tokens(self.text[start:end])
        return self.before[last] - self.before[first]


def split_passages(text: str, target: int = TARGET_TOKENS, whole: int = ONE_PASSAGE_TOKENS) -> list[Span]:
    """The passages of a message, in order; one span for a message of at most ``whole`` tokens (or empty text)."""
    trimmed = _trim(text, 0, len(text))
    if trimmed is None:
        return [Span(0, len(text))]
    costs = _Costs(text)
    if costs(trimmed.start, trimmed.end) <= whole:
        return [trimmed]
    pieces = [p for block in _blocks(text) for p in _fit(costs, block, target)]
    return _pack(costs, pieces, target)


def excerpt(text: str) -> str:
    """A message as a memory quotes it: whole when it is one passage, else its first passage and a mark of the
    rest (the passages hold every word; a memory need not copy a document).  Cheap for any length."""
    if len(text) <= 4 * ONE_PASSAGE_TOKENS or approx_tokens(text[: 12 * ONE_PASSAGE_TOKENS]) <= ONE_PASSAGE_TOKENS:
        return text
    head = text[: 8 * TARGET_TOKENS]
    first = split_passages(head + "\n\n" + "x " * (2 * ONE_PASSAGE_TOKENS))[0]
    return f"{head[first.start : first.end]} …"


def _trim(text: str, start: int, end: int) -> Span | None:
    """The span without its surrounding whitespace; None when nothing but whitespace is left."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return Span(start, end) if start < end else None


def _blocks(text: str) -> Iterator[tuple[Span, bool]]:
    """Structural blocks in order: (span, is_code).  Code fences whole; prose by paragraphs and list items."""
    position = 0
    for fence in _FENCE.finditer(text):
        yield from _prose_blocks(text, position, fence.start())
        span = _trim(text, fence.start(), fence.end())
        if span is not None:
            yield span, True
        position = fence.end()
    yield from _prose_blocks(text, position, len(text))


def _prose_blocks(text: str, start: int, end: int) -> Iterator[tuple[Span, bool]]:
    cuts = [start]
    for match in _BLOCK_BREAK.finditer(text, start, end):
        cuts.append(match.end())
    for match in _ITEM.finditer(text, start, end):
        if match.start() > start:
            cuts.append(match.start())
    cuts = [*sorted(set(cuts)), end]
    for a, b in itertools.pairwise(cuts):
        span = _trim(text, a, b)
        if span is not None:
            yield span, False


def _fit(costs: _Costs, block: tuple[Span, bool], target: int) -> Iterator[Span]:
    """A block as pieces of at most ``target`` tokens: itself, else its sentences (lines for code), else words."""
    span, code = block
    text = costs.text
    if costs(span.start, span.end) <= target:
        yield span
        return
    inner = text[span.start : span.end]
    breaks = re.finditer(r"\n", inner) if code else _SENTENCE_END.finditer(inner)
    cuts = [*sorted({span.start, *(span.start + m.end() for m in breaks)}), span.end]
    for a, b in itertools.pairwise(cuts):
        piece = _trim(text, a, b)
        if piece is None:
            continue
        if costs(piece.start, piece.end) <= target:
            yield piece
        else:
            yield from _by_words(costs, piece, target)


def _by_words(costs: _Costs, span: Span, target: int) -> Iterator[Span]:
    """A run with no sentence or line break to cut at: cut between words (or anywhere, for one huge word)."""
    text = costs.text
    start, spent, last_gap = span.start, 0, None
    position = span.start
    for match in _PIECES.finditer(text, span.start, span.end):
        cost = costs(match.start(), match.end())
        if spent + cost > target and position > start:
            cut = last_gap if last_gap is not None and last_gap > start else position
            piece = _trim(text, start, cut)
            if piece is not None:
                yield piece
            start, last_gap = cut, None
            spent = costs(start, match.start())
        spent += cost
        if match.group(1) is not None:
            last_gap = match.end()
        position = match.end()
    piece = _trim(text, start, span.end)
    if piece is not None:
        yield piece


def _pack(costs: _Costs, pieces: list[Span], target: int) -> list[Span]:
    """Consecutive pieces joined while they fit in ``target`` tokens (a span covers the text between them)."""
    packed: list[Span] = []
    for piece in pieces:
        if packed and costs(packed[-1].start, piece.end) <= target:
            packed[-1] = Span(packed[-1].start, piece.end)
        else:
            packed.append(piece)
    return packed
