"""The facade's decision chains and decision audit (ITSERR): link a decision to the earlier ones it builds on or
reverses, walk a chain, list the decisions due for review, record a review; what follows new decision memories
(their links, by the rules or a model)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from narrative.checks import require_choice, require_positive, require_text
from narrative.engine.core import Runtime
from narrative.errors import ValidationError
from narrative.model import DecisionReview, LinkKind, MemoryItem, MemoryLink, ReviewOutcome, Stream
from narrative.read import audit
from narrative.read.audit import DueDecision
from narrative.read.decision_chain import DecisionChain, decision_chain
from narrative.write import chains

log = logging.getLogger("narrative.write")


class Decisions:
    """Decision chains and the decision audit."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime

    def link_decision(
        self, memory_id: int, earlier_id: int, kind: str = "builds_on", *, reason: str = "", user: str | None = None
    ) -> MemoryLink:
        user_id = self.rt.owner_id(user)
        chosen = require_choice(LinkKind, kind, "kind")
        note = _optional_text(reason, "reason", 1000)
        with self.rt.store.transaction():
            return chains.link(self.rt.store, user_id, memory_id, earlier_id, chosen, note, self.rt.clock())

    def decision_chain(self, memory_id: int, *, user: str | None = None) -> DecisionChain:
        return decision_chain(self.rt.store, self.rt.reader_id(user), memory_id)

    def decisions_to_review(self, *, limit: int = 10, user: str | None = None) -> list[DueDecision]:
        user_id = self.rt.reader_id(user)
        require_positive(limit, "limit")
        s = self.rt.settings
        due = audit.due_decisions(
            self.rt.store, user_id, self.rt.clock(), s.decision_audit_days, s.decision_revisit_days, limit
        )
        if due and self.rt.llm_enabled():
            from narrative.providers.llm import LLMSettings

            due = audit.ask_questions(self.rt.llm, LLMSettings.from_settings(s), due)
        return due

    def review_decision(
        self, memory_id: int, outcome: str = "kept", *, note: str = "", user: str | None = None
    ) -> DecisionReview:
        user_id = self.rt.owner_id(user)
        verdict = require_choice(ReviewOutcome, outcome, "outcome")
        text = _optional_text(note, "note", 4000)
        memory = self.rt.store.get_memory(user_id, memory_id)
        if memory.stream is not Stream.DECISION:
            raise ValidationError(f"memory {memory_id} is not a decision (stream {memory.stream.value})", "memory_id")
        return self.rt.store.insert_decision_review(user_id, memory_id, verdict, text, self.rt.clock())

    # --- what follows new memories -------------------------------------------------------------------

    def after_memories(self, user_id: str, memories: Sequence[MemoryItem]) -> None:
        """Link each new decision to the earlier decisions it builds on or reverses (a model's judgement when
        an LLM is configured and answers well, else the rules)."""
        new = sorted((m for m in memories if m.stream is Stream.DECISION), key=lambda m: m.id)
        if not new:
            return
        judge = None
        if self.rt.llm_enabled():
            from narrative.providers.llm import LLMSettings

            judge = chains.ChainJudge(self.rt.llm, LLMSettings.from_settings(self.rt.settings))
        now = self.rt.clock()
        store = self.rt.store
        for decision in new:
            links = chains.propose_links(store, user_id, decision, now, judge)
            if links:
                with store.transaction():
                    chains.record_links(store, user_id, links, now)


def _optional_text(value: object, field: str, limit: int) -> str:
    """Text that may be empty ("" when it is)."""
    if isinstance(value, str) and not value.strip():
        return ""
    return require_text(value, field, limit).strip()
