"""Open state: open threads, conservative thread resolution across conversations, staleness."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import narrative
from conftest import DEMO_NOW, DemoBuilder, FakeClock, copy_db
from llm_server import Reply, ScriptedLLMServer, scripted_llm_server
from narrative.errors import InvalidTransition, NotFound, ValidationError
from narrative.model import DeltaType, Entity, EntityType, Message, Role
from narrative.text.words import past_forms
from narrative.write import resolve

Snap = Callable[[Any], dict[str, list[tuple[Any, ...]]]]
llm_server = pytest.fixture(scripted_llm_server)
T0 = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture
def maya(build_demo: DemoBuilder, tmp_path: Path, clock: FakeClock) -> Iterator[narrative.Memory]:
    """A copy of the bundled sample (closed and confirmed session by session), the morning after."""
    path = copy_db(build_demo(embedder="none"), tmp_path / "demo.db")
    clock.now = DEMO_NOW
    memory = narrative.Memory(path, user="maya", embedder="none", clock=clock, env={})
    yield memory
    memory.close()


def entity_named(mem: narrative.Memory, kind: EntityType, text: str) -> Entity:
    return next(e for e in mem.store.list_entities("maya", entity_types=[kind]) if text in e.name)


# --- across conversations: the demo ------------------------------------------------------------


def test_sams_measurements_waiting_on_is_resolved_by_session_four(maya: narrative.Memory) -> None:
    waiting = entity_named(maya, EntityType.WAITING_ON, "Sam")
    conversations = maya.list_conversations()
    first, fourth = conversations[-1], conversations[0]
    assert waiting.conversation_id == first.id
    assert not waiting.is_active and waiting.resolved_at == fourth.archived_at
    closing = maya.get_conversation_archive(fourth.id)["memories"][0]
    assert waiting.resolved_by_memory_id == closing.id
    blocker = maya.store.get_entity("maya", waiting.resolved_by_entity_id or 0)
    assert blocker.entity_type is EntityType.BLOCKER_CLEARED and blocker.conversation_id == fourth.id
    [delta] = [
        d
        for d in maya.store.list_state_deltas("maya", conversation_id=fourth.id)
        if d.delta_type is DeltaType.RESOLVED_WAITING_ON
    ]
    assert delta.applied and delta.data["entity_id"] == waiting.id and delta.data["from_conversation"] == first.id
    assert "Sam sent the measurements" in delta.data["evidence"]


def test_only_explicit_resolutions_count(maya: narrative.Memory) -> None:
    called = entity_named(maya, EntityType.TASK, "call Mum")
    assert not called.is_active  # "I finally called Mum about Lisbon."
    assert entity_named(maya, EntityType.TASK, "draw the plot map").is_active  # unblocked is not drawn
    assert entity_named(maya, EntityType.TASK, "three stories").is_active  # one story found, two to go
    assert entity_named(maya, EntityType.QUESTION_OPENED, "watering schedule").is_active  # only the assistant answered
    open_names = {e.name for e in maya.open_threads()}
    assert not any("Sam" in n for n in open_names) and "draw the plot map before anything else" in open_names


def test_open_threads_filter_by_type_and_storyline(maya: narrative.Memory, snapshot: Snap) -> None:
    everything = maya.open_threads()
    assert {e.entity_type for e in everything} <= {EntityType.TASK, EntityType.QUESTION_OPENED, EntityType.WAITING_ON}
    assert [e.created_at for e in everything] == sorted(e.created_at for e in everything)
    tasks = maya.open_threads("task")
    assert tasks and all(e.entity_type is EntityType.TASK for e in tasks)
    storyline = tasks[0].storyline_id
    assert storyline is not None
    assert all(e.storyline_id == storyline for e in maya.open_threads(storyline_id=storyline))
    assert maya.open_threads("decision")  # any type may be asked for
    before = snapshot(maya.store)
    with pytest.raises(ValidationError):
        maya.open_threads("planet")
    assert snapshot(maya.store) == before


def test_stale_threads_after_the_configured_days(maya: narrative.Memory, clock: FakeClock) -> None:
    clock.now = datetime(2026, 3, 8, 9, 0, tzinfo=UTC)  # five days after the first session…
    stale = {e.name for e in maya.stale_threads()}  # default: Settings.stale_after_days == 5
    assert "draw the plot map before anything else" in stale  # made on 2 March
    assert not any("three stories" in n for n in stale)  # made on 5 March
    assert {e.name for e in maya.stale_threads(days=2)} >= {e.name for e in maya.stale_threads()}
    assert any("three stories" in e.name for e in maya.stale_threads(days=2))
    with pytest.raises(ValidationError):
        maya.stale_threads(days=-1)


def test_resolve_thread_by_hand(maya: narrative.Memory, snapshot: Snap) -> None:
    task = entity_named(maya, EntityType.TASK, "draw the plot map")
    memory = maya.list_memories(limit=1)[0]
    before = snapshot(maya.store)
    with pytest.raises(NotFound):
        maya.resolve_thread(task.id, by_memory_id=99999)
    with pytest.raises(NotFound):
        maya.resolve_thread(99999)
    assert snapshot(maya.store) == before
    done = maya.resolve_thread(task.id, by_memory_id=memory.id)
    assert not done.is_active and done.resolved_by_memory_id == memory.id and done.resolved_at is not None
    assert task.id not in {e.id for e in maya.open_threads()}
    before = snapshot(maya.store)
    with pytest.raises(InvalidTransition):
        maya.resolve_thread(task.id)
    assert snapshot(maya.store) == before


# --- within one conversation and the rules themselves ------------------------------------------------


def test_a_later_turn_of_the_same_conversation_can_settle_a_question(mem: narrative.Memory) -> None:
    mem.start_conversation()
    mem.remember("Should we host the docs on GitHub Pages or Netlify?", speaker="alex")
    mem.remember("Both work.", "assistant", speaker="rook")
    mem.remember("We figured out the docs hosting: GitHub Pages, because it is free.", speaker="alex")
    preview = mem.close_conversation()
    resolved = [d for d in preview.deltas if d.delta_type is DeltaType.RESOLVED_THREAD]
    assert len(resolved) == 1 and resolved[0].data["from_conversation"] is None
    assert not [d for d in preview.deltas if d.delta_type is DeltaType.NEW_THREAD]
    mem.confirm_memory()
    assert not mem.open_threads()


def _entity(kind: EntityType, name: str, **data: Any) -> Entity:
    return Entity(
        id=1, user_id="u", entity_type=kind, name=name, created_at=T0, data={"message_id": 1, **data}, conversation_id=1
    )


def _said(*texts: str, role: Role = Role.USER) -> list[resolve.Evidence]:
    messages = [
        Message(
            id=10 + i,
            user_id="u",
            conversation_id=2,
            position=10 + i,
            role=role,
            content=t,
            created_at=T0 + timedelta(days=1),
        )
        for i, t in enumerate(texts)
    ]
    return resolve.evidence_from(messages)


WAITING = _entity(
    EntityType.WAITING_ON, "Sam: send the measurements of the beds", who="Sam", what="send the measurements of the beds"
)
TASK = _entity(EntityType.TASK, "call Mum about the summer in Lisbon")
QUESTION = _entity(EntityType.QUESTION_OPENED, "Should the schedule be per plot or per volunteer?")


@pytest.mark.parametrize(
    ("item", "text", "settles"),
    [
        (WAITING, "Sam sent the measurements yesterday.", True),
        (WAITING, "Sam hasn't sent the measurements yet.", False),  # negated
        (WAITING, "Did Sam send the measurements?", False),  # a question
        (WAITING, "Sam sent me a birthday card.", False),  # who, but not what
        (WAITING, "The measurements of the beds are still missing.", False),  # no cue
        (TASK, "I finally called Mum about Lisbon.", True),  # the task's own verb, in the past
        (TASK, "I will call Mum about Lisbon tomorrow.", False),
        (TASK, "Done with the Lisbon summer call to Mum.", True),
        (QUESTION, "We decided the schedule is per plot.", True),
        (QUESTION, "The schedule per plot looks nice on the map.", False),
    ],
)
def test_resolution_rules(item: Entity, text: str, settles: bool) -> None:
    found = resolve.find_resolutions([item], _said(text))
    assert bool(found) is settles
    if found:
        assert found[0].method == "heuristic" and 0.7 <= found[0].confidence <= 0.95


def test_the_assistant_and_earlier_turns_never_settle_anything() -> None:
    assert not resolve.find_resolutions([WAITING], _said("Sam sent the measurements.", role=Role.ASSISTANT))
    early = Entity(**{**WAITING.__dict__, "data": {**WAITING.data, "message_id": 99}})
    assert not resolve.find_resolutions([early], _said("Sam sent the measurements."))


def test_embedding_similarity_can_stand_in_for_shared_words() -> None:
    text = "The dimensions finally arrived."
    assert not resolve.find_resolutions([WAITING], _said(text))

    def close(a: Any, b: Any) -> Any:
        import numpy as np

        return np.full((len(a), len(b)), 0.9, dtype=np.float32)

    # similar, but a waiting-on still needs a word of what is awaited
    assert not resolve.find_resolutions([WAITING], _said(text), similarity=close)
    assert resolve.find_resolutions([TASK], _said("Finished that phone thing."), similarity=close)


def test_past_forms() -> None:
    assert past_forms("call") == ("called",)
    assert "wrote" in past_forms("write") and "drawn" in past_forms("draw")
    assert "planned" in past_forms("plan") and "tried" in past_forms("try")
    assert past_forms("bake") == ("baked",)


def test_an_llm_judges_candidate_pairs(llm_server: ScriptedLLMServer) -> None:
    from narrative.providers.llm import OllamaLLM
    from narrative.write.compress import LLMCloseAssist

    judge = LLMCloseAssist(OllamaLLM("llama3.2", base_url=llm_server.url))
    llm_server.script(Reply.json({"resolves": True, "confidence": 0.9}))
    found = resolve.find_resolutions([WAITING], _said("The measurements of the beds are here."), judge=judge.resolves)
    assert [r.method for r in found] == ["llm"] and found[0].confidence == 0.9
    llm_server.script(Reply.json({"resolves": True, "confidence": 0.5}))
    assert not resolve.find_resolutions([WAITING], _said("Sam sent the measurements."), judge=judge.resolves)
    llm_server.script(Reply.error(500))  # a failed call falls back to the cue test
    assert resolve.find_resolutions([WAITING], _said("Sam sent the measurements."), judge=judge.resolves)
    body = llm_server.chat_requests[0].body
    assert body is not None and "send the measurements of the beds" in body["messages"][1]["content"]


def test_without_a_judge_only_sentences_with_a_settling_cue_are_embedded() -> None:
    import numpy as np

    asked: list[str] = []

    def recording(a: Any, b: Any) -> Any:
        asked.extend(b)
        return np.full((len(a), len(b)), 0.9, dtype=np.float32)

    said = _said("The weather was lovely.", "We planted tomatoes.", "Finished that phone thing.")
    found = resolve.find_resolutions([TASK], said, similarity=recording)
    assert [r.evidence.sentence for r in found] == ["Finished that phone thing."]
    assert asked == ["Finished that phone thing."]  # the cue-less sentences can never settle it: not embedded
    asked.clear()
    assert not resolve.find_resolutions([TASK], _said("The weather was lovely."), similarity=recording)
    assert asked == []


def test_only_pairs_a_similarity_can_decide_are_embedded() -> None:
    """Shared words settle the relation either way for some pairs: their texts are not embedded."""
    import numpy as np

    asked: list[tuple[list[str], list[str]]] = []

    def recording(a: Any, b: Any) -> Any:
        asked.append((list(a), list(b)))
        return np.full((len(a), len(b)), 0.9, dtype=np.float32)

    words = "I finally called Mum about Lisbon."  # shares enough words with TASK: related without a model
    found = resolve.find_resolutions([TASK], _said(words), similarity=recording)
    assert [r.evidence.sentence for r in found] == [words] and asked == []
    no_words = "We decided on something else entirely."  # a decision settles any question it is related to
    found = resolve.find_resolutions([QUESTION, TASK], _said(words, no_words), similarity=recording)
    assert len(asked) == 1 and asked[0][1] == [no_words]  # one call, the pair without shared words only
    assert {r.entity.name for r in found} == {QUESTION.name, TASK.name}
