"""Routing keeps a reply with the turn it answers, and a change of subject out of the storyline's text.

First the rules on their own (no model): the change-of-subject phrases, what counts as small talk, what
a reply is, and how ``continuity`` / ``decide`` treat a reply and an assistant's turn.  Then one scenario
through ``Memory.remember`` with the real MiniLM model (loaded once per module).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import narrative
from conftest import FakeClock
from narrative.model import Storyline, StorylineKind, StorylineStatus
from narrative.write import embedding, routing, storylines
from narrative.write.routing import Candidate, RoutingInput, RoutingThresholds
from narrative.write.turn_types import TurnResult

T = RoutingThresholds()
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
CURRENT, OTHER = 10, 20


# --- change-of-subject phrases ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Completely different topic: my sister is getting married.", "My sister is getting married."),
        ("Completely different topic. My sister Lena just got engaged!", "My sister Lena just got engaged!"),
        ("On a completely different topic, the wedding is in Lisbon.", "The wedding is in Lisbon."),
        ("By the way, did you see the game?", "Did you see the game?"),
        ("Anyway, I bought a new car.", "I bought a new car."),
        ("Changing the subject: the roof leaks.", "The roof leaks."),
        ("That's great! Anyway, how's work?", "That's great! How's work?"),
        ("I went to the park anyway, it was fine.", "I went to the park anyway, it was fine."),
    ],
)
def test_strip_topic_cue_keeps_what_the_new_topic_is_about(text: str, kept: str) -> None:
    assert routing.strip_topic_cue(text) == kept


def test_cue_words_are_the_words_only_the_cue_used() -> None:
    assert {"completely", "different", "topic"} <= routing.cue_words("Completely different topic: the roof leaks.")
    assert "roof" not in routing.cue_words("Completely different topic: the roof leaks.")
    assert routing.cue_words("The roof leaks.") == frozenset()


def test_anyway_is_a_cue_only_where_it_opens_a_sentence() -> None:
    assert routing.TOPIC_CUE.search("Anyway, how's work?")
    assert routing.TOPIC_CUE.search("Nice! Anyway, how's work?")
    assert not routing.TOPIC_CUE.search("I went anyway, it was fine.")


def test_a_description_skips_the_cue_and_the_greeting() -> None:
    assert storylines.description_of("Completely different topic. My sister Lena got engaged!") == (
        "My sister Lena got engaged!"
    )
    assert storylines.description_of("Morning! I want to start the garden app. It's for volunteers.") == (
        "I want to start the garden app."
    )


# --- small talk, replies ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tags", "entities", "expected"),
    [
        ("Good morning!", ("morning",), (), False),
        ("What's your name?", ("name",), (("question_opened", "What's your name?"),), False),
        ("Are you an AI?", (), (("question_opened", "Are you an AI?"),), False),
        ("Hi! I decided to quit my job", ("job",), (("decision", "quit my job"),), True),
        ("Good morning! The plot map is ready.", ("morning", "plot map"), (), True),
    ],
)
def test_substance_ignores_the_words_of_greetings_and_questions_about_the_assistant(
    text: str, tags: tuple[str, ...], entities: tuple[tuple[str, str], ...], expected: bool
) -> None:
    assert routing.has_substance(text, tags, entities) is expected


@pytest.mark.parametrize(
    ("turn", "previous", "expected"),
    [
        (("assistant", "rook"), ("user", "maya"), True),
        (("user", "maya"), ("assistant", "rook"), True),
        (("user", "Melanie"), ("user", "Caroline"), True),  # two people, both "user": the other one answers
        (("user", "Caroline"), ("user", "caroline "), False),  # the same speaker goes on
        (("user", ""), ("user", ""), False),  # nobody named: not a reply
    ],
)
def test_a_reply_is_a_turn_after_the_other_sides_turn(
    turn: tuple[str, str], previous: tuple[str, str], expected: bool
) -> None:
    assert routing.is_reply(turn[0], turn[1], previous[0], previous[1]) is expected


def current() -> Storyline:
    return Storyline(CURRENT, "maya", "Porto trip", StorylineKind.DETECTED, StorylineStatus.ACTIVE, NOW, NOW)


def given(
    *,
    reply: bool,
    cue: bool = False,
    since: timedelta = timedelta(minutes=1),
    may_create: bool = True,
    tags: tuple[str, ...] = ("wedding", "dress"),
) -> RoutingInput:
    return RoutingInput(
        text="a message",
        vector=None,
        topic_tags=tags,
        substantive=True,
        now=NOW,
        current=current(),
        previous_at=NOW - since,
        cue=cue,
        reply=reply,
        may_create=may_create,
    )


def far(sid: int, similarity: float) -> Candidate:
    return Candidate(sid, None, 1, similarity, similarity)


def test_a_reply_stays_even_when_it_comes_late_or_drifts_without_a_topic_of_its_own() -> None:
    near, far_away = T.stay_similarity + 0.05, T.stay_similarity / 2
    late = given(reply=True, since=T.continuity_window * 3)
    assert routing.continuity(late, near, None, T) == (True, "a reply stays with the turn it answers")
    assert routing.continuity(replace(late, reply=False), near, None, T)[0] is False  # not a reply: too late
    vague = given(reply=True, tags=("dress",))  # too little to make a storyline of its own
    assert routing.continuity(vague, far_away, None, T) == (True, "a reply stays with the turn it answers")


def test_a_reply_that_moves_to_a_named_topic_of_its_own_leaves_unless_it_answers_a_question() -> None:
    far_away = T.stay_similarity / 2
    stay, reason = routing.continuity(given(reply=True), far_away, None, T)
    assert not stay and reason.startswith("a reply that moved to a topic of its own")
    answer = replace(given(reply=True), answers_question=True)
    assert routing.continuity(answer, far_away, None, T) == (True, "a reply stays with the turn it answers")


def test_a_reply_that_announces_a_new_topic_or_fits_another_storyline_leaves() -> None:
    assert routing.continuity(given(reply=True, cue=True), 0.5, None, T) == (False, "explicit change of subject")
    better = far(OTHER, T.switch_similarity + 0.1)
    stay, reason = routing.continuity(given(reply=True), 0.05, better, T)
    assert not stay and reason.startswith(f"storyline {OTHER} fits better")


def test_a_turn_that_may_not_create_never_opens_a_storyline() -> None:
    turn = given(reply=False, cue=True, may_create=False)
    route = routing.decide(turn, [far(OTHER, 0.05)], 0.05, 1, T)
    assert route.decision != "create"
    assert routing.decide(given(reply=False, cue=True), [far(OTHER, 0.05)], 0.05, 1, T).decision == "create"


# --- the engine, with the real model ------------------------------------------------------------------------------

TURNS = [
    ("porto", "user", "maya", "I'm planning a trip to Porto in May and TAP flights from Berlin look cheapest."),
    ("noted", "assistant", "rook", "Noted: book TAP before the 30th, when the fares to Porto go up."),
    ("morning", "user", "maya", "Good morning!"),
    ("about", "user", "maya", "What can you do?"),
    ("porto hotel", "user", "maya", "For Porto I'd like a hotel near the river in Ribeira."),
    (
        "wedding",
        "user",
        "maya",
        "Completely different topic: my sister's wedding is next month and I still need a dress and shoes.",
    ),
    ("wedding reply", "assistant", "rook", "How exciting! What colour is the dress code?"),
    (
        "garden",
        "user",
        "maya",
        "Completely different topic: the community garden app needs a plot map of the raised beds.",
    ),
]
TWO_PEOPLE = [  # a later conversation between two people, both with role "user"
    ("mel", "user", "Melanie", "I finally finished the pottery bowl for my kids, it took three weekends."),
    ("caroline", "user", "Caroline", "Wow, that sounds lovely! Did the glaze come out the way you hoped?"),
]
OTHER_PEOPLE = [  # the same topic, later, between two other people
    ("jon", "user", "Jon", "I finally finished a pottery bowl for my kids, after three weekends of work."),
    ("gina", "user", "Gina", "Nice! Did the glaze turn out the way you wanted?"),
]


@dataclass
class Scenario:
    mem: narrative.Memory
    turns: dict[str, TurnResult] = field(default_factory=dict)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    mem = narrative.Memory(tmp_path_factory.mktemp("replies") / "maya.db", user="maya", clock=FakeClock(), env={})
    found = Scenario(mem)
    for title, turns in (("trips", TURNS), ("pottery", TWO_PEOPLE), ("pottery again", OTHER_PEOPLE)):
        mem.start_conversation(title)
        for label, role, speaker, text in turns:
            found.turns[label] = mem.remember(text, role, speaker=speaker)
        mem.close_conversation()
    yield found
    mem.close()


def test_an_assistant_reply_stays_in_the_storyline_of_the_turn_it_answers(scenario: Scenario) -> None:
    porto, noted = scenario.turns["porto"], scenario.turns["noted"]
    assert porto.decision == "create"
    assert (noted.decision, noted.storyline.id) == ("continue", porto.storyline.id)
    assert noted.scores["reason"] == "an assistant reply stays in the storyline of the turn it answers"
    reply = scenario.turns["wedding reply"]
    assert reply.storyline.id == scenario.turns["wedding"].storyline.id


def test_an_assistant_turn_never_creates_a_storyline(scenario: Scenario) -> None:
    decisions = [t.decision for t in scenario.turns.values() if t.message.role.value == "assistant"]
    assert "create" not in decisions


def test_greetings_and_questions_about_the_assistant_inside_a_topic_go_to_the_defaults(scenario: Scenario) -> None:
    assert scenario.turns["morning"].storyline.name == "Small talk"
    assert scenario.turns["about"].storyline.name == "About the assistant"
    assert scenario.turns["porto hotel"].storyline.id == scenario.turns["porto"].storyline.id


def test_a_change_of_subject_never_becomes_the_storylines_text(scenario: Scenario) -> None:
    for label in ("wedding", "garden"):
        turn = scenario.turns[label]
        assert turn.decision == "create", label
        made = scenario.mem.get_storyline(turn.storyline.id)
        text = " ".join([made.name, made.description, " ".join(made.keywords), made.summary]).lower()
        for word in ("completely", "different", "topic"):
            assert word not in text, (label, word, text)
        assert "different topic" not in embedding.routing_text(made).lower()
    assert scenario.turns["garden"].storyline.id != scenario.turns["wedding"].storyline.id


def test_an_exchange_never_pairs_turns_across_a_storyline_switch(scenario: Scenario) -> None:
    for label in ("wedding", "garden"):  # each opened a storyline: its memory holds its own turn only
        turn = scenario.turns[label]
        exchange = turn.memories[0]
        assert exchange.message_ids == (turn.message.id,)
        assert exchange.content == f"maya: {turn.message.content}"
    noted = scenario.turns["noted"]  # the reply in the same storyline is paired with what it answers
    assert noted.memories[0].message_ids == (scenario.turns["porto"].message.id, noted.message.id)
    hotel = scenario.turns["porto hotel"]  # back from the defaults: not paired with the question before it
    assert hotel.memories[0].message_ids == (hotel.message.id,)


def test_between_two_people_the_answer_stays_with_what_it_answers(scenario: Scenario) -> None:
    mel, caroline = scenario.turns["mel"], scenario.turns["caroline"]
    assert caroline.storyline.id == mel.storyline.id
    assert caroline.scores["continuity"] == "a reply stays with the turn it answers"
    assert caroline.memories[0].message_ids == (mel.message.id, caroline.message.id)


def test_a_turn_never_joins_other_peoples_storyline_by_similarity(scenario: Scenario) -> None:
    mel, jon = scenario.turns["mel"], scenario.turns["jon"]
    assert jon.storyline.id != mel.storyline.id  # same words, other people: another thread
    assert mel.storyline.id not in [c["storyline_id"] for c in jon.scores["candidates"]]
    assert scenario.turns["gina"].storyline.id == jon.storyline.id


# --- a change of subject without a cue (the real model, default settings) ------------------------------------

DOG = [
    ("Alice", "I adopted a greyhound called Pickles from the shelter last week."),
    ("Bob", "That's wonderful! How is Pickles settling in?"),
    ("Alice", "Pickles sleeps nineteen hours a day and loves the sofa."),
]


@pytest.mark.parametrize(
    "turns",
    [
        pytest.param(
            [
                *DOG,
                ("Bob", "I started a pottery class on Thursday and made a blue bowl on the wheel."),
                ("Alice", "A blue bowl sounds lovely, is the pottery teacher good?"),
            ],
            id="a reply that opens its own topic",
        ),
        pytest.param(
            [
                ("Alice", DOG[0][1]),
                ("Alice", DOG[2][1]),
                ("Alice", "My pottery class on Thursday made a blue bowl on the wheel."),
                ("Alice", "The pottery teacher Odile showed us how to centre clay."),
            ],
            id="one speaker moving on",
        ),
    ],
)
def test_a_plain_change_of_subject_opens_its_own_storyline(tmp_path: Path, turns: list[tuple[str, str]]) -> None:
    """What a cheaper routing input must keep: the turn that changes the subject leaves the dog's storyline,
    is not paired with the turn before it, and the next pottery turn follows it."""
    clock = FakeClock()
    with narrative.Memory(tmp_path / "topics.db", user="maya", clock=clock, env={}) as mem:
        results = [mem.remember(text, speaker=speaker) for speaker, text in turns]
    dog, pottery, after = results[0], results[-2], results[-1]
    assert pottery.decision == "create" and pottery.storyline.id != dog.storyline.id
    assert pottery.memories[0].message_ids == (pottery.message.id,)
    assert after.storyline.id == pottery.storyline.id
    assert {r.storyline.id for r in results[:-2]} == {dog.storyline.id}
