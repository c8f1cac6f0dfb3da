"""The facade's conversation lifecycle (Talking Rock) and messages."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from narrative.checks import require_choice, require_message
from narrative.engine.core import Runtime
from narrative.model import Conversation, ConversationStatus, Message, Role
from narrative.read import status
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
        return self.rt.store.active_conversation(self.rt.reader_id(user))

    def get_conversation(self, conversation_id: int, *, user: str | None = None) -> Conversation:
        return self.rt.store.get_conversation(self.rt.reader_id(user), conversation_id)

    def list_conversations(
        self, status: str | None = None, *, limit: int = 50, offset: int = 0, user: str | None = None
    ) -> list[Conversation]:
        wanted = None if status is None else require_choice(ConversationStatus, status, "status")
        return self.rt.store.list_conversations(self.rt.reader_id(user), status=wanted, limit=limit, offset=offset)

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
        self.rt.reader_id(user)
        chosen = require_choice(Role, role, "role")
        require_message(content, "content")  # checked before the user is made: a refused message makes none
        user_id = self.rt.user_id(user) if conversation_id is None else self.rt.owner_id(user)
        return lifecycle.add_message(
            self.rt.store,
            user_id,
            content,
            at or self.rt.clock(),
            role=chosen,
            speaker=speaker,
            conversation_id=conversation_id,
            meta=meta,
        )

    def messages(
        self, conversation_id: int | None = None, *, limit: int | None = None, user: str | None = None
    ) -> list[Message]:
        """Messages in order: of one conversation, or the user's latest ``limit`` across all."""
        return status.messages(self.rt.store, self.rt.reader_id(user), conversation_id, limit)

    def pause_conversation(self, conversation_id: int | None = None, *, user: str | None = None) -> Conversation:
        return lifecycle.pause(self.rt.store, self.rt.owner_id(user), conversation_id, self.rt.clock())

    def unpause_conversation(self, conversation_id: int | None = None, *, user: str | None = None) -> Conversation:
        return lifecycle.unpause(self.rt.store, self.rt.owner_id(user), conversation_id)

    def resume_conversation(self, conversation_id: int | None = None, *, user: str | None = None) -> Conversation:
        """ready_to_close → active: cancel the closure, nothing is stored."""
        return lifecycle.resume(self.rt.store, self.rt.owner_id(user), conversation_id)

    def describe(self, *, user: str | None = None) -> dict[str, Any]:
        """Where the memory lives and what it holds (for ``narrative init`` and status pages)."""
        return status.describe(self.rt.store, self.rt.settings.db, self.rt.reader_id(user))

    def users(self) -> dict[str, dict[str, int]]:
        """Every user of this file with what they hold beyond a fresh start (rows per table; empty for a user
        with nothing yet).  Reads only: it creates no user, so interfaces can say whose data a file holds."""
        return status.users(self.rt.store)
