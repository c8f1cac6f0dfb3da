"""A model that answers every request with prose never puts that prose into memory.

The stand-in is the real loopback server of ``tests/llm_server.py`` speaking the Ollama and OpenAI wire
formats; it answers every request — JSON steps and prose steps alike — with the same chatty text.  JSON
steps fail to parse; prose steps get more or fewer sentences than asked, or sentences that name nothing of
what they were asked to summarise.  Every step falls back to the heuristic with a logged warning: no
sealed link, reflection or confirmed memory holds the prose.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

import narrative
from conftest import FakeClock
from llm_server import Reply, ScriptedLLMServer, scripted_llm_server
from narrative.write import answers

llm_server = pytest.fixture(scripted_llm_server)

PROSE = {
    "not json": "this is not json",
    "chatty": "Sure, happy to help with that! Let me know if there is anything else you would like.",
    "rambling": " ".join(["Here is a long answer that wanders off and keeps going without any point."] * 8),
}
TURNS = [
    ("maya", "I'm planning the community garden app; the volunteers keep losing track of watering."),
    ("rook", "Where will the volunteers use it: in the garden or at home?"),
    ("maya", "We decided to use SQLite instead of Firebase because it works offline and costs nothing."),
    ("rook", "Sounds right. What comes first, the plot map or the schedule?"),
    ("maya", "Completely different topic: my sister Lena is getting married in Porto in June."),
    ("maya", "I realized that I need to write a speech for the wedding."),
]


@pytest.fixture(params=["ollama", "openai"])
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def mem(db_path: Path, llm_server: ScriptedLLMServer, provider: str) -> Iterator[narrative.Memory]:
    memory = narrative.Memory(
        db_path,
        user="maya",
        embedder="none",
        clock=FakeClock(),
        env={},
        reflect_every=3,
        llm=provider,
        llm_url=llm_server.url,
        llm_model="test",
    )
    yield memory
    memory.close()


def fragments(prose: str) -> list[str]:
    """Pieces of the prose that must not show up anywhere (its sentences, and the text itself)."""
    return [prose.strip(), *(s.strip().rstrip(".!") for s in prose.split(".") if len(s.strip()) > 10)]


@pytest.mark.parametrize("kind", list(PROSE))
def test_prose_answers_never_become_links_reflections_or_the_confirmed_memory(
    mem: narrative.Memory, llm_server: ScriptedLLMServer, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    prose = PROSE[kind]
    llm_server.set_fallback(Reply.text(prose))
    with caplog.at_level(logging.WARNING, logger="narrative"):
        mem.start_conversation("garden and a wedding")
        for speaker, text in TURNS:
            mem.remember(text, "assistant" if speaker == "rook" else "user", speaker=speaker)
        mem.close_conversation()
        confirmed = mem.confirm_memory()
    assert llm_server.chat_requests  # the model was asked, again and again
    links = mem.list_narratives(limit=100)
    assert links and all(link.sealed for link in links)
    stored = [link.summary for link in links] + [m.content for m in mem.list_memories(limit=1000)]
    assert any(m.stream.value == "reflection" for m in mem.list_memories(limit=1000))
    assert confirmed is not None
    for text in stored:
        for piece in fragments(prose):
            assert piece.lower() not in text.lower(), (piece, text)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("heuristic" in w for w in warnings)


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("", "empty"),
        ('{"sentence": "Maya picked SQLite."}', "data or markup instead of prose"),
        ("Maya picked SQLite. Then she drew the map.", "2 sentences where 1 were asked"),
        ("Maya picked SQLite " + "and more " * 60 + ".", "characters, more than 300"),
        ("this is not json", "it names nothing of what it was asked to summarise"),
    ],
)
def test_a_prose_step_refuses_what_it_did_not_ask_for(answer: str, problem: str) -> None:
    material = "Garden app. We decided to use SQLite instead of Firebase because it works offline."
    found = answers.refusal(answer, sentences=(1, 1), max_chars=300, material=material)
    assert found is not None and problem in found


def test_a_prose_step_takes_a_grounded_answer_of_the_asked_length() -> None:
    material = "Garden app. We decided to use SQLite instead of Firebase because it works offline."
    answer = "  Maya chose SQLite over Firebase so the garden app works offline. "
    assert answers.prose(answer, "narrative_update", sentences=(1, 1), max_chars=300, material=material) == (
        answer.strip()
    )
