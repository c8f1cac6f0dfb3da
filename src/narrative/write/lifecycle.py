"""The Talking Rock conversation lifecycle: which step is allowed from which state.

::

    start ──► active ──close──► ready_to_close ──confirm──► compressing ──► archived
                ▲  │                  │
                │  └ pause/unpause    │ resume
                └─────────────────────┘

``paused`` is a flag on an active conversation that silences idle invitations.
At most one conversation per user is active; the database enforces it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from narrative.checks import require_message
from narrative.errors import ConversationAlreadyActive, InvalidTransition, NotFound
from narrative.model import Conversation, ConversationStatus, Message, Role
from narrative.store.protocol import Store

ACTIVE = ConversationStatus.ACTIVE
READY = ConversationStatus.READY_TO_CLOSE
COMPRESSING = ConversationStatus.COMPRESSING
ARCHIVED = ConversationStatus.ARCHIVED


def _require_status(conversation: Conversation, allowed: set[ConversationStatus], step: str) -> None:
    if conversation.status not in allowed:
        wanted = " or ".join(sorted(s.value for s in allowed))
        raise InvalidTransition(
            f"cannot {step} conversation {conversation.id}: it is {conversation.status.value}, needs {wanted}"
        )


def start(store: Store, user_id: str, now: datetime, title: str = "") -> Conversation:
    """Open a new active conversation; refused while another one is active."""
    existing = store.active_conversation(user_id)
    if existing is not None:
        raise ConversationAlreadyActive(f"conversation {existing.id} is still active: close it or keep talking in it")
    return store.insert_conversation(user_id, now, title=title)


def current_or_start(store: Store, user_id: str, now: datetime) -> Conversation:
    """The active conversation, starting one when there is none (Talking Rock's startup rule).

    Refused while a conversation waits for review (ready_to_close) and none is active: a new one started
    silently would stand in the way of resuming the first.  Starting one explicitly is allowed.
    """
    active = store.active_conversation(user_id)
    if active is not None:
        return active
    waiting = store.list_conversations(user_id, status=READY, limit=1)
    if waiting:
        cid = waiting[0].id
        raise InvalidTransition(
            f"conversation {cid} is waiting for review (ready_to_close), so nothing was stored: confirm it"
            f" (confirm_memory / `narrative confirm`) and talk on in a new conversation, resume it to keep"
            f" talking in it (`narrative resume`), or start a new conversation explicitly"
            f" (`narrative conversation start`) and review {cid} later"
        )
    try:
        with store.transaction():  # a savepoint: losing the race below leaves the caller's transaction usable
            return start(store, user_id, now)
    except ConversationAlreadyActive:  # another process started one at the same moment: talk in that one
        active = store.active_conversation(user_id)
        if active is None:
            raise
        return active


def add_message(
    store: Store,
    user_id: str,
    content: str,
    now: datetime,
    role: Role = Role.USER,
    speaker: str = "",
    conversation_id: int | None = None,
    meta: dict[str, Any] | None = None,
) -> Message:
    """Append one message to the given (or the active) conversation, which must be active."""
    require_message(content, "content")
    with store.transaction():
        if conversation_id is None:
            conversation = current_or_start(store, user_id, now)
        else:
            conversation = store.get_conversation(user_id, conversation_id)
        _require_status(conversation, {ACTIVE}, "add a message to")
        return store.insert_message(user_id, conversation.id, role, content, now, speaker=speaker, meta=meta)


def add_messages(
    store: Store, user_id: str, items: Sequence[tuple[str, datetime, Role, str, dict[str, Any] | None]]
) -> list[Message]:
    """Append messages ``(content, time, role, speaker, meta)`` to the active conversation (started when
    there is none) in one transaction: all of them are stored, or none."""
    for content, *_ in items:
        require_message(content, "content")
    with store.transaction():
        conversation: Conversation | None = None
        stored = []
        for content, now, role, speaker, meta in items:
            if conversation is None:
                conversation = current_or_start(store, user_id, now)
                _require_status(conversation, {ACTIVE}, "add a message to")
            stored.append(
                store.insert_message(user_id, conversation.id, role, content, now, speaker=speaker, meta=meta)
            )
        return stored


def pause(store: Store, user_id: str, conversation_id: int | None, now: datetime) -> Conversation:
    """Pause a conversation (None: the active one)."""
    conversation = _given_or_active(store, user_id, conversation_id)
    conversation_id = conversation.id
    _require_status(conversation, {ACTIVE}, "pause")
    if conversation.is_paused:
        raise InvalidTransition(f"conversation {conversation_id} is already paused")
    return store.update_conversation(user_id, conversation_id, is_paused=1, paused_at=now)


def unpause(store: Store, user_id: str, conversation_id: int | None) -> Conversation:
    """Unpause a conversation (None: the active one)."""
    conversation = _given_or_active(store, user_id, conversation_id)
    conversation_id = conversation.id
    _require_status(conversation, {ACTIVE}, "unpause")
    if not conversation.is_paused:
        raise InvalidTransition(f"conversation {conversation_id} is not paused")
    return store.update_conversation(user_id, conversation_id, is_paused=0, paused_at=None)


def close(store: Store, user_id: str, conversation_id: int | None, now: datetime) -> Conversation:
    """active → ready_to_close.  Nothing final is stored here; the preview comes next."""
    conversation = _resolve(store, user_id, conversation_id)
    _require_status(conversation, {ACTIVE}, "close")
    return store.update_conversation(user_id, conversation.id, status=READY, closed_at=now, is_paused=0, paused_at=None)


def resume(store: Store, user_id: str, conversation_id: int | None) -> Conversation:
    """ready_to_close → active (cancel the closure); refused if another is active meanwhile."""
    conversation = _resolve(store, user_id, conversation_id, status=READY)
    _require_status(conversation, {READY}, "resume")
    active = store.active_conversation(user_id)
    if active is not None:
        raise ConversationAlreadyActive(
            f"cannot resume conversation {conversation.id}: conversation {active.id} is active now; close"
            f" {active.id} first (it then waits for review too), or confirm {conversation.id} instead"
        )
    with store.transaction():
        store.set_preview(user_id, conversation.id, None)
        return store.update_conversation(user_id, conversation.id, status=ACTIVE, closed_at=None)


def begin_compressing(store: Store, user_id: str, conversation_id: int) -> Conversation:
    conversation = store.get_conversation(user_id, conversation_id)
    _require_status(conversation, {READY}, "confirm")
    return store.update_conversation(user_id, conversation_id, status=COMPRESSING)


def archive(
    store: Store,
    user_id: str,
    conversation_id: int,
    now: datetime,
    model: str = "heuristic",
    passes: int = 1,
    duration_ms: int = 0,
) -> Conversation:
    """compressing → archived, recording how the compression ran."""
    conversation = store.get_conversation(user_id, conversation_id)
    _require_status(conversation, {COMPRESSING}, "archive")
    return store.update_conversation(
        user_id,
        conversation_id,
        status=ARCHIVED,
        archived_at=now,
        compression_model=model,
        compression_passes=passes,
        compression_duration_ms=duration_ms,
    )


def _given_or_active(store: Store, user_id: str, conversation_id: int | None) -> Conversation:
    if conversation_id is not None:
        return store.get_conversation(user_id, conversation_id)
    active = store.active_conversation(user_id)
    if active is None:
        raise InvalidTransition("there is no active conversation")
    return store.get_conversation(user_id, active.id)


def _resolve(
    store: Store, user_id: str, conversation_id: int | None, status: ConversationStatus = ACTIVE
) -> Conversation:
    if conversation_id is not None:
        return store.get_conversation(user_id, conversation_id)
    if status is ACTIVE:
        active = store.active_conversation(user_id)
        if active is None:
            raise InvalidTransition("there is no active conversation to close")
        return active
    found = store.list_conversations(user_id, status=status, limit=1)
    if not found:
        raise NotFound(f"no conversation is {status.value}")
    return found[0]
