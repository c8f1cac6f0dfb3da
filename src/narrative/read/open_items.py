"""Open-item queries: what is still open (tasks, waiting-ons, opened questions), what went stale, what is recent.

The write path settles items (:mod:`narrative.write.resolve`); these read what is left, for the greeting, the
export, the engine's ``open_items`` / ``stale_items`` and the CLI.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from narrative.errors import ValidationError
from narrative.model import Entity, EntityType
from narrative.store.protocol import Store

__all__ = ["OPEN_TYPES", "open_entities", "recent_entities", "stale_entities"]

OPEN_TYPES: tuple[EntityType, ...] = (EntityType.TASK, EntityType.WAITING_ON, EntityType.QUESTION_OPENED)


def open_entities(
    store: Store,
    user_id: str,
    entity_type: EntityType | None = None,
    storyline_id: int | None = None,
    exclude_conversation: int | None = None,
    limit: int = 500,
) -> list[Entity]:
    """Active entities of the open types (or of ``entity_type``), oldest first."""
    types = [entity_type] if entity_type is not None else list(OPEN_TYPES)
    found = store.list_entities(user_id, entity_types=types, active=True, storyline_id=storyline_id, limit=limit)
    found = [e for e in found if exclude_conversation is None or e.conversation_id != exclude_conversation]
    return sorted(found, key=lambda e: (e.created_at, e.id))


def stale_entities(
    store: Store, user_id: str, now: datetime, days: int, entity_type: EntityType | None = None
) -> list[Entity]:
    """Open items older than ``days`` days that nothing has resolved ("should have moved by now")."""
    if isinstance(days, bool) or not isinstance(days, int) or days < 0:
        raise ValidationError(f"days must be a non-negative integer, got {days!r}", field="days")
    cutoff = now - timedelta(days=days)
    return [e for e in open_entities(store, user_id, entity_type) if e.created_at <= cutoff]


def recent_entities(store: Store, user_id: str, entity_type: EntityType, now: datetime, days: int) -> list[Entity]:
    """Entities of one type made in the last ``days`` days, newest first (e.g. recent decisions)."""
    since = now - timedelta(days=days)
    found = store.list_entities(user_id, entity_types=[entity_type], since=since)
    return [e for e in found if e.created_at <= now]
