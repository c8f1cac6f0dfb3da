"""Search results as a reader gets them: the messages each hit shows, what it costs, and the deeper calls the
budget measures make when the first results do not fill the largest budget.

A hit shows the messages it names in ``hit.shown`` (the search decides which turns of an exchange it puts in
front of a reader).  When a hit names none (a summary: reflection, narrative link, closing memory), the bench
falls back to reading it: it shows the memory's only source message, or the source messages whose text stands in
``hit.text`` word for word.  A summary of many messages quotes none of them whole, so it shows nothing, but it
still spends the tokens of its text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from narrative.bench import turns as shown_text
from narrative.engine import Memory
from narrative.text.lines import turn_line

DEPTH = 50  # results asked of the default search: always enough for 20 turns, usually for 2,000 tokens
DEEPEST = 400  # short messages: the budget measures ask for more (100, 200, 400) until 2,000 tokens are filled


def message_turns(mem: Memory, key: str) -> dict[int, shown_text.Turn]:
    """Message id -> the message as a turn line, named by the benchmark's id kept in its metadata under ``key``."""
    return {m.id: shown_text.Turn(str(m.meta.get(key, "")), turn_line(m)) for m in mem.messages()}


def shown(hits: Sequence[Any], turn_of: dict[int, shown_text.Turn]) -> list[shown_text.Shown]:
    """Each hit as a model sees it: the turns it shows, its source turns, its tokens, its text, its conflicts."""
    result = []
    for hit in hits:
        sources = [turn_of[i] for i in hit.memory.message_ids if i in turn_of]
        text = getattr(hit, "text", "") or hit.memory.content  # what the hit shows a reader
        named = [turn_of[i].key for i in getattr(hit, "shown", ()) if i in turn_of]
        result.append(
            shown_text.Shown(
                tuple(named) if named else shown_text.shown_turns(text, sources),
                frozenset(t.key for t in sources),
                shown_text.count_tokens(text),
                text,
                bool(getattr(hit, "conflicts", ())),
            )
        )
    return result


def filled(
    mem: Memory, question: str, hits: Sequence[Any], turn_of: dict[int, shown_text.Turn], **options: Any
) -> list[shown_text.Shown]:
    """A search's results for the budget measures: ``mem.search(question, k, **options)`` for the smallest k of 50,
    100, 200, 400 whose results fill the largest budget (or that returns fewer than k: all it has); ``hits`` are the
    first 50.

    The turn measures keep the first 50 results; with short messages 50 results can show well under 2,000 tokens,
    and a budget the search was never asked to fill says nothing about it.
    """
    k, ranked = DEPTH, shown(hits, turn_of)
    while len(hits) == k and sum(item.tokens for item in ranked) < max(shown_text.BUDGETS) and k < DEEPEST:
        k *= 2
        hits = mem.search(question, k, record=False, **options)
        ranked = shown(hits, turn_of)
    return ranked
