"""The facade's conversation lifecycle (Talking Rock) and messages."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from narrative.checks import require_choice
from narrative.engine.core import EngineBase
from narrative.errors import InvalidTransition
from narrative.model import Conversation, ConversationStatus, Message, Role
from narrative.write import lifecycle


class ConversationsAPI(EngineBase):
    def start_conversation(
        self, title: str = "", *, user: str | None = None, at: datetime | None = None
    ) -> Conversation:
        """Start a conversation; raises ConversationAlreadyActive while one is active."""
        user_id = self._user(user)
        return lifecycle.start(self.store, user_id, at or self.clock(), title=title)

    def active_conversation(self, *, user: str | None = None) -> Conversation | None:
        return self.store.active_conversation(self._user(user))

    def get_conversation(self, conversation_id: int, *, user: str | None = None) -> Conversation:
        return self.store.get_conversation(self._user(user), conversation_id)

    def list_conversations(
        self, status: str | None = None, *, limit: int = 50, offset: int = 0, user: str | None = None
    ) -> list[Conversation]:
        wanted = None if status is None else require_choice(ConversationStatus, status, "status")
        return self.store.list_conversations(self._user(user), status=wanted, limit=limit, offset=offset)

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
        user_id = self._user(user)
        return lifecycle.add_message(
            self.store,
            user_id,
            content,
            at or self.clock(),
            role=require_choice(Role, role, "role"),
            speaker=speaker,
            conversation_id=conversation_id,
            meta=meta,
        )

    def messages(
        self, conversation_id: int | None = None, *, limit: int | None = None, user: str | None = None
    ) -> list[Message]:
        """Messages in order: of one conversation, or the user's latest ``limit`` across all."""
        user_id = self._user(user)
        if conversation_id is not None:
            self.store.get_conversation(user_id, conversation_id)
            return self.store.list_messages(user_id, conversation_id=conversation_id, limit=limit)
        return self.store.list_messages(user_id, limit=limit, latest=limit is not None)

    def pause_conversation(self, conversation_id: int | None = None, *, user: str | None = None) -> Conversation:
        user_id = self._user(user)
        return lifecycle.pause(self.store, user_id, self._active_id(user_id, conversation_id), self.clock())

    def unpause_conversation(self, conversation_id: int | None = None, *, user: str | None = None) -> Conversation:
        user_id = self._user(user)
        return lifecycle.unpause(self.store, user_id, self._active_id(user_id, conversation_id))

    def resume_conversation(self, conversation_id: int | None = None, *, user: str | None = None) -> Conversation:
        """ready_to_close → active: cancel the closure, nothing is stored."""
        return lifecycle.resume(self.store, self._user(user), conversation_id)

    def describe(self, *, user: str | None = None) -> dict[str, Any]:
        """Where the memory lives and what it holds (for ``narrative init`` and status pages)."""
        user_id = self._user(user)
        return {
            "db": self.settings.db,
            "backend": self.store.backend,
            "user": user_id,
            "migrations": self.store.applied_migrations(),
            "counts": {
                table: self.store.count_rows(table, user_id)
                for table in ("conversations", "messages", "memories", "narratives", "storylines", "entities")
            },
        }

    def users(self) -> dict[str, dict[str, int]]:
        """Every user of this file with what they hold beyond a fresh start (rows per table; empty for a user
        with nothing yet).  Reads only: it creates no user, so interfaces can say whose data a file holds."""
        return {u.id: self.store.user_content(u.id) for u in self.store.list_users()}

    def _active_id(self, user_id: str, conversation_id: int | None) -> int:
        if conversation_id is not None:
            return conversation_id
        active = self.store.active_conversation(user_id)
        if active is None:
            raise InvalidTransition("there is no active conversation")
        return active.id
