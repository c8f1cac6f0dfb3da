"""Excerpts: the sentences of a long piece of text that hold what a query asked about.

A search result that shows a passage of a long message (a reply, a pasted document) used to show the whole
passage, about 160 tokens, of which the query's answer is usually a sentence or two; the rest spends the reader's
budget on explanation and code around it.  An excerpt keeps the pieces (sentences, list items, code lines, packed
to about 40 tokens) that hold the most of the query's words, up to about 80 tokens, in their order, with ``…``
where text was left out.  The result still points to the whole message (``message #N, part k``), so a reader
that wants the rest asks for it.

A piece holding none of the query's words (a passage found by its meaning alone) gives no reason to prefer one
sentence over another: the excerpt is then the passage's beginning.
"""

from __future__ import annotations

from collections.abc import Collection

from narrative.store.keyword_index import terms
from narrative.text.passages import TARGET_TOKENS, Span, approx_tokens, more_tokens_than, split_passages

#: An excerpt is at most about this many tokens: half a passage.
EXCERPT_TOKENS = TARGET_TOKENS // 2
#: ... made of pieces of about this many tokens (a sentence or two, a few code lines).
PIECE_TOKENS = EXCERPT_TOKENS // 2
ELLIPSIS = "…"


def excerpt_of(text: str, words: Collection[str], limit: int = EXCERPT_TOKENS) -> str:
    """``text`` whole when it fits in ``limit`` tokens, else its pieces that hold the most of ``words`` (stemmed
    query terms, see :func:`narrative.store.keyword_index.query_terms`), in order, ``…`` marking what is left out."""
    if not more_tokens_than(text, limit):
        return text
    pieces = split_passages(text, target=max(1, limit // 2), whole=max(1, limit // 2))
    chosen = _chosen(text, pieces, set(words), limit)
    shown = ""
    last_end = 0
    for index in sorted(chosen):
        piece = pieces[index]
        between = text[last_end : piece.start]  # the text between this piece and the one shown before it
        if between.strip():
            shown += f" {ELLIPSIS} " if shown else f"{ELLIPSIS} "
        elif shown and between:
            shown += " "  # whitespace between two pieces shown: one space
        shown += text[piece.start : piece.end]  # nothing between them (a long run cut in two): joined as it was
        last_end = piece.end
    return f"{shown} {ELLIPSIS}" if text[last_end:].strip() else shown


def _chosen(text: str, pieces: list[Span], words: set[str], limit: int) -> set[int]:
    """Indexes of the pieces to show: best first by how many query words each holds (earlier on a tie), while
    they fit; with no query word in any piece, the first pieces that fit."""
    held = [len(words & set(terms(text[p.start : p.end]))) for p in pieces]
    order = sorted(range(len(pieces)), key=lambda i: (-held[i], i))
    if not any(held):
        order = list(range(len(pieces)))
    chosen: set[int] = set()
    spent = 0
    for index in order:
        if chosen and held[index] == 0 and any(held):
            break
        cost = approx_tokens(text[pieces[index].start : pieces[index].end])
        if spent + cost > limit:
            if chosen:
                break
            continue
        chosen.add(index)
        spent += cost
    return chosen or {0}
