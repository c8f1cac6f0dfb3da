"""The facade's conversation lifecycle (Talking Rock) and messages."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from narrative.checks import require_choice
from narrative.engine.core import Runtime
from narrative.errors import InvalidTransition
from narrative.model import Conversation, ConversationStatus, Message, Role
from narrative.write import lifecycle


class Conversations:
    """Conversations and their messages: start, add, pause, resume, list, describe."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime

    def start_conversation(
        self, title: str = "", *, user: str | None = None, at: datetime | None = None
    ) -> Conversation:
        """Start a conversation; raises ConversationAlreadyActive while one is active."""
        user_id = self.rt.user_id(user)
        return lifecycle.start(self.rt.store, user_id, at or self.rt.clock(), title=title)

    def active_conversation(self, *, user: str | None = None) -> Conversation | None:
        return self.rt.store.active_conversation(self.rt.user_id(user))

    def get_conversation(self, conversation_id: int, *, user: str | None = None) -> Conversation:
        return self.rt.store.get_conversation(self.rt.user_id(user), conversation_id)

    def list_conversations(
        self, status: str | None = None, *, limit: int = 50, offset: int = 0, user: str | None = None
    ) -> list[Conversation]:
        wanted = None if status is None else require_choice(ConversationStatus, status, "status")
        return self.rt.store.list_conversations(self.rt.user_id(user), status=wanted, limit=limit, offset=offset)

    def add_message(
        self,
        content: str,
        role: str = "user",
        *,
        speaker: str = "",
        conversation_id: int | None = None,
        at: datetime | None = None,
        meta: dict[str, Any] | None = None,
        user: str | None = None,
    ) -> Message:
        """Store one message in the active conversation (started if none) without derived work."""
        user_id = self.rt.user_id(user)
        return lifecycle.add_message(
            self.rt.store,
            user_id,
            content,
            at or self.rt.clock(),
            role=require_choice(Role, role, "role"),
            speaker=speaker,
            conversation_id=conversation_id,
            meta=meta,
        )

    def messages(
        self, conversation_id: int | None = None, *, limit: int | None = None, user: str | None = None
    ) -> list[Message]:
        """Messages in order: of one conversation, or the user's latest ``limit`` across all."""
        user_id = self.rt.user_id(user)
        if conversation_id is not None:
            self.rt.store.get_conversation(user_id, conversation_id)
            return self.rt.store.list_messages(user_id, conversation_id=conversation_id, limit=limit)
        return self.rt.store.list_messages(user_id, limit=limit, latest=limit is not None)

    def pause_conversation(self, conversation_id: int | None = None, *, user: str | None = None) -> Conversation:
        user_id = self.rt.user_id(user)
        return lifecycle.pause(self.rt.store, user_id, self._active_id(user_id, conversation_id), self.rt.clock())

    def unpause_conversation(self, conversation_id: int | None = None, *, user: str | None = None) -> Conversation:
        user_id = self.rt.user_id(user)
        return lifecycle.unpause(self.rt.store, user_id, self._active_id(user_id, conversation_id))

    def resume_conversation(self, conversation_id: int | None = None, *, user: str | None = None) -> Conversation:
        """ready_to_close → active: cancel the closure, nothing is stored."""
        return lifecycle.resume(self.rt.store, self.rt.user_id(user), conversation_id)

    def describe(self, *, user: str | None = None) -> dict[str, Any]:
        """Where the memory lives and what it holds (for ``narrative init`` and status pages)."""
        user_id = self.rt.user_id(user)
        return {
            "db": self.rt.settings.db,
            "backend": self.rt.store.backend,
            "user": user_id,
            "migrations": self.rt.store.applied_migrations(),
            "counts": {
                table: self.rt.store.count_rows(table, user_id)
                for table in ("conversations", "messages", "memories", "narratives", "storylines", "entities")
            },
        }

    def users(self) -> dict[str, dict[str, int]]:
        """Every user of this file with what they hold beyond a fresh start (rows per table; empty for a user
        with nothing yet).  Reads only: it creates no user, so interfaces can say whose data a file holds."""
        return {u.id: self.rt.store.user_content(u.id) for u in self.rt.store.list_users()}

    def _active_id(self, user_id: str, conversation_id: int | None) -> int:
        if conversation_id is not None:
            return conversation_id
        active = self.rt.store.active_conversation(user_id)
        if active is None:
            raise InvalidTransition("there is no active conversation")
        return active.id
