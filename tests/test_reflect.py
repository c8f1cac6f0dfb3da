"""ITSERR reflections and retention tiers on the write path.

Every ``reflect_every`` exchanges of a conversation a reflection memory covers them, storyline by storyline (a
reflection belongs to the storyline of what it reflects), unless it would only restate one sentence; closing a
conversation adds none (the memory a person confirms is its closing summary).  Conversation memories older than
10 exchanges get key points, older than 50 a session theme — without losing their text or provenance.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import narrative
from conftest import FakeClock
from narrative.engine import Turn
from narrative.model import MemoryItem, ReflectionDetails, Retention, Source, Stream
from narrative.text import patterns as P
from narrative.text.words import restated_in
from narrative.write import reflect
from narrative.write.turn_types import TurnResult

QUESTION = "Which map library should the garden app use for the plot map?"
DECISION = "We decided to use MapLibre instead of Leaflet for the plot map because it is free."
RESEARCH = "On p. 45 of Thinking in Systems by Donella Meadows, she says stocks change slowly."
INSIGHT = "I realized that the shade maps of the garden beds matter most."
DECISIONS = DECISION + " We also decided to print the plot map for the shed."  # two positions: a summary
ASKED_AND_READ = "Should the plot map work offline? " + RESEARCH  # a second question, and one source
STRETCH = [QUESTION, DECISIONS, ASKED_AND_READ]
FOLLOW_UPS = [
    "The plot map should colour each garden bed by its watering schedule.",
    "The legend of the plot map lists the beds of the community garden.",
    "The garden beds near the fence get the least sun on the plot map.",
    "Jonas wants the plot map printed for the garden shed.",
]


def every3(db_path: Path, **settings: object) -> narrative.Memory:
    """Keyword-only memory that reflects every three exchanges (unless ``settings`` say otherwise)."""
    chosen: dict[str, Any] = {"reflect_every": 3, **settings}
    return narrative.Memory(db_path, user="alice", embedder="none", clock=FakeClock(), env={}, **chosen)


@pytest.fixture
def mem3(db_path: Path) -> Iterator[narrative.Memory]:
    memory = every3(db_path)
    yield memory
    memory.close()


def say(mem: narrative.Memory, texts: list[str]) -> list[TurnResult]:
    return [mem.remember(text, speaker="maya") for text in texts]


def reflections(mem: narrative.Memory) -> list[MemoryItem]:
    """Reflection memories, oldest first."""
    return list(reversed(mem.list_memories(stream="reflection", limit=500)))


def exchanges(mem: narrative.Memory, conversation_id: int | None = None) -> list[MemoryItem]:
    """Conversation memories, oldest first."""
    return list(reversed(mem.list_memories(stream="conversation", conversation_id=conversation_id, limit=500)))


def details(memory: MemoryItem) -> ReflectionDetails:
    assert isinstance(memory.details, ReflectionDetails)
    return memory.details


# --- periodic reflections ------------------------------------------------------------------------------------------


def test_a_reflection_comes_every_n_exchanges_and_covers_them(mem3: narrative.Memory) -> None:
    first, second, third = say(mem3, STRETCH)
    assert first.reflections == [] and second.reflections == []
    made = third.reflections
    kinds = [details(m).reflection_type for m in made]
    assert kinds == ["questions", "positions"]  # the one source would only restate its sentence: not stored
    covered = exchanges(mem3)
    for memory in made:
        assert memory.stream is Stream.REFLECTION and memory.source is Source.REFLECTION
        d = details(memory)
        assert d.exchange_count == 3
        assert (d.covered_from, d.covered_to) == (covered[0].event_at, covered[-1].event_at)
        assert memory.message_ids == tuple(r.message.id for r in (first, second, third))  # provenance
        assert memory.conversation_id == third.message.conversation_id
        assert memory.storyline_id == third.storyline.id
        assert memory.event_at == covered[-1].event_at
    questions, positions = (m.content for m in made)
    assert QUESTION in questions and "Should the plot map work offline?" in questions
    assert "Maya decided to use MapLibre instead of Leaflet, because it is free." in positions  # who, what, why
    assert "Maya decided to print the plot map for the shed." in positions
    assert [m.id for m in reflections(mem3)] == [m.id for m in made]


def test_a_reflection_that_would_restate_one_sentence_is_not_stored(mem3: narrative.Memory) -> None:
    """ "Maya asked “Which map library …?”" alone, or "Maya decided to use MapLibre …" alone, says the one
    sentence the exchange already holds: one fact is stored once."""
    turns = say(mem3, [QUESTION, DECISION, RESEARCH])
    assert turns[-1].reflections == [] and reflections(mem3) == []


def test_no_stored_reflection_restates_a_single_sentence(mem3: narrative.Memory) -> None:
    say(mem3, [*STRETCH, INSIGHT, *FOLLOW_UPS])
    sentences = [s for m in mem3.messages(limit=100) for s in P.split_sentences(m.content)]
    made = reflections(mem3)
    assert made
    assert all(restated_in(m.content, sentences, names=["maya"]) is None for m in made)


def test_reflections_keep_coming_and_cover_only_the_new_exchanges(mem3: narrative.Memory) -> None:
    turns = say(mem3, [*STRETCH, INSIGHT, *FOLLOW_UPS[:2]])
    assert [len(t.reflections) > 0 for t in turns] == [False, False, True, False, False, True]
    later = turns[5].reflections
    assert {details(m).exchange_count for m in later} == {3}
    covered = exchanges(mem3)[3:6]
    assert {details(m).covered_from for m in later} == {covered[0].event_at}
    expected = tuple(dict.fromkeys(i for m in covered for i in m.message_ids))
    assert all(m.message_ids == expected for m in later)
    assert expected[0] == turns[2].message.id  # the first covered exchange answers the turn before it
    assert [details(m).reflection_type for m in later] == ["questions"]  # the insight alone: only its sentence
    assert "colour each garden bed by its watering schedule" in later[0].content


def test_the_count_is_per_conversation(mem3: narrative.Memory) -> None:
    say(mem3, [QUESTION, DECISIONS])
    mem3.close_conversation()
    mem3.confirm_memory()  # closing reflects on nothing: the confirmed memory is the closing summary
    assert reflections(mem3) == []
    mem3.start_conversation("again")
    turns = say(mem3, FOLLOW_UPS[:3])
    assert [bool(t.reflections) for t in turns] == [False, False, True]


def test_no_reflection_without_anything_to_say(mem3: narrative.Memory) -> None:
    turns = [mem3.remember(text, speaker="maya") for text in ("Hi!", "Thanks!", "ok")]
    assert turns[-1].reflections == []
    assert reflections(mem3) == []


def test_a_reflection_belongs_to_the_storyline_of_what_it_reflects(db_path: Path) -> None:
    """The garden plan is reflected under the garden storyline, the tax return under its own, even when the
    stretch ends on the tax return (small talk is nobody's topic: it is not reflected at all)."""
    with every3(db_path, reflect_every=5) as mem:
        turns = say(
            mem,
            [
                "Let's plan the garden: tomatoes along the south fence.",
                "The beans go by the shed, and the herbs near the kitchen door.",
                "Completely different topic: my tax return is due on April 30.",
                "I need to ask my accountant for the P60 by next week.",
                "Hi!",
            ],
        )
        garden, tax = turns[0].storyline.id, turns[2].storyline.id
        assert garden != tax and turns[1].storyline.id == garden and turns[3].storyline.id == tax
        made = turns[-1].reflections
        assert {m.storyline_id for m in made} == {garden, tax}
        for memory in made:
            covered = {t.storyline.id for t in turns if t.message.id in memory.message_ids[-2:]}
            assert covered == {memory.storyline_id}
        [on_garden] = [m for m in made if m.storyline_id == garden]
        assert "tomatoes" in on_garden.content and "tax" not in on_garden.content


# --- at the end of a conversation: nothing beside the confirmed memory ------------------------------------------


def test_closing_adds_no_reflection(mem3: narrative.Memory) -> None:
    turns = say(mem3, [*STRETCH, INSIGHT])
    before = reflections(mem3)
    end = mem3._turns.writer().finish_conversation("alice", turns[0].message.conversation_id, mem3.clock())
    assert end.sealed and reflections(mem3) == before


def test_the_stream_size_threshold_reflects_across_conversations(db_path: Path) -> None:
    with every3(db_path, reflect_every=100, reflection_stream_threshold=4) as mem:
        say(mem, [QUESTION, DECISIONS])
        mem.close_conversation()
        mem.confirm_memory()
        assert reflections(mem) == []
        mem.start_conversation("again")
        turns = say(mem, FOLLOW_UPS[:2])
    assert turns[0].reflections == [] and turns[1].message.position == 4
    made = turns[1].reflections  # the last four exchanges of the stream, one reflection per storyline they are in
    assert {details(m).exchange_count for m in made} == {2} and len({m.storyline_id for m in made}) == 2
    covered = {i for m in made for i in m.message_ids}
    assert {t.message.id for t in turns} <= covered and len(covered) == 4


def test_reflections_get_vectors_when_there_is_an_embedder(tmp_path: Path) -> None:
    with narrative.Memory(
        tmp_path / "h.db", user="alice", embedder="hashing", clock=FakeClock(), env={}, reflect_every=3
    ) as mem:
        made = say(mem, STRETCH)[-1].reflections
        assert made
        hits = mem.search("Maya decided to use MapLibre", streams=["reflection"], mode="vector", record=False)
    assert hits and hits[0].memory.id in {m.id for m in made}


# --- retention tiers -------------------------------------------------------------------------------------------------

PLANTS = [
    "basil",
    "borage",
    "calendula",
    "chard",
    "chives",
    "cilantro",
    "comfrey",
    "dill",
    "fennel",
    "garlic",
    "kale",
    "leek",
    "lovage",
    "marjoram",
    "mint",
    "nasturtium",
    "oregano",
    "parsley",
    "radish",
    "rhubarb",
    "rocket",
    "rosemary",
    "sage",
    "sorrel",
    "spinach",
    "squash",
    "tarragon",
    "thyme",
    "tomato",
    "turnip",
    "yarrow",
    "zucchini",
    "artichoke",
    "asparagus",
    "beetroot",
    "broccoli",
    "cabbage",
    "carrot",
    "celery",
    "chicory",
    "cucumber",
    "endive",
    "fava",
    "hyssop",
    "lettuce",
    "lupin",
    "melon",
    "okra",
    "onion",
    "parsnip",
    "pea",
    "pepper",
    "potato",
    "pumpkin",
    "quinoa",
    "salsify",
    "shallot",
    "strawberry",
    "sunflower",
    "watercress",
    "wasabi",
]


@pytest.fixture(scope="module")
def long_talk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[narrative.Memory, list[TurnResult]]]:
    """61 exchanges in one conversation (keyword-only: no model needed)."""
    path = tmp_path_factory.mktemp("retention") / "alice.db"
    mem = narrative.Memory(path, user="alice", embedder="none", clock=FakeClock(), env={})
    turns = mem.remember_many(
        [
            Turn(f"In bed {i} of the community garden we planted {plant} next to the path.", speaker="maya")
            for i, plant in enumerate(PLANTS)
        ]
    )
    yield mem, turns
    mem.close()


def test_recent_exchanges_keep_full_retention(long_talk: tuple[narrative.Memory, list[TurnResult]]) -> None:
    mem, turns = long_talk
    newest = exchanges(mem)[-reflect.FULL_WINDOW :]
    assert all(m.retention is Retention.FULL and m.key_points == "" for m in newest)
    assert [m.id for m in newest] == [t.memories[0].id for t in turns[-reflect.FULL_WINDOW :]]


def test_exchanges_past_ten_get_key_points(long_talk: tuple[narrative.Memory, list[TurnResult]]) -> None:
    mem, _ = long_talk
    middle = exchanges(mem)[-reflect.KEY_POINTS_WINDOW : -reflect.FULL_WINDOW]
    assert len(middle) == reflect.KEY_POINTS_WINDOW - reflect.FULL_WINDOW
    for memory in middle:
        assert memory.retention is Retention.KEY_POINTS
        assert memory.key_points and len(memory.key_points) <= len(memory.content)
        assert "planted" in memory.key_points


def test_exchanges_past_fifty_become_session_themes(long_talk: tuple[narrative.Memory, list[TurnResult]]) -> None:
    mem, turns = long_talk
    old = exchanges(mem)[: -reflect.KEY_POINTS_WINDOW]
    assert len(old) == len(PLANTS) - reflect.KEY_POINTS_WINDOW == 11
    themed = [m for m in old if m.retention is Retention.THEME]
    assert [m.id for m in themed] == [t.memories[0].id for t in turns[: reflect.THEME_BLOCK]]
    assert old[-1].retention is Retention.KEY_POINTS  # the 51st waits for a full block of ten
    [theme] = [m for m in reflections(mem) if details(m).reflection_type == "theme"]
    assert theme.content.startswith("Session theme: ")
    assert details(theme).exchange_count == reflect.THEME_BLOCK
    assert theme.message_ids == tuple(dict.fromkeys(i for m in themed for i in m.message_ids))
    assert (details(theme).covered_from, details(theme).covered_to) == (themed[0].event_at, themed[-1].event_at)
    assert theme.created_at == turns[reflect.KEY_POINTS_WINDOW + reflect.THEME_BLOCK - 1].message.created_at


def test_retention_keeps_the_originals_and_they_stay_searchable(
    long_talk: tuple[narrative.Memory, list[TurnResult]],
) -> None:
    mem, turns = long_talk
    for turn in (turns[0], turns[20]):  # a themed one and a key-points one
        original = turn.memories[0]
        now = mem.get_memory(original.id)
        assert now.retention is not Retention.FULL
        assert (now.content, now.message_ids, now.positions) == (
            original.content,
            original.message_ids,
            original.positions,
        )
        plant = PLANTS[turn.message.position - 1]
        hits = mem.search(plant, streams=["conversation"], record=False)
        assert original.id in [h.memory.id for h in hits[:2]], plant


def test_periodic_reflections_run_alongside_retention(long_talk: tuple[narrative.Memory, list[TurnResult]]) -> None:
    mem, turns = long_talk
    periodic = [m for m in reflections(mem) if details(m).reflection_type != "theme"]
    assert periodic
    assert {details(m).exchange_count for m in periodic} == {10}
    reflected_at = [
        i + 1 for i, t in enumerate(turns) if any(details(m).reflection_type != "theme" for m in t.reflections)
    ]
    assert reflected_at == [10, 20, 30, 40, 50, 60]
