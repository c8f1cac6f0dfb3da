"""Text written without an LLM reads as sentences a person would write.

Sealed links, closing memories and reflections are made from what the speakers said (retold in the third
person), never from topic tags; none repeats a sentence; a link whose arc holds a decision says what was
decided and why.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import narrative
from conftest import FakeClock
from narrative.text import patterns as P
from narrative.text.words import restated_in
from narrative.write.retell import retold

TALK = [
    ("maya", "user", "I'm planning the community garden app; the volunteers keep losing track of watering."),
    ("rook", "assistant", "Where will the volunteers use it: out in the garden or at home?"),
    ("maya", "user", "Out in the garden, where the signal is terrible."),
    ("maya", "user", "We decided to use SQLite instead of Firebase because it works offline and costs nothing."),
    ("rook", "assistant", "Sounds right. What comes first?"),
    ("maya", "user", "Completely different topic. I'm finishing the reading for Friday's seminar."),
    ("rook", "assistant", "Which reading is it?"),
    ("maya", "user", "I realized that I hate public speaking, and the seminar needs a short talk."),
]
KEYWORD_LIST = re.compile(r"\b(It was about|Explored|talked about)\b|;\s*\w+;")


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[narrative.Memory]:
    memory = narrative.Memory(
        tmp_path_factory.mktemp("text") / "maya.db",
        user="maya",
        embedder="none",
        clock=FakeClock(),
        env={},
        reflect_every=4,
    )
    memory.start_conversation("garden and a seminar")
    for speaker, role, text in TALK:
        memory.remember(text, role, speaker=speaker)
    memory.close_conversation()
    memory.confirm_memory()
    yield memory
    memory.close()


def texts(mem: narrative.Memory) -> list[str]:
    links = [n.summary for n in mem.list_narratives(limit=100)]
    kept = [m.content for m in mem.list_memories(limit=1000) if m.stream.value in ("narrative", "reflection")]
    return links + kept


def test_no_text_is_a_keyword_list_or_repeats_a_sentence(mem: narrative.Memory) -> None:
    written = texts(mem)
    assert written
    for text in written:
        assert not KEYWORD_LIST.search(text), text
        sentences = [s.strip().casefold() for s in P.split_sentences(text)]
        assert len(sentences) == len(set(sentences)), text
        assert "different topic" not in text.lower(), text


def test_a_sealed_link_says_what_was_decided_and_why(mem: narrative.Memory) -> None:
    links = [n for n in mem.list_narratives(limit=100) if n.sealed]
    decided = [n.summary for n in links if "SQLite" in n.summary]
    assert decided, [n.summary for n in links]
    assert any("decided to use SQLite instead of Firebase, because it works offline" in s for s in decided)
    assert all(not s.startswith("maya:") for s in (n.summary for n in links))  # the arc, not the last line


def test_reflections_are_sentences_about_who_said_what(mem: narrative.Memory) -> None:
    reflections = [m.content for m in mem.list_memories(stream="reflection", limit=100)]
    assert reflections
    assert any("Maya is planning the community garden app" in r for r in reflections)
    said = [s for m in mem.messages(limit=100) for s in P.split_sentences(m.content)]
    assert all(restated_in(r, said, names=["maya", "rook"]) is None for r in reflections)  # each says more than one
    assert len(reflections) == len(set(reflections))


def test_the_closing_memories_retell_each_topic_rather_than_list(mem: narrative.Memory) -> None:
    """Two topics (the garden app, then "Completely different topic": the seminar) are two memories, each told
    from its own turns and filed under its own storyline, not one memory that merges them."""
    closing = sorted((m for m in mem.list_memories(limit=100) if m.user_reviewed), key=lambda m: m.id)
    assert [m.stream.value for m in closing] == ["narrative", "narrative"]
    garden, seminar = (m.content for m in closing)
    assert garden.startswith("Maya decided to use SQLite instead of Firebase") and "seminar" not in garden
    assert "Maya hates public speaking" in seminar and "SQLite" not in seminar
    assert len({m.storyline_id for m in closing}) == 2
    assert not any(KEYWORD_LIST.search(m.content) for m in closing)


@pytest.mark.parametrize(
    ("said", "told"),
    [
        ("I hate public speaking.", "Maya hates public speaking."),
        ("I finally called Mum.", "Maya finally called Mum."),
        ("I think I need a break.", "Maya thinks Maya needs a break."),
        ("I'm tired and I've been busy.", "Maya is tired and Maya has been busy."),
        ("I don't know, I can try.", "Maya doesn't know, Maya can try."),
        ("I watch birds and I try to draw them.", "Maya watches birds and Maya tries to draw them."),
        ("I went home.", "Maya went home."),
    ],
)
def test_retelling_agrees_the_verb_with_the_speaker(said: str, told: str) -> None:
    assert retold(said, "Maya") == told


def test_retelling_to_the_user_keeps_the_verb(tmp_path: Path) -> None:
    assert retold("I hate public speaking.", "You") == "you hate public speaking."
