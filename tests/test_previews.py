"""Previews read right without an LLM (issue 23, item 7): what a person reviews has no grammar slip, no product
taken for a person, no sentence said twice, no stated decision missed, no two topics merged, no deadline dropped.

Each case is a realistic conversation fed through the real write path and close path (no model), then the
preview is read as a person reads it; a few more phrasings of each show the rule follows how people talk,
not one sentence.  Real SQLite files and PostgreSQL; the two-topic case also with the local MiniLM embedder.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import narrative
from conftest import FakeClock
from narrative.model import EntityType
from narrative.text import patterns as P
from narrative.text.words import new_words
from narrative.write.preview import Preview


def previewed(mem: narrative.Memory, turns: list[str | tuple[str, str]]) -> Preview:
    """Maya's turns (a tuple is ``(role, text)``: Rook answers) through the write path; the close's preview."""
    conversation = mem.start_conversation()
    for turn in turns:
        role, text = turn if isinstance(turn, tuple) else ("user", turn)
        mem.remember(text, role, speaker="maya" if role == "user" else "rook")
    return mem.close_conversation(conversation.id)


def people(preview: Preview) -> list[str]:
    return [e.name for e in preview.entities if e.entity_type is EntityType.PERSON]


def said_twice(text: str) -> list[tuple[str, str]]:
    """Pairs of sentences of ``text`` where the later one says nothing the earlier one did not."""
    sentences = P.split_sentences(text)
    return [
        (a, b)
        for i, a in enumerate(sentences)
        for b in sentences[i + 1 :]
        if new_words(b, [a], names=["maya"]) == set() and new_words(b, [], names=["maya"])
    ]


# --- "Maya settled on picked Postgres over MySQL instead of MySQL" ---------------------------------------------


@pytest.mark.parametrize(
    ("said", "told"),
    [
        ("We picked Postgres over MySQL for the new service.", "Maya picked Postgres over MySQL for the new service"),
        ("We chose SQLite over Firebase for the field app.", "Maya chose SQLite over Firebase for the field app"),
        (
            "I went with the blue logo instead of the green one.",
            "Maya went with the blue logo instead of the green one",
        ),
        ("We opted for trains rather than flights because of the kids.", "Maya opted for trains instead of flights"),
    ],
)
def test_a_choice_is_retold_with_the_speakers_own_verb(mem: narrative.Memory, said: str, told: str) -> None:
    preview = previewed(mem, [said])
    assert told in preview.narrative
    assert "settled on" not in preview.narrative
    alternative = told.split()[-1]
    assert preview.narrative.count(alternative) == 1  # the alternative is named once


@pytest.mark.parametrize(
    ("role", "speaker", "who"),
    [("tool", "weather_bot", "Weather_bot"), ("system", "", "The system prompt"), ("assistant", "", "The assistant")],
)
def test_what_a_tool_or_the_assistant_decided_is_not_told_as_the_persons(
    mem: narrative.Memory, role: str, speaker: str, who: str
) -> None:
    """A tool's "we decided …" was told as "Maya decided …", and its "I will send …" as her open task."""
    conversation = mem.start_conversation()
    mem.remember("What should we do about the picnic on Saturday?", speaker="maya")
    said = "Forecast: heavy rain. We decided to cancel the picnic. I will send the refund request on Monday."
    mem.remember(said, role, speaker=speaker)
    preview = mem.close_conversation(conversation.id)
    assert f"{who} decided to cancel the picnic" in preview.narrative
    assert "Maya decided" not in preview.narrative
    assert "Maya" not in preview.narrative.split("Still open:")[1].split(";")[0]


def test_each_person_of_a_group_chat_is_told_deciding_what_they_decided(mem: narrative.Memory) -> None:
    conversation = mem.start_conversation()
    mem.remember("I think the team dinner could be on Friday at the harbour.", speaker="maya")
    mem.remember("Any thoughts on the venue, everyone?", speaker="maya")
    mem.remember("We picked the Italian place over the sushi bar for the dinner.", speaker="bob")
    preview = mem.close_conversation(conversation.id)
    assert "Bob picked the Italian place over the sushi bar" in preview.narrative


# --- "Alice settled on host the launch party" -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("said", "told"),
    [
        ("We decided to host the launch party at the office.", "Maya decided to host the launch party at the office"),
        ("We decided to rotate the watering shifts weekly.", "Maya decided to rotate the watering shifts weekly"),
        ("I decided to repaint the hallway before the move.", "Maya decided to repaint the hallway before the move"),
        (
            "We've decided to cancel the gym membership because nobody goes.",
            "Maya decided to cancel the gym membership",
        ),
        ("We decided on the blue logo.", "Maya settled on the blue logo"),
    ],
)
def test_an_action_decided_is_decided_to_and_a_thing_settled_on(mem: narrative.Memory, said: str, told: str) -> None:
    assert told in previewed(mem, [said]).narrative


# --- "Decided: the speech opens with the lost ice cream story." not extracted -----------------------------------


@pytest.mark.parametrize(
    ("said", "decided"),
    [
        ("Decided: the speech opens with the lost ice cream story.", "the speech opens with the lost ice cream story"),
        ("Decision: we fly to Lisbon on the 3rd.", "we fly to Lisbon on the 3rd"),
        ("Final decision - the kids sleep in the loft.", "the kids sleep in the loft"),
        ("Verdict: the old sofa goes to the charity shop.", "the old sofa goes to the charity shop"),
    ],
)
def test_a_decision_stated_as_a_note_is_extracted(mem: narrative.Memory, said: str, decided: str) -> None:
    preview = previewed(mem, [said, ("assistant", "Lovely."), "I still need to finish the ending by Thursday."])
    assert [e.name for e in preview.entities if e.entity_type is EntityType.DECISION] == [decided]
    assert f"Maya decided that {decided}" in preview.narrative
    assert said not in preview.narrative  # retold once, not repeated as said


# --- "People involved: Postgres" ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "turns",
    [
        ["We picked Postgres over MySQL for the new service.", "I asked Priya and she thinks Postgres is fine."],
        ["I'm using Figma and Notion for the mockups.", "I talked to Priya about the roadmap."],
        ["We switched to Linear last week.", "I talked to Priya about it."],
        ["I talked to Priya about Postgres and Redis today.", "Priya thinks Postgres is fine for now."],
    ],
)
def test_a_tool_or_product_is_not_a_person_involved(mem: narrative.Memory, turns: list[str]) -> None:
    preview = previewed(mem, list(turns))
    assert people(preview) == ["Priya"]
    for product in ("Postgres", "Figma", "Notion", "Linear", "Redis"):
        assert f"People involved: {product}" not in preview.narrative
        assert f"and {product}." not in preview.narrative


def test_the_people_a_conversation_involves_are_still_named(mem: narrative.Memory) -> None:
    preview = previewed(mem, ["I met Tom and Lena at the cafe.", "Lena wants to help with the seed swap in May."])
    assert people(preview) == ["Tom", "Lena"] and "Tom" in preview.narrative


# --- a sentence said twice ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "turns",
    [
        ["Sam will send the bed measurements on Friday."],
        ["We went with SQLite instead of Firebase because it works offline."],
        ["I'm waiting on Dana to send the paint samples.", "Dana will send the paint samples on Monday."],
        ["The deadline for the grant application is March 3."],
        ["Decision: we fly to Lisbon on the 3rd."],
        [
            ("assistant", "What did you pick?"),
            "We picked Postgres over MySQL.",
            ("assistant", "Why?"),
            "Because we know it.",
        ],
    ],
)
def test_no_sentence_is_said_twice(mem: narrative.Memory, turns: list[str | tuple[str, str]]) -> None:
    preview = previewed(mem, turns)
    assert said_twice(preview.narrative) == [], preview.narrative
    open_items = [e.label for e in preview.kept if e.entity_type is EntityType.WAITING_ON]
    assert len(open_items) <= 1, open_items


def test_a_reason_given_when_asked_why_is_the_decisions_reason(mem: narrative.Memory) -> None:
    preview = previewed(
        mem,
        [
            "We picked Postgres over MySQL for the new service.",
            ("assistant", "Why Postgres?"),
            "Because the team knows it.",
        ],
    )
    assert "Maya picked Postgres over MySQL for the new service, because the team knows it." in preview.narrative
    assert "Because the team" not in preview.narrative


# --- a deadline dropped -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("said", "deadline"),
    [
        ("Also, completely different topic: my tax return is due on April 30.", "April 30"),
        ("The deadline for the grant application is March 3.", "March 3"),
        ("I need to finish the slides for the board, ideally by Thursday.", "Thursday"),
        ("The report is due next week, and Jo will review it.", "next week"),
        ("The slides have to be in by Thursday.", "Thursday"),
    ],
)
def test_a_deadline_reaches_the_preview(mem: narrative.Memory, said: str, deadline: str) -> None:
    preview = previewed(mem, [said])
    assert deadline in preview.narrative
    assert any(deadline in e.label for e in preview.kept if e.entity_type is EntityType.TASK)


# --- two topics of one conversation merged --------------------------------------------------------------------------

TWO_TOPICS: list[str | tuple[str, str]] = [
    "Let's plan the garden: tomatoes along the south fence.",
    ("assistant", "Good spot for them."),
    "The beans go by the shed, and the herbs near the kitchen door.",
    "Also, completely different topic: my tax return is due on April 30.",
    ("assistant", "Do you have the forms?"),
    "I need to ask my accountant for the P60 by next week.",
]


def assert_two_topics_kept_apart(mem: narrative.Memory) -> None:
    preview = previewed(mem, TWO_TOPICS)
    assert preview.proposes_parts and len(preview.parts) == 2
    garden, tax = (str(p["narrative"]) for p in preview.parts)
    assert "tomatoes" in garden and "tax" not in garden and "accountant" not in garden
    assert "April 30" in tax and "Maya's accountant" in tax and "tomatoes" not in tax
    made = mem.confirm_memory(preview.conversation_id).memories
    assert [m.storyline_id for m in made] == [p["storyline_id"] for p in preview.parts]
    assert len({m.storyline_id for m in made}) == 2


def test_two_topics_are_two_memories_each_in_its_storyline(mem: narrative.Memory) -> None:
    assert_two_topics_kept_apart(mem)


@pytest.fixture
def minilm(tmp_path: Path) -> Iterator[narrative.Memory]:
    memory = narrative.Memory(tmp_path / "m.db", user="maya", clock=FakeClock(), env={})
    yield memory
    memory.close()


def test_two_topics_are_kept_apart_with_the_default_embedder(minilm: narrative.Memory) -> None:
    assert_two_topics_kept_apart(minilm)


def test_a_one_turn_topic_beside_two_others_is_a_part_of_its_own(minilm: narrative.Memory) -> None:
    """A new user's probe: with three storylines, the one-turn aside (the wedding) was in no part, so it was never
    reviewed; its part does not repeat the aside's cue either."""
    preview = previewed(
        minilm,
        [
            "We decided to plant tomatoes in the garden because they grow well here.",
            "Sam will send the bed measurements on Friday.",
            "Also, completely different topic: my sister's wedding is on June 14 in Porto.",
        ],
    )
    assert preview.proposes_parts
    told = [str(p["narrative"]) for p in preview.parts]
    wedding = [t for t in told if "wedding" in t]
    assert len(wedding) == 1 and "June 14" in wedding[0] and "different topic" not in wedding[0]
    assert any("tomatoes" in t for t in told)


def test_editing_a_two_topic_preview_keeps_one_memory(mem: narrative.Memory) -> None:
    preview = previewed(mem, TWO_TOPICS)
    assert preview.proposes_parts
    [made] = mem.confirm_memory(preview.conversation_id, edited_narrative="Garden plan and tax return.").memories
    assert made.content == "Garden plan and tax return."


def test_redirecting_a_two_topic_preview_keeps_one_memory(mem: narrative.Memory) -> None:
    preview = previewed(mem, TWO_TOPICS)
    home = mem.create_storyline("Home")
    redirected = mem.redirect_preview(preview.conversation_id, home.id)
    assert not redirected.proposes_parts
    [made] = mem.confirm_memory(preview.conversation_id).memories
    assert made.storyline_id == home.id and made.content == preview.narrative


def test_a_two_topic_narrative_does_not_deny_what_one_of_its_parts_tells(minilm: narrative.Memory) -> None:
    """A probe over HTTP: a topic with a decision beside one with only an open task was told as "You decided to
    paint the kitchen blue … Still open: book the dentist … Nothing was decided." — the second part's closing
    sentence, true of its topic alone, denied the first; a redirect (or confirming after it) stored it so."""
    conversation = minilm.start_conversation()
    for said in (
        "We decided to paint the kitchen blue because it feels calm.",
        "I need to book the dentist for next Tuesday.",
        "The kitchen paint needs two coats.",
    ):
        minilm.remember(said)  # as POST /messages {content, role: user} does: no speaker
    preview = minilm.close_conversation(conversation.id)
    assert preview.proposes_parts and any("Nothing was decided" in str(p["narrative"]) for p in preview.parts)
    assert "decided to paint the kitchen blue" in preview.narrative and "book the dentist" in preview.narrative
    assert "Nothing was" not in preview.narrative
    redirected = minilm.redirect_preview(preview.conversation_id, minilm.create_storyline("Home").id)
    [made] = minilm.confirm_memory(redirected.conversation_id).memories
    assert made.content == preview.narrative
