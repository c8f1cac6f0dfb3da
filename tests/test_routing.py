"""Routing messages to storylines (NarraNexus): the decision rules, then the engine with the real MiniLM model.

The first half calls ``routing.decide`` / ``continuity`` / ``fuse_candidates`` with hand-made candidates,
one test per branch.  The second half replays one two-conversation scenario through ``Memory.remember``
once per module (the model is loaded once per process) and checks what it left in the database.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

import narrative
from conftest import FakeClock
from narrative.errors import InvalidTransition, ValidationError
from narrative.model import Participant, Storyline, StorylineKind, StorylineStatus
from narrative.read import scene
from narrative.store.sqlite import SqliteStore
from narrative.write import embedding, routing, storylines
from narrative.write.routing import Candidate, RoutingInput, RoutingThresholds
from narrative.write.turn_types import TurnResult

T = RoutingThresholds()
T_REFRESH = narrative.Settings().routing_refresh_every
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
FALLBACK = 1  # Your Story
CURRENT = 10
OTHER = 20
STRONG = T.switch_similarity + 0.05  # the same topic
WEAK = (T.weak_switch_similarity + T.switch_similarity) / 2  # between the weak and the strong threshold
NEAR = T.stay_similarity + 0.05  # close enough to stay in the current storyline
FAR = T.stay_similarity / 2  # too far to stay
DEFAULTS = {"Small talk": 2, "Thanks and acknowledgements": 3, "About the assistant": 4}


def storyline(sid: int = CURRENT, kind: StorylineKind = StorylineKind.DETECTED, name: str = "Garden app") -> Storyline:
    return Storyline(sid, "maya", name, kind, StorylineStatus.ACTIVE, NOW, NOW, keywords=("garden", "plot"))


def given(
    *,
    current: Storyline | None = None,
    substantive: bool = True,
    tags: tuple[str, ...] = ("garden", "plot map"),
    since_previous: timedelta | None = timedelta(minutes=2),
    llm: bool | None = None,
    cue: bool = False,
) -> RoutingInput:
    return RoutingInput(
        text="a message",
        vector=None,
        topic_tags=tags,
        substantive=substantive,
        now=NOW,
        current=current,
        previous_at=None if since_previous is None else NOW - since_previous,
        llm_continuity=llm,
        cue=cue,
    )


def candidate(sid: int, similarity: float, bm25_rank: int | None = None, fused: float | None = None) -> Candidate:
    return Candidate(sid, bm25_rank, None, similarity, similarity if fused is None else fused)


# --- small talk and its strict boundaries -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hi!", "Small talk"),
        ("Good morning, how are you?", "Small talk"),
        ("Thanks!", "Thanks and acknowledgements"),
        ("ok, sounds good", "Thanks and acknowledgements"),
        ("Who are you, actually?", "About the assistant"),
    ],
)
def test_small_talk_matches_its_default_storyline(text: str, expected: str) -> None:
    assert routing.small_talk_default(text, DEFAULTS, substantive=False) == (expected, DEFAULTS[expected])


def test_small_talk_is_strict_about_content_and_length() -> None:
    assert routing.small_talk_default("Hi! I decided to quit my job", DEFAULTS, substantive=True) is None
    long_greeting = "Hello " + "and more words " * 5
    assert len(long_greeting.split()) > routing.SMALL_TALK_MAX_WORDS
    assert routing.small_talk_default(long_greeting, DEFAULTS, substantive=False) is None
    assert routing.small_talk_default("The plot map needs a legend", DEFAULTS, substantive=False) is None
    assert routing.small_talk_default("Hi!", {}, substantive=False) is None  # no defaults known: nothing to match


def test_topic_cue_recognises_an_explicit_change_of_subject() -> None:
    assert routing.TOPIC_CUE.search("On a completely different topic, my sister is getting married")
    assert routing.TOPIC_CUE.search("By the way, did Jonas call?")
    assert not routing.TOPIC_CUE.search("The plot map needs a legend")


def test_storyline_name_comes_from_the_leading_tags() -> None:
    assert routing.storyline_name(["garden app", "plot map", "legend", "beds"]) == "Garden app · plot map · legend"
    assert routing.storyline_name(["", "soil"]) == "Soil"
    assert routing.storyline_name([]) == "Untitled thread"


# --- stage 2: reciprocal rank fusion -----------------------------------------------------------------------


def test_fuse_candidates_adds_reciprocal_ranks_of_both_lists() -> None:
    keyword = [(1, 7.5), (2, 3.0)]
    similarities = {2: 0.9, 3: 0.5}
    fused = routing.fuse_candidates(keyword, similarities, rrf_k=60)
    assert [c.storyline_id for c in fused] == [2, 1, 3]
    two, one, three = fused
    assert two.fused == pytest.approx(1 / 62 + 1 / 61) and (two.bm25_rank, two.vector_rank) == (2, 1)
    assert one.fused == pytest.approx(1 / 61) and (one.vector_rank, one.similarity) == (None, 0.0)
    assert three.fused == pytest.approx(1 / 62) and three.bm25_rank is None and three.similarity == 0.5


def test_fuse_candidates_breaks_ties_by_similarity_then_id() -> None:
    fused = routing.fuse_candidates([(5, 1.0)], {4: 0.3}, rrf_k=60)  # both rank 1 in one list
    assert [c.storyline_id for c in fused] == [4, 5]
    assert routing.fuse_candidates([], {}, rrf_k=60) == []


# --- stage 1: continuity --------------------------------------------------------------------------------------


def test_continuity_needs_a_current_topic_storyline() -> None:
    assert routing.continuity(given(), None, None, T) == (False, "no current topic storyline")
    small_talk = storyline(2, StorylineKind.DEFAULT, "Small talk")
    assert routing.continuity(given(current=small_talk), 0.9, None, T)[0] is False
    your_story = storyline(FALLBACK, StorylineKind.YOUR_STORY, "Your Story")
    assert routing.continuity(given(current=your_story), 0.9, None, T)[0] is False
    assert routing.continuity(given(current=storyline(kind=StorylineKind.USER)), 0.9, None, T)[0] is True


def test_continuity_takes_the_model_verdict_before_any_heuristic() -> None:
    cued = given(current=storyline(), llm=True, cue=True, since_previous=timedelta(days=3))
    assert routing.continuity(cued, 0.0, None, T) == (True, "llm continuity check")
    assert routing.continuity(given(current=storyline(), llm=False), 0.9, None, T) == (False, "llm continuity check")


def test_continuity_heuristic_reasons() -> None:
    current = storyline()
    assert routing.continuity(given(current=current, cue=True), 0.9, None, T) == (False, "explicit change of subject")
    late = given(current=current, since_previous=T.continuity_window + timedelta(seconds=1))
    assert routing.continuity(late, 0.9, None, T) == (False, "too long since the previous message")
    assert routing.continuity(given(current=current, since_previous=None), 0.9, None, T)[0] is False
    short = given(current=current, substantive=False)
    assert routing.continuity(short, None, None, T) == (True, "short follow-up within the continuity window")
    stay, reason = routing.continuity(given(current=current), NEAR, candidate(OTHER, NEAR + 0.05), T)
    assert stay and reason == f"same thread within the window (similarity {NEAR:.2f})"
    stay, reason = routing.continuity(given(current=current), None, None, T)  # no vectors: stay within the window
    assert stay
    stay, reason = routing.continuity(given(current=current), FAR, None, T)
    assert not stay and reason == f"moved away from the current storyline ({FAR:.2f})"
    stay, reason = routing.continuity(given(current=current), NEAR, candidate(OTHER, STRONG), T)
    assert not stay and reason == f"storyline {OTHER} fits better ({STRONG:.2f} vs {NEAR:.2f})"
    # a better storyline that does not beat the current one by the margin does not pull the message away
    close_behind = STRONG - T.switch_margin / 2
    assert routing.continuity(given(current=current), close_behind, candidate(OTHER, STRONG), T)[0] is True


# --- stage 3: the decision, one test per branch ------------------------------------------------------------


def decide(g: RoutingInput, candidates: list[Candidate], current_similarity: float | None = None) -> routing.Route:
    return routing.decide(g, candidates, current_similarity, FALLBACK, T)


def test_decide_continue_within_the_thread_records_scores() -> None:
    route = decide(given(current=storyline()), [candidate(CURRENT, 0.5, 1), candidate(OTHER, 0.2)], 0.5)
    assert (route.decision, route.storyline_id) == ("continue", CURRENT)
    assert route.scores["current_storyline_id"] == CURRENT and route.scores["current_similarity"] == 0.5
    assert route.scores["continuity"].startswith("same thread")
    assert [c["storyline_id"] for c in route.scores["candidates"]] == [CURRENT, OTHER]
    assert set(route.scores["candidates"][0]) == {"storyline_id", "bm25_rank", "vector_rank", "similarity", "fused"}


def test_decide_keeps_only_the_top_five_candidates_in_the_scores() -> None:
    many = [candidate(100 + i, 0.1) for i in range(8)]
    assert len(decide(given(), many).scores["candidates"]) == 5


def test_decide_switches_to_a_storyline_that_fits_better() -> None:
    route = decide(given(current=storyline()), [candidate(OTHER, 0.7, 1), candidate(CURRENT, 0.2, 2)], 0.2)
    assert (route.decision, route.storyline_id) == ("switch", OTHER)
    assert route.scores["reason"] == f"matches storyline {OTHER} (similarity 0.70)"


def test_decide_switches_without_a_current_storyline_when_one_matches() -> None:
    route = decide(given(), [candidate(OTHER, STRONG)])
    assert (route.decision, route.storyline_id) == ("switch", OTHER)


def test_decide_weak_similarity_is_enough_when_bm25_ranks_it_first() -> None:
    assert decide(given(), [candidate(OTHER, WEAK, bm25_rank=1)]).decision == "switch"
    # ... but not without the keyword agreement: a substantive message then starts a new storyline
    assert decide(given(), [candidate(OTHER, WEAK, bm25_rank=2)]).decision == "create"


def test_decide_returns_to_the_current_storyline_after_a_pause_when_it_still_matches() -> None:
    late = given(current=storyline(), since_previous=timedelta(hours=5))
    route = decide(late, [candidate(CURRENT, 0.6, 1), candidate(OTHER, 0.3)], 0.6)
    assert (route.decision, route.storyline_id) == ("continue", CURRENT)
    assert route.scores["continuity"] == "too long since the previous message"


def test_decide_creates_a_storyline_for_a_substantive_new_topic() -> None:
    route = decide(given(tags=("wedding", "lisbon", "dress")), [candidate(OTHER, 0.1)])
    assert (route.decision, route.storyline_id) == ("create", None)
    assert route.new_name == "Wedding · lisbon · dress"
    assert route.scores["reason"] == "new topic: no storyline is similar enough (best 0.10)"


def test_decide_needs_enough_tags_to_create() -> None:
    route = decide(given(tags=("wedding",)), [])
    assert (route.decision, route.storyline_id) == ("default", FALLBACK)
    assert route.scores["reason"] == "nothing specific: Your Story"


def test_decide_stays_with_the_current_storyline_when_nothing_clearly_matches() -> None:
    late = given(current=storyline(), tags=("soil",), since_previous=timedelta(hours=5))
    route = decide(late, [candidate(CURRENT, FAR), candidate(OTHER, FAR)], FAR)
    assert (route.decision, route.storyline_id) == ("continue", CURRENT)
    assert route.scores["reason"] == "no clear match: stay with the current storyline"


def test_decide_weak_match_is_taken_when_there_is_no_topic_to_stay_in() -> None:
    route = decide(given(substantive=False), [candidate(OTHER, WEAK, bm25_rank=2)])
    assert (route.decision, route.storyline_id) == ("switch", OTHER)
    assert route.scores["reason"].startswith(f"weak match {WEAK:.2f}")


def test_decide_default_when_nothing_is_specific() -> None:
    route = decide(given(substantive=False, tags=()), [candidate(OTHER, 0.1)])
    assert (route.decision, route.storyline_id) == ("default", FALLBACK)


def test_decide_an_explicit_cue_leaves_the_current_storyline_even_when_it_is_the_best_match() -> None:
    cued = given(current=storyline(), cue=True, tags=("wedding", "lisbon"))
    route = decide(cued, [candidate(CURRENT, 0.8, 1), candidate(OTHER, 0.2, 2)], 0.8)
    assert route.decision == "create" and route.scores["continuity"] == "explicit change of subject"
    route = decide(cued, [candidate(CURRENT, 0.8, 1), candidate(OTHER, STRONG, 2)], 0.8)
    assert (route.decision, route.storyline_id) == ("switch", OTHER)
    # a cue does not accept the weak keyword-only match either
    assert decide(cued, [candidate(OTHER, WEAK, 1)], 0.2).decision == "create"


def test_decide_honours_the_model_saying_the_message_continues() -> None:
    route = decide(given(current=storyline(), llm=True, cue=True), [candidate(OTHER, 0.9, 1)], 0.0)
    assert (route.decision, route.storyline_id) == ("continue", CURRENT)
    assert route.scores["continuity"] == "llm continuity check"


def test_decide_honours_the_model_saying_the_message_leaves() -> None:
    left = given(current=storyline(), llm=False, tags=("wedding", "lisbon"))
    route = decide(left, [candidate(CURRENT, 0.8, 1)], 0.8)
    assert route.decision == "create"
    route = decide(left, [candidate(CURRENT, 0.8, 1), candidate(OTHER, STRONG)], 0.8)
    assert (route.decision, route.storyline_id) == ("switch", OTHER)


# --- storyline upkeep (pure functions) -----------------------------------------------------------------------


def test_merge_keywords_keeps_persistent_ones_and_stays_short() -> None:
    merged = storylines.merge_keywords(("garden", "plot"), ("legend", "garden"))
    assert merged[0] == "garden" and "legend" in merged and "plot" in merged
    many = storylines.merge_keywords(tuple(f"k{i}" for i in range(8)), ("new1", "new2", "new3"))
    assert len(many) == storylines.MAX_KEYWORDS and many[0] == "k0"


def test_rolling_summary_keeps_the_latest_points() -> None:
    summary = ""
    for i in range(6):
        summary = storylines.rolling_summary(summary, f"point {i}", "maya")
    assert summary.splitlines() == [f"- maya: point {i}" for i in range(2, 6)]
    assert storylines.rolling_summary(summary, "", "maya") == summary  # nothing salient: unchanged
    assert storylines.rolling_summary("", "no speaker", "") == "- no speaker"


def test_participants_first_speaker_creates_and_each_appears_once() -> None:
    people = storylines.with_participant((), "maya", "participant")
    people = storylines.with_participant(people, "rook", "agent")
    people = storylines.with_participant(people, "maya", "participant")
    people = storylines.with_participant(people, "", "participant")
    assert people == (Participant("maya", "creator"), Participant("rook", "agent"))


def test_routing_embedding_drifts_and_refreshes_on_schedule() -> None:
    a = np.array([1.0, 0.0], dtype=np.float32)
    b = np.array([0.0, 1.0], dtype=np.float32)
    first = embedding.drift(None, 3 * a)
    assert np.allclose(first, a)
    moved = embedding.drift(a, b)
    assert np.linalg.norm(moved) == pytest.approx(1.0) and 0 < moved[1] < moved[0]
    assert np.allclose(embedding.blend(a, b), np.array([1, 1]) / np.sqrt(2))
    topic = storyline()
    counts = (1, 2, 5, 6, 10, 15, 20, 30, 35, 40, 60, 80)
    due = [n for n in counts if storylines.needs_embedding_refresh(replace(topic, interaction_count=n), 5)]
    assert due == [1, 5, 10, 20, 40, 80]  # at creation, after 5, then each time the count doubles
    default = storyline(2, StorylineKind.DEFAULT, "Small talk")
    assert not storylines.needs_embedding_refresh(replace(default, interaction_count=5), 5)


def test_auxiliary_storylines_are_other_recent_topics() -> None:
    def at(sid: int, minutes: int, kind: StorylineKind = StorylineKind.DETECTED) -> Storyline:
        return replace(storyline(sid, kind), last_message_at=NOW + timedelta(minutes=minutes))

    pool = [at(1, 5), at(2, 9, StorylineKind.DEFAULT), at(3, 7), at(4, 8, StorylineKind.USER), at(5, 1)]
    assert [s.id for s in scene.auxiliary(pool, main_id=4)] == [3, 1]


def test_a_detected_storyline_takes_its_name_from_its_keywords(store: SqliteStore) -> None:
    store.ensure_user("maya", NOW)

    def insert(name: str, kind: StorylineKind, keywords: tuple[str, ...]) -> Storyline:
        return store.insert_storyline("maya", name, kind, NOW, keywords=keywords)

    grown = insert("Garden", StorylineKind.DETECTED, ("plot map", "legend", "beds", "sun"))
    assert storylines.maybe_rename(store, grown).name == "Plot map · legend · beds"
    assert store.get_storyline("maya", grown.id).name == "Plot map · legend · beds"
    mine = insert("My garden", StorylineKind.USER, ("plot map", "legend"))
    assert storylines.maybe_rename(store, mine) == mine  # a user's storyline keeps its name
    young = insert("Soil", StorylineKind.DETECTED, ("soil",))
    assert storylines.maybe_rename(store, young) == young  # one keyword is not enough to rename
    twin = insert("Beds", StorylineKind.DETECTED, ("plot map", "legend", "beds"))
    assert storylines.maybe_rename(store, twin) == twin  # the name is taken


def test_a_storyline_the_user_renamed_keeps_its_name(tmp_path: Path) -> None:
    with narrative.Memory(tmp_path / "r.db", user="maya", embedder="hashing", clock=FakeClock(), env={}) as mem:
        first = mem.remember("I'm planning a garden app with a plot map for the community garden.")
        mem.rename_storyline(first.storyline.id, "My garden project")
        for i in range(T_REFRESH):
            mem.remember(f"The plot map legend {i} shows the community garden beds and their watering.")
        assert mem.get_storyline(first.storyline.id).name == "My garden project"


# --- the engine, with the real model: one scenario, replayed once ------------------------------------------------

CONVERSATION_1 = [
    ("greeting", "user", "Hi!"),
    ("greeting reply", "assistant", "Hello Maya! How are you?"),
    ("garden", "user", "I'm planning a garden app with a plot map for the community garden."),
    ("garden reply", "assistant", "Should the plot map use MapLibre or Leaflet for the garden beds?"),
    ("thanks", "user", "Thanks!"),
    ("garden more", "user", "The plot map should color each garden bed by its watering schedule."),
    (
        "wedding",
        "user",
        "On a completely different topic, my sister's wedding is next month in Lisbon and I need a dress.",
    ),
    ("wedding more", "user", "The wedding venue in Lisbon is by the river."),
]
CONVERSATION_2 = [
    ("garden again", "user", "The plot map for the community garden app needs a legend."),
    ("news", "user", "Hi! I decided to quit my job"),
]


@dataclass
class Scenario:
    mem: narrative.Memory
    turns: dict[str, TurnResult] = field(default_factory=dict)
    conversations: list[int] = field(default_factory=list)

    def storyline(self, label: str) -> Storyline:
        return self.mem.get_storyline(self.turns[label].storyline.id)


def say(mem: narrative.Memory, scenario: Scenario, turns: list[tuple[str, str, str]]) -> None:
    for label, role, text in turns:
        scenario.turns[label] = mem.remember(text, role, speaker="maya" if role == "user" else "rook")


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    path = tmp_path_factory.mktemp("routing") / "maya.db"
    clock = FakeClock()
    mem = narrative.Memory(path, user="maya", clock=clock, env={})
    found = Scenario(mem)
    found.conversations.append(mem.start_conversation("first").id)
    say(mem, found, CONVERSATION_1)
    mem.close_conversation()
    mem.confirm_memory()
    clock.advance(days=2)
    found.conversations.append(mem.start_conversation("second").id)
    say(mem, found, CONVERSATION_2)
    yield found
    mem.close()


def test_greetings_go_to_the_small_talk_default(scenario: Scenario) -> None:
    for label in ("greeting", "greeting reply"):
        turn = scenario.turns[label]
        assert turn.decision == "default"
        assert turn.storyline.name == "Small talk" and turn.storyline.kind is StorylineKind.DEFAULT
        assert turn.narrative is None  # defaults keep no running narrative


def test_a_greeting_with_news_is_substantive_and_not_small_talk(scenario: Scenario) -> None:
    news = scenario.turns["news"]
    assert news.storyline.kind is not StorylineKind.DEFAULT
    assert news.decision != "default"
    assert any(e.entity_type.value == "decision" for e in news.entities)


def test_a_substantive_new_topic_creates_a_detected_storyline_with_keywords(scenario: Scenario) -> None:
    turn = scenario.turns["garden"]
    assert turn.decision == "create"
    assert turn.scores["reason"].startswith("new topic")
    created = turn.storyline
    assert created.kind is StorylineKind.DETECTED and created.status is StorylineStatus.ACTIVE
    assert {"garden", "plot"} <= set(created.keywords)
    assert created.description.startswith("I'm planning a garden app")
    assert "garden" in created.name.lower()


def test_follow_ups_and_acknowledgements_continue_the_topic(scenario: Scenario) -> None:
    garden = scenario.turns["garden"].storyline.id
    for label in ("garden reply", "thanks", "garden more"):
        turn = scenario.turns[label]
        assert (turn.decision, turn.storyline.id) == ("continue", garden), label
    assert scenario.turns["thanks"].scores["continuity"] == "a reply stays with the turn it answers"


def test_an_explicit_change_of_subject_leaves_the_storyline(scenario: Scenario) -> None:
    wedding = scenario.turns["wedding"]
    assert wedding.decision == "create"
    assert wedding.scores["continuity"] == "explicit change of subject"
    assert wedding.storyline.id != scenario.turns["garden"].storyline.id
    assert "wedding" in wedding.storyline.keywords and "lisbon" in wedding.storyline.keywords
    more = scenario.turns["wedding more"]
    assert (more.decision, more.storyline.id) == ("continue", wedding.storyline.id)


def test_a_later_conversation_about_the_same_topic_switches_back_to_it(scenario: Scenario) -> None:
    again = scenario.turns["garden again"]
    assert again.message.conversation_id == scenario.conversations[1]
    assert (again.decision, again.storyline.id) == ("switch", scenario.turns["garden"].storyline.id)
    assert again.scores["current_storyline_id"] is None
    best = again.scores["candidates"][0]
    assert best["storyline_id"] == again.storyline.id and best["similarity"] >= T.switch_similarity


def test_every_message_is_routed_and_its_decision_recorded_with_scores(scenario: Scenario) -> None:
    mem = scenario.mem
    messages = mem.messages(limit=100)
    assert [m.position for m in messages] == list(range(1, len(messages) + 1))
    assert all(m.storyline_id is not None for m in messages)
    for turn in scenario.turns.values():
        [recorded] = mem.routing_decisions(turn.message.id)
        assert recorded.message_id == turn.message.id
        assert (recorded.storyline_id, recorded.decision) == (turn.storyline.id, turn.decision)
        assert recorded.scores == turn.scores
    switch = mem.routing_decisions(scenario.turns["garden again"].message.id)[0]
    assert {"current_storyline_id", "candidates", "continuity", "reason"} <= set(switch.scores)
    assert len(mem.routing_decisions(limit=3)) == 3


def test_topic_storylines_have_a_routing_embedding_and_defaults_do_not(scenario: Scenario) -> None:
    mem = scenario.mem
    assert mem.embedder is not None
    vectors = mem.store.storyline_vectors("maya", mem.embedder.identity)
    topics = {s.id for s in mem.list_storylines() if s.kind is StorylineKind.DETECTED}
    assert topics and set(vectors) == topics
    for vector in vectors.values():
        assert vector.shape == (384,) and float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-3)


def test_participants_are_the_speakers_with_roles(scenario: Scenario) -> None:
    garden = scenario.storyline("garden")
    assert garden.participants[:2] == (Participant("maya", "creator"), Participant("rook", "agent"))
    assert scenario.storyline("wedding").participants == (Participant("maya", "creator"),)
    assert scenario.storyline("greeting").participants == ()  # defaults get minimal updates


def test_interaction_count_counts_the_messages_routed_to_each_storyline(scenario: Scenario) -> None:
    messages = scenario.mem.messages(limit=100)
    for storyline_ in scenario.mem.list_storylines():
        routed = sum(m.storyline_id == storyline_.id for m in messages)
        assert storyline_.interaction_count == routed, storyline_.name


def test_rolling_summary_grows_with_the_storyline(scenario: Scenario) -> None:
    first = scenario.turns["garden"].storyline.summary
    later = scenario.turns["garden more"].storyline.summary
    assert len(first.splitlines()) == 1 and "plot map" in first
    assert len(later.splitlines()) > len(first.splitlines())
    assert later.splitlines()[-1] == "- maya: The plot map should color each garden bed by its watering schedule."
    assert scenario.storyline("greeting").summary == ""


def test_default_storylines_exist_once_per_user(scenario: Scenario) -> None:
    kinds = [(s.name, s.kind) for s in scenario.mem.list_storylines()]
    for name in routing.DEFAULT_STORYLINES:
        assert kinds.count((name, StorylineKind.DEFAULT)) == 1
    assert kinds.count(("Your Story", StorylineKind.YOUR_STORY)) == 1


# --- the facade's storyline rules (no model needed) -----------------------------------------------------------


def test_your_story_cannot_be_renamed_or_archived(mem: narrative.Memory) -> None:
    story = mem.your_story()
    with pytest.raises(InvalidTransition):
        mem.rename_storyline(story.id, "Something else")
    with pytest.raises(InvalidTransition):
        mem.archive_storyline(story.id)
    assert mem.your_story() == story


def test_a_user_storyline_can_be_renamed_and_archived(mem: narrative.Memory) -> None:
    made = mem.create_storyline("Garden app", keywords=(" Garden ", "Plot map", " "))
    assert made.kind is StorylineKind.USER and made.keywords == ("garden", "plot map")
    assert mem.rename_storyline(made.id, "Community garden").name == "Community garden"
    mem.archive_storyline(made.id)
    assert made.id not in {s.id for s in mem.list_storylines()}
    assert mem.get_storyline(made.id).status is StorylineStatus.ARCHIVED


def test_a_storyline_name_already_taken_is_refused_by_name(mem: narrative.Memory) -> None:
    """Renaming onto another storyline's name said "UNIQUE constraint failed: storylines.user_id, storylines.name"."""
    garden = mem.create_storyline("Garden app")
    wedding = mem.create_storyline("Wedding")
    for name in ("Garden app", "garden APP", "Your Story"):
        with pytest.raises(ValidationError, match=r"a storyline named .* already exists"):
            mem.rename_storyline(wedding.id, name)
        with pytest.raises(ValidationError, match="already exists"):
            mem.create_storyline(name)
    assert mem.rename_storyline(garden.id, "Garden App").name == "Garden App"  # its own name, in other letters
    assert mem.get_storyline(wedding.id).name == "Wedding"


def test_without_vectors_a_new_topic_still_creates_a_storyline(mem: narrative.Memory) -> None:
    turn = mem.remember("I'm planning a garden app with a plot map for the community garden.", speaker="maya")
    assert turn.decision == "create" and turn.storyline.kind is StorylineKind.DETECTED
    assert mem.store.storyline_vectors("alice", "all-MiniLM-L6-v2:384") == {}


def test_a_storyline_is_named_as_a_person_would_and_keeps_its_name(store: SqliteStore) -> None:
    """The noun phrase that holds the most topic tags, not stemmed keyword triples; the name stays while the
    topic it names is still among the storyline's leading keywords, and changes only when the topic moved."""
    assert routing.storyline_name(["measurement", "sam", "send", "bed"], "Sam will send the bed measurements on"
                                  " Friday.") == "Bed measurements"  # fmt: skip
    assert routing.storyline_name(["sister", "wedding"], "My sister's wedding in Porto is next month.") == (
        "Sister's wedding"
    )
    assert routing.storyline_name(["garden app", "plot map"], "I'm planning a garden app with a plot map.") == (
        "Garden app"
    )
    store.ensure_user("maya", NOW)
    named = store.insert_storyline(
        "maya", "Sister's wedding", StorylineKind.DETECTED, NOW, keywords=("speech", "porto", "wedding", "sister")
    )
    assert storylines.maybe_rename(store, named).name == "Sister's wedding"  # the topic is still there
    moved = store.update_storyline(
        "maya",
        named.id,
        keywords=("flight", "booking", "airport", "luggage"),
        summary="- Maya: I still have to book the flight to the airport in Porto.",
    )
    assert storylines.maybe_rename(store, moved).name == "Flight"
