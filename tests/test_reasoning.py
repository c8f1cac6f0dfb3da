"""``Memory.reasoning_context``: memories, influence types by the documented rule, prompt sections, recorded uses."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import narrative
from conftest import DEMO_NOW, DemoBuilder, FakeClock, copy_db
from narrative.errors import ValidationError
from narrative.model import OPEN_ENTITY_TYPES, Entity, EntityType, InfluenceType, UseKind
from narrative.read.reasoning import ReasoningContext, content_words, match_entities

REQUEST = "when will Sam send the measurements for the plot map?"
KINDS = ["classification", "decomposition", "verification"]


@pytest.fixture
def maya(build_demo: DemoBuilder, tmp_path: Path) -> Iterator[narrative.Memory]:
    copy = copy_db(build_demo(loaded_at=DEMO_NOW), tmp_path / "demo.db")
    memory = narrative.Memory(copy, user="maya", env={}, clock=FakeClock(DEMO_NOW))
    yield memory
    memory.close()


def expected_influence(rc: ReasoningContext, index: int) -> InfluenceType:
    """The rule of read/reasoning.py, restated."""
    m = rc.memories[index]
    best = next(x for x in rc.memories if "search" in x.found_by)
    if "entity" in m.found_by:
        return InfluenceType.ENTITY_REFERENCE
    if rc.kind is UseKind.VERIFICATION:
        return InfluenceType.INTENT_VERIFICATION
    if m is best:
        return InfluenceType.DISAMBIGUATION
    if best.memory.storyline_id is not None and m.memory.storyline_id == best.memory.storyline_id:
        return InfluenceType.PATTERN_MATCH
    return InfluenceType.DISAMBIGUATION


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_records_a_use_with_influence_types(maya: narrative.Memory, kind: str) -> None:
    rc = maya.reasoning_context(REQUEST, kind)
    assert rc.kind is UseKind(kind) and rc.memories
    assert [m.influence for m in rc.memories] == [expected_influence(rc, i) for i in range(len(rc.memories))]
    assert any(e.name.startswith("Sam") for e in rc.matched_entities)  # "Sam" is a proper name in the request
    assert any(m.influence is InfluenceType.ENTITY_REFERENCE for m in rc.memories)
    if kind == "verification":
        assert any(m.influence is InfluenceType.INTENT_VERIFICATION for m in rc.memories)
    else:  # the best search match is a disambiguation, unless it also names an entity (then: entity_reference)
        assert any(m.influence is InfluenceType.DISAMBIGUATION for m in rc.memories)
    assert rc.use_id is not None
    use = maya.get_use(rc.use_id)
    assert use.kind is UseKind(kind) and use.query == REQUEST
    assert [(r.memory_id, r.influence_type, r.score, r.reasoning) for r in use.references] == [
        (m.memory.id, m.influence, round(m.score, 6), m.reasoning) for m in rc.memories
    ]
    assert all(r.reasoning for r in use.references)


def test_entity_memories_say_which_entity_they_name(maya: narrative.Memory) -> None:
    rc = maya.reasoning_context(REQUEST)
    for m in rc.memories:
        if m.influence is InfluenceType.ENTITY_REFERENCE:
            assert m.entities and all(e.memory_id == m.memory.id for e in m.entities)
            assert all(repr(e.name) in m.reasoning for e in m.entities)


def test_decomposition_adds_decisions(maya: narrative.Memory) -> None:
    rc = maya.reasoning_context("plan the next steps for the garden app", "decomposition", 3)
    assert any("decisions" in m.found_by for m in rc.memories)
    decisions = rc.variables["decisions"]
    assert decisions != "(none)" and "(decision," in decisions
    assert rc.prompt.startswith("Similar past tasks (id: text):\n")
    assert "\n\nRelevant decisions (id: text):\n" in rc.prompt and "\n\nOpen blockers:\n" in rc.prompt


@pytest.mark.parametrize(
    ("kind", "headings", "extra"),
    [
        ("classification", ["Relevant memories (id: text):", "Open threads:"], {}),
        (
            "decomposition",
            ["Similar past tasks (id: text):", "Relevant decisions (id: text):", "Open blockers:"],
            {"classification": "file × human × execute"},
        ),
        (
            "verification",
            [
                "Memories where the user asked something similar (id: text):",
                "Memories about the same people, tasks or projects (id: text):",
            ],
            {"classification": "stream × human × read", "proposed_action": "show the measurements"},
        ),
    ],
)
def test_prompt_section_and_template_per_kind(
    maya: narrative.Memory, kind: str, headings: list[str], extra: dict[str, str]
) -> None:
    rc = maya.reasoning_context(REQUEST, kind, record=False)
    positions = [rc.prompt.index(h) for h in headings]
    assert positions == sorted(positions) and positions[0] == 0
    first = rc.memories[0]
    assert f"{first.memory.id}: " in rc.prompt
    system, user = rc.render(**extra)
    assert "JSON" in system and REQUEST in user
    for heading in headings:
        assert heading in user
    if extra:
        with pytest.raises(ValidationError):
            rc.render()  # the caller's classification (and proposed action) are required


def test_active_entities_are_open_threads(maya: narrative.Memory) -> None:
    rc = maya.reasoning_context(REQUEST, record=False)
    assert rc.entities
    assert all(e.is_active and e.entity_type in OPEN_ENTITY_TYPES for e in rc.entities)
    assert f"#{rc.entities[0].id}: {rc.entities[0].name}" in rc.variables["threads"]
    without = maya.reasoning_context(REQUEST, include_active_entities=False, record=False)
    assert without.entities == () and "Open threads:\n(none)" in without.prompt


def test_to_dict(maya: narrative.Memory) -> None:
    data = maya.reasoning_context(REQUEST, "verification").to_dict()
    assert data["kind"] == "verification" and data["use_id"] is not None
    first = data["memories"][0]
    assert {"memory_id", "influence_type", "score", "reasoning", "found_by", "entities", "corrections"} <= set(first)
    assert data["prompt"] and set(data["variables"]) == {"memories", "entity_memories"}


def test_a_correction_feeds_the_next_reasoning(maya: narrative.Memory) -> None:
    first = maya.reasoning_context(REQUEST)
    assert first.use_id is not None
    maya.learn_from_outcome(first.use_id, "corrected", "she meant the herb spiral beds")
    again = maya.reasoning_context(REQUEST)
    noted = [m for m in again.memories if m.corrections]
    assert noted and noted[0].corrections == ("she meant the herb spiral beds",)
    assert '[earlier correction: "she meant the herb spiral beds"]' in again.prompt


@pytest.mark.parametrize(
    ("request_text", "kind", "top_k"),
    [
        ("", "classification", 5),
        ("ok", "recall", 5),
        ("ok", "outcome", 5),
        ("ok", "guess", 5),
        ("ok", "classification", 0),
        ("ok", "classification", 51),
    ],
)
def test_bad_input_is_refused_and_records_nothing(
    mem: narrative.Memory, request_text: str, kind: str, top_k: int
) -> None:
    mem.remember("We decided to use SQLite because it works offline.")
    before = len(mem.list_uses())
    with pytest.raises(ValidationError):
        mem.reasoning_context(request_text, kind, top_k)
    assert len(mem.list_uses()) == before


def test_keyword_only_mode(mem: narrative.Memory) -> None:
    mem.remember("I'm waiting on Priya to send the budget spreadsheet.", speaker="alice")
    mem.remember("We decided to use SQLite because it works offline.", speaker="alice")
    rc = mem.reasoning_context("did Priya send the budget?")
    assert rc.memories and rc.memories[0].memory.content.endswith("budget spreadsheet.")
    assert any(m.influence is InfluenceType.ENTITY_REFERENCE for m in rc.memories)


# --- entity matching -----------------------------------------------------------------------------------


def entity(name: str, kind: EntityType = EntityType.TASK, eid: int = 1) -> Entity:
    return Entity(eid, "alice", kind, name, DEMO_NOW, memory_id=eid)


def test_content_words_fold_plurals_and_drop_stopwords() -> None:
    assert content_words("The measurements of the beds, Sam's") == {"measurement": False, "bed": False, "sam": True}


@pytest.mark.parametrize(
    ("name", "request_text", "matched"),
    [
        ("Sam", "did sam reply?", True),  # every word of the name
        ("call Mum about the summer in Lisbon", "book flights to lisbon", True),  # a proper name
        ("call Mum about the summer in Lisbon", "the summer was hot", False),  # one common word
        ("draw the plot map before anything else", "fix the plot map thing", True),  # two words
        ("draw the plot map", "the weather", False),
    ],
)
def test_match_entities(name: str, request_text: str, matched: bool) -> None:
    found = match_entities([entity(name)], request_text)
    assert bool(found) is matched
    if matched:
        assert 0 < found[0][1] <= 1 and found[0][2]


def test_better_overlap_first() -> None:
    found = match_entities(
        [entity("plot map", eid=1), entity("draw the plot map before the rain", eid=2)], "the plot map"
    )
    assert [e.id for e, _, _ in found] == [1, 2]
