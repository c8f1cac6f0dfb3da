"""What a memory file holds: where it lives, its migrations, rows per user, a user's messages (status pages)."""

from __future__ import annotations

from typing import Any

from narrative.model import Message
from narrative.store.protocol import Store

__all__ = ["USER_TABLES", "describe", "messages", "users"]

USER_TABLES = ("conversations", "messages", "memories", "narratives", "storylines", "entities")


def describe(store: Store, db: str, user_id: str) -> dict[str, Any]:
    """Where the memory lives and what one user holds there."""
    return {
        "db": db,
        "backend": store.backend,
        "user": user_id,
        "migrations": store.applied_migrations(),
        "counts": {table: store.count_rows(table, user_id) for table in USER_TABLES},
    }


def users(store: Store) -> dict[str, dict[str, int]]:
    """Every user of the file with what they hold beyond a fresh start (rows per table; empty for a user with
    nothing yet).  Reads only: it creates no user."""
    return {u.id: store.user_content(u.id) for u in store.list_users()}


def messages(store: Store, user_id: str, conversation_id: int | None, limit: int | None) -> list[Message]:
    """Messages in order: of one conversation (NotFound for another user's), or the user's latest ``limit``."""
    if conversation_id is not None:
        store.get_conversation(user_id, conversation_id)
        return store.list_messages(user_id, conversation_id=conversation_id, limit=limit)
    return store.list_messages(user_id, limit=limit, latest=limit is not None)
