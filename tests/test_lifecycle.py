"""The Talking Rock conversation lifecycle, through the facade and ``narrative.write.lifecycle``.

    start ──► active ──close──► ready_to_close ──confirm──► compressing ──► archived
                ▲  │                  │
                │  └ pause/unpause    │ resume
                └─────────────────────┘

Every refused step raises and leaves the database exactly as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

import narrative
from narrative.errors import ConversationAlreadyActive, InvalidTransition, NotFound, ValidationError
from narrative.model import Conversation, ConversationStatus, Role
from narrative.write import lifecycle

ACTIVE = ConversationStatus.ACTIVE
READY = ConversationStatus.READY_TO_CLOSE
COMPRESSING = ConversationStatus.COMPRESSING
ARCHIVED = ConversationStatus.ARCHIVED

Snap = Callable[[Any], dict[str, list[tuple[Any, ...]]]]


def close(mem: narrative.Memory, conversation_id: int | None = None) -> Conversation:
    return lifecycle.close(mem.store, mem.user, conversation_id, mem.clock())


def archive(mem: narrative.Memory, conversation_id: int) -> Conversation:
    """The confirm side: ready_to_close → compressing → archived."""
    lifecycle.begin_compressing(mem.store, mem.user, conversation_id)
    return lifecycle.archive(mem.store, mem.user, conversation_id, mem.clock(), model="heuristic", passes=2)


def assert_refused(mem: narrative.Memory, snapshot: Snap, error: type[Exception], step: Callable[[], object]) -> None:
    """``step`` raises ``error`` and changes nothing in the database."""
    before = snapshot(mem.store)
    with pytest.raises(error):
        step()
    assert snapshot(mem.store) == before


# --- the happy path -------------------------------------------------------------------------


def test_start_opens_an_active_conversation(mem: narrative.Memory) -> None:
    assert mem.active_conversation() is None
    started = mem.start_conversation("planning")
    assert started.status is ACTIVE
    assert started.title == "planning"
    assert started.user_id == "alice"
    assert started.message_count == 0 and not started.is_paused
    assert mem.active_conversation() == started
    assert mem.get_conversation(started.id) == started


def test_add_message_starts_a_conversation_when_none_is_active(mem: narrative.Memory) -> None:
    message = mem.add_message("Hello, rock.")
    active = mem.active_conversation()
    assert active is not None
    assert message.conversation_id == active.id
    assert active.message_count == 1
    assert active.last_message_at == message.created_at
    assert message.role is Role.USER and message.position == 1

    reply = mem.add_message("Hello, Alice.", role="assistant", speaker="rock")
    assert reply.conversation_id == active.id  # the same conversation continues
    assert (reply.role, reply.speaker) == (Role.ASSISTANT, "rock")
    assert mem.store.count_rows("conversations") == 1


def test_full_lifecycle_to_archived(mem: narrative.Memory) -> None:
    first = mem.add_message("We need a plan for the launch.")
    conversation = mem.get_conversation(first.conversation_id)

    paused = mem.pause_conversation()
    assert paused.is_paused and paused.paused_at is not None and paused.status is ACTIVE
    unpaused = mem.unpause_conversation(conversation.id)
    assert not unpaused.is_paused and unpaused.paused_at is None

    ready = close(mem)
    assert ready.status is READY and ready.closed_at is not None
    assert mem.active_conversation() is None

    resumed = lifecycle.resume(mem.store, mem.user, None)  # the latest ready_to_close one
    assert resumed.id == conversation.id
    assert resumed.status is ACTIVE and resumed.closed_at is None
    mem.add_message("One more thing: the venue.")

    close(mem, conversation.id)
    compressing = lifecycle.begin_compressing(mem.store, mem.user, conversation.id)
    assert compressing.status is COMPRESSING
    archived = lifecycle.archive(
        mem.store, mem.user, conversation.id, mem.clock(), model="heuristic", passes=2, duration_ms=15
    )
    assert archived.status is ARCHIVED
    assert archived.archived_at is not None
    assert (archived.compression_model, archived.compression_passes, archived.compression_duration_ms) == (
        "heuristic",
        2,
        15,
    )
    assert archived.message_count == 2
    assert [c.status for c in mem.list_conversations()] == [ARCHIVED]
    assert mem.list_conversations("archived") == [archived]
    assert mem.list_conversations("active") == []


def test_close_pauses_off_and_frees_the_slot(mem: narrative.Memory) -> None:
    mem.start_conversation()
    mem.pause_conversation()
    ready = close(mem)
    assert not ready.is_paused
    second = mem.start_conversation("next")  # ready_to_close does not hold the active slot
    assert mem.active_conversation() == second
    assert {c.status for c in mem.list_conversations()} == {ACTIVE, READY}


def test_resume_clears_the_preview(mem: narrative.Memory) -> None:
    conversation = mem.start_conversation()
    close(mem)
    mem.store.set_preview(mem.user, conversation.id, {"summary": "draft"})
    lifecycle.resume(mem.store, mem.user, conversation.id)
    assert mem.store.get_preview(mem.user, conversation.id) is None


# --- refused transitions: each raises and changes nothing ------------------------------------


def test_second_start_is_refused(mem: narrative.Memory, snapshot: Snap) -> None:
    first = mem.start_conversation()
    assert_refused(mem, snapshot, ConversationAlreadyActive, mem.start_conversation)
    with pytest.raises(InvalidTransition):  # ConversationAlreadyActive is an InvalidTransition
        mem.start_conversation("again")
    assert mem.active_conversation() == first
    assert mem.store.count_rows("conversations") == 1


def test_message_to_a_ready_to_close_conversation_is_refused(mem: narrative.Memory, snapshot: Snap) -> None:
    conversation = mem.start_conversation()
    mem.add_message("before closing")
    close(mem)
    assert_refused(
        mem, snapshot, InvalidTransition, lambda: mem.add_message("too late", conversation_id=conversation.id)
    )
    assert mem.get_conversation(conversation.id).message_count == 1
    assert len(mem.messages(conversation.id)) == 1


def test_message_to_an_archived_conversation_is_refused(mem: narrative.Memory, snapshot: Snap) -> None:
    conversation = mem.start_conversation()
    close(mem)
    archive(mem, conversation.id)
    assert_refused(
        mem, snapshot, InvalidTransition, lambda: mem.add_message("too late", conversation_id=conversation.id)
    )
    assert mem.get_conversation(conversation.id).status is ARCHIVED


def test_message_to_a_compressing_conversation_is_refused(mem: narrative.Memory, snapshot: Snap) -> None:
    conversation = mem.start_conversation()
    close(mem)
    lifecycle.begin_compressing(mem.store, mem.user, conversation.id)
    assert_refused(
        mem, snapshot, InvalidTransition, lambda: mem.add_message("too late", conversation_id=conversation.id)
    )


def test_pause_twice_is_refused(mem: narrative.Memory, snapshot: Snap) -> None:
    mem.start_conversation()
    paused = mem.pause_conversation()
    assert_refused(mem, snapshot, InvalidTransition, mem.pause_conversation)
    assert mem.active_conversation() == paused


def test_unpause_when_not_paused_is_refused(mem: narrative.Memory, snapshot: Snap) -> None:
    conversation = mem.start_conversation()
    assert_refused(mem, snapshot, InvalidTransition, mem.unpause_conversation)
    assert not mem.get_conversation(conversation.id).is_paused


def test_pause_and_unpause_need_an_active_conversation(mem: narrative.Memory, snapshot: Snap) -> None:
    conversation = mem.start_conversation()
    close(mem)
    assert_refused(mem, snapshot, InvalidTransition, mem.pause_conversation)  # none active
    assert_refused(mem, snapshot, InvalidTransition, lambda: mem.pause_conversation(conversation.id))
    assert_refused(mem, snapshot, InvalidTransition, lambda: mem.unpause_conversation(conversation.id))


def test_close_when_none_is_active_is_refused(mem: narrative.Memory, snapshot: Snap) -> None:
    mem.list_conversations()  # first sight of alice: her user row and Your Story exist from here on
    assert_refused(mem, snapshot, InvalidTransition, lambda: close(mem))
    conversation = mem.start_conversation()
    close(mem)
    assert_refused(mem, snapshot, InvalidTransition, lambda: close(mem))
    assert_refused(mem, snapshot, InvalidTransition, lambda: close(mem, conversation.id))  # already closed


def test_resume_an_active_conversation_is_refused(mem: narrative.Memory, snapshot: Snap) -> None:
    conversation = mem.start_conversation()
    assert_refused(mem, snapshot, InvalidTransition, lambda: lifecycle.resume(mem.store, mem.user, conversation.id))


def test_resume_an_archived_conversation_is_refused(mem: narrative.Memory, snapshot: Snap) -> None:
    conversation = mem.start_conversation()
    close(mem)
    archive(mem, conversation.id)
    assert_refused(mem, snapshot, InvalidTransition, lambda: lifecycle.resume(mem.store, mem.user, conversation.id))


def test_resume_while_another_is_active_is_refused(mem: narrative.Memory, snapshot: Snap) -> None:
    closed = mem.start_conversation("first")
    close(mem)
    mem.store.set_preview(mem.user, closed.id, {"summary": "draft"})
    mem.start_conversation("second")
    assert_refused(mem, snapshot, ConversationAlreadyActive, lambda: lifecycle.resume(mem.store, mem.user, closed.id))
    assert mem.get_conversation(closed.id).status is READY
    assert mem.store.get_preview(mem.user, closed.id) == {"summary": "draft"}  # the rollback kept it


def test_archive_from_active_is_refused(mem: narrative.Memory, snapshot: Snap) -> None:
    conversation = mem.start_conversation()
    assert_refused(
        mem,
        snapshot,
        InvalidTransition,
        lambda: lifecycle.archive(mem.store, mem.user, conversation.id, mem.clock()),
    )
    assert_refused(
        mem, snapshot, InvalidTransition, lambda: lifecycle.begin_compressing(mem.store, mem.user, conversation.id)
    )
    close(mem)
    # confirm must come before archive
    assert_refused(
        mem,
        snapshot,
        InvalidTransition,
        lambda: lifecycle.archive(mem.store, mem.user, conversation.id, mem.clock()),
    )
    assert mem.get_conversation(conversation.id).status is READY


def test_archived_is_final(mem: narrative.Memory, snapshot: Snap) -> None:
    conversation = mem.start_conversation()
    close(mem)
    archive(mem, conversation.id)
    for step in (
        lambda: lifecycle.begin_compressing(mem.store, mem.user, conversation.id),
        lambda: lifecycle.archive(mem.store, mem.user, conversation.id, mem.clock()),
        lambda: close(mem, conversation.id),
    ):
        assert_refused(mem, snapshot, InvalidTransition, step)


def test_empty_message_is_refused(mem: narrative.Memory, snapshot: Snap) -> None:
    mem.start_conversation()
    for content in ("", "   \n"):
        assert_refused(mem, snapshot, ValidationError, partial(mem.add_message, content))
    assert_refused(mem, snapshot, ValidationError, lambda: mem.add_message("hi", role="narrator"))


def test_empty_message_does_not_start_a_conversation(mem: narrative.Memory) -> None:
    with pytest.raises(ValidationError):
        mem.add_message("")
    assert mem.active_conversation() is None
    assert mem.store.count_rows("conversations") == 0


# --- messages and positions ------------------------------------------------------------------


def test_positions_increase_per_user_across_conversations(mem: narrative.Memory) -> None:
    first = [mem.add_message(text) for text in ("one", "two", "three")]
    close(mem)
    mem.start_conversation()  # explicit: a message alone is refused while the first waits for review
    second = [mem.add_message(text) for text in ("four", "five")]
    assert first[0].conversation_id != second[0].conversation_id
    positions = [m.position for m in first + second]
    assert positions == [1, 2, 3, 4, 5]

    bobs = [mem.add_message(text, user="bob") for text in ("bob one", "bob two")]
    assert [m.position for m in bobs] == [1, 2]  # every user counts separately
    assert mem.add_message("six").position == 6


def test_messages_come_back_in_order(mem: narrative.Memory) -> None:
    texts = ["alpha", "beta", "gamma", "delta"]
    written = [mem.add_message(t, role="user" if i % 2 == 0 else "assistant") for i, t in enumerate(texts[:2])]
    close(mem)
    mem.start_conversation()
    written += [mem.add_message(t) for t in texts[2:]]
    mem.add_message("bob's", user="bob")

    everything = mem.messages()
    assert [m.content for m in everything] == texts
    assert [m.position for m in everything] == sorted(m.position for m in everything)
    assert [m.content for m in mem.messages(written[0].conversation_id)] == texts[:2]
    assert [m.content for m in mem.messages(written[2].conversation_id)] == texts[2:]
    assert [m.content for m in mem.messages(limit=3)] == texts[1:]  # the latest three, still in order
    assert [m.id for m in everything] == [m.id for m in written]


def test_message_meta_roundtrips(mem: narrative.Memory) -> None:
    written = mem.add_message("with meta", meta={"client": "cli", "n": 2})
    assert mem.messages()[0].meta == {"client": "cli", "n": 2}
    assert written.meta == {"client": "cli", "n": 2}


# --- other users ---------------------------------------------------------------------------


def test_another_users_conversation_is_not_found(mem: narrative.Memory, snapshot: Snap) -> None:
    conversation = mem.start_conversation()
    mem.add_message("alice speaking")
    mem.list_conversations(user="bob")  # bob exists from here on
    assert mem.list_conversations(user="bob") == []
    assert mem.active_conversation(user="bob") is None

    store = mem.store
    for step in (
        lambda: mem.get_conversation(conversation.id, user="bob"),
        lambda: mem.messages(conversation.id, user="bob"),
        lambda: mem.add_message("intruder", conversation_id=conversation.id, user="bob"),
        lambda: mem.pause_conversation(conversation.id, user="bob"),
        lambda: lifecycle.close(store, "bob", conversation.id, mem.clock()),
        lambda: lifecycle.begin_compressing(store, "bob", conversation.id),
        lambda: lifecycle.resume(store, "bob", conversation.id),
    ):
        assert_refused(mem, snapshot, NotFound, step)
    assert mem.get_conversation(conversation.id).status is ACTIVE


def test_unknown_conversation_id_is_not_found(mem: narrative.Memory, snapshot: Snap) -> None:
    mem.start_conversation()
    assert_refused(mem, snapshot, NotFound, lambda: mem.get_conversation(999))
    assert_refused(mem, snapshot, NotFound, lambda: mem.add_message("hi", conversation_id=999))


def test_each_user_has_their_own_active_conversation(mem: narrative.Memory) -> None:
    alices = mem.start_conversation()
    bobs = mem.start_conversation(user="bob")
    assert alices.id != bobs.id
    assert mem.active_conversation() == alices
    assert mem.active_conversation(user="bob") == bobs
    with pytest.raises(ConversationAlreadyActive):
        mem.start_conversation(user="bob")
