"""History: every change to a memory is an event (mem0's ``history(id)``; issue 23).

One append-only list per memory, oldest first: ``created`` (the store appends it with the memory itself, so
no write path can store a memory without one), ``edited`` (by hand: the CLI, HTTP, MCP, the page),
``confirmed`` (the review step confirmed what a close proposed), ``superseded`` and ``restored`` (a
correction, and undoing it), ``deleted`` (the tombstone).  Each holds the time, the text before and after,
and a small ``detail`` of ids and words, never text:

==============  =================================================================================
kind            detail
==============  =================================================================================
created         ``{}``
edited          ``{"fields": ["content", "importance", …]}``: what the edit changed
confirmed       ``{"conversation_id": N}``; ``old_text`` is the proposal when the review reworded it
superseded      ``{"superseded_by": M}``: the memory that corrected it
restored        ``{"superseded_by": M}``: the supersession undone
deleted         ``{"with": "memory" | "conversation" | "storyline"}``: what the delete was of
==============  =================================================================================

A delete keeps the events, without their texts and details (:func:`tombstone`): the history says that the
memory was made, changed and deleted, and when, but nothing of what it said (docs/decisions.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from narrative.model import EventKind, MemoryEvent, MemoryItem
from narrative.store.protocol import Store

__all__ = [
    "BEFORE_HISTORY",
    "EDITABLE",
    "confirmed",
    "edited",
    "events_for_old_export",
    "history",
    "record",
    "tombstone",
]

#: The detail of the events made for memories stored before there was a history (the migration, old exports).
BEFORE_HISTORY = {"from": "before history"}


def record(
    store: Store,
    user_id: str,
    memory_id: int,
    kind: EventKind | str,
    old: str,
    new: str,
    now: datetime,
    detail: Mapping[str, Any] | None = None,
) -> MemoryEvent:
    """Append one event to a memory's history (``superseded`` / ``restored``: detail ``{"superseded_by": id}``)."""
    return store.insert_memory_event(user_id, memory_id, EventKind(kind), now, old, new, detail)


#: The fields of a memory an edit by hand may change (``entities``: its entities were added or removed).
EDITABLE = ("content", "importance", "emotions", "metadata")


def edited(store: Store, before: MemoryItem, after: MemoryItem, now: datetime, entities: bool = False) -> None:
    """An edit by hand: the text before and after, and which fields it changed (no event when none did)."""
    changed = [f for f in EDITABLE if getattr(before, f) != getattr(after, f)] + (["entities"] if entities else [])
    if changed:
        record(
            store, after.user_id, after.id, EventKind.EDITED, before.content, after.content, now, {"fields": changed}
        )


def confirmed(store: Store, memories: Sequence[MemoryItem], conversation_id: int, now: datetime) -> None:
    """The review confirmed these memories of a close (the proposal, when the review reworded it, as old text)."""
    for memory in memories:
        proposal = memory.original_content if memory.user_edited and memory.original_content else ""
        record(
            store,
            memory.user_id,
            memory.id,
            EventKind.CONFIRMED,
            proposal,
            memory.content,
            now,
            {"conversation_id": conversation_id},
        )


def tombstone(store: Store, user_id: str, memory_ids: Iterable[int], now: datetime, with_: str) -> None:
    """Before memories are deleted: blank their events' texts and details, then append ``deleted`` to each.

    ``with_``: what the delete was of (``memory``, ``conversation`` or ``storyline``).
    """
    ids = sorted(set(memory_ids))
    store.tombstone_memory_events(user_id, ids)
    for memory_id in ids:
        record(store, user_id, memory_id, EventKind.DELETED, "", "", now, {"with": with_})


def history(store: Store, user_id: str, memory_id: int) -> list[MemoryEvent]:
    """Every event of a memory, oldest first, also after it was deleted; NotFound when it never was the user's."""
    events = store.memory_events(user_id, memory_id)
    if not events:
        store.get_memory(user_id, memory_id)  # NotFound unless it is the user's (every memory has a created event)
    return events


def events_for_old_export(memories: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Event rows for an export made before there was a history (what the migration gives a file's memories)."""
    rows: list[dict[str, Any]] = []

    def add(memory: Mapping[str, Any], kind: str, old: Any, new: Any) -> None:
        rows.append(
            {
                "id": len(rows) + 1,
                "memory_id": memory.get("id"),
                "kind": kind,
                "old_text": old if isinstance(old, str) else "",
                "new_text": new if isinstance(new, str) else "",
                "detail": dict(BEFORE_HISTORY),
                "created_at": memory.get("created_at"),
            }
        )

    for m in memories:
        content, original, reviewed = m.get("content"), m.get("original_content"), bool(m.get("user_reviewed"))
        add(m, "created", "", content if reviewed or original is None else original)
    for m in memories:
        if m.get("user_reviewed"):
            original = m.get("original_content")
            add(m, "confirmed", original if original not in (None, m.get("content")) else "", m.get("content"))
    for m in memories:
        original = m.get("original_content")
        if not m.get("user_reviewed") and original is not None and original != m.get("content"):
            add(m, "edited", original, m.get("content"))
    return rows
