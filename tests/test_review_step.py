"""The review step's rough edges (issue 16): split parts carry their own key points and links, removing an
extracted item rewrites the preview, resume can tell what it would discard, a message while a conversation
waits for review is refused with directions, and walking forward shows every branch.  Real SQLite files."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import narrative
from narrative.errors import ConversationAlreadyActive, InvalidTransition
from narrative.model import ConversationStatus, EntityType

Snap = Callable[[Any], dict[str, list[tuple[Any, ...]]]]

TURNS = [
    ("user", "We decided to use Postgres instead of MySQL because the team knows it well."),
    ("assistant", "Good call. What is the first step?"),
    ("user", "I need to write the migration scripts by Friday. I'm waiting on Priya to send the schema dump."),
    ("assistant", "Noted: migrations first, and Priya's schema dump is the blocker."),
]


def talk(mem: narrative.Memory) -> int:
    conversation = mem.start_conversation("db move")
    for role, text in TURNS:
        mem.remember(text, role, speaker="alex" if role == "user" else "rook")
    return conversation.id


# --- split ------------------------------------------------------------------------------------------


def test_each_split_part_carries_only_its_own_key_points(mem: narrative.Memory) -> None:
    cid = talk(mem)
    work = mem.create_storyline("Work")
    preview = mem.close_conversation(cid)
    waiting = next(e for e in preview.kept if e.entity_type is EntityType.WAITING_ON)
    decision = next(e for e in preview.kept if e.entity_type is EntityType.DECISION)
    first, second = mem.split_memory(
        cid,
        [
            {"narrative": "The database moves to Postgres.", "storyline_id": work.id},
            {"narrative": "Priya owes the schema dump.", "storyline_id": None, "entity_ids": [waiting.key]},
        ],
    ).memories
    assert waiting.label in second.key_points and decision.label not in second.key_points
    assert decision.label in first.key_points and waiting.label not in first.key_points


def test_each_split_part_is_stamped_with_the_link_of_its_own_storyline(mem: narrative.Memory) -> None:
    cid = talk(mem)
    work, home = mem.create_storyline("Work"), mem.create_storyline("Home")
    work_link = mem.narrative_update("Work moved to Postgres", [], None, "work", storyline_id=work.id)
    home_link = mem.narrative_update("The kitchen plan stands", [], None, "home", storyline_id=home.id)
    mem.close_conversation(cid)
    first, second = mem.split_memory(
        cid,
        [
            {"narrative": "The database moves to Postgres.", "storyline_id": work.id},
            {"narrative": "The kitchen waits.", "storyline_id": home.id},
        ],
    ).memories
    assert (first.narrative_id, second.narrative_id) == (work_link.id, home_link.id)


def test_confirm_alone_keeps_every_key_point(mem: narrative.Memory) -> None:
    cid = talk(mem)
    preview = mem.close_conversation(cid)
    [memory] = mem.confirm_memory(cid).memories
    assert all(e.label in memory.key_points for e in preview.kept if e.entity_type is not EntityType.PERSON)


# --- removing an extracted item ----------------------------------------------------------------------


def test_removing_an_item_rewrites_the_narrative_and_the_changes(mem: narrative.Memory) -> None:
    cid = talk(mem)
    preview = mem.close_conversation(cid)
    assert "schema dump" in preview.narrative and "new_waiting_ons" in preview.changes()
    waiting = next(e for e in preview.kept if e.entity_type is EntityType.WAITING_ON)
    edited = mem.edit_preview(cid, remove_entities=[waiting.key])
    assert "new_waiting_ons" not in edited.changes()
    assert "schema dump" not in edited.narrative and "Postgres" in edited.narrative
    assert not edited.user_edited  # the proposal was recomposed, not reworded by you
    assert mem.get_memory_preview(cid).to_dict() == edited.to_dict()  # kept
    result = mem.confirm_memory(cid)
    assert all(d.data.get("key") != waiting.key for d in result.deltas)
    assert result.memories[0].content == edited.narrative


def test_removing_an_item_keeps_your_own_wording(mem: narrative.Memory) -> None:
    cid = talk(mem)
    preview = mem.close_conversation(cid)
    waiting = next(e for e in preview.kept if e.entity_type is EntityType.WAITING_ON)
    mem.edit_preview(cid, "Postgres it is; Priya still owes the dump.")
    edited = mem.edit_preview(cid, remove_entities=[waiting.key])
    assert edited.narrative == "Postgres it is; Priya still owes the dump."
    assert "new_waiting_ons" not in edited.changes()


# --- resume: what it would discard --------------------------------------------------------------------


def test_preview_edits_lists_what_resume_would_discard(mem: narrative.Memory) -> None:
    cid = talk(mem)
    preview = mem.close_conversation(cid)
    assert mem.preview_edits(cid) == []
    work = mem.create_storyline("Work")
    mem.edit_preview(cid, "My own words.", remove_entities=[preview.kept[0].key])
    mem.redirect_preview(cid, work.id)
    edits = mem.preview_edits()
    assert edits[0] == "the memory's wording" and preview.kept[0].key in edits[1] and "Work" in edits[2]
    mem.resume_conversation(cid)
    assert mem.preview_edits(cid) == []  # nothing waits any more


# --- a message while a conversation waits for review ---------------------------------------------------


def test_a_message_while_a_conversation_waits_for_review_is_refused_with_directions(
    mem: narrative.Memory, snapshot: Snap
) -> None:
    cid = talk(mem)
    mem.close_conversation(cid)
    before = snapshot(mem.store)
    with pytest.raises(InvalidTransition) as refused:
        mem.remember("And one more thing.", speaker="alex")
    assert snapshot(mem.store) == before
    said = str(refused.value)
    assert f"conversation {cid} is waiting for review" in said
    assert "narrative confirm" in said and "narrative resume" in said and "conversation start" in said
    with pytest.raises(InvalidTransition):
        mem.add_message("raw too", speaker="alex")
    # the ways on that the message names all work
    resumed = mem.resume_conversation(cid)
    assert resumed.status is ConversationStatus.ACTIVE
    assert mem.remember("And one more thing.", speaker="alex").message.conversation_id == cid


def test_resume_while_another_is_active_names_it(mem: narrative.Memory) -> None:
    cid = talk(mem)
    mem.close_conversation(cid)
    second = mem.start_conversation("something else")  # explicit: allowed
    mem.remember("Something else entirely.", speaker="alex")
    with pytest.raises(ConversationAlreadyActive) as refused:
        mem.resume_conversation(cid)
    assert f"conversation {second.id} is active" in str(refused.value)
    assert mem.confirm_memory(cid).conversation.status is ConversationStatus.ARCHIVED


# --- walking forward shows every branch ----------------------------------------------------------------


def test_walk_forward_shows_every_branch(mem: narrative.Memory) -> None:
    n1 = mem.narrative_update("Chose SQLite", [], None, "storage")
    n2 = mem.narrative_update("Tuned SQLite", [], n1.id, "storage")
    n3 = mem.narrative_update("Ranking fuses BM25 with vectors", [], n2.id, "search")
    b1 = mem.narrative_update("A side branch from the SQLite choice", [], n1.id, "storage")
    b2 = mem.narrative_update("A side branch from the tuning", [], n2.id, "storage")
    assert [n.id for n in mem.walk_forward(n1.id)] == [n2.id, n3.id, b2.id, b1.id]  # depth first, oldest first
    assert [n.id for n in mem.walk_forward(n1.id, depth=1)] == [n2.id, b1.id]  # every branch one step on
    assert [n.id for n in mem.walk_forward(n2.id)] == [n3.id, b2.id]
    assert mem.walk_forward(b1.id) == []
    with pytest.raises(narrative.errors.ValidationError):
        mem.walk_forward(n1.id, depth=0)
