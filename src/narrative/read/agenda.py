"""What an agent should keep in mind beside the conversation: the current storyline's bindings, the goals that
went quiet, the decisions due for review.  The greeting and the context block show it (small sections of their
own); the engine's ``stale_goals`` and ``decisions_to_review`` return it.

NarraNexus: "Long-running goals (an ONGOING job, a multi-session research project) stay alive as long as their
Narrative exists. The agent can be reminded of stale goals and pick them back up."  A goal is **stale** when it is
``ongoing`` (a ``paused`` goal is quiet on purpose), its storyline is not archived, and nothing has touched it for
``goal_stale_days`` days (``Settings.goal_stale_days``; what touches a goal: ``write/bindings.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from narrative.config import Settings
from narrative.model import Binding, BindingKind, Storyline, StorylineStatus
from narrative.read.audit import DueDecision, due_decisions
from narrative.read.scene import auxiliary
from narrative.store.protocol import Store

__all__ = [
    "Agenda",
    "AgendaRules",
    "GoalReminder",
    "binding_section",
    "bindings_of",
    "carried",
    "gather",
    "greeting_lines",
    "reminder_section",
    "stale_goals",
]

SHOWN = 3  # goals and decisions a greeting or a context names


@dataclass(frozen=True)
class AgendaRules:
    goal_stale_days: int = 7
    audit_days: int = 30
    revisit_days: int = 14

    @classmethod
    def from_settings(cls, settings: Settings) -> AgendaRules:
        return cls(settings.goal_stale_days, settings.decision_audit_days, settings.decision_revisit_days)


@dataclass(frozen=True)
class GoalReminder:
    """A goal nothing has touched for ``threshold_days`` days or more."""

    goal: Binding
    storyline: str
    quiet_days: int
    threshold_days: int

    def why(self) -> dict[str, Any]:
        return {
            "rule": f"an ongoing goal nothing has touched for {self.threshold_days} days or more",
            "touched_at": self.goal.touched_at.isoformat(),
            "touched_by": self.goal.touched_by,
            "quiet_days": self.quiet_days,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "binding_id": self.goal.id,
            "goal": self.goal.name,
            "status": self.goal.status,
            "storyline_id": self.goal.storyline_id,
            "storyline": self.storyline,
            "payload": self.goal.payload,
            "why": self.why(),
        }

    def line(self) -> str:
        return (
            f"{self.goal.name} ({self.storyline}; last touched {self.goal.touched_at:%Y-%m-%d}, "
            f"{self.quiet_days} days ago: {self.goal.touched_by or 'bound'})"
        )


def stale_goals(
    store: Store, user_id: str, now: datetime, days: int, storylines: dict[int, Storyline] | None = None
) -> list[GoalReminder]:
    """Ongoing goals untouched for ``days`` days or more, the quietest first."""
    cut = now - timedelta(days=days)
    goals = [
        g
        for g in store.list_bindings(user_id, kinds=[BindingKind.GOAL], active=True)
        if g.status == "ongoing" and g.touched_at <= cut
    ]
    if not goals:
        return []
    if storylines is None:
        storylines = {s.id: s for s in store.list_storylines(user_id, include_archived=True)}
    found = [
        GoalReminder(g, storylines[g.storyline_id].name, max(0, (now - g.touched_at).days), days)
        for g in goals
        if g.storyline_id in storylines and storylines[g.storyline_id].status is not StorylineStatus.ARCHIVED
    ]
    return sorted(found, key=lambda r: (r.goal.touched_at, r.goal.id))


@dataclass(frozen=True)
class Agenda:
    """The current storyline's live bindings, the stale goals and the decisions due for review."""

    bindings: tuple[Binding, ...] = ()
    stale_goals: tuple[GoalReminder, ...] = ()
    reviews: tuple[DueDecision, ...] = ()
    rules: AgendaRules = AgendaRules()

    def to_dict(self) -> dict[str, Any]:
        return {
            "bindings": [binding_dict(b) for b in self.bindings],
            "stale_goals": [g.to_dict() for g in self.stale_goals],
            "decisions_to_review": [d.to_dict() for d in self.reviews],
        }


def binding_dict(binding: Binding) -> dict[str, Any]:
    return {
        "id": binding.id,
        "storyline_id": binding.storyline_id,
        "kind": binding.kind.value,
        "name": binding.name,
        "status": binding.status,
        "payload": binding.payload,
        "touched_at": binding.touched_at.isoformat(),
        "touched_by": binding.touched_by,
        "completed_at": None if binding.completed_at is None else binding.completed_at.isoformat(),
    }


def gather(store: Store, user_id: str, now: datetime, rules: AgendaRules, storyline_id: int | None = None) -> Agenda:
    """Everything on the agenda now; ``storyline_id`` names the storyline whose live bindings to include."""
    bindings = store.list_bindings(user_id, storyline_ids=[storyline_id]) if storyline_id is not None else []
    return Agenda(
        tuple(sorted(bindings, key=lambda b: (b.kind.value, b.created_at, b.id))),
        tuple(stale_goals(store, user_id, now, rules.goal_stale_days)),
        tuple(due_decisions(store, user_id, now, rules.audit_days, rules.revisit_days)),
        rules,
    )


def bindings_of(
    store: Store, user_id: str, storyline_id: int | None, kinds: Sequence[BindingKind] | None, history: bool
) -> list[Binding]:
    """Live bindings (``history``: completed ones), of one storyline (checked to be the user's) or all."""
    if storyline_id is not None:
        store.get_storyline(user_id, storyline_id)
    ids = None if storyline_id is None else [storyline_id]
    return store.list_bindings(user_id, storyline_ids=ids, kinds=kinds, active=not history)


def carried(
    store: Store, user_id: str, live: Sequence[Binding], storyline_ids: Sequence[int]
) -> dict[int, tuple[list[Binding], list[dict[str, Any]]]]:
    """For each storyline: its live bindings, and the binding names of up to two other recent topic storylines
    (NarraNexus: "Module instances bound to this Narrative are loaded"; auxiliary narratives ride along)."""
    storylines = store.list_storylines(user_id)
    names: dict[int, list[str]] = {}
    for binding in sorted(live, key=lambda b: (b.kind.value, b.created_at, b.id)):
        names.setdefault(binding.storyline_id, []).append(binding.name)
    found = {}
    for sid in dict.fromkeys(storyline_ids):
        own = sorted((b for b in live if b.storyline_id == sid), key=lambda b: (b.kind.value, b.id))
        others = [
            {"storyline_id": s.id, "storyline": s.name, "bindings": names.get(s.id, [])}
            for s in auxiliary(storylines, sid)
        ]
        found[sid] = (own, others)
    return found


# --- how the greeting and the context show it ----------------------------------------------------------


def greeting_lines(agenda: Agenda) -> list[str]:
    """The greeting's two sections (each left out when empty)."""
    lines: list[str] = []
    if agenda.stale_goals:
        lines += ["", f"Goals gone quiet (untouched for {agenda.rules.goal_stale_days} days or more):"]
        lines += [f"  • {g.line()}" for g in agenda.stale_goals[:SHOWN]]
        if len(agenda.stale_goals) > SHOWN:
            lines.append(f"  • … and {len(agenda.stale_goals) - SHOWN} more")
    if agenda.reviews:
        lines += ["", "Decisions to review:"]
        lines += [f"  • {d.question} ({d.reason})" for d in agenda.reviews[:SHOWN]]
        if len(agenda.reviews) > SHOWN:
            lines.append(f"  • … and {len(agenda.reviews) - SHOWN} more")
    return lines


def _status(binding: Binding) -> str:
    tools = binding.payload.get("tools") if binding.kind is BindingKind.TOOLSET else None
    extra = f"; tools: {', '.join(str(t) for t in tools)}" if isinstance(tools, list) and tools else ""
    return f"- {binding.kind.value}: {binding.name} ({binding.status}{extra})"


def binding_section(storyline: Storyline, bindings: Sequence[Binding]) -> tuple[str, str, list[tuple[float, str]]]:
    """(head, tail, ranked lines) of the context's ``<bindings>`` section: the storyline's live instances
    (goals last to go, tool sets first)."""
    order = {BindingKind.GOAL: 3, BindingKind.JOB: 2, BindingKind.MODULE: 1, BindingKind.TOOLSET: 0}
    lines = [(order[b.kind] + i / 1000, _status(b)) for i, b in enumerate(bindings)]
    name = " ".join(storyline.name.replace('"', "'").split())
    return f'<bindings storyline="{name}">', "</bindings>", lines


def reminder_section(agenda: Agenda) -> tuple[str, str, list[tuple[float, str]]]:
    """(head, tail, ranked lines) of the context's ``<reminders>`` section: stale goals, then decisions to
    review (the quietest goal and the longest waiting decision go last)."""
    lines: list[tuple[float, str]] = []
    for i, goal in enumerate(agenda.stale_goals[:SHOWN]):
        lines.append((10 - i, f"- stale goal: {goal.line()}"))
    for i, due in enumerate(agenda.reviews[:SHOWN]):
        lines.append((5 - i, f"- review decision #{due.memory.id}: {due.question}"))
    return "<reminders>", "</reminders>", lines
