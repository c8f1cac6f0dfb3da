"""The facade's chat-log import: past conversations into an existing user, through the write path.

Each conversation of the log (``narrative.write.chat_log``: JSONL, ChatGPT's or Claude's export) is started,
its messages are remembered as turns (``remember_many``: routed, extracted, embedded in batches; a long one
becomes passages), then it is closed and confirmed as the review step would: the import is the person's
consent to keep what they exported.  The whole log is read and checked first, so a bad line stores nothing;
each conversation is one transaction, so a failure while storing keeps the conversations before it and
nothing of the one it happened in.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from narrative.engine.core import Runtime
from narrative.engine.turns import Turn
from narrative.errors import InvalidTransition, NarrativeError, ValidationError
from narrative.model import ConversationStatus
from narrative.read.listing import count_in_conversations
from narrative.write.chat_log import ChatConversation, held_already, parse_chat_log

if TYPE_CHECKING:
    from narrative.engine.closing import Closing
    from narrative.engine.conversations import Conversations
    from narrative.engine.turns import Turns


class Imports:
    """Chat logs into a user's memory (uses Conversations, Turns and Closing)."""

    def __init__(self, runtime: Runtime, conversations: Conversations, turns: Turns, closing: Closing) -> None:
        self.rt = runtime
        self.conversations = conversations
        self.turns = turns
        self.closing = closing

    def import_chat(
        self,
        text: str,
        format: str = "auto",
        *,
        user: str | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Import a chat log; returns ``{format, conversations, messages, memories, skipped, already_imported,
        conversation_ids}`` (what was stored; a conversation the user holds already, message for message, is
        left out and counted in ``already_imported``).

        Refused while the user has a conversation active or waiting for review (close or confirm it first):
        each imported conversation passes through the lifecycle, and only one is active at a time.
        ``progress(done, total)`` counts messages.
        """
        self.rt.reader_id(user)
        log = parse_chat_log(text, format)  # checked whole before the user is made: a refused log makes none
        user_id = self.rt.user_id(user)
        self._free(user_id)
        held = held_already(self.rt.store, user_id, log.conversations)
        fresh = [c for c, already in zip(log.conversations, held, strict=True) if not already]
        total, done, made = sum(len(c.turns) for c in fresh), 0, []
        for conversation in fresh:
            try:
                made.append(self._one(user_id, conversation, done, total, progress))
            except NarrativeError as error:
                self.rt.forget_user(user_id, known=False)  # what was cached inside the rolled-back transaction
                kept = f"{len(made)} conversation{'s' if len(made) != 1 else ''} ({done} messages)"
                said = (
                    f"{conversation.turns[0].where}: {error} — the import stopped: {kept} before it are stored,"
                    " nothing from this conversation on"
                )
                raise (
                    ValidationError(said, field=error.field)
                    if isinstance(error, ValidationError)
                    else type(error)(said)
                ) from error
            done += len(conversation.turns)
        memories = count_in_conversations(self.rt.store, user_id, made)
        return {
            "format": log.format,
            "conversations": len(made),
            "messages": total,
            "memories": memories,
            "skipped": log.skipped,
            "already_imported": len(log.conversations) - len(fresh),
            "conversation_ids": made,
        }

    def _free(self, user_id: str) -> None:
        busy = self.conversations.active_conversation(user=user_id)
        waiting = self.conversations.list_conversations(ConversationStatus.READY_TO_CLOSE.value, limit=1, user=user_id)
        if busy is not None or waiting:
            which = busy.id if busy is not None else waiting[0].id
            state = "active" if busy is not None else "waiting for review"
            raise InvalidTransition(
                f"conversation {which} is {state}: close and confirm it (`narrative close`, `narrative confirm`)"
                " before importing, so the imported conversations do not mix with it"
            )

    def _one(
        self,
        user_id: str,
        conversation: ChatConversation,
        done: int,
        total: int,
        progress: Callable[[int, int], None] | None,
    ) -> int:
        """One conversation, in one transaction: start, remember its turns, close, confirm; its id."""
        turns = [Turn(t.content, t.role, t.speaker, t.at, t.meta) for t in conversation.turns]
        times = [t.at for t in conversation.turns if t.at is not None]
        first: datetime | None = min(times) if times else None
        last: datetime | None = max(times) if times else None

        def step(count: int, _all: int) -> None:
            if progress is not None:
                progress(done + count, total)

        with self.rt.store.transaction():
            started = self.conversations.start_conversation(conversation.title, user=user_id, at=first)
            self.turns.remember_many(turns, user=user_id, progress=step)
            self.closing.close_conversation(started.id, at=last, user=user_id)
            self.closing.confirm_memory(started.id, at=last, user=user_id)
        return started.id
