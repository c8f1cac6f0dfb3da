"""The review is the gate, and one fact is stored once (issue 23, items 4 and 5).

What a person confirms is what is stored: an edit replaces the machine's text, a split stores the parts and
nothing else, a removed item is not stored; closing copies no link summary and no reflection into memories
beside the confirmed one.  A summary the machine wrote that would only restate one sentence points to the memory
that holds it instead of copying it; a list shows each fact once.  Real SQLite files and PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import narrative
from narrative.model import Entity, EntityType, Stream

TURNS = [
    ("user", "We decided to use Postgres instead of MySQL because the team knows it well."),
    ("assistant", "Good call. What is the first step?"),
    ("user", "I need to write the migration scripts by Friday. I'm waiting on Priya to send the schema dump."),
    ("assistant", "Noted: migrations first, and Priya's schema dump is the blocker."),
]


def talk(mem: narrative.Memory, turns: list[tuple[str, str]] = TURNS, title: str = "db move") -> int:
    conversation = mem.start_conversation(title)
    for role, text in turns:
        mem.remember(text, role, speaker="alex" if role == "user" else "rook")
    return conversation.id


def entities(mem: narrative.Memory, cid: int) -> list[Entity]:
    return mem.store.list_entities(mem.user, conversation_id=cid, limit=1000)


def ids(mem: narrative.Memory, cid: int) -> set[int]:
    return {m.id for m in mem.list_memories(conversation_id=cid, limit=1000)}


# --- item 4: the review is the gate ----------------------------------------------------------------------------


def test_confirming_an_edit_stores_exactly_the_edited_memory(mem: narrative.Memory) -> None:
    cid = talk(mem)
    before = ids(mem, cid)
    mem.close_conversation(cid)
    mem.edit_preview(cid, "Alex moves the service to Postgres; Priya owes the schema dump.")
    result = mem.confirm_memory(cid)
    [made] = result.memories
    assert made.content == "Alex moves the service to Postgres; Priya owes the schema dump." and made.user_edited
    assert ids(mem, cid) - before == {made.id}  # no link summary, no closing reflection beside it
    assert [m.id for m in mem.list_memories(conversation_id=cid, limit=100) if m.user_reviewed] == [made.id]
    assert result.end is not None and result.end.sealed  # the chain keeps its links (not as memories)


def test_confirming_an_edit_given_at_confirm_stores_only_it(mem: narrative.Memory) -> None:
    cid = talk(mem)
    before = ids(mem, cid)
    mem.close_conversation(cid)
    [made] = mem.confirm_memory(cid, edited_narrative="Postgres it is.").memories
    assert ids(mem, cid) - before == {made.id} and made.content == "Postgres it is."
    assert mem.list_memories(stream="reflection", limit=100) == []


def test_a_split_stores_the_parts_and_nothing_else(mem: narrative.Memory) -> None:
    cid = talk(mem)
    work = mem.create_storyline("Work")
    before = ids(mem, cid)
    mem.close_conversation(cid)
    parts: list[dict[str, Any]] = [
        {"narrative": "The service moves to Postgres.", "storyline_id": work.id},
        {"narrative": "Priya owes the schema dump.", "storyline_id": None},
    ]
    made = mem.split_memory(cid, parts).memories
    assert [m.content for m in made] == ["The service moves to Postgres.", "Priya owes the schema dump."]
    assert ids(mem, cid) - before == {m.id for m in made}
    assert {m.id for m in mem.list_memories(limit=1000) if m.stream in (Stream.NARRATIVE, Stream.REFLECTION)} == {
        m.id for m in made
    }


def test_a_removed_item_is_not_stored_anywhere(mem: narrative.Memory) -> None:
    """Removing the decision takes its entity, its turn note (the decision memory) and its change with it."""
    cid = talk(mem)
    preview = mem.close_conversation(cid)
    decision = next(e for e in preview.kept if e.entity_type is EntityType.DECISION)
    assert mem.list_memories(stream="decision", conversation_id=cid)  # the write path made a turn note
    mem.edit_preview(cid, remove_entities=[decision.key])
    [made] = mem.confirm_memory(cid).memories
    assert mem.list_memories(stream="decision", conversation_id=cid) == []
    assert not [e for e in entities(mem, cid) if e.entity_type is EntityType.DECISION]
    assert "Decision" not in made.key_points and "Postgres" not in made.content


def test_a_kept_item_keeps_its_turn_note(mem: narrative.Memory) -> None:
    cid = talk(mem)
    mem.close_conversation(cid)
    mem.confirm_memory(cid)
    [note] = mem.list_memories(stream="decision", conversation_id=cid)
    assert "Postgres" in note.content


def test_a_product_taken_for_a_person_is_neither_proposed_nor_stored(mem: narrative.Memory) -> None:
    cid = talk(
        mem,
        [("user", "We picked Postgres over MySQL for the new service."), ("user", "Priya thinks Postgres is fine.")],
    )
    preview = mem.close_conversation(cid)
    assert "Postgres" not in [e.name for e in preview.entities if e.entity_type is EntityType.PERSON]
    assert "People involved: Postgres" not in preview.narrative
    mem.confirm_memory(cid)
    assert "Postgres" not in [e.name for e in entities(mem, cid) if e.entity_type is EntityType.PERSON]


# --- item 5: one fact once ---------------------------------------------------------------------------------------


def test_a_closing_memory_that_restates_one_sentence_points_to_it(mem: narrative.Memory) -> None:
    """ "Sam will send the bed measurements on Friday." said once is stored once: as what was said."""
    conversation = mem.start_conversation("beds")
    said = mem.remember("Sam will send the bed measurements on Friday.", speaker="maya")
    before = ids(mem, conversation.id)
    preview = mem.close_conversation(conversation.id)
    assert preview.restates == said.memories[0].id
    result = mem.confirm_memory(conversation.id)
    [kept] = result.memories
    assert kept.id == said.memories[0].id and result.existing == [kept.id]
    assert kept.user_reviewed and kept.content == "maya: Sam will send the bed measurements on Friday."
    assert ids(mem, conversation.id) == before  # nothing new: no copy, no link summary, no reflection
    holding = [m for m in mem.list_memories(limit=100) if "bed measurements" in m.content]
    assert [m.id for m in holding] == [kept.id]
    assert {e.memory_id for e in entities(mem, conversation.id)} == {kept.id}
    archive = mem.get_conversation_archive(conversation.id)
    assert [m.id for m in archive["memories"]] == [kept.id]


def test_a_restating_closing_memory_goes_where_the_person_files_it(mem: narrative.Memory) -> None:
    conversation = mem.start_conversation()
    said = mem.remember("Sam will send the bed measurements on Friday.", speaker="maya")
    home = mem.create_storyline("Home")
    mem.close_conversation(conversation.id)
    [kept] = mem.confirm_memory(conversation.id, destination_storyline_id=home.id).memories
    assert kept.id == said.memories[0].id and kept.storyline_id == home.id


def test_an_edit_is_stored_as_written_even_when_it_restates(mem: narrative.Memory) -> None:
    conversation = mem.start_conversation()
    mem.remember("Sam will send the bed measurements on Friday.", speaker="maya")
    mem.close_conversation(conversation.id)
    [made] = mem.confirm_memory(conversation.id, edited_narrative="Sam sends the bed measurements Friday.").memories
    assert made.stream is Stream.NARRATIVE and made.content == "Sam sends the bed measurements Friday."


def test_the_greeting_names_a_kept_memory_as_the_last_remembered(mem: narrative.Memory) -> None:
    conversation = mem.start_conversation()
    mem.remember("Sam will send the bed measurements on Friday.", speaker="maya")
    mem.close_conversation(conversation.id)
    mem.confirm_memory(conversation.id)
    assert "bed measurements" in mem.greet().text


def test_a_list_shows_each_fact_once(mem: narrative.Memory) -> None:
    """Exchanges overlap (each holds the turn it answers) and a decision note repeats its turn: listed, every
    turn shows once, the rest is folded into the memory that shows it."""
    cid = talk(mem)
    listed = mem.list_memories(conversation_id=cid, limit=100)
    shown = mem.one_fact_once([m.id for m in listed])
    assert [item.memory.id for item in shown] == [m.id for m in listed]
    visible = [item for item in shown if item.folded_into is None]
    text = "\n".join(item.text for item in visible)
    for _, said in TURNS:
        assert text.count(said) == 1, said
    folded = [item for item in shown if item.folded_into is not None]
    assert folded and all(
        item.memory.id in next(v.also for v in visible if v.memory.id == item.folded_into) for item in folded
    )
    notes = [item for item in shown if item.memory.stream is Stream.DECISION]
    assert notes and all(item.folded_into is not None for item in notes)


def test_a_reviewed_memory_is_never_folded_into_another(mem: narrative.Memory) -> None:
    conversation = mem.start_conversation()
    mem.remember("Sam will send the bed measurements on Friday.", speaker="maya")
    mem.remember("Noted, I'll remind you.", "assistant", speaker="rook")
    mem.close_conversation(conversation.id)
    [kept] = mem.confirm_memory(conversation.id).memories
    listed = mem.list_memories(conversation_id=conversation.id, limit=100)
    shown = {item.memory.id: item for item in mem.one_fact_once([m.id for m in listed])}
    assert shown[kept.id].folded_into is None and shown[kept.id].text == kept.content


def test_a_machine_narrative_of_any_length_confirms_within_the_bound() -> None:
    """Rules over a long conversation can write a narrative past the 5,000 characters a person's edit may have:
    it ends at the last sentence that fits instead of failing the confirm (seen on a BEAM chat)."""
    from narrative.write.close import NARRATIVE_MAX, _bounded

    long = " ".join(f"Decided: step {i} of the garden plan uses the north beds." for i in range(200))
    cut = _bounded(long)
    assert len(cut) <= NARRATIVE_MAX and cut.endswith(".…") and long.startswith(cut[:-1])
    assert _bounded("Short and done.") == "Short and done."
