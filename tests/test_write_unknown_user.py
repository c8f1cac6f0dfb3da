"""A write that fails creates no user (thirteenth session): a write on what a user holds (an id, the active or
waiting conversation, a storyline, an entity, a binding, a use) for a user nobody wrote for raises what it raised
before (NotFound, InvalidTransition, ValidationError) and leaves every row as it was: no user row, no Your Story,
no default storyline.  A write of that kind with nothing to do (a delete by filter, pending messages, a
consolidation) does nothing and makes nobody either.  Writes that add something still make the user.  On both
stores."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import narrative
from conftest import FakeClock, Snapshot, take_snapshot
from narrative.errors import InvalidTransition, NarrativeError, NotFound, ValidationError
from narrative.store.protocol import Store

Call = Callable[[], Any]


def _alice_writes(mem: narrative.Memory) -> dict[str, int]:
    """Alice's data, one of each thing a write can name: memories, a conversation and its message, a storyline,
    an open entity, a binding, a use, a narrative link."""
    turn = mem.remember("We decided to use SQLite instead of Firebase because it works offline.", speaker="Alice")
    fact = mem.add_memory("I live in Berlin.", stream="decision")
    mem.edit_memory(fact.id, entities_to_add=[{"type": "task", "name": "book the venue"}])
    binding = mem.bind(turn.storyline.id, "goal", "Ship the offline app")
    mem.search("Berlin")  # records a use
    return {
        "memory": fact.id,
        "other_memory": turn.memories[0].id if turn.memories else fact.id,
        "conversation": turn.message.conversation_id,
        "message": turn.message.id,
        "storyline": turn.storyline.id,
        "entity": mem.open_threads(entity_type="task")[0].id,
        "binding": binding.id,
        "use": mem.list_uses()[0].id,
        "narrative": mem.narrative_search()[0].id,
    }


def _failing_writes(mem: narrative.Memory, user: str, ids: dict[str, int]) -> list[tuple[str, type[Exception], Call]]:
    """Every write that names what ``user`` would have to hold, with the error it raises for a user who holds
    nothing (Alice's ids: as for another user's)."""
    m, c, s, n = ids["memory"], ids["conversation"], ids["storyline"], ids["narrative"]
    two_parts = [{"narrative": "a", "storyline_id": None}, {"narrative": "b", "storyline_id": None}]
    return [
        ("delete_memory", NotFound, lambda: mem.delete_memory(m, user=user)),
        ("delete_memories", NotFound, lambda: mem.delete_memories([m], user=user)),
        ("delete_conversation", NotFound, lambda: mem.delete_conversation(c, user=user)),
        ("delete_storyline", NotFound, lambda: mem.delete_storyline(s, user=user)),
        ("delete_storyline, no move", NotFound, lambda: mem.delete_storyline(s, move_to_your_story=False, user=user)),
        ("edit_memory", NotFound, lambda: mem.edit_memory(m, content="I live in Paris.", user=user)),
        ("update_memories", NotFound, lambda: mem.update_memories([{"id": m, "importance": 3}], user=user)),
        ("restore_memory", NotFound, lambda: mem.restore_memory(m, user=user)),
        ("pause_conversation", InvalidTransition, lambda: mem.pause_conversation(user=user)),
        ("pause_conversation id", NotFound, lambda: mem.pause_conversation(c, user=user)),
        ("unpause_conversation", InvalidTransition, lambda: mem.unpause_conversation(user=user)),
        ("resume_conversation", NotFound, lambda: mem.resume_conversation(user=user)),
        ("close_conversation", InvalidTransition, lambda: mem.close_conversation(user=user)),
        ("close_conversation id", NotFound, lambda: mem.close_conversation(c, user=user)),
        ("edit_preview", InvalidTransition, lambda: mem.edit_preview(None, "A new text.", user=user)),
        ("redirect_preview", InvalidTransition, lambda: mem.redirect_preview(None, s, user=user)),
        ("confirm_memory", InvalidTransition, lambda: mem.confirm_memory(user=user)),
        ("confirm_memory id", NotFound, lambda: mem.confirm_memory(c, user=user)),
        ("split_memory", InvalidTransition, lambda: mem.split_memory(None, two_parts, user=user)),
        ("resolve_thread", NotFound, lambda: mem.resolve_thread(ids["entity"], user=user)),
        ("rename_storyline", NotFound, lambda: mem.rename_storyline(s, "Renamed", user=user)),
        ("archive_storyline", NotFound, lambda: mem.archive_storyline(s, user=user)),
        ("bind", NotFound, lambda: mem.bind(s, "goal", "Ship it", user=user)),
        ("update_binding", NotFound, lambda: mem.update_binding(ids["binding"], status="paused", user=user)),
        ("complete_binding", NotFound, lambda: mem.complete_binding(ids["binding"], user=user)),
        ("delete_binding", NotFound, lambda: mem.delete_binding(ids["binding"], user=user)),
        ("link_decision", NotFound, lambda: mem.link_decision(m, ids["other_memory"], user=user)),
        ("review_decision", NotFound, lambda: mem.review_decision(m, user=user)),
        ("learn_from_outcome", NotFound, lambda: mem.learn_from_outcome(ids["use"], "approved", user=user)),
        ("record_use", NotFound, lambda: mem.record_use("recall", "Berlin", [(m, "retrieval")], user=user)),
        ("add_memory storyline", NotFound, lambda: mem.add_memory("x", storyline_id=s, user=user)),
        ("add_memory conversation", NotFound, lambda: mem.add_memory("x", conversation_id=c, user=user)),
        ("add_memory messages", ValidationError, lambda: mem.add_memory("x", message_ids=[ids["message"]], user=user)),
        ("add_memories", NotFound, lambda: mem.add_memories([{"content": "x"}, {"content": "y", "storyline_id": s}],
                                                            user=user)),
        ("add_message", NotFound, lambda: mem.add_message("Hello", conversation_id=c, user=user)),
        ("narrative_update memories", NotFound, lambda: mem.narrative_update("A link.", [m], user=user)),
        ("narrative_update link", NotFound, lambda: mem.narrative_update("Link.", previous_narrative_id=n, user=user)),
        ("narrative_update storyline", NotFound, lambda: mem.narrative_update("A link.", storyline_id=s, user=user)),
    ]  # fmt: skip


def _writes_with_nothing_to_do(mem: narrative.Memory, user: str) -> None:
    """Writes on what the user holds that succeed for a user who holds nothing: they change nothing."""
    assert mem.delete_memories(filters={"stream": "fact"}, user=user)["ids"] == []
    assert mem.process_pending(user=user) == []
    assert mem.consolidate(user=user)["links"] == 0


def _users(store: Store) -> list[str]:
    return sorted(u.id for u in store.list_users())


def _refused_and_unchanged(mem: narrative.Memory, user: str, ids: dict[str, int], before: Snapshot) -> None:
    snapshot_users = _users(mem.store)
    for name, error, call in _failing_writes(mem, user, ids):
        with pytest.raises(error) as raised:
            call()
        assert isinstance(raised.value, NarrativeError), name
        assert _users(mem.store) == snapshot_users, name
    _writes_with_nothing_to_do(mem, user)
    assert _users(mem.store) == snapshot_users
    assert take_snapshot(mem.store) == before  # not a row: no user, no Your Story, no default storyline


def test_a_failing_write_for_an_unknown_user_stores_nothing(
    mem: narrative.Memory, snapshot: Callable[[Store], Snapshot]
) -> None:
    ids = _alice_writes(mem)
    assert _users(mem.store) == ["alice"]
    _refused_and_unchanged(mem, "bob", ids, snapshot(mem.store))
    assert _users(mem.store) == ["alice"]


def test_a_failing_write_of_a_fresh_memory_makes_not_even_its_own_user(
    mem: narrative.Memory, snapshot: Callable[[Store], Snapshot], databases: Any, clock: FakeClock
) -> None:
    other = databases.fresh()
    with narrative.Memory(other, user="alice", embedder="none", clock=clock, env={}) as elsewhere:
        ids = _alice_writes(elsewhere)  # ids that exist somewhere, not in this file
    before = snapshot(mem.store)
    _refused_and_unchanged(mem, "alice", ids, before)
    assert _users(mem.store) == []


def test_the_reported_probe_leaves_no_user_behind(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        fact = mem.add_memory("I live in Berlin.")
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        with pytest.raises(NotFound):
            mem.delete_memory(fact.id, user="bob")
        with pytest.raises(InvalidTransition):
            mem.pause_conversation(user="bob")
        assert _users(mem.store) == ["alice"]
        assert mem.delete_memory(fact.id)["memories"] == 1  # alice's own write on her id, from a fresh memory


def test_a_user_deleted_by_another_connection_is_not_made_again_by_a_failing_write(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        fact = mem.add_memory("I live in Berlin.")
        with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as other:
            other.delete_user("alice")
        with pytest.raises(NotFound):
            mem.edit_memory(fact.id, content="I live in Paris.")
        assert _users(mem.store) == []
        mem.add_memory("I live in Paris.")  # the next write that adds starts alice afresh
        assert _users(mem.store) == ["alice"]
        assert [s.name for s in mem.list_storylines() if s.is_your_story] == ["Your Story"]


def _adds(mem: narrative.Memory) -> dict[str, Call]:
    """Writes that add something and name nothing the user must hold: each makes its user."""
    export = mem.export()
    return {
        "add_memory": lambda: mem.add_memory("I live in Berlin.", user="u-add-memory"),
        "add_memories": lambda: mem.add_memories([{"content": "I live in Berlin."}], user="u-add-memories"),
        "remember": lambda: mem.remember("I live in Berlin.", user="u-remember"),
        "add_message": lambda: mem.add_message("Hello", user="u-add-message"),
        "start_conversation": lambda: mem.start_conversation("Hi", user="u-start"),
        "create_storyline": lambda: mem.create_storyline("Garden", user="u-storyline"),
        "create_api_key": lambda: mem.create_api_key(user="u-key"),
        "record_use": lambda: mem.record_use("recall", "Berlin", user="u-use"),
        "narrative_update": lambda: mem.narrative_update("A first link.", user="u-narrative"),
        "your_story": lambda: mem.your_story(user="u-your-story"),
        "import_data": lambda: mem.import_data(export, user="u-import"),
        "import_chat": lambda: mem.import_chat(json.dumps({"content": "Hi."}) + "\n", user="u-chat"),
    }


def test_writes_that_add_still_make_the_user(mem: narrative.Memory) -> None:
    mem.add_memory("I live in Berlin.")
    for name, call in _adds(mem).items():
        made = set(_users(mem.store))
        call()
        new = set(_users(mem.store)) - made
        assert len(new) == 1, name
        assert [s.name for s in mem.list_storylines(user=new.pop()) if s.is_your_story] == ["Your Story"], name


def _refused_adds(mem: narrative.Memory, user: str) -> dict[str, Call]:
    """Writes that add something and are refused on their own input (ValidationError): checked before the user
    would be made, so they make nobody."""
    chat = json.dumps({"content": ""}) + "\n"
    return {
        "add_memory empty": lambda: mem.add_memory("", user=user),
        "add_memory importance": lambda: mem.add_memory("I live in Berlin.", importance=9, user=user),
        "add_memory stream": lambda: mem.add_memory("I live in Berlin.", stream="dream", user=user),
        "add_memory metadata": lambda: mem.add_memory("I live in Berlin.", metadata={"no spaces": 1}, user=user),
        "add_memories empty": lambda: mem.add_memories([{"content": "x"}, {"content": " "}], user=user),
        "add_memories key": lambda: mem.add_memories([{"content": "x", "colour": "red"}], user=user),
        "add_memories vectors": lambda: mem.add_memories([{"content": "x"}], vectors=np.zeros((1, 4)), user=user),
        "remember empty": lambda: mem.remember("", user=user),
        "remember role": lambda: mem.remember("Hello", role="narrator", user=user),
        "remember_many empty": lambda: mem.remember_many([narrative.Turn("Hello"), narrative.Turn("")], user=user),
        "add_message empty": lambda: mem.add_message("", user=user),
        "add_message role": lambda: mem.add_message("Hello", role="narrator", user=user),
        "start_conversation title": lambda: mem.start_conversation(5, user=user),  # type: ignore[arg-type]
        "create_storyline empty": lambda: mem.create_storyline("  ", user=user),
        "create_storyline long": lambda: mem.create_storyline("x" * 201, user=user),
        "narrative_update empty": lambda: mem.narrative_update("", user=user),
        "narrative_update topic": lambda: mem.narrative_update("A link.", topic=5, user=user),  # type: ignore[arg-type]
        "record_use kind": lambda: mem.record_use("guess", "Berlin", user=user),
        "record_use query": lambda: mem.record_use("recall", "", user=user),
        "create_api_key label": lambda: mem.create_api_key(label=5, user=user),  # type: ignore[arg-type]
        "import_data": lambda: mem.import_data("not an export", user=user),
        "import_chat": lambda: mem.import_chat(chat, user=user),
    }


def test_a_write_that_adds_refused_on_its_input_makes_no_user(
    mem: narrative.Memory, snapshot: Callable[[Store], Snapshot]
) -> None:
    mem.add_memory("I live in Berlin.")
    before = snapshot(mem.store)
    for name, call in _refused_adds(mem, "bob").items():
        with pytest.raises(ValidationError):
            call()
        assert _users(mem.store) == ["alice"], name
    assert take_snapshot(mem.store) == before


def test_a_refused_add_of_a_fresh_memory_makes_not_even_its_own_user(
    mem: narrative.Memory, snapshot: Callable[[Store], Snapshot]
) -> None:
    before = snapshot(mem.store)
    for name, call in _refused_adds(mem, "alice").items():
        with pytest.raises(ValidationError):
            call()
        assert _users(mem.store) == [], name
    assert take_snapshot(mem.store) == before
