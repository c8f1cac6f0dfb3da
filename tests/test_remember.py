"""The write path of one turn: ``MemoryItem.remember`` / ``remember_many`` and the Koshi running narrative.

message (stored first, with its position) → routed (decision and scores recorded) → memories in their
streams (conversation exchange, decisions, research) → entities → the storyline's running narrative link.
All derived work of a turn is one transaction: when it fails the message stays, unrouted, and
``process_pending`` finishes it later.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import narrative
from conftest import FakeClock
from narrative.engine import Turn
from narrative.errors import SealedNarrative, ValidationError
from narrative.model import (
    ConversationDetails,
    DecisionDetails,
    EntityType,
    MemoryItem,
    Narrative,
    ResearchDetails,
    Role,
    Source,
    Storyline,
    StorylineKind,
    Stream,
)
from narrative.store.filters import MemoryFilter
from narrative.write import narrate
from narrative.write.extract import HeuristicExtractor, TurnExtraction
from narrative.write.turn_types import TurnResult


def rows(mem: narrative.Memory, table: str, where: str = "1 = 1", params: tuple[Any, ...] = ()) -> list[Any]:
    """Rows of one table (tests may read the database directly; the engine never does).  Both stores run
    SQL written with ``?`` placeholders through ``_all``."""
    return list(mem.store._all(f"SELECT * FROM {table} WHERE {where}", params))  # type: ignore[attr-defined]


def link(mem: narrative.Memory, narrative_id: int) -> Narrative:
    return mem.store.get_narrative(mem.user, narrative_id)


def memories_of(mem: narrative.Memory, message_id: int) -> list[MemoryItem]:
    return [m for m in mem.list_memories(limit=500) if message_id in m.message_ids]


# --- the message and its routing ------------------------------------------------------------------------------


def test_remember_stores_the_message_with_its_position_role_and_speaker(mem: narrative.Memory) -> None:
    first = mem.remember("I'm planning a garden app with a plot map.", speaker="maya", meta={"channel": "chat"})
    second = mem.remember("Which map library should it use?", "assistant", speaker="rook")
    assert (first.message.position, second.message.position) == (1, 2)
    assert first.message.conversation_id == second.message.conversation_id
    stored = mem.messages(first.message.conversation_id)
    assert [(m.id, m.role, m.speaker, m.content) for m in stored] == [
        (first.message.id, Role.USER, "maya", "I'm planning a garden app with a plot map."),
        (second.message.id, Role.ASSISTANT, "rook", "Which map library should it use?"),
    ]
    assert stored[0].meta == {"channel": "chat"}
    assert all(m.storyline_id == first.storyline.id for m in stored)


def test_remember_records_the_routing_decision_with_its_scores(mem: narrative.Memory) -> None:
    turn = mem.remember("I'm planning a garden app with a plot map for the community garden.", speaker="maya")
    [decision] = mem.routing_decisions(turn.message.id)
    assert (decision.message_id, decision.storyline_id, decision.decision) == (
        turn.message.id,
        turn.storyline.id,
        turn.decision,
    )
    assert decision.decision == "create"
    assert decision.scores == turn.scores
    assert {"current_storyline_id", "candidates", "continuity", "reason"} <= set(decision.scores)
    assert mem.store.routing_decisions("alice", message_id=turn.message.id) == [decision]


def test_remember_refuses_empty_text_and_unknown_roles_without_storing(mem: narrative.Memory) -> None:
    with pytest.raises(ValidationError):
        mem.remember("   ")
    with pytest.raises(ValidationError):
        mem.remember("hello", role="narrator")
    with pytest.raises(ValidationError):  # a batch is checked before anything is stored
        mem.remember_many([Turn("fine"), Turn("")])
    assert mem.messages(limit=10) == []


def test_turn_result_describes_itself(mem: narrative.Memory) -> None:
    turn = mem.remember("We decided to use Postgres instead of MySQL because the team knows it well.")
    data = turn.to_dict()
    assert data["message_id"] == turn.message.id and data["decision"] == turn.decision
    assert data["memory_ids"] == [m.id for m in turn.memories]
    assert data["narrative_id"] == turn.narrative.id if turn.narrative else data["narrative_id"] is None
    text = turn.describe()
    assert text.startswith(f"message #{turn.message.id} (position 1) → {turn.storyline.name}")
    assert "[decision]" in text


# --- memories in their streams --------------------------------------------------------------------------------------


def test_the_conversation_memory_is_the_exchange_of_two_turns(mem: narrative.Memory) -> None:
    question = mem.remember("What soil should the raised beds in the community garden use?", speaker="maya")
    answer = mem.remember("Loam with compost works well for raised beds.", "assistant", speaker="rook")
    [asked] = question.memories
    assert asked.stream is Stream.CONVERSATION and asked.source is Source.CONVERSATION
    assert asked.message_ids == (question.message.id,)  # nothing to answer: the turn alone
    assert isinstance(asked.details, ConversationDetails)
    assert asked.details.question_type == "factual"
    assert {"soil", "bed"} <= set(asked.details.topic_tags)
    [exchange] = answer.memories
    assert exchange.message_ids == (question.message.id, answer.message.id)
    assert exchange.positions == (1, 2)
    assert exchange.content == (
        "maya: What soil should the raised beds in the community garden use?\n"
        "rook: Loam with compost works well for raised beds."
    )
    assert isinstance(exchange.details, ConversationDetails)
    assert exchange.details.user_input == question.message.content
    assert exchange.details.agent_response == answer.message.content
    assert (exchange.conversation_id, exchange.storyline_id) == (answer.message.conversation_id, answer.storyline.id)
    assert exchange.event_at == answer.message.created_at


def test_one_turn_per_conversation_memory_when_configured(db_path: Path) -> None:
    with narrative.Memory(db_path, user="alice", embedder="none", clock=FakeClock(), env={}, exchange_turns=1) as m:
        m.remember("What soil should the raised beds use?", speaker="maya")
        answer = m.remember("Loam with compost.", "assistant", speaker="rook")
    assert answer.memories[0].message_ids == (answer.message.id,)
    assert answer.memories[0].content == "rook: Loam with compost."


def test_a_decision_goes_to_the_decision_stream_with_rationale_and_alternatives(mem: narrative.Memory) -> None:
    turn = mem.remember("We decided to use Postgres instead of MySQL because the team knows it well.", speaker="maya")
    exchange, decision = turn.memories
    assert exchange.stream is Stream.CONVERSATION
    assert decision.stream is Stream.DECISION and decision.source is Source.EXTRACTION
    assert decision.content == "We decided to use Postgres instead of MySQL because the team knows it well."
    assert isinstance(decision.details, DecisionDetails)
    assert decision.details.decision == "use Postgres"
    assert decision.details.rationale == "the team knows it well"
    assert decision.details.alternatives_considered == ("MySQL",)
    assert decision.importance >= 3
    assert decision.message_ids == (turn.message.id,)
    assert mem.get_memory(decision.id) == decision
    assert [m.id for m in mem.list_memories(stream="decision")] == [decision.id]


MEADOWS = "On p. 45 of Thinking in Systems by Donella Meadows, she says stocks change slowly."


def test_a_research_item_goes_to_the_research_stream_with_its_source(mem: narrative.Memory) -> None:
    turn = mem.remember(MEADOWS, speaker="maya")
    [research] = [m for m in turn.memories if m.stream is Stream.RESEARCH]
    assert research.source is Source.EXTRACTION and research.content == MEADOWS
    assert isinstance(research.details, ResearchDetails)
    assert research.details.author == "Donella Meadows"
    assert research.details.page_reference == "p. 45"
    assert research.details.work_title and research.details.work_title in "Thinking in Systems"
    assert research.details.source_type in {"citation", "annotation"}
    assert any(e.entity_type is EntityType.PERSON and e.name == "Donella Meadows" for e in turn.entities)


def test_a_research_item_keeps_the_whole_work_title(mem: narrative.Memory) -> None:
    turn = mem.remember(MEADOWS, speaker="maya")
    [research] = [m for m in turn.memories if m.stream is Stream.RESEARCH]
    assert isinstance(research.details, ResearchDetails)
    assert research.details.work_title == "Thinking in Systems"


def test_importance_and_emotions_are_set(mem: narrative.Memory) -> None:
    greeting = mem.remember("Hi!", speaker="maya")
    news = mem.remember("I'm so excited, I just got engaged to Sam!", speaker="maya")
    worry = mem.remember("I'm worried because the grant deadline is urgent.", speaker="maya")
    assert greeting.memories[0].importance == 1 and greeting.memories[0].emotions == ()
    assert news.memories[0].importance >= 4 and "excitement" in news.memories[0].emotions
    assert worry.memories[0].importance >= 3 and worry.memories[0].emotions


# --- entities --------------------------------------------------------------------------------------------------------


def test_entities_are_stored_with_their_turn(mem: narrative.Memory) -> None:
    task = mem.remember("I need to email Jonas about the watering schedule by Friday.", speaker="maya")
    waiting = mem.remember("I'm waiting on Jonas to send the plot list.", speaker="maya")
    insight = mem.remember("I realized that the shade maps matter most.", speaker="maya")
    by_type = {e.entity_type: e for t in (task, waiting, insight) for e in t.entities}
    assert by_type[EntityType.TASK].name == "email Jonas about the watering schedule by Friday"
    assert by_type[EntityType.TASK].data["due"] == "Friday"
    assert by_type[EntityType.WAITING_ON].data["who"] == "Jonas"
    assert by_type[EntityType.INSIGHT].name == "the shade maps matter most"
    for turn in (task, waiting, insight):
        for entity in turn.entities:
            assert entity.memory_id == turn.memories[0].id
            assert (entity.conversation_id, entity.storyline_id) == (turn.message.conversation_id, turn.storyline.id)
            assert entity.data["message_id"] == turn.message.id and entity.data["speaker"] == "maya"
            assert entity.is_active
    stored = {e.id for e in mem.store.list_entities("alice")}
    assert {e.id for t in (task, waiting, insight) for e in t.entities} == stored


def test_open_questions_are_the_users_only(mem: narrative.Memory) -> None:
    asked = mem.remember("What soil should the raised beds use?", speaker="maya")
    replied = mem.remember("Do you want loam or a peat-free mix?", "assistant", speaker="rook")
    assert [e.entity_type for e in asked.entities] == [EntityType.QUESTION_OPENED]
    assert asked.entities[0].name == "What soil should the raised beds use?"
    assert not any(e.entity_type is EntityType.QUESTION_OPENED for e in replied.entities)


def test_the_speaker_is_not_an_entity_of_their_own_turn(mem: narrative.Memory) -> None:
    turn = mem.remember("Jonas here. I need to fix the garden gate by Friday.", speaker="Jonas")
    assert not any(e.entity_type is EntityType.PERSON and e.name == "Jonas" for e in turn.entities)


def test_a_turn_is_read_with_the_turn_before_it(mem: narrative.Memory) -> None:
    """Even one ``remember`` at a time, the extractor sees the stored previous turn (what was asked)."""
    mem.remember("What soil should the raised beds use?", speaker="maya")
    solved = mem.remember("I figured out the answer: loam with compost works best.", speaker="maya")
    [resolved] = [e for e in solved.entities if e.entity_type is EntityType.QUESTION_RESOLVED]
    assert resolved.data["question"] == "What soil should the raised beds use?"


# --- many turns at once --------------------------------------------------------------------------------------------

BATCH = [
    Turn("Hi!", speaker="maya"),
    Turn("I'm planning a garden app with a plot map for the community garden.", speaker="maya"),
    Turn("Should the plot map use MapLibre or Leaflet?", "assistant", speaker="rook"),
    Turn("We decided to use MapLibre instead of Leaflet because it is free.", speaker="maya"),
    Turn(MEADOWS, speaker="maya"),
    Turn("On a completely different topic, my sister's wedding is next month in Lisbon.", speaker="maya"),
]


def summary_of(results: list[TurnResult]) -> list[tuple[Any, ...]]:
    return [
        (
            r.message.position,
            r.storyline.name,
            r.decision,
            tuple((m.stream, m.content, m.message_ids) for m in r.memories),
            tuple((e.entity_type, e.name) for e in r.entities),
        )
        for r in results
    ]


def test_remember_many_equals_remembering_one_at_a_time(tmp_path: Path) -> None:
    """The batch path (one embedding call for the chunk) and the turn-by-turn path store the same things."""

    def run(name: str, batch: bool) -> tuple[list[tuple[Any, ...]], list[Any], list[Any]]:
        with narrative.Memory(tmp_path / name, user="maya", embedder="hashing", clock=FakeClock(), env={}) as m:
            results = (
                m.remember_many(BATCH) if batch else [m.remember(t.content, t.role, speaker=t.speaker) for t in BATCH]
            )
            memory_vectors = [tuple(r) for r in rows(m, "memory_vectors")]
            storyline_vectors = [tuple(r) for r in rows(m, "storyline_vectors")]
            return summary_of(results), memory_vectors, storyline_vectors

    together = run("batch.db", batch=True)
    alone = run("single.db", batch=False)
    assert together == alone
    results, memory_vectors, storyline_vectors = together
    assert len(memory_vectors) == sum(len(r[3]) for r in results)  # every memory has its vector
    assert storyline_vectors and results[0][2] == "default" and results[1][2] == "create"


def test_remember_many_of_nothing_is_nothing(mem: narrative.Memory) -> None:
    assert mem.remember_many([]) == []


# --- one transaction per turn; pending messages ----------------------------------------------------------------------


class BrokenExtractor:
    """An Extractor that fails on one kind of text (a crashed model, a bug in a plug-in)."""

    identity = "broken"

    def __init__(self, fails_on: str = "") -> None:
        self.fails_on = fails_on
        self.heuristic = HeuristicExtractor()

    def extract_turn(
        self, text: str, *, speaker: str = "", role: str = "user", previous: str | None = None
    ) -> TurnExtraction:
        if self.fails_on in text:
            raise RuntimeError("the extractor crashed")
        return self.heuristic.extract_turn(text, speaker=speaker, role=role, previous=previous)


class CrashingAssist:
    """A TurnAssist whose narrative step fails — after the turn's memories and entities were written."""

    def __init__(self) -> None:
        self.heuristic = HeuristicExtractor()

    def begin_turn(self) -> None:
        pass

    def extract_turn(
        self, text: str, *, speaker: str = "", role: str = "user", previous: str | None = None
    ) -> TurnExtraction:
        return self.heuristic.extract_turn(text, speaker=speaker, role=role, previous=previous)

    def continuity(self, storyline: Storyline, previous: str, text: str) -> bool | None:
        return None

    def storyline_summary(self, storyline: Storyline, text: str) -> dict[str, Any] | None:
        return None

    def narrative_sentence(self, topic: str, previous_summary: str, text: str) -> str | None:
        raise RuntimeError("the narrative step crashed")

    def judge_statement(self, speaker: str, earlier: str, earlier_said: str, new: str, new_said: str) -> str | None:
        return None


def derived_rows(mem: narrative.Memory, message_id: int) -> dict[str, int]:
    """How many rows the derived work of one message left behind."""
    return {
        "memory_sources": len(rows(mem, "memory_sources", "message_id = ?", (message_id,))),
        "entities": sum(e.data.get("message_id") == message_id for e in mem.store.list_entities("alice")),
        "routing_decisions": len(mem.routing_decisions(message_id)),
    }


def test_a_failing_extractor_keeps_the_message_and_leaves_it_pending(mem: narrative.Memory) -> None:
    done = mem.remember("I'm planning a garden app with a plot map for the community garden.", speaker="maya")
    before = {table: rows(mem, table) for table in ("memories", "entities", "narratives", "routing_decisions")}
    mem._runtime.extractor = BrokenExtractor()
    with pytest.raises(RuntimeError, match="extractor crashed"):
        mem.remember("I need to email Jonas about the plot list by Friday.", speaker="maya")
    [pending] = mem.pending_messages()
    assert pending.content == "I need to email Jonas about the plot list by Friday." and pending.storyline_id is None
    assert pending.position == done.message.position + 1
    assert {table: rows(mem, table) for table in before} == before  # nothing derived was written

    mem._runtime.extractor = None  # the default extractor again
    [result] = mem.process_pending()
    assert result.message.id == pending.id and result.storyline.id == done.storyline.id
    assert mem.pending_messages() == []
    assert any(e.entity_type is EntityType.TASK for e in result.entities)
    assert result.memories[0].message_ids == (done.message.id, pending.id)
    assert link(mem, result.narrative.id).memory_ids[-1] == result.memories[-1].id  # type: ignore[union-attr]
    assert mem.process_pending() == []


def test_a_failure_midway_rolls_back_the_whole_turn(mem: narrative.Memory) -> None:
    writer = mem._turns.writer()
    writer.assist = CrashingAssist()
    text = "We decided to use Postgres instead of MySQL because the team knows it well. I need to migrate by Friday."
    with pytest.raises(RuntimeError, match="narrative step crashed"):
        mem.remember(text, speaker="maya")
    [pending] = mem.pending_messages()
    assert pending.content == text
    assert derived_rows(mem, pending.id) == {"memory_sources": 0, "entities": 0, "routing_decisions": 0}
    assert rows(mem, "memories") == [] and rows(mem, "narratives") == []
    assert [s for s in mem.list_storylines() if s.kind is StorylineKind.DETECTED] == []  # the new one rolled back

    writer.assist = None
    [result] = mem.process_pending()
    assert result.decision == "create" and result.narrative is not None
    assert [m.stream for m in result.memories] == [Stream.CONVERSATION, Stream.DECISION]
    assert {EntityType.DECISION, EntityType.TASK} <= {e.entity_type for e in result.entities}
    assert derived_rows(mem, pending.id)["routing_decisions"] == 1
    assert mem.pending_messages() == []


def test_a_failing_batch_leaves_every_unprocessed_turn_pending(mem: narrative.Memory) -> None:
    mem._runtime.extractor = BrokenExtractor(fails_on="explode")
    turns = [
        Turn("I'm planning a garden app with a plot map.", speaker="maya"),
        Turn("This one will explode the extractor.", speaker="maya"),
        Turn("The plot map needs a legend.", speaker="maya"),
    ]
    with pytest.raises(RuntimeError):
        mem.remember_many(turns)
    pending = mem.pending_messages()
    assert [m.content for m in pending] == [t.content for t in turns]
    mem._runtime.extractor = BrokenExtractor(fails_on="never in any text")
    results = mem.process_pending()
    assert [r.message.id for r in results] == [m.id for m in pending]
    assert results[2].memories[0].message_ids == (pending[1].id, pending[2].id)
    assert mem.pending_messages() == []


def test_a_pending_turn_between_done_ones_is_read_with_its_real_neighbour(mem: narrative.Memory) -> None:
    mem.remember("What soil should the raised beds use?", speaker="maya")
    mem._runtime.extractor = BrokenExtractor(fails_on="figured")
    with pytest.raises(RuntimeError):
        mem.remember("I figured out the answer: loam with compost works best.", speaker="maya")
    mem._runtime.extractor = None
    mem.remember("The plot map needs a legend.", speaker="maya")
    [pending] = mem.pending_messages()
    [result] = mem.process_pending()
    previous = mem.messages(limit=10)[0]
    assert result.memories[0].message_ids == (previous.id, pending.id)
    [resolved] = [e for e in result.entities if e.entity_type is EntityType.QUESTION_RESOLVED]
    assert resolved.data["question"] == "What soil should the raised beds use?"


# --- the running narrative (Koshi), with the real model ------------------------------------------------------------


@dataclass
class Chain:
    mem: narrative.Memory
    turns: dict[str, TurnResult] = field(default_factory=dict)
    end: Any = None
    conversation_id: int = 0
    closed_at: datetime | None = None


CHAIN_TURNS = [
    ("hello", "user", "Hi!"),
    ("garden 1", "user", "I'm planning a garden app with a plot map for the community garden."),
    ("garden 2", "assistant", "Should the plot map use MapLibre or Leaflet for the garden beds?"),
    ("garden 3", "user", "We decided to use MapLibre instead of Leaflet because it is free."),
    ("wedding 1", "user", "On a completely different topic, my sister's wedding is next month in Lisbon."),
    ("wedding 2", "user", "The wedding venue in Lisbon is by the river and I need a dress."),
    ("garden 4", "user", "The plot map for the community garden app needs a legend for the beds."),
    ("garden 5", "user", "The legend should show which garden beds get the most sun."),
]


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    path = tmp_path_factory.mktemp("koshi") / "maya.db"
    clock = FakeClock()
    mem = narrative.Memory(path, user="maya", clock=clock, env={})
    found = Chain(mem)
    for label, role, text in CHAIN_TURNS:
        found.turns[label] = mem.remember(text, role, speaker="maya" if role == "user" else "rook")
    found.conversation_id = found.turns["hello"].message.conversation_id
    found.closed_at = clock()
    found.end = mem._turns.writer().finish_conversation("maya", found.conversation_id, found.closed_at)
    yield found
    mem.close()


def test_the_scenario_routes_as_expected(chain: Chain) -> None:
    decisions = [chain.turns[label].decision for label, _, _ in CHAIN_TURNS]
    assert decisions == ["default", "create", "continue", "continue", "create", "continue", "switch", "continue"]
    garden = chain.turns["garden 1"].storyline.id
    assert chain.turns["garden 4"].storyline.id == garden


def test_the_open_link_collects_each_turns_memories(chain: Chain) -> None:
    link = chain.turns["garden 3"].narrative
    assert link is not None and link.storyline_id == chain.turns["garden 1"].storyline.id
    expected = [m.id for label in ("garden 1", "garden 2", "garden 3") for m in chain.turns[label].memories]
    assert list(link.memory_ids) == expected
    assert len(chain.turns["garden 3"].memories) == 2  # the decision joined the thread too
    assert chain.turns["garden 1"].narrative is not None and chain.turns["garden 1"].narrative.id == link.id
    assert chain.turns["hello"].narrative is None  # small talk has no running narrative


def test_memories_are_stamped_with_the_link_open_when_they_were_stored(chain: Chain) -> None:
    for label, _, _ in CHAIN_TURNS:
        turn = chain.turns[label]
        expected = None if turn.narrative is None else turn.narrative.id
        for memory in turn.memories:
            assert chain.mem.get_memory(memory.id).narrative_id == expected, label


def test_a_switch_seals_the_previous_link_and_the_next_one_points_back(chain: Chain) -> None:
    garden_link = chain.turns["garden 3"].narrative
    wedding = chain.turns["wedding 1"]
    assert garden_link is not None and wedding.narrative is not None
    assert [n.id for n in wedding.sealed] == [garden_link.id]
    sealed = link(chain.mem, garden_link.id)
    assert sealed.sealed and sealed.sealed_at == wedding.message.created_at
    assert wedding.narrative.previous_narrative_id == garden_link.id
    assert wedding.narrative.id != garden_link.id and wedding.narrative.topic == wedding.storyline.name
    with pytest.raises(SealedNarrative):
        chain.mem.store.update_narrative("maya", garden_link.id, summary="rewritten")
    assert link(chain.mem, garden_link.id) == sealed


def test_returning_to_a_storyline_continues_its_own_chain(chain: Chain) -> None:
    back = chain.turns["garden 4"]
    first_link = chain.turns["garden 3"].narrative
    wedding_link = chain.turns["wedding 2"].narrative
    assert back.narrative is not None and first_link is not None and wedding_link is not None
    assert [n.id for n in back.sealed] == [wedding_link.id]
    assert back.narrative.previous_narrative_id == first_link.id
    assert back.narrative.id not in (first_link.id, wedding_link.id)
    assert chain.turns["garden 5"].narrative is not None and chain.turns["garden 5"].narrative.id == back.narrative.id
    walked = [n.id for n in chain.mem.walk_back(back.narrative.id, depth=5)]
    assert walked[:2] == [back.narrative.id, first_link.id]


def test_finishing_the_conversation_seals_running_links_and_copies_none_into_memories(chain: Chain) -> None:
    """The links stay in the chain; the memory a person confirms is the conversation's closing summary, so no
    link summary is stored as a memory beside it (docs/decisions.md, "What a close stores")."""
    end = chain.end
    back = chain.turns["garden 5"].narrative
    assert back is not None
    assert [n.id for n in end.sealed] == [back.id] and end.sealed[0].sealed
    assert all(n.sealed for n in chain.mem.list_narratives())
    assert chain.mem.store.open_narrative("maya", back.storyline_id) is None
    assert chain.mem.list_memories(stream="narrative", limit=100) == []


def test_small_talk_between_two_topics_does_not_keep_the_first_thread_open(mem: narrative.Memory) -> None:
    garden = mem.remember("I'm planning a garden app with a plot map for the community garden.", speaker="maya")
    hello = mem.remember("Hi!", speaker="maya")
    wedding = mem.remember("On a completely different topic, my sister's wedding is next month in Lisbon.")
    assert (hello.decision, wedding.decision) == ("default", "create")
    assert garden.narrative is not None and wedding.narrative is not None
    assert [n.id for n in wedding.sealed] == [garden.narrative.id]
    assert link(mem, garden.narrative.id).sealed
    assert wedding.narrative.previous_narrative_id == garden.narrative.id


def test_finishing_twice_adds_nothing(chain: Chain) -> None:
    before = len(chain.mem.list_memories(limit=500))
    again = chain.mem._turns.writer().finish_conversation("maya", chain.conversation_id, chain.mem.clock())
    assert again.sealed == []
    assert len(chain.mem.list_memories(limit=500)) == before


def test_finishing_an_empty_conversation_is_a_no_op(mem: narrative.Memory) -> None:
    conversation = mem.start_conversation()
    end = mem._turns.writer().finish_conversation("alice", conversation.id, mem.clock())
    assert end.sealed == []


def test_a_long_arc_seals_its_link_and_the_next_one_follows(mem: narrative.Memory) -> None:
    turns = [
        Turn(f"The plot map legend number {i} shows the community garden beds.", speaker="maya")
        for i in range(narrate.MAX_LINK_MEMORIES + 1)
    ]
    results = mem.remember_many(turns)
    full = results[narrate.MAX_LINK_MEMORIES - 1].narrative
    nxt = results[-1].narrative
    assert full is not None and nxt is not None
    assert full.sealed and len(full.memory_ids) == narrate.MAX_LINK_MEMORIES
    assert not nxt.sealed and nxt.previous_narrative_id == full.id and nxt.storyline_id == full.storyline_id
    assert nxt.memory_ids == tuple(m.id for m in results[-1].memories)


def test_conversation_memories_of_a_conversation_can_be_listed(mem: narrative.Memory) -> None:
    turn = mem.remember("I'm planning a garden app with a plot map.", speaker="maya")
    where = MemoryFilter(streams=[Stream.CONVERSATION], conversation_ids=[turn.message.conversation_id])
    assert [m.id for m in mem.store.list_memories("alice", where)] == [turn.memories[0].id]
    assert memories_of(mem, turn.message.id) == turn.memories


def test_system_messages_are_not_pending_derived_work(mem: narrative.Memory) -> None:
    mem.remember("We decided to ship on Friday because QA signed off.", speaker="maya")
    mem.add_message("The user approved the last classification.", "system", speaker="narrative")
    assert mem.pending_messages() == []
