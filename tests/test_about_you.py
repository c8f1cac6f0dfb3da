"""Your Story keeps who the person is: self-descriptions said in passing become notes of Your Story.

Talking Rock's Your Story "tells who you are".  A person says it mid-question ("… for my growth as a 44-year-old
colour technologist"), where the message's own words and vector are about something else; the note holds the
clause alone, points at its message, and is found by a question about the person.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import narrative
from conftest import FakeClock
from narrative.model import Source, Stream
from narrative.write.extract import HeuristicExtractor
from narrative.write.extract.about import self_descriptions

PROBABILITY = (
    "I'm trying to decide where to start with probability: coin tosses, where heads is 1/2, or dice, where a 4 is "
    "1/6, so should I start with coins or dice to learn how to calculate the probability of an event as a ratio of "
    "favorable outcomes, which seems crucial for my practical growth as a 44-year-old colour technologist from Port "
    "Michael?"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (PROBABILITY, ("I'm a 44-year-old colour technologist from Port Michael",)),
        ("My name is Sam and I live in Leeds.", ("My name is Sam", "I live in Leeds")),
        ("I'm 44 years old and I'm a nurse, so go easy on me", ("I'm 44 years old", "I'm a nurse")),
        ("i'm a nurse lol", ("I'm a nurse",)),
        ("I am a software developer who loves cats", ("I am a software developer",)),
        ("I work at Google as an engineer.", ("I work at Google as an engineer",)),
        ("I'm volunteering as a mentor for a local school.", ("I'm a mentor for a local school",)),
        ("I made this to show my path as a trans woman.", ("I'm a trans woman",)),
        ("Call me Ishmael.", ("Call me Ishmael",)),
        ("I'm from Porto, but I'm based in Berlin now.", ("I'm from Porto", "I'm based in Berlin now")),
    ],
)
def test_a_self_description_is_read_as_the_person_said_it(text: str, expected: tuple[str, ...]) -> None:
    assert self_descriptions(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "I'm a bit tired today.",
        "I'm a little worried about the deadline.",
        "I'm not a nurse.",
        "If I were a teacher I'd quit.",
        "I loved reading that book as a kid.",
        "I use Redis as a buffer for the writes.",
        "I'm in awe of your courage as a trans person.",
        "As a result, the plot fails.",
        "I'm 3 problems into the set.",
        "Use `I'm a teacher` as the test string.",
        "I'm a big fan of jazz.",
    ],
)
def test_what_is_not_who_the_person_is_is_not_read(text: str) -> None:
    assert self_descriptions(text) == ()


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("Iamn'sfrom ofa-yeld4.,\nAIMR")), max_size=80) | st.text(max_size=200))
def test_any_text_reads_without_error_and_every_note_quotes_it(text: str) -> None:
    """No crash on any input; each clause is the person's words (only "as a" reads "I'm a")."""
    found = self_descriptions(text)
    flat = " ".join(text.lower().replace("\u2019", "'").split())
    for clause in found:
        words = clause.lower().split()
        body = " ".join(words[1:]) if words[0] == "i'm" else " ".join(words)
        assert body in flat or " ".join(words[1:]) in flat
        assert len(words) <= 12


def test_only_the_person_describes_themselves() -> None:
    extractor = HeuristicExtractor()
    assert extractor.extract_turn("I'm a nurse.", role="user").about_you == ("I'm a nurse",)
    assert extractor.extract_turn("I'm a language model, not a nurse.", role="assistant").about_you == ()


def test_a_self_description_becomes_one_note_of_your_story(mem: narrative.Memory) -> None:
    turn = mem.remember("My name is Sam and I live in Leeds. Can you suggest a walk for Sunday?")
    [note] = [m for m in turn.memories if m.stream is Stream.FACT]
    assert note.source is Source.EXTRACTION
    assert note.content == "My name is Sam; I live in Leeds"
    assert note.storyline_id == mem.your_story().id != turn.storyline.id or turn.storyline.is_your_story
    assert note.message_ids == (turn.message.id,)
    assert note.narrative_id is None  # no link of the topic's chain holds it
    assert note.importance == 4
    assert [m.id for m in mem.list_memories(storyline_id=mem.your_story().id, stream="fact")] == [note.id]


def test_an_assistant_describing_itself_makes_no_note(mem: narrative.Memory) -> None:
    mem.remember("What are you?")
    reply = mem.remember("I'm a language model, a helper for your notes.", "assistant")
    assert not [m for m in reply.memories if m.stream is Stream.FACT]


def test_a_self_description_said_again_is_kept_once(mem: narrative.Memory) -> None:
    first = mem.remember("I'm a nurse, and I want to plan my night shifts.")
    mem.remember("Let's plan them.", "assistant")
    again = mem.remember("As I said, I'm a nurse, so weekends are hard.")
    assert [m for m in first.memories if m.stream is Stream.FACT]
    assert not [m for m in again.memories if m.stream is Stream.FACT]
    notes = mem.list_memories(storyline_id=mem.your_story().id, stream="fact")
    assert [m.content for m in notes] == ["I'm a nurse"]


def test_in_a_chat_of_several_people_the_note_says_who(mem: narrative.Memory) -> None:
    turn = mem.remember("I'm a counselor now, after years of training.", speaker="Caroline")
    [note] = [m for m in turn.memories if m.stream is Stream.FACT]
    assert note.content == "Caroline: I'm a counselor now"


def test_deleting_the_conversation_deletes_its_notes(mem: narrative.Memory) -> None:
    turn = mem.remember("I'm a nurse from Leeds.")
    [note] = [m for m in turn.memories if m.stream is Stream.FACT]
    assert note.conversation_id == turn.message.conversation_id
    mem.delete_conversation(turn.message.conversation_id)
    assert note.id not in {m.id for m in mem.list_memories(limit=100)}


def test_a_question_about_the_person_finds_the_clause_said_in_passing(tmp_path: Path) -> None:
    """By meaning: the message is about probability, the question about work; the note answers and shows it."""
    with narrative.Memory(tmp_path / "m.db", user="alice", embedder="minilm", clock=FakeClock(), env={}) as mem:
        said = mem.remember(PROBABILITY)
        mem.remember("Start with coin tosses: one outcome of two, so heads is 1/2.", "assistant")
        mem.remember("And what is the chance of two sixes in a row with two dice?")
        mem.remember("Each six is 1/6, and the rolls are independent, so 1/36.", "assistant")
        [first, *_] = mem.search("What profession did I mention I work in?", 5)
    assert first.memory.stream is Stream.FACT
    assert first.shown == (said.message.id,)
    assert "colour technologist" in first.text


def test_the_context_tells_the_agent_who_the_person_is(mem: narrative.Memory) -> None:
    """Talking Rock: "Your Story tells who you are". The context's about_you section holds Your Story's facts,
    newest first, each once, paid for by the recent messages."""
    mem.remember("I'm a nurse from Leeds, and I want to plan my night shifts.")
    mem.remember("Let's plan them around your sleep.", "assistant")
    mem.remember("I'm a nurse, as I said, and my name is Sam.")
    mem.add_memory("Prefers short answers.", stream="fact", storyline_id=mem.your_story().id)
    block = mem.context("when should I sleep between shifts?", 2000)
    about = block.text.split("<about_you>\n", 1)[1].split("\n</about_you>", 1)[0].splitlines()
    assert [line.split(" (said ")[0] for line in about] == [
        "- Prefers short answers.",
        "- I'm a nurse; My name is Sam",
        "- I'm a nurse from Leeds",
    ]
    assert block.text.index("<about_you>") < block.text.index("<recent_messages")
    assert block.about[0].content == "Prefers short answers."
    assert block.to_dict()["about_you"][0]["content"] == "Prefers short answers."
    section = next(s for s in block.sections if s.name == "about_you")
    assert section.shown == 3 and section.tokens <= section.limit


def test_about_you_drops_the_oldest_facts_first_when_its_share_is_small(mem: narrative.Memory) -> None:
    for town in ("Leeds", "York", "Hull", "Bath", "Ely", "Wells"):
        mem.add_memory(
            f"Lived in {town} for a year, working at the hospital there.",
            stream="fact",
            storyline_id=mem.your_story().id,
        )
    block = mem.context("where did I live?", 1000)
    section = next(s for s in block.sections if s.name == "about_you")
    assert 0 < section.shown < 6 and section.dropped == 6 - section.shown
    assert block.about[0].content.startswith("Lived in Wells")


def test_a_corrected_self_description_leaves_about_you_with_the_correction(mem: narrative.Memory) -> None:
    mem.remember("I live in Berlin.")
    mem.remember("Actually, I moved: I live in Lisbon now, not Berlin.")
    block = mem.context("where do I live?", 2000)
    assert [m.content for m in block.about] == ["I live in Lisbon now"]
    [old] = [m for m in mem.list_memories(stream="fact") if m.content == "I live in Berlin"]
    assert old.valid_to is not None  # superseded with its message, as the message's own memory is


def test_deleting_a_turns_memory_deletes_the_note_drawn_from_it(mem: narrative.Memory) -> None:
    """What a person takes back is not kept as who they are (and not in the file's bytes)."""
    kept = mem.remember("I'm a nurse from Leeds.")
    taken = mem.remember("Also, I'm a drummer in a band.")
    [note] = [m for m in taken.memories if m.stream is Stream.FACT]
    counts = mem.delete_memory(taken.memories[0].id)
    assert counts["memories"] == 2
    assert {m.content for m in mem.list_memories(stream="fact")} == {"I'm a nurse from Leeds"}
    assert "drummer" not in mem.context("who am I?", 2000).text
    assert [m for m in kept.memories if m.stream is Stream.FACT]
    with pytest.raises(narrative.NotFound):
        mem.get_memory(note.id)


def test_restoring_a_corrected_turn_restores_its_note(mem: narrative.Memory) -> None:
    """Undoing a correction the detector made undoes it for what was noted from the turn too."""
    first = mem.remember("I live in Berlin.")
    mem.remember("Actually, I moved: I live in Lisbon now, not Berlin.")
    [note] = [m for m in first.memories if m.stream is Stream.FACT]
    assert mem.get_memory(note.id).valid_to is not None
    mem.restore_memory(first.memories[0].id)
    assert mem.get_memory(note.id).valid_to is None
    assert [e.kind.value for e in mem.history(note.id)] == ["created", "superseded", "restored"]
    about = [m.content for m in mem.context("where do I live?", 2000).about]
    assert about == ["I live in Lisbon now", "I live in Berlin"]


def test_a_notes_hit_names_the_corrected_turn_first(mem: narrative.Memory) -> None:
    """The README's example: the first hit's ``supersedes[0]`` is the memory "I live in Berlin.", the turn the
    correction replaced; the note drawn from that turn comes after it."""
    mem.remember("I live in Berlin.")
    mem.remember("Actually, I moved: I live in Lisbon now, not Berlin.")
    [first, *_] = mem.search("where do I live?")
    assert first.text == "Actually, I moved: I live in Lisbon now, not Berlin."
    assert [old.content for old in first.supersedes] == ["I live in Berlin.", "I live in Berlin"]


def test_about_you_says_a_fact_once_when_an_agent_files_the_same_words(mem: narrative.Memory) -> None:
    mem.remember("I'm a nurse from Leeds.")
    mem.add_memory("I'm a nurse from Leeds", stream="fact", storyline_id=mem.your_story().id)
    block = mem.context("what do I do?", 2000)
    assert [m.content.casefold() for m in block.about] == ["i'm a nurse from leeds"]
    assert block.text.count("nurse from Leeds (said") == 1
