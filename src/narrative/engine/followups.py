"""What follows a write: the work that keeps bindings, decision chains and research links current.

After each batch of turns (``Turns``), each memory added by hand (``Memories``) and each confirmed close
(``Closing``), the writing service hands what it made to :class:`Followups`, which passes it to the services that
care.  The follow-up work runs after the write committed, in transactions of its own: if it fails, the write
stands, the failure is logged, and ``consolidate()`` (or the next write) makes the missing links.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from narrative.engine.bindings import Bindings
from narrative.engine.decisions import Decisions
from narrative.engine.research import Research
from narrative.errors import NarrativeError
from narrative.model import MemoryItem
from narrative.write.turn_types import TurnResult

log = logging.getLogger("narrative.write")


class Followups:
    """Hands new turns, memories and closes to the bindings, decisions and research services."""

    def __init__(self, bindings: Bindings, decisions: Decisions, research: Research) -> None:
        self.bindings = bindings
        self.decisions = decisions
        self.research = research

    def after_turns(self, user_id: str, results: Sequence[TurnResult]) -> None:
        if not results:
            return
        self.after_memories(user_id, [m for r in results for m in r.memories])
        try:
            self.bindings.after_turns(user_id, results)
        except NarrativeError as error:
            log.warning("bindings after %d turns failed (%s); the turns are stored", len(results), error)

    def after_memories(self, user_id: str, memories: Sequence[MemoryItem]) -> None:
        try:
            self.decisions.after_memories(user_id, memories)
            self.research.after_memories(user_id, memories)
        except NarrativeError as error:
            log.warning("linking %d new memories failed (%s); they are stored", len(memories), error)

    def after_close(self, user_id: str, conversation_id: int) -> None:
        try:
            self.bindings.after_close(user_id, conversation_id)
        except NarrativeError as error:
            log.warning("goals after closing conversation %d failed (%s)", conversation_id, error)
