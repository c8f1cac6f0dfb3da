"""The LLM provider layer, end to end against a real HTTP stand-in speaking both wire formats."""

from __future__ import annotations

import logging
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import narrative
from llm_server import Reply, ScriptedLLMServer, scripted_llm_server
from narrative.config import Settings
from narrative.errors import ProviderError, ValidationError
from narrative.providers.llm import (
    LLM,
    ChatMessage,
    LLMSettings,
    NoLLM,
    OllamaLLM,
    OpenAICompatibleLLM,
    TurnBudget,
    ask_json,
    ask_text,
    build_llm,
    check_fields,
    extract_json_object,
    is_enabled,
    provider_class,
)
from narrative.providers.prompts import prompt_names, prompt_variables, render_prompt

llm_server = pytest.fixture(scripted_llm_server)

CONTINUITY_VARS: dict[str, Any] = {
    "storyline_name": "Kitchen renovation",
    "storyline_keywords": ["kitchen", "tiles", "budget"],
    "storyline_summary": "- choosing tiles\n- budget capped at 12k",
    "previous_query": "Which tiles are cheaper?",
    "previous_response": "The ceramic ones.",
    "elapsed": "2 minutes",
    "message": "And how long does grouting take?",
}
CONTINUITY_ANSWER = {"same_storyline": True, "confidence": 0.9, "reason": "still about the tiles"}


def continuity(obj: dict[str, Any]) -> dict[str, Any]:
    out = check_fields(obj, {"same_storyline": bool, "confidence": float, "reason": str})
    if not 0.0 <= out["confidence"] <= 1.0:
        raise ValidationError("confidence outside 0..1", field="confidence")
    return out


def make_llm(kind: str, server: ScriptedLLMServer, **kw: Any) -> LLM:
    if kind == "ollama":
        return OllamaLLM("llama3.2", base_url=server.url, **kw)
    return OpenAICompatibleLLM("gpt-test", base_url=server.url + "/v1", api_key="sk-test", **kw)


@pytest.fixture(params=["ollama", "openai"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def warnings_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.WARNING, logger="narrative.llm"):
        yield caplog


def llm_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "narrative.llm" and r.levelno == logging.WARNING]


# ------------------------------------------------------------------ the wire


def test_ollama_complete_speaks_api_chat(llm_server: ScriptedLLMServer) -> None:
    llm_server.script(Reply.text("Hello there.", prompt_tokens=21, completion_tokens=3))
    llm = OllamaLLM("llama3.2", base_url=llm_server.url)
    done = llm.complete([ChatMessage("user", "hi")], max_tokens=50)
    assert (done.text, done.model, done.prompt_tokens, done.completion_tokens) == ("Hello there.", "llama3.2", 21, 3)
    assert llm.identity == "ollama:llama3.2" and llm.supports_json
    [request] = llm_server.chat_requests
    assert request.path == "/api/chat"
    assert request.body == {
        "model": "llama3.2",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": False,
        "options": {"num_predict": 50},
    }


def test_openai_complete_speaks_chat_completions(llm_server: ScriptedLLMServer) -> None:
    llm_server.script(Reply.text("Hello.", prompt_tokens=9, completion_tokens=2))
    llm = OpenAICompatibleLLM("gpt-test", base_url=llm_server.url, api_key="sk-secret")
    done = llm.complete([ChatMessage("system", "be brief"), ChatMessage("user", "hi")])
    assert (done.text, done.model, done.prompt_tokens, done.completion_tokens) == ("Hello.", "gpt-test", 9, 2)
    [request] = llm_server.chat_requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-secret"
    assert request.body is not None
    assert request.body["model"] == "gpt-test"
    assert "response_format" not in request.body and "max_tokens" not in request.body
    assert "sk-secret" not in repr(llm)


def test_missing_usage_is_none(llm_server: ScriptedLLMServer, kind: str) -> None:
    llm_server.script(Reply.text("ok", prompt_tokens=None, completion_tokens=None))
    done = make_llm(kind, llm_server).complete([ChatMessage("user", "hi")])
    assert done.prompt_tokens is None and done.completion_tokens is None


def test_models_listing(llm_server: ScriptedLLMServer) -> None:
    assert "llama3.2:latest" in OllamaLLM(base_url=llm_server.url).models()
    assert "qwen2.5:1.5b" in OpenAICompatibleLLM("x", base_url=llm_server.url).models()


def test_ask_json_sends_json_mode_and_model(llm_server: ScriptedLLMServer, kind: str) -> None:
    llm_server.script(Reply.json(CONTINUITY_ANSWER))
    budget = TurnBudget(max_calls=4, max_tokens=4000)
    result = ask_json(make_llm(kind, llm_server), budget, "continuity_check", CONTINUITY_VARS, continuity)
    assert result == CONTINUITY_ANSWER
    [request] = llm_server.chat_requests
    assert request.body is not None
    assert request.body["model"] == ("llama3.2" if kind == "ollama" else "gpt-test")
    if kind == "ollama":
        assert request.body["format"] == "json"
        assert request.body["options"] == {"num_predict": 4000}
    else:
        assert request.body["response_format"] == {"type": "json_object"}
        assert request.body["max_tokens"] == 4000
    roles = [m["role"] for m in request.body["messages"]]
    assert roles == ["system", "user"]
    assert "And how long does grouting take?" in request.body["messages"][1]["content"]


def test_json_mode_off_when_provider_lacks_it(llm_server: ScriptedLLMServer) -> None:
    llm_server.script(Reply.text("Sure! ```json\n" + '{"shift": false, "topic": "tiles"}' + "\n```"))
    llm = OpenAICompatibleLLM("gpt-test", base_url=llm_server.url, supports_json=False)
    variables = {"current_topic": "tiles", "narrative": "", "recent": "", "message": "more tiles"}
    result = ask_json(llm, None, "topic_shift", variables, lambda o: check_fields(o, {"shift": bool, "topic": str}))
    assert result == {"shift": False, "topic": "tiles"}
    assert llm_server.chat_requests[0].body is not None
    assert "response_format" not in llm_server.chat_requests[0].body


def test_ask_text_returns_a_clean_sentence(llm_server: ScriptedLLMServer, kind: str) -> None:
    llm_server.script(Reply.text('  "We settled on ceramic tiles and grouting comes next."\n'))
    variables = {"topic": "tiles", "narrative": "Choosing tiles.", "exchange": "user: ceramic it is"}
    text = ask_text(make_llm(kind, llm_server), TurnBudget(), "narrative_update", variables)
    assert text == "We settled on ceramic tiles and grouting comes next."
    assert llm_server.chat_requests[0].body is not None
    assert "format" not in llm_server.chat_requests[0].body
    assert "response_format" not in llm_server.chat_requests[0].body


# ------------------------------------------------------------------ budget


def test_usage_is_charged_to_the_budget(llm_server: ScriptedLLMServer, kind: str) -> None:
    llm_server.script(Reply.json(CONTINUITY_ANSWER, prompt_tokens=120, completion_tokens=30))
    budget = TurnBudget(max_calls=4, max_tokens=1000)
    assert ask_json(make_llm(kind, llm_server), budget, "continuity_check", CONTINUITY_VARS, continuity)
    assert (budget.calls, budget.tokens, budget.remaining_tokens) == (1, 150, 850)


def test_unreported_usage_is_estimated(llm_server: ScriptedLLMServer) -> None:
    llm_server.script(Reply.json(CONTINUITY_ANSWER, prompt_tokens=None, completion_tokens=None))
    budget = TurnBudget()
    assert ask_json(make_llm("ollama", llm_server), budget, "continuity_check", CONTINUITY_VARS, continuity)
    assert budget.calls == 1 and budget.tokens > 50  # the prompt alone is a few hundred characters


def test_spent_call_budget_degrades_without_calling(
    llm_server: ScriptedLLMServer, kind: str, warnings_log: pytest.LogCaptureFixture
) -> None:
    llm_server.set_fallback(Reply.json(CONTINUITY_ANSWER))
    llm, budget = make_llm(kind, llm_server), TurnBudget(max_calls=2, max_tokens=10_000)
    for _ in range(2):
        assert ask_json(llm, budget, "continuity_check", CONTINUITY_VARS, continuity) is not None
    assert ask_json(llm, budget, "continuity_check", CONTINUITY_VARS, continuity) is None
    assert ask_text(llm, budget, "narrative_update", {"topic": "", "narrative": "", "exchange": ""}) is None
    assert len(llm_server.chat_requests) == 2
    assert any("budget spent" in m for m in llm_warnings(warnings_log))


def test_spent_token_budget_degrades_and_caps_max_tokens(llm_server: ScriptedLLMServer) -> None:
    llm_server.set_fallback(Reply.json(CONTINUITY_ANSWER, prompt_tokens=200, completion_tokens=20))
    llm, budget = make_llm("openai", llm_server), TurnBudget(max_calls=10, max_tokens=300)
    assert ask_json(llm, budget, "continuity_check", CONTINUITY_VARS, continuity, max_tokens=500) is not None
    assert ask_json(llm, budget, "continuity_check", CONTINUITY_VARS, continuity) is not None
    assert ask_json(llm, budget, "continuity_check", CONTINUITY_VARS, continuity) is None
    sent = [r.body["max_tokens"] for r in llm_server.chat_requests if r.body]
    assert sent == [300, 80]  # never more than what is left of the turn
    assert budget.calls == 2


def test_failed_calls_still_count(llm_server: ScriptedLLMServer) -> None:
    llm_server.script(Reply.error(500))
    budget = TurnBudget(max_calls=1)
    assert ask_json(make_llm("ollama", llm_server), budget, "continuity_check", CONTINUITY_VARS, continuity) is None
    assert budget.calls == 1 and not budget.allows_call()


def test_budget_from_settings() -> None:
    budget = TurnBudget.from_settings(LLMSettings(max_calls_per_turn=2, max_tokens_per_turn=99))
    assert (budget.max_calls, budget.max_tokens, budget.allows_call()) == (2, 99, True)


# ------------------------------------------------------------------ failures degrade


def _degrades(server: ScriptedLLMServer, kind: str, reply: Reply, caplog: pytest.LogCaptureFixture, **kw: Any) -> str:
    server.script(reply)
    result = ask_json(make_llm(kind, server, **kw), TurnBudget(), "continuity_check", CONTINUITY_VARS, continuity)
    assert result is None
    [message] = llm_warnings(caplog)
    assert message.startswith("continuity_check:")
    return message


def test_malformed_json_content(
    llm_server: ScriptedLLMServer, kind: str, warnings_log: pytest.LogCaptureFixture
) -> None:
    message = _degrades(llm_server, kind, Reply.malformed(), warnings_log)
    assert "without a JSON object" in message


def test_wrong_shape_fails_validation(
    llm_server: ScriptedLLMServer, kind: str, warnings_log: pytest.LogCaptureFixture
) -> None:
    message = _degrades(llm_server, kind, Reply.json({"same_storyline": "yes", "confidence": 2}), warnings_log)
    assert "failed validation" in message and "same_storyline" in message


def test_http_500(llm_server: ScriptedLLMServer, kind: str, warnings_log: pytest.LogCaptureFixture) -> None:
    message = _degrades(llm_server, kind, Reply.error(500, "model runner crashed"), warnings_log)
    assert "HTTP 500" in message and "model runner crashed" in message


def test_garbled_body(llm_server: ScriptedLLMServer, kind: str, warnings_log: pytest.LogCaptureFixture) -> None:
    message = _degrades(llm_server, kind, Reply.garbled(), warnings_log)
    assert "not JSON" in message


def test_timeout(llm_server: ScriptedLLMServer, kind: str, warnings_log: pytest.LogCaptureFixture) -> None:
    started = time.monotonic()
    message = _degrades(llm_server, kind, Reply.slow(3.0), warnings_log, timeout_s=0.3)
    assert time.monotonic() - started < 2.0
    assert "within 0.3s" in message


def test_unreachable_server_raises_provider_error() -> None:
    with ScriptedLLMServer() as server:
        dead_url = server.url
    with pytest.raises(ProviderError, match="cannot reach"):
        OllamaLLM(base_url=dead_url).complete([ChatMessage("user", "hi")])


def test_provider_errors_are_provider_errors(llm_server: ScriptedLLMServer, kind: str) -> None:
    llm_server.script(Reply.error(503), Reply.garbled(), Reply.json({"unexpected": "envelope"}, raw_body=b"{}"))
    llm = make_llm(kind, llm_server)
    for expected in ("HTTP 503", "not JSON", "malformed response"):
        with pytest.raises(ProviderError, match=expected):
            llm.complete([ChatMessage("user", "hi")])


# ------------------------------------------------------------------ no model


def test_no_llm_is_quiet_and_offline(warnings_log: pytest.LogCaptureFixture) -> None:
    llm = build_llm(LLMSettings())
    assert isinstance(llm, NoLLM) and not is_enabled(llm) and llm.identity == "none"
    with pytest.raises(ProviderError):
        llm.complete([ChatMessage("user", "hi")])
    budget = TurnBudget()
    assert ask_json(llm, budget, "continuity_check", CONTINUITY_VARS, continuity) is None
    assert budget.calls == 0
    assert llm_warnings(warnings_log) == []


def test_missing_variable_fails_loudly_even_without_a_model() -> None:
    with pytest.raises(ValidationError, match="storyline_summary"):
        ask_json(NoLLM(), None, "continuity_check", {"message": "hi"}, continuity)
    with pytest.raises(ValidationError, match="unknown prompt"):
        ask_text(NoLLM(), None, "no_such_prompt", {})


# ------------------------------------------------------------------ prompts and parsing


def test_every_prompt_renders_with_its_variables() -> None:
    expected = {
        "entity_extraction", "narrative_memory", "state_delta", "routing_suggestion", "reflection_questions",
        "reflection_positions", "reflection_sources", "continuity_check", "topic_shift", "narrative_update",
        "storyline_summary", "turn_extraction", "thread_resolution", "reasoning_classification",
        "reasoning_decomposition", "reasoning_verification",
    }  # fmt: skip
    assert expected <= set(prompt_names())
    for name in prompt_names():
        variables = prompt_variables(name)
        assert variables, name
        system, user = render_prompt(name, {v: f"<{v}>" for v in variables})
        assert system and user and "$" not in system + user, name
        assert all(f"<{v}>" in system + user for v in variables), name


def test_structured_values_render_as_json() -> None:
    _, user = render_prompt("thread_resolution", {"thread": {"question": "which tiles?"}, "message": "ceramic"})
    assert '"question": "which tiles?"' in user


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": [1, {"b": 2}]}\n```', {"a": [1, {"b": 2}]}),
        ('Here you go: {"a": "}"} and more {"c": 3}', {"a": "}"}),
        ('{broken {"a": 1}', {"a": 1}),
        ("[1, 2]", None),
        ("no json here", None),
    ],
)
def test_extract_json_object(text: str, expected: dict[str, Any] | None) -> None:
    assert extract_json_object(text) == expected


def test_check_fields() -> None:
    assert check_fields({"c": 1, "b": True, "x": 0}, {"c": float, "b": bool}) == {"c": 1.0, "b": True}
    for bad in ({"b": True}, {"c": True, "b": True}, {"c": "1", "b": True}):
        with pytest.raises(ValidationError):
            check_fields(bad, {"c": float, "b": bool})


# ------------------------------------------------------------------ settings and registration


def test_llm_settings_come_from_settings() -> None:
    """One configuration path: Settings resolves the documented NARRATIVE_LLM_* names; LLMSettings is built from it."""
    env = {
        "NARRATIVE_LLM_PROVIDER": "Ollama",
        "NARRATIVE_LLM_URL": "http://gpu-box:11434",
        "NARRATIVE_LLM_MODEL": "qwen2.5:1.5b",
        "NARRATIVE_LLM_API_KEY": "sk-env",
        "NARRATIVE_LLM_TIMEOUT_S": "12.5",
        "NARRATIVE_LLM_MAX_CALLS_PER_TURN": "2",
    }
    settings = LLMSettings.from_settings(Settings.resolve(env, llm_model="llama3.2"))
    assert settings == LLMSettings(
        provider="ollama",
        base_url="http://gpu-box:11434",
        model="llama3.2",
        api_key="sk-env",
        timeout_s=12.5,
        max_calls_per_turn=2,
        max_tokens_per_turn=4000,
    )
    assert "sk-env" not in repr(settings)
    assert LLMSettings.from_settings(Settings.resolve({})) == LLMSettings()
    chosen = Settings.resolve({"NARRATIVE_LLM_PROVIDER": "openai"}, llm_provider="none")
    assert LLMSettings.from_settings(chosen).provider == "none"
    old_names = {"NARRATIVE_LLM_TIMEOUT": "5", "NARRATIVE_LLM_MAX_CALLS": "1", "NARRATIVE_LLM_MAX_TOKENS": "9"}
    assert LLMSettings.from_settings(Settings.resolve(old_names)) == LLMSettings()  # one set of names only


@pytest.mark.parametrize(
    ("env", "explicit", "field"),
    [
        ({"NARRATIVE_LLM_TIMEOUT_S": "soon"}, {}, "llm_timeout_s"),
        ({"NARRATIVE_LLM_MAX_CALLS_PER_TURN": "many"}, {}, "llm_max_calls_per_turn"),
        ({}, {"llm_timeout_s": 0}, "timeout_s"),
        ({}, {"llm_temperature": 0.2}, "llm_temperature"),
    ],
)
def test_bad_llm_settings_are_refused(env: dict[str, str], explicit: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        LLMSettings.from_settings(Settings.resolve(env, **explicit))
    assert caught.value.field == field


def test_an_unknown_provider_fails_when_the_memory_is_built(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match=r"unknown LLM provider 'bogus'"):
        narrative.Memory(tmp_path / "m.db", user="alice", embedder="none", llm="bogus", env={})
    with pytest.raises(ValidationError, match=r"unknown LLM provider 'bogus'"):
        narrative.Memory(tmp_path / "m.db", user="alice", embedder="none", env={"NARRATIVE_LLM_PROVIDER": "bogus"})
    assert not (tmp_path / "m.db").exists()  # refused before the database is opened
    with narrative.Memory(tmp_path / "m.db", user="alice", embedder="none", llm="ollama", env={}) as mem:
        assert mem.settings.llm_provider == "ollama"  # a known name builds; nothing is called yet


def test_unknown_provider() -> None:
    with pytest.raises(ValidationError, match=r"unknown LLM provider 'claude-local'.*ollama"):
        build_llm(LLMSettings(provider="claude-local"))


def test_builtin_providers_come_from_entry_points(llm_server: ScriptedLLMServer) -> None:
    assert provider_class("ollama") is OllamaLLM
    assert provider_class("openai") is OpenAICompatibleLLM
    llm = build_llm(LLMSettings(provider="openai", base_url=llm_server.url, model="gpt-test", timeout_s=5))
    assert isinstance(llm, OpenAICompatibleLLM) and llm.identity == "openai:gpt-test" and llm.timeout_s == 5
    with pytest.raises(ValidationError, match="needs a model"):
        build_llm(LLMSettings(provider="openai"))
    with pytest.raises(ValidationError, match="base_url"):
        OllamaLLM(base_url="localhost:11434")


def test_third_party_provider_registers_like_builtins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "echo_llm_plugin.py").write_text(
        textwrap.dedent("""
        from narrative.providers.llm import Completion

        class EchoLLM:
            supports_json = False

            def __init__(self, model):
                self.identity = f"echo:{model}"

            @classmethod
            def from_settings(cls, settings):
                return cls(settings.model)

            def complete(self, messages, *, json_mode=False, max_tokens=None):
                return Completion(text=messages[-1].content, model="echo")

        class NotAnLLM:
            pass
    """)
    )
    dist = tmp_path / "echo_llm_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-llm-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[narrative.llms]\necho = echo_llm_plugin:EchoLLM\nbroken = echo_llm_plugin:NotAnLLM\n"
        "[narrative.providers]\nolder = echo_llm_plugin:EchoLLM\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "echo_llm_plugin", raising=False)
    llm = build_llm(LLMSettings(provider="echo", model="parrot"))
    assert llm.identity == "echo:parrot" and is_enabled(llm)
    variables = {"topic": "t", "narrative": "n", "exchange": "the latest words"}
    assert ask_text(llm, TurnBudget(), "narrative_update", variables) is not None
    with pytest.raises(ValidationError, match="not an LLM"):
        build_llm(LLMSettings(provider="broken"))
    assert build_llm(LLMSettings(provider="older", model="x")).identity == "echo:x"  # the group of earlier versions
    monkeypatch.delitem(sys.modules, "echo_llm_plugin", raising=False)
