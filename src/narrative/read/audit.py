"""The decision audit (ITSERR): "Periodic 'decision audit' prompts".

A decision (a memory of the ``decision`` stream) is **due for review** when it still stands (no later decision
reverses it and no review said it was reversed) and

* it was made, or last kept at a review, ``audit_days`` days ago or more (``Settings.decision_audit_days``); or
* it is marked reversible, was never revisited (no review, no later decision builds on it) and is
  ``revisit_days`` days old or more (``Settings.decision_revisit_days``).

Each due decision comes with its rationale and rejected alternatives, a ``reason`` (which rule made it due) and a
``question`` to put to the user.  Without an LLM the question is a fixed sentence; with one, the model words it
(:func:`ask_questions`: one or two sentences that end with a question and name the decision, else the fixed
sentence stands).  ``Memory.review_decision`` records the answer: ``kept`` starts the clock again, ``reversed``
takes the decision off the list for good.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from narrative.model import (
    DecisionDetails,
    DecisionReview,
    LinkKind,
    MemoryItem,
    ReviewOutcome,
    Stream,
)
from narrative.store.filters import MemoryFilter
from narrative.store.protocol import Store
from narrative.text import patterns as P
from narrative.text.words import word_keys

if TYPE_CHECKING:
    from narrative.providers.llm import LLM, LLMSettings

__all__ = ["DueDecision", "ask_questions", "decision_details", "due_decisions", "question_for"]

log = logging.getLogger("narrative.read")

EVERYTHING = 100_000
MAX_QUESTION = 400


def decision_details(memory: MemoryItem) -> DecisionDetails:
    details = memory.details
    return details if isinstance(details, DecisionDetails) else DecisionDetails(decision=memory.content)


@dataclass(frozen=True)
class DueDecision:
    """A decision offered for review: what was decided, why, over what, and why it is due now."""

    memory: MemoryItem
    details: DecisionDetails
    since: datetime  # when its audit clock started: the decision, or its last review that kept it
    days: int  # days since then
    rule: str  # "age" | "reversible"
    reason: str
    question: str
    last_review: DecisionReview | None = None
    revisited: bool = False

    def why(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "reason": self.reason,
            "since": self.since.isoformat(),
            "days": self.days,
            "reversible": self.details.reversible,
            "revisited": self.revisited,
            "last_review": None if self.last_review is None else self.last_review.outcome.value,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory.id,
            "decision": self.details.decision or self.memory.content,
            "content": self.memory.content,
            "rationale": self.details.rationale,
            "alternatives": list(self.details.alternatives_considered),
            "decision_type": self.details.decision_type,
            "reversible": self.details.reversible,
            "decided_at": (self.memory.event_at or self.memory.created_at).isoformat(),
            "storyline_id": self.memory.storyline_id,
            "question": self.question,
            "why": self.why(),
        }


def question_for(memory: MemoryItem, details: DecisionDetails) -> str:
    """The fixed audit prompt: what was decided, when, why, over what; does it still stand?"""
    when = (memory.event_at or memory.created_at).date().isoformat()
    text = f"On {when} you decided “{details.decision or memory.content}”"
    if details.rationale:
        text += f" because {details.rationale.rstrip('.')}"
    if details.alternatives_considered:
        text += f", over {_join(details.alternatives_considered)}"
    return text + ". Does it still stand?"


def _join(items: Sequence[str]) -> str:
    items = [i for i in items if i]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def due_decisions(
    store: Store, user_id: str, now: datetime, audit_days: int, revisit_days: int, limit: int = 20
) -> list[DueDecision]:
    """Decisions due for review, the longest waiting first (module docstring for the rules)."""
    decisions = store.list_memories(user_id, MemoryFilter(streams=[Stream.DECISION], limit=EVERYTHING))
    if not decisions:
        return []
    ids = [m.id for m in decisions]
    links = store.memory_links(user_id, ids, kinds=[LinkKind.BUILDS_ON, LinkKind.REVERSES])
    reversed_ids = {k.linked_id for k in links if k.kind is LinkKind.REVERSES}
    built_on = {k.linked_id for k in links if k.kind is LinkKind.BUILDS_ON}
    reviews: dict[int, DecisionReview] = {}
    for answer in store.decision_reviews(user_id, ids):  # oldest first: the last one stays
        reviews[answer.memory_id] = answer
    due = []
    for memory in decisions:
        review = reviews.get(memory.id)
        if memory.id in reversed_ids or (review is not None and review.outcome is ReviewOutcome.REVERSED):
            continue
        found = _due(memory, review, memory.id in built_on, now, audit_days, revisit_days)
        if found is not None:
            due.append(found)
    due.sort(key=lambda d: (d.since, d.memory.id))
    return due[:limit]


def _due(
    memory: MemoryItem,
    review: DecisionReview | None,
    built_on: bool,
    now: datetime,
    audit_days: int,
    revisit_days: int,
) -> DueDecision | None:
    details = decision_details(memory)
    made = memory.event_at or memory.created_at
    since = review.created_at if review is not None else made
    days = max(0, (now - since).days)
    revisited = review is not None or built_on
    if days >= audit_days:
        reason = (
            f"kept at a review {days} days ago; at least {audit_days} days have passed"
            if review is not None
            else f"decided {days} days ago and never reviewed (reviews are due every {audit_days} days)"
        )
        return DueDecision(
            memory, details, since, days, "age", reason, question_for(memory, details), review, revisited
        )
    if details.reversible and not revisited and days >= revisit_days:
        reason = f"reversible, and not revisited in the {days} days since it was made (at least {revisit_days})"
        question = question_for(memory, details)
        return DueDecision(memory, details, since, days, "reversible", reason, question, review, revisited)
    return None


def ask_questions(llm: LLM, limits: LLMSettings, due: Sequence[DueDecision]) -> list[DueDecision]:
    """The same decisions with the model's wording of each question where it answered well (one call each)."""
    from narrative.providers.llm import TurnBudget, ask_text

    worded = []
    for item in due:
        text = ask_text(
            llm,
            TurnBudget.from_settings(limits),
            "decision_audit",
            {"decision": item.to_dict(), "why_due": item.reason},
            max_tokens=160,
        )
        question = _checked(text, item)
        worded.append(item if question is None else replace(item, question=question))
    return worded


def _checked(text: str | None, item: DueDecision) -> str | None:
    """The model's question when it is one: 1–2 sentences of prose ending with "?" that name the decision."""
    if text is None:
        return None
    answer = " ".join(text.split())
    material = " ".join([item.memory.content, item.details.decision, item.details.rationale])
    problem = None
    if answer[:1] in "{[<" or "```" in answer or len(answer) > MAX_QUESTION:
        problem = "data, markup or too long"
    elif not answer.endswith("?") or not 1 <= len(P.split_sentences(answer)) <= 2:
        problem = "not one or two sentences ending with a question"
    elif not word_keys(answer) & word_keys(material):
        problem = "it names nothing of the decision"
    if problem is not None:
        log.warning(
            "decision_audit: the model's question is not usable (%s): %.80r; fixed wording used", problem, answer
        )
        return None
    return answer
