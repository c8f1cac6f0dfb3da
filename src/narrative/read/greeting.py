"""The startup greeting (Talking Rock's CAIRN) and gentle idle awareness.

Opening the memory answers "where was I?":

* a conversation is **active** → a *resume* greeting: its title, how long it has been quiet, its
  latest messages and the running narrative of its storyline ("we were in the middle of …");
* otherwise → a *fresh* greeting: open threads (questions, tasks — with their due dates),
  waiting-ons, decisions of the last ``decision_days`` days, stale items (open for longer than
  ``stale_after_days``), a conversation still waiting for review, and the latest memory of a closed
  conversation (or the latest narrative link) as "where you left off"; given an agenda
  (:mod:`narrative.read.agenda`), also the goals gone quiet and the decisions due for review.

Idle awareness is an invitation, never a demand: an active, unpaused conversation quiet for longer
than ``idle_after_minutes`` yields one line, once per quiet spell (the caller records
``idle_notified_at``; a new message clears it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from narrative.model import (
    Conversation,
    ConversationStatus,
    Entity,
    EntityType,
    MemoryItem,
    Message,
    Narrative,
    Source,
    Stream,
)
from narrative.read.agenda import Agenda, GoalReminder, greeting_lines
from narrative.read.audit import DueDecision
from narrative.read.current import current_messages
from narrative.read.open_items import open_entities, recent_entities
from narrative.store.filters import MemoryFilter
from narrative.store.protocol import Store
from narrative.text.lines import entity_label

__all__ = ["IDLE_INVITATION", "Greeting", "build_greeting", "idle_due"]

IDLE_INVITATION = "We've been quiet for a while. Is this thread resolved, or are you still sitting with it?"
_SHOWN = 5  # items per section in the text


@dataclass
class Greeting:
    """What to say when the user opens the memory; ``text`` is ready to show."""

    kind: str  # resume | fresh
    text: str
    conversation: Conversation | None = None
    recent_messages: list[Message] = field(default_factory=list)
    running_narrative: Narrative | None = None
    open_threads: list[Entity] = field(default_factory=list)
    waiting_ons: list[Entity] = field(default_factory=list)
    recent_decisions: list[Entity] = field(default_factory=list)
    stale: list[Entity] = field(default_factory=list)
    latest_memory: MemoryItem | None = None
    latest_narrative: Narrative | None = None
    pending_review: Conversation | None = None
    agenda: Agenda | None = None  # stale goals and decisions due for review (read/agenda.py)

    @property
    def stale_goals(self) -> list[GoalReminder]:
        return [] if self.agenda is None else list(self.agenda.stale_goals)

    @property
    def decisions_to_review(self) -> list[DueDecision]:
        return [] if self.agenda is None else list(self.agenda.reviews)

    def to_dict(self) -> dict[str, Any]:
        def entities(items: list[Entity]) -> list[dict[str, Any]]:
            return [_entity_dict(e) for e in items]

        return {
            "kind": self.kind,
            "text": self.text,
            "conversation": None if self.conversation is None else _conversation_dict(self.conversation),
            "recent_messages": [
                {
                    "id": m.id,
                    "position": m.position,
                    "role": m.role.value,
                    "speaker": m.speaker,
                    "content": m.content,
                    "created_at": m.created_at.isoformat(),
                }
                for m in self.recent_messages
            ],
            "running_narrative": _narrative_dict(self.running_narrative),
            "open_threads": entities(self.open_threads),
            "waiting_ons": entities(self.waiting_ons),
            "recent_decisions": entities(self.recent_decisions),
            "stale": entities(self.stale),
            "latest_memory": None
            if self.latest_memory is None
            else {
                "id": self.latest_memory.id,
                "content": self.latest_memory.content,
                "conversation_id": self.latest_memory.conversation_id,
                "storyline_id": self.latest_memory.storyline_id,
                "created_at": self.latest_memory.created_at.isoformat(),
            },
            "latest_narrative": _narrative_dict(self.latest_narrative),
            "pending_review": None if self.pending_review is None else _conversation_dict(self.pending_review),
            "stale_goals": [g.to_dict() for g in self.stale_goals],
            "decisions_to_review": [d.to_dict() for d in self.decisions_to_review],
        }

    def __str__(self) -> str:
        return self.text


def _entity_dict(e: Entity) -> dict[str, Any]:
    return {
        "id": e.id,
        "type": e.entity_type.value,
        "name": e.name,
        "label": entity_label(e.entity_type, e.name, e.data),
        "conversation_id": e.conversation_id,
        "storyline_id": e.storyline_id,
        "created_at": e.created_at.isoformat(),
        "due": e.data.get("due"),
    }


def _conversation_dict(c: Conversation) -> dict[str, Any]:
    return {
        "id": c.id,
        "title": c.title,
        "status": c.status.value,
        "message_count": c.message_count,
        "is_paused": c.is_paused,
        "started_at": c.started_at.isoformat(),
        "last_message_at": None if c.last_message_at is None else c.last_message_at.isoformat(),
    }


def _narrative_dict(n: Narrative | None) -> dict[str, Any] | None:
    if n is None:
        return None
    return {"id": n.id, "summary": n.summary, "topic": n.topic, "storyline_id": n.storyline_id, "sealed": n.sealed}


def _ago(then: datetime, now: datetime) -> str:
    seconds = max(0, int((now - then).total_seconds()))
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size:
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''} ago"
    return "just now"


def _line(e: Entity, now: datetime, stale: bool = False) -> str:
    label = entity_label(e.entity_type, e.name, e.data)
    if e.entity_type is EntityType.QUESTION_OPENED:
        label = f"“{label}”"
    extras = []
    if e.data.get("due"):
        extras.append(f"due {e.data['due']}")
    if stale:
        extras.append(f"open since {e.created_at:%Y-%m-%d}, {_ago(e.created_at, now)}")
    elif e.conversation_id is not None:
        extras.append(f"from conversation #{e.conversation_id}")
    return f"  • {label}" + (f" ({'; '.join(extras)})" if extras else "")


def _section(title: str, items: list[Entity], now: datetime, stale: bool = False) -> list[str]:
    if not items:
        return []
    lines = [title]
    lines += [_line(e, now, stale) for e in items[:_SHOWN]]
    if len(items) > _SHOWN:
        lines.append(f"  • … and {len(items) - _SHOWN} more")
    return lines


# --- resume -------------------------------------------------------------------------------------


def _resume(store: Store, user_id: str, active: Conversation, now: datetime, recent: int) -> Greeting:
    messages = current_messages(
        store, user_id, store.list_messages(user_id, conversation_id=active.id, limit=recent, latest=True)
    )
    running = None
    for message in reversed(messages):
        if message.storyline_id is not None:
            running = store.open_narrative(user_id, message.storyline_id)
            if running is not None:
                break
    title = f"“{active.title}”" if active.title else f"conversation #{active.id}"
    last = active.last_message_at or active.started_at
    lines = [
        f"Welcome back. We were in the middle of {title} ({active.message_count} messages; "
        f"the last one {_ago(last, now)})."
    ]
    if active.is_paused:
        lines.append("You paused it; it is waiting for you whenever you are ready.")
    if running is not None:
        lines += ["", f"Where we were: {running.summary}"]
    if messages:
        lines += ["", "The last few messages:"]
        lines += [f"  [{m.position}] {m.speaker or m.role.value}: {_clip(m.content)}" for m in messages]
    lines += ["", "Carry on, or close it when you are done."]
    return Greeting(
        "resume", "\n".join(lines), conversation=active, recent_messages=messages, running_narrative=running
    )


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# --- fresh --------------------------------------------------------------------------------------


def _latest_memory(store: Store, user_id: str) -> MemoryItem | None:
    """The newest user-reviewed memory of a closed conversation: a closing memory, or the memory of what was said
    that a confirmation kept instead of a copy (docs/decisions.md, "What a close stores")."""
    where = MemoryFilter(streams=[Stream.NARRATIVE], sources=[Source.NARRATIVE], current_only=True, limit=50)
    found = [next((m for m in store.list_memories(user_id, where) if m.user_reviewed), None)]
    for conversation in store.list_conversations(user_id, status=ConversationStatus.ARCHIVED, limit=1):
        where = MemoryFilter(conversation_ids=[conversation.id], current_only=True, limit=500)
        found.append(next((m for m in store.list_memories(user_id, where) if m.user_reviewed), None))
    reviewed = [m for m in found if m is not None]
    return max(reviewed, key=lambda m: (m.created_at, m.id)) if reviewed else None


def _fresh(
    store: Store, user_id: str, now: datetime, stale_after_days: int, decision_days: int, agenda: Agenda | None
) -> Greeting:
    open_items = open_entities(store, user_id)
    stale_cut = now - timedelta(days=stale_after_days)
    stale = [e for e in open_items if e.created_at <= stale_cut]
    fresh = [e for e in open_items if e.created_at > stale_cut]
    threads = [e for e in fresh if e.entity_type is not EntityType.WAITING_ON]
    waiting = [e for e in fresh if e.entity_type is EntityType.WAITING_ON]
    decisions = recent_entities(store, user_id, EntityType.DECISION, now, decision_days)
    pending = store.list_conversations(user_id, status=ConversationStatus.READY_TO_CLOSE, limit=1)
    latest_memory = _latest_memory(store, user_id)
    latest_link = store.latest_narrative(user_id)
    reminders = greeting_lines(agenda) if agenda is not None else []
    anything = open_items or latest_memory or latest_link or reminders
    lines = ["Welcome back." if anything else "Hello. Nothing is open yet."]
    if latest_memory is not None:
        when = latest_memory.event_at or latest_memory.created_at
        lines += ["", f"Where you left off ({when:%Y-%m-%d}): {latest_memory.content}"]
    elif latest_link is not None:
        lines += ["", f"Where you left off: {latest_link.summary}"]
    if pending:
        title = f"“{pending[0].title}”" if pending[0].title else f"#{pending[0].id}"
        lines += ["", f"Conversation {title} is waiting for your review before it is archived."]
    for title, items, is_stale in (
        ("Open threads:", threads, False),
        ("Waiting on:", waiting, False),
        (f"Gone quiet (open longer than {stale_after_days} days):", stale, True),
    ):
        section = _section(title, items, now, is_stale)
        lines += ["", *section] if section else []
    if decisions:
        lines += ["", f"Decided in the last {decision_days} days:"]
        lines += [f"  • {e.data.get('what') or e.name} ({e.created_at:%Y-%m-%d})" for e in decisions[:_SHOWN]]
    else:
        last = store.list_entities(user_id, entity_types=[EntityType.DECISION], limit=1)
        if last:
            lines += [
                "",
                f"No decisions in the last {decision_days} days; the latest was "
                f"“{last[0].data.get('what') or last[0].name}” ({last[0].created_at:%Y-%m-%d}).",
            ]
    lines += reminders
    if open_items or decisions or reminders:
        lines += ["", "What would you like to pick up?"]
    return Greeting(
        "fresh",
        "\n".join(lines),
        open_threads=threads,
        waiting_ons=waiting,
        recent_decisions=decisions,
        stale=stale,
        latest_memory=latest_memory,
        latest_narrative=latest_link,
        pending_review=pending[0] if pending else None,
        agenda=agenda,
    )


def build_greeting(
    store: Store,
    user_id: str,
    now: datetime,
    *,
    stale_after_days: int = 5,
    decision_days: int = 7,
    recent_messages: int = 6,
    agenda: Agenda | None = None,
) -> Greeting:
    """Resume the active conversation, or greet with what is open, decided, stale and last remembered (and, given
    an ``agenda``, the goals gone quiet and the decisions due for review)."""
    active = store.active_conversation(user_id)
    if active is not None:
        return _resume(store, user_id, active, now, recent_messages)
    return _fresh(store, user_id, now, stale_after_days, decision_days, agenda)


def idle_due(conversation: Conversation | None, now: datetime, idle_after_minutes: int) -> bool:
    """True when an active, unpaused conversation has been quiet long enough and was not told yet."""
    if conversation is None or conversation.status is not ConversationStatus.ACTIVE or conversation.is_paused:
        return False
    if conversation.idle_notified_at is not None:
        return False
    last = conversation.last_message_at or conversation.started_at
    return now - last >= timedelta(minutes=idle_after_minutes)
