"""Storyline bindings (NarraNexus): "Active module instances — running jobs, chat histories, skill study sessions —
are bound to the Narrative they belong to."

An agent binds a named instance (a tool set, a job with a status, a goal with a state, a module with any JSON
payload) to a storyline.  Binding the same kind and name to the same storyline again updates the live binding
instead of adding a second one, so an agent can bind what it uses at every turn.  A status that is final for its
kind (``BINDING_STATUSES``: a job ``done``, a goal ``achieved`` …) moves the binding to history
(``completed_at``); a live status brings it back.

Every change *touches* the binding (``touched_at``, and ``touched_by`` says what touched it).  Without an LLM a
goal is also touched by a turn routed to its storyline that names it (:func:`named_goals`: it shares at least two
of the goal's content words, or all of them when it has fewer).  With an LLM, closing a conversation asks the
model which goals the conversation moved, and which it achieved or abandoned (:func:`apply_progress`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from narrative.errors import ValidationError
from narrative.model import BINDING_STATUSES, Binding, BindingKind, Message, Storyline
from narrative.store.protocol import Store
from narrative.text.lines import turn_line
from narrative.text.words import word_keys

if TYPE_CHECKING:
    from narrative.providers.llm import LLM, LLMSettings

__all__ = [
    "MAX_PAYLOAD",
    "GoalJudge",
    "GoalProgress",
    "after_close",
    "after_turns",
    "apply_progress",
    "bind",
    "check_status",
    "complete",
    "delete",
    "named_goals",
    "touch_goals",
    "update",
]

MAX_PAYLOAD = 50_000  # characters of a payload's JSON
MAX_NAME = 200
BY_HAND = "updated by hand"


def check_status(kind: BindingKind, status: str | None) -> str:
    """The status, checked against the kind's statuses (the kind's first live status when None)."""
    statuses = BINDING_STATUSES[kind]
    if status is None:
        return statuses.active[0]
    if not isinstance(status, str) or status not in statuses.all:
        raise ValidationError(
            f"a {kind.value}'s status is one of {', '.join(statuses.all)}; got {status!r}", field="status"
        )
    return status


def check_payload(payload: Mapping[str, Any] | None) -> dict[str, Any]:
    if payload is None:
        return {}
    if not isinstance(payload, Mapping):
        raise ValidationError("payload must be a JSON object", field="payload")
    try:
        text = json.dumps(dict(payload), sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ValidationError(f"payload must be plain JSON ({error})", field="payload") from None
    if len(text) > MAX_PAYLOAD:
        raise ValidationError(f"payload is longer than {MAX_PAYLOAD} characters as JSON", field="payload")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValidationError("name must be non-empty text", field="name")
    name = " ".join(name.split())
    if len(name) > MAX_NAME:
        raise ValidationError(f"name is longer than {MAX_NAME} characters", field="name")
    return name


def _final(kind: BindingKind, status: str) -> bool:
    return status in BINDING_STATUSES[kind].final


def bind(
    store: Store,
    user_id: str,
    storyline_id: int,
    kind: BindingKind,
    name: str,
    status: str | None,
    payload: Mapping[str, Any] | None,
    now: datetime,
) -> Binding:
    """Bind ``name`` to the storyline; a live binding of that kind and name there is updated (and touched)."""
    name = _check_name(name)
    store.get_storyline(user_id, storyline_id)  # NotFound for another user's or a missing storyline
    live = [
        b
        for b in store.list_bindings(user_id, storyline_ids=[storyline_id], kinds=[kind])
        if b.name.casefold() == name.casefold()
    ]
    if live:
        return update(store, user_id, live[0], status=status, payload=payload, now=now, reason="bound again")
    checked = check_status(kind, status)
    return store.insert_binding(
        Binding(
            id=0,
            user_id=user_id,
            storyline_id=storyline_id,
            kind=kind,
            name=name,
            status=checked,
            payload=check_payload(payload),
            created_at=now,
            updated_at=now,
            touched_at=now,
            touched_by="bound",
            completed_at=now if _final(kind, checked) else None,
        )
    )


def update(
    store: Store,
    user_id: str,
    binding: Binding,
    *,
    status: str | None = None,
    payload: Mapping[str, Any] | None = None,
    name: str | None = None,
    now: datetime,
    reason: str = BY_HAND,
) -> Binding:
    """Change a binding's status, payload (replaced whole) or name; it is touched.  A final status moves it to
    history, a live one brings it back."""
    changes: dict[str, Any] = {"touched_at": now, "touched_by": reason, "updated_at": now}
    if name is not None:
        changes["name"] = _check_name(name)
    if payload is not None:
        changes["payload"] = check_payload(payload)
    if status is not None:
        changes["status"] = check_status(binding.kind, status)
        if _final(binding.kind, changes["status"]):
            changes["completed_at"] = binding.completed_at or now
        else:
            changes["completed_at"] = None
    return store.update_binding(user_id, binding.id, **changes)


def complete(store: Store, user_id: str, binding: Binding, now: datetime, status: str | None = None) -> Binding:
    """Move a binding to history with the kind's finishing status (a job ``done``, a goal ``achieved`` …) or
    the final status given."""
    statuses = BINDING_STATUSES[binding.kind]
    final = statuses.finish if status is None else check_status(binding.kind, status)
    if final not in statuses.final:
        raise ValidationError(
            f"completing a {binding.kind.value} takes one of {', '.join(statuses.final)}; got {final!r}",
            field="status",
        )
    return update(store, user_id, binding, status=final, now=now, reason="completed")


# --- goals touched by turns -----------------------------------------------------------------------


def _goal_words(goal: Binding) -> set[str]:
    return word_keys(goal.name)


def names_goal(goal: Binding, text: str) -> list[str]:
    """The goal's content words a text says, when it says enough of them to name the goal (else [])."""
    keys = _goal_words(goal)
    shared = sorted(keys & word_keys(text))
    return shared if keys and len(shared) >= min(2, len(keys)) else []


def named_goals(goals: Sequence[Binding], message: Message, storyline_id: int) -> list[tuple[Binding, str]]:
    """(goal, why) for each live goal of ``storyline_id`` (where the message was routed) that the message names."""
    found = []
    for goal in goals:
        if goal.storyline_id != storyline_id or not goal.active:
            continue
        shared = names_goal(goal, message.content)
        if shared:
            found.append((goal, f"message #{message.id} names it ({', '.join(shared)})"))
    return found


def touch_goals(
    store: Store, user_id: str, goals: Sequence[Binding], routed: Sequence[tuple[Message, int]]
) -> list[Binding]:
    """Touch every live goal that a message (with the storyline it was routed to) names, at that message's time;
    returns the goals touched."""
    touched: dict[int, Binding] = {}
    for message, storyline_id in routed:
        for goal, why in named_goals(goals, message, storyline_id):
            current = touched.get(goal.id, goal)
            if message.created_at >= current.touched_at:
                touched[goal.id] = store.update_binding(user_id, goal.id, touched_at=message.created_at, touched_by=why)
    return list(touched.values())


# --- a model's judgement of a conversation's progress on goals -------------------------------------


@dataclass(frozen=True)
class GoalProgress:
    """What a model said about one goal after a conversation: moved or not, its status now, and why."""

    goal_id: int
    touched: bool
    status: str
    reason: str


def apply_progress(
    store: Store, user_id: str, goals: Sequence[Binding], progress: Sequence[GoalProgress], when: datetime
) -> list[Binding]:
    """Touch the goals the model says the conversation moved (at ``when``), with its reason; a final status it
    gives (achieved, abandoned) moves the goal to history."""
    by_id = {g.id: g for g in goals}
    changed = []
    for item in progress:
        goal = by_id.get(item.goal_id)
        if goal is None or not (item.touched or item.status != goal.status):
            continue
        reason = f"model: {item.reason}"
        status = item.status if item.status != goal.status else None
        changed.append(update(store, user_id, goal, status=status, now=when, reason=reason))
    return changed


MAX_EXCHANGE_LINES = 40  # the conversation's latest turns a model is shown
_GOAL_STATUSES = BINDING_STATUSES[BindingKind.GOAL].all


class GoalJudge:
    """Asks a model which of a storyline's live goals a conversation moved, and their status now."""

    def __init__(self, llm: LLM, limits: LLMSettings) -> None:
        self.llm, self.limits = llm, limits

    def progress(
        self, storyline: Storyline, goals: Sequence[Binding], messages: Sequence[Message]
    ) -> list[GoalProgress] | None:
        """One entry per goal the model judged, or None (logged) when it failed or answered out of shape."""
        if not goals or not messages:
            return []
        allowed = {g.id for g in goals}

        def valid(obj: dict[str, Any]) -> dict[str, Any]:
            from narrative.providers.llm import check_fields

            entries = check_fields(obj, {"goals": list})["goals"]
            seen: set[int] = set()
            for entry in entries:
                checked = check_fields(entry, {"id": int, "touched": bool, "status": str, "reason": str})
                if checked["id"] not in allowed or checked["id"] in seen:
                    raise ValidationError(f"goal {checked['id']} was not asked about", field="id")
                if checked["status"] not in _GOAL_STATUSES:
                    raise ValidationError(f"unknown goal status {checked['status']!r}", field="status")
                if len(checked["reason"]) > 300 or (checked["touched"] and not checked["reason"].strip()):
                    raise ValidationError("a touched goal needs a short reason", field="reason")
                seen.add(checked["id"])
            return {"goals": entries}

        lines = [turn_line(m) for m in messages][-MAX_EXCHANGE_LINES:]
        from narrative.providers.llm import TurnBudget, ask_json

        reply = ask_json(
            self.llm,
            TurnBudget.from_settings(self.limits),
            "goal_progress",
            {
                "storyline": storyline.name,
                "goals": [{"id": g.id, "goal": g.name, "status": g.status} for g in goals],
                "exchanges": "\n".join(lines),
            },
            valid,
        )
        if reply is None:
            return None
        return [
            GoalProgress(int(e["id"]), bool(e["touched"]), str(e["status"]), " ".join(str(e["reason"]).split()))
            for e in reply["goals"]
        ]


# --- what follows turns and closes -------------------------------------------------------------------


def after_turns(store: Store, user_id: str, routed: Sequence[tuple[Message, int]]) -> list[Binding]:
    """Touch the live goals the turns named (each message with the storyline it was routed to); returns every
    live binding of the user as it is now."""
    live = store.list_bindings(user_id)
    goals = [b for b in live if b.kind is BindingKind.GOAL]
    if not goals:
        return live
    with store.transaction():
        touched = {b.id: b for b in touch_goals(store, user_id, goals, routed)}
    return [touched.get(b.id, b) for b in live]


def after_close(store: Store, user_id: str, conversation_id: int, judge: GoalJudge) -> list[Binding]:
    """Ask the model which live goals of each storyline the conversation spoke in it moved, achieved or abandoned;
    apply what it answered well (at the time of the storyline's last message); returns the goals changed."""
    messages = store.list_messages(user_id, conversation_id=conversation_id)
    goals = store.list_bindings(user_id, kinds=[BindingKind.GOAL])
    changed: list[Binding] = []
    for storyline_id in sorted({g.storyline_id for g in goals}):
        said = [m for m in messages if m.storyline_id == storyline_id]
        mine = [g for g in goals if g.storyline_id == storyline_id]
        if not said:
            continue
        progress = judge.progress(store.get_storyline(user_id, storyline_id), mine, said)
        if progress:
            with store.transaction():
                changed += apply_progress(store, user_id, mine, progress, said[-1].created_at)
    return changed


def delete(store: Store, user_id: str, binding_id: int) -> dict[str, int]:
    """Delete a binding for good (completing it keeps it as history instead)."""
    store.delete_binding(user_id, binding_id)
    return {"bindings": 1}
