"""The write path with an LLM: a real HTTP server speaking the Ollama and OpenAI wire formats.

Good answers are used (extraction, continuity verdict, narrative sentence, storyline summary); a
malformed answer, an HTTP error, a timeout or a spent per-turn budget falls back to the heuristic with a
logged warning, and the turn is never lost.

Per turn the write path asks, in this order: ``turn_extraction`` (always), ``continuity_check`` (a
substantive message inside a topic storyline), ``narrative_update`` and ``storyline_summary`` (a topic
storyline).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import narrative
from conftest import FakeClock
from llm_server import RecordedRequest, Reply, ScriptedLLMServer, scripted_llm_server
from narrative.model import ConversationDetails, DecisionDetails, EntityType, ResearchDetails, Stream
from narrative.write.turn_types import TurnResult

llm_server = pytest.fixture(scripted_llm_server)
PROVIDERS = ["ollama", "openai"]

PROMPT_OPENINGS = {  # how each prompt's system message begins
    "turn_extraction": "You read one exchange",
    "continuity_check": "You decide whether a new message continues",
    "narrative_update": "You keep a one-sentence account",
    "storyline_summary": "You maintain the card",
    "statement_judgement": "You keep a person's memory true over time.",
}

EXTRACTION: dict[str, Any] = {
    "question_type": "methodological",
    "topic_tags": ["Garden App", "plot map"],
    "decisions": [
        {
            "decision": "use MapLibre for the plot map",
            "rationale": "it renders vector tiles offline",
            "alternatives": ["Leaflet", "Google Maps"],
            "decision_type": "methodological",
            "confidence": 0.9,
            "reversible": False,
        }
    ],
    "research": [
        {
            "content": "Meadows: stocks change slowly",
            "source_type": "citation",
            "source_reference": "Meadows, Thinking in Systems, p. 45",
            "author": "Donella Meadows",
            "work_title": "Thinking in Systems",
            "page_reference": "p. 45",
        }
    ],
    "entities": [
        {"type": "task", "name": "email Jonas about the plot list", "detail": "by Friday"},
        {"type": "unknown_kind", "name": "ignored"},
    ],
    "importance": 4,
    "emotions": ["Hopeful"],
}
SENTENCE = "Maya starts the garden app and picks MapLibre for the plot map."
SUMMARY = {"name": "Garden app", "keywords": ["garden", "map"], "summary": "- Maya plans the garden app\n- MapLibre"}

TEXT = "We decided to use Postgres instead of MySQL because the team knows it well."


def extraction(tags: list[str], **extra: Any) -> Reply:
    return Reply.json({"topic_tags": tags, "importance": 3, **extra})


def continuity(same: bool) -> Reply:
    return Reply.json({"same_storyline": same, "confidence": 0.9, "reason": "scripted"})


def topic_turn(sentence: str = SENTENCE, summary: dict[str, Any] = SUMMARY) -> list[Reply]:
    """The two replies a turn in a topic storyline ends with."""
    return [Reply.text(sentence), Reply.json(summary)]


def with_llm(db_path: Path, server: ScriptedLLMServer, provider: str, **settings: Any) -> narrative.Memory:
    return narrative.Memory(
        db_path,
        user="maya",
        embedder="none",
        clock=FakeClock(),
        env={},
        llm=provider,
        llm_url=server.url,
        llm_model="test",
        **settings,
    )


@pytest.fixture(params=PROVIDERS)
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def mem(db_path: Path, llm_server: ScriptedLLMServer, provider: str) -> Iterator[narrative.Memory]:
    memory = with_llm(db_path, llm_server, provider)
    yield memory
    memory.close()


def prompt_of(request: RecordedRequest) -> str:
    assert request.body is not None
    system = request.body["messages"][0]["content"]
    return next(name for name, opening in PROMPT_OPENINGS.items() if system.startswith(opening))


def user_text(request: RecordedRequest) -> str:
    assert request.body is not None
    return str(request.body["messages"][1]["content"])


def assert_turn_kept(mem: narrative.Memory, turn: TurnResult) -> None:
    """The turn is whole: message routed, decision recorded, memories and narrative stored."""
    [message] = [m for m in mem.messages(limit=100) if m.id == turn.message.id]
    assert message.storyline_id == turn.storyline.id
    assert mem.routing_decisions(turn.message.id)[0].decision == turn.decision
    assert turn.memories and all(mem.get_memory(m.id) == m for m in turn.memories)
    assert mem.pending_messages() == []


# --- good answers are used ------------------------------------------------------------------------------------------


def test_the_models_extraction_sentence_and_summary_are_used(
    mem: narrative.Memory, llm_server: ScriptedLLMServer, provider: str
) -> None:
    llm_server.script(Reply.json(EXTRACTION), *topic_turn())
    turn = mem.remember("Let's plan the garden app; what should draw the plot map?", speaker="maya")
    assert [prompt_of(r) for r in llm_server.chat_requests] == [
        "turn_extraction",
        "narrative_update",
        "storyline_summary",
    ]
    assert turn.decision == "create" and turn.storyline.name == "Garden app"
    exchange, decision, research = turn.memories
    assert isinstance(exchange.details, ConversationDetails)
    assert exchange.details.topic_tags == ("garden app", "plot map")
    assert exchange.details.question_type == "methodological"
    assert (exchange.importance, exchange.emotions) == (4, ("hopeful",))
    assert decision.stream is Stream.DECISION and isinstance(decision.details, DecisionDetails)
    assert decision.content == "use MapLibre for the plot map"
    assert decision.details.rationale == "it renders vector tiles offline"
    assert decision.details.alternatives_considered == ("Leaflet", "Google Maps")
    assert (decision.details.confidence, decision.details.reversible) == (0.9, False)
    assert research.stream is Stream.RESEARCH and isinstance(research.details, ResearchDetails)
    assert (research.details.author, research.details.work_title, research.details.page_reference) == (
        "Donella Meadows",
        "Thinking in Systems",
        "p. 45",
    )
    assert [(e.entity_type, e.name) for e in turn.entities] == [(EntityType.TASK, "email Jonas about the plot list")]
    assert turn.narrative is not None and turn.narrative.summary == SENTENCE
    assert turn.storyline.summary == SUMMARY["summary"]
    assert_turn_kept(mem, turn)


def test_with_the_model_a_self_description_is_still_noted_in_your_story(
    mem: narrative.Memory, llm_server: ScriptedLLMServer, provider: str
) -> None:
    """The model's extraction is used, and who the person is still comes from their own words (the prompt asks
    the model nothing about it: the note is the clause the person said, never the model's text)."""
    llm_server.script(Reply.json(EXTRACTION), *topic_turn())
    turn = mem.remember("I'm a landscape architect; what should draw the plot map of the garden app?", speaker="maya")
    notes = [m for m in turn.memories if m.stream is Stream.FACT]
    assert [(n.content, n.storyline_id) for n in notes] == [("maya: I'm a landscape architect", mem.your_story().id)]
    assert [m.stream for m in turn.memories[:3]] == [Stream.CONVERSATION, Stream.DECISION, Stream.RESEARCH]
    assert_turn_kept(mem, turn)


def test_requests_speak_the_providers_wire_format(
    mem: narrative.Memory, llm_server: ScriptedLLMServer, provider: str
) -> None:
    llm_server.script(Reply.json(EXTRACTION), *topic_turn())
    mem.remember("Let's plan the garden app; what should draw the plot map?", speaker="maya")
    requests = llm_server.chat_requests
    path = "/api/chat" if provider == "ollama" else "/v1/chat/completions"
    assert {r.path for r in requests} == {path}
    for request in requests:
        assert request.body is not None and request.body["model"] == "test"
        json_mode = prompt_of(request) != "narrative_update"
        if provider == "ollama":
            assert (request.body.get("format") == "json") is json_mode
            assert request.body["stream"] is False
        else:
            assert (request.body.get("response_format") == {"type": "json_object"}) is json_mode


def test_the_continuity_verdict_is_honoured_both_ways(mem: narrative.Memory, llm_server: ScriptedLLMServer) -> None:
    llm_server.script(extraction(["garden app", "plot map"]), *topic_turn())
    garden = mem.remember("I'm planning the garden app with a plot map.", speaker="maya")
    # an explicit change of subject, which the heuristic would leave — the model says it continues
    llm_server.script(extraction(["greenhouse", "heater"]), continuity(True), *topic_turn())
    stays = mem.remember("On a completely different topic, the greenhouse heater for the garden broke.", speaker="maya")
    assert (stays.decision, stays.storyline.id) == ("continue", garden.storyline.id)
    assert stays.scores["continuity"] == "llm continuity check"
    # a close follow-up, which the heuristic would keep — the model says it is another storyline
    llm_server.script(extraction(["sister", "wedding"]), continuity(False), *topic_turn("Maya's sister marries."))
    leaves = mem.remember("My sister's wedding in Lisbon is next month and the plot map can wait.", speaker="maya")
    assert leaves.decision == "create" and leaves.storyline.id != garden.storyline.id
    assert leaves.storyline.name == "Sister's wedding"
    assert [garden.narrative.id if garden.narrative else None] == [n.id for n in leaves.sealed]
    asked = [r for r in llm_server.chat_requests if prompt_of(r) == "continuity_check"]
    assert len(asked) == 2
    assert "Previous message from the user: I'm planning the garden app" in user_text(asked[0])


def test_the_model_is_not_asked_about_continuity_for_small_talk(
    mem: narrative.Memory, llm_server: ScriptedLLMServer
) -> None:
    llm_server.script(extraction(["garden app", "plot map"]), *topic_turn())
    mem.remember("I'm planning the garden app with a plot map.", speaker="maya")
    llm_server.script(extraction([]), *topic_turn())
    thanks = mem.remember("Thanks!", speaker="maya")
    assert thanks.decision == "continue"
    assert "continuity_check" not in [prompt_of(r) for r in llm_server.chat_requests]


def test_the_extraction_of_a_reply_sees_the_question_it_answers(
    mem: narrative.Memory, llm_server: ScriptedLLMServer
) -> None:
    llm_server.script(extraction(["soil", "raised beds"]), *topic_turn())
    mem.remember("What soil should the raised beds use?", speaker="maya")
    llm_server.script(extraction(["soil", "loam"]), continuity(True), *topic_turn())
    mem.remember("Loam with compost works well for raised beds.", "assistant", speaker="rook")
    last = [r for r in llm_server.chat_requests if prompt_of(r) == "turn_extraction"][-1]
    assert "User: What soil should the raised beds use?" in user_text(last)
    assert "Assistant: Loam with compost works well for raised beds." in user_text(last)


# --- failures fall back to the heuristic, with a warning, and keep the turn -------------------------------------------

FAILURES = {
    "malformed json": Reply.malformed('{"topic_tags": ["garden", '),
    "wrong shape": Reply.json({"topic_tags": "garden", "importance": 9, "summary": "", "same_storyline": "yes"}),
    "http 500": Reply.error(500),
    "garbled body": Reply.garbled(),
}


def assert_heuristic_turn(mem: narrative.Memory, turn: TurnResult) -> None:
    assert_turn_kept(mem, turn)
    exchange, decision = turn.memories
    assert isinstance(exchange.details, ConversationDetails) and "mysql" in exchange.details.topic_tags
    assert isinstance(decision.details, DecisionDetails)
    assert decision.details.rationale == "the team knows it well"  # the heuristic's reading
    assert turn.narrative is not None and "Postgres" in turn.narrative.summary
    assert turn.storyline.summary.startswith("- maya: ")


@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_bad_answer_falls_back_to_the_heuristic(
    mem: narrative.Memory, llm_server: ScriptedLLMServer, caplog: pytest.LogCaptureFixture, failure: str
) -> None:
    llm_server.set_fallback(FAILURES[failure])
    with caplog.at_level(logging.WARNING, logger="narrative"):
        turn = mem.remember(TEXT, speaker="maya")
    assert_heuristic_turn(mem, turn)
    assert len(llm_server.chat_requests) == 3  # extraction, narrative sentence, storyline summary: all tried
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("narrative")]
    assert len(warned) >= 3 and all("heuristic" in r.getMessage() for r in warned)


def test_a_timeout_falls_back_to_the_heuristic(
    db_path: Path, llm_server: ScriptedLLMServer, provider: str, caplog: pytest.LogCaptureFixture
) -> None:
    llm_server.set_fallback(Reply.slow(3.0, '{"topic_tags": ["late"], "importance": 5}'))
    with with_llm(db_path, llm_server, provider, llm_timeout_s=0.2) as mem, caplog.at_level(logging.WARNING):
        turn = mem.remember(TEXT, speaker="maya")
        assert_heuristic_turn(mem, turn)
    timeouts = [r for r in caplog.records if r.name == "narrative.llm" and "within 0.2s" in r.getMessage()]
    assert len(timeouts) == 3


def test_a_spent_turn_budget_falls_back_and_resets_next_turn(
    db_path: Path, llm_server: ScriptedLLMServer, provider: str, caplog: pytest.LogCaptureFixture
) -> None:
    with with_llm(db_path, llm_server, provider, llm_max_calls_per_turn=1) as mem:
        llm_server.script(Reply.json(EXTRACTION))
        with caplog.at_level(logging.WARNING, logger="narrative.llm"):
            first = mem.remember("Let's plan the garden app; what should draw the plot map?", speaker="maya")
        assert len(llm_server.chat_requests) == 1  # only the extraction fit in the budget
        assert first.storyline.name == "Garden app"  # ... and it was used
        assert first.narrative is not None and first.narrative.summary != SENTENCE  # the heuristic's sentence
        assert_turn_kept(mem, first)
        spent = [r for r in caplog.records if "budget spent" in r.getMessage()]
        assert [r.getMessage().split(":")[0] for r in spent] == ["narrative_update", "storyline_summary"]
        llm_server.script(extraction(["plot map", "legend"]))
        second = mem.remember("The plot map needs a legend for the garden beds.", speaker="maya")
        assert len(llm_server.chat_requests) == 2  # a fresh budget: one more call
        assert_turn_kept(mem, second)


def test_no_server_at_all_never_loses_a_turn(db_path: Path, provider: str, caplog: pytest.LogCaptureFixture) -> None:
    with ScriptedLLMServer() as gone:
        url = gone.url  # a port nobody listens on once the server stops
    mem = narrative.Memory(
        db_path,
        user="maya",
        embedder="none",
        clock=FakeClock(),
        env={},
        llm=provider,
        llm_url=url,
        llm_model="test",
        llm_timeout_s=2,
    )
    with mem, caplog.at_level(logging.WARNING, logger="narrative.llm"):
        turn = mem.remember(TEXT, speaker="maya")
        assert_heuristic_turn(mem, turn)
    assert any("cannot reach" in r.getMessage() or "failed" in r.getMessage() for r in caplog.records)
