"""What a reader meets about a fact that changed, or about two statements that disagree.

Each measure reads one ranked list (:class:`narrative.bench.turns.Shown` items, in rank order) within a budget of
tokens, the way the budget measures do: a result counts with every result above it, and the first that does not
fit ends the list.

* **current** — a message that states the fact as it is now (BEAM's ``updated_info``) is shown within 1,000 tokens;
* **stale** — within 1,000 tokens, a message that states it as it was (``original_info``) is shown in a higher
  result than every updated one, or is shown while no updated one is: the reader meets the old fact first, or
  alone.  A result that shows both an old and a new message is not "before" the new one;
* **both** — at least one message of each side of a contradiction is shown within 2,000 tokens;
* **said** — some result within 2,000 tokens says that it conflicts with another memory.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from narrative.bench.turns import Shown, fitting, turns_in

UPDATE_BUDGET = 1000
CONFLICT_BUDGET = 2000


def current(ranked: Sequence[Shown], updated: Collection[str]) -> bool:
    """An updated message is shown within 1,000 tokens."""
    return bool(turns_in(fitting(ranked, UPDATE_BUDGET)) & set(updated))


def stale(ranked: Sequence[Shown], original: Collection[str], updated: Collection[str]) -> bool:
    """Within 1,000 tokens an original message is shown above every updated one (or with none shown)."""
    for item in fitting(ranked, UPDATE_BUDGET):
        if set(item.turns) & set(updated):
            return False
        if set(item.turns) & set(original):
            return True
    return False


def both_sides(ranked: Sequence[Shown], first: Collection[str], second: Collection[str]) -> bool:
    """At least one message of each side is shown within 2,000 tokens."""
    shown = turns_in(fitting(ranked, CONFLICT_BUDGET))
    return bool(shown & set(first)) and bool(shown & set(second))


def said(ranked: Sequence[Shown]) -> bool:
    """Some result within 2,000 tokens says it conflicts with another memory."""
    return any(item.conflicts for item in fitting(ranked, CONFLICT_BUDGET))
