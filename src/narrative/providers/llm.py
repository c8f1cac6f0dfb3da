"""The LLM provider layer: one protocol, two HTTP providers, a budget, two safe helpers.

An LLM is optional everywhere in ``narrative``.  The default is :class:`NoLLM`;
every step that could use a model has a heuristic, and the write/read pipelines
call a model only through :func:`ask_json` / :func:`ask_text`, which return
``None`` on any failure (provider down, timeout, malformed answer, failed
validation, turn budget spent) after logging a warning on the
``narrative.llm`` logger.  The caller then uses its heuristic: a bad model
answer never loses a turn.

Providers are found through the ``narrative.llms`` entry-point group
(``ollama``, ``openai`` here; third parties register the same way; the
``narrative.providers`` group of earlier versions is still read).  Embedders
register under their own group, ``narrative.embedders``.  A provider class
exposes ``from_settings(settings) -> LLM``, where ``settings`` is an
:class:`LLMSettings` built from :class:`~narrative.config.Settings`
(:meth:`LLMSettings.from_settings`): one set of ``NARRATIVE_LLM_*`` names.

HTTP goes through the standard library (``urllib``) with an explicit timeout on
every request; loopback URLs bypass any proxy configured in the environment.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.client import HTTPException
from importlib import metadata
from typing import Any, Literal, Protocol, Self, runtime_checkable

from narrative.config import Settings
from narrative.errors import NarrativeError, ProviderError, ValidationError
from narrative.providers.prompts import render_prompt

__all__ = [
    "ENTRY_POINT_GROUP",
    "LLM",
    "ChatMessage",
    "Completion",
    "LLMSettings",
    "NoLLM",
    "OllamaLLM",
    "OpenAICompatibleLLM",
    "TurnBudget",
    "ask_json",
    "ask_text",
    "build_llm",
    "check_fields",
    "extract_json_object",
    "is_enabled",
    "provider_class",
]

log = logging.getLogger("narrative.llm")

ENTRY_POINT_GROUP = "narrative.llms"  # LLM providers; embedders register under "narrative.embedders"
LEGACY_GROUP = "narrative.providers"  # the one group of earlier versions: still read, after ENTRY_POINT_GROUP
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


# ---------------------------------------------------------------- protocol


@dataclass(frozen=True)
class ChatMessage:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class Completion:
    """One answer.  Token counts are ``None`` when the server does not report them."""

    text: str
    model: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@runtime_checkable
class LLM(Protocol):
    """A chat model.  ``identity`` is ``"provider:model"``, or ``"none"`` for no model."""

    @property
    def identity(self) -> str: ...

    @property
    def supports_json(self) -> bool: ...

    def complete(
        self, messages: list[ChatMessage], *, json_mode: bool = False, max_tokens: int | None = None
    ) -> Completion: ...


def is_enabled(llm: LLM) -> bool:
    """False for :class:`NoLLM`: the caller should go straight to its heuristic."""
    return llm.identity != "none"


# ---------------------------------------------------------------- settings


@dataclass(frozen=True)
class LLMSettings:
    """Which model to use and how much of it one turn may spend."""

    provider: str = "none"
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 30.0
    max_calls_per_turn: int = 4
    max_tokens_per_turn: int = 4000

    def __post_init__(self) -> None:
        if not isinstance(self.provider, str) or not self.provider or self.provider != self.provider.strip().lower():
            raise ValidationError(f"provider must be a lower-case name, got {self.provider!r}", field="provider")
        if not self.timeout_s > 0:
            raise ValidationError(f"timeout_s must be positive, got {self.timeout_s}", field="timeout_s")
        for name in ("max_calls_per_turn", "max_tokens_per_turn"):
            if getattr(self, name) < 0:
                raise ValidationError(f"{name} must not be negative", field=name)

    @classmethod
    def from_settings(cls, settings: Settings) -> LLMSettings:
        """The LLM part of :class:`~narrative.config.Settings`: the one configuration path (explicit values >
        the ``NARRATIVE_LLM_*`` variables docs/cli.md lists > defaults), resolved there."""
        return cls(
            provider=settings.llm_provider.strip().lower() or "none",
            base_url=settings.llm_url or None,
            model=settings.llm_model or None,
            api_key=settings.llm_api_key or None,
            timeout_s=settings.llm_timeout_s,
            max_calls_per_turn=settings.llm_max_calls_per_turn,
            max_tokens_per_turn=settings.llm_max_tokens_per_turn,
        )


def provider_class(name: str) -> Any:
    """The class registered under ``name`` in the ``narrative.llms`` entry points (or, for plug-ins of earlier
    versions, ``narrative.providers``)."""
    groups = [metadata.entry_points(group=group) for group in (ENTRY_POINT_GROUP, LEGACY_GROUP)]
    found = [ep for eps in groups for ep in eps if ep.name == name]
    if not found:
        known = sorted({ep.name for eps in groups for ep in eps} | {"none"})
        raise ValidationError(f"unknown LLM provider {name!r}; known: {', '.join(known)}", field="provider")
    try:
        cls = found[0].load()
    except Exception as exc:
        raise ProviderError(f"LLM provider {name!r} failed to load: {exc}") from exc
    if not (callable(getattr(cls, "from_settings", None)) and callable(getattr(cls, "complete", None))):
        raise ValidationError(f"provider {name!r} is registered but is not an LLM", field="provider")
    return cls


def build_llm(settings: LLMSettings) -> LLM:
    """Build the configured model; ``provider="none"`` gives :class:`NoLLM`."""
    if settings.provider == "none":
        return NoLLM()
    llm = provider_class(settings.provider).from_settings(settings)
    if not isinstance(llm, LLM):
        raise ValidationError(f"provider {settings.provider!r} did not build an LLM", field="provider")
    return llm


# ---------------------------------------------------------------- providers


class NoLLM:
    """The offline default: no model.  Pipelines check :func:`is_enabled` and use heuristics."""

    identity = "none"
    supports_json = False

    @classmethod
    def from_settings(cls, settings: LLMSettings) -> NoLLM:
        return cls()

    def complete(
        self, messages: list[ChatMessage], *, json_mode: bool = False, max_tokens: int | None = None
    ) -> Completion:
        raise ProviderError("no LLM is configured (provider 'none'); use the heuristic")


class _HTTPChatModel:
    """Shared plumbing of the HTTP providers: one JSON request, errors mapped to ProviderError."""

    kind = ""
    default_url = ""
    default_model: str | None = None

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        supports_json: bool = True,
    ) -> None:
        chosen = model or self.default_model
        if not chosen:
            raise ValidationError(f"the {self.kind} provider needs a model name", field="model")
        self.model: str = chosen
        self.base_url = (base_url or self.default_url).rstrip("/")
        if urllib.parse.urlsplit(self.base_url).scheme not in ("http", "https") or "://" not in self.base_url:
            raise ValidationError(f"base_url must start with http:// or https://, got {base_url!r}", field="base_url")
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.supports_json = supports_json
        self.identity = f"{self.kind}:{self.model}"

    @classmethod
    def from_settings(cls, settings: LLMSettings) -> Self:
        return cls(settings.model, base_url=settings.base_url, api_key=settings.api_key, timeout_s=settings.timeout_s)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, base_url={self.base_url!r})"

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _request(self, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        """GET (no payload) or POST JSON to ``base_url + path``; return the decoded JSON object."""
        url = self.base_url + path
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        method = "GET" if data is None else "POST"
        request = urllib.request.Request(url, data=data, headers=self._headers(), method=method)
        try:
            with _opener_for(url).open(request, timeout=self.timeout_s) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            detail = _error_detail(exc)
            raise ProviderError(f"{self.identity}: HTTP {exc.code} from {url}: {detail or exc.reason}") from exc
        except TimeoutError as exc:
            raise ProviderError(f"{self.identity}: no answer from {url} within {self.timeout_s:g}s") from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise ProviderError(f"{self.identity}: no answer from {url} within {self.timeout_s:g}s") from exc
            raise ProviderError(f"{self.identity}: cannot reach {url}: {exc.reason}") from exc
        except (HTTPException, OSError) as exc:
            raise ProviderError(f"{self.identity}: connection to {url} failed: {exc!r}") from exc
        try:
            decoded = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ProviderError(f"{self.identity}: {url} answered with a body that is not JSON: {body[:80]!r}") from exc
        if not isinstance(decoded, dict):
            raise ProviderError(f"{self.identity}: {url} answered with JSON that is not an object")
        return decoded

    def _malformed(self, what: str) -> ProviderError:
        return ProviderError(f"{self.identity}: malformed response from {self.base_url}: {what}")


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        return str(exc.read(300).decode("utf-8", "replace").strip())
    except (OSError, HTTPException):
        return ""
    finally:
        exc.close()


def _opener_for(url: str) -> urllib.request.OpenerDirector:
    """Loopback servers (a local Ollama, the test stand-in) never go through an environment proxy."""
    if urllib.parse.urlsplit(url).hostname in _LOOPBACK:
        return urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener()


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class OllamaLLM(_HTTPChatModel):
    """Ollama's native chat API: ``POST {base_url}/api/chat``."""

    kind = "ollama"
    default_url = "http://localhost:11434"
    default_model = "llama3.2"

    def complete(
        self, messages: list[ChatMessage], *, json_mode: bool = False, max_tokens: int | None = None
    ) -> Completion:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "stream": False,
        }
        if json_mode and self.supports_json:
            payload["format"] = "json"
        if max_tokens is not None:
            payload["options"] = {"num_predict": max_tokens}
        body = self._request("/api/chat", payload)
        message = body.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise self._malformed("no message.content")
        return Completion(
            text=content,
            model=str(body.get("model") or self.model),
            prompt_tokens=_count(body.get("prompt_eval_count")),
            completion_tokens=_count(body.get("eval_count")),
        )

    def models(self) -> list[str]:
        """Names of the models the server has pulled (``GET /api/tags``)."""
        entries = self._request("/api/tags").get("models")
        if not isinstance(entries, list):
            raise self._malformed("no models list")
        return [str(e["name"]) for e in entries if isinstance(e, dict) and "name" in e]


class OpenAICompatibleLLM(_HTTPChatModel):
    """Any server speaking ``POST {base_url}/v1/chat/completions`` (OpenAI, vLLM, llama.cpp, LM Studio…)."""

    kind = "openai"
    default_url = "https://api.openai.com"

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        supports_json: bool = True,
    ) -> None:
        super().__init__(model, base_url=base_url, api_key=api_key, timeout_s=timeout_s, supports_json=supports_json)
        self.base_url = self.base_url.removesuffix("/v1")  # accept both ".../v1" and the bare host

    def complete(
        self, messages: list[ChatMessage], *, json_mode: bool = False, max_tokens: int | None = None
    ) -> Completion:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
        }
        if json_mode and self.supports_json:
            payload["response_format"] = {"type": "json_object"}
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        body = self._request("/v1/chat/completions", payload)
        try:
            content = body["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise self._malformed("no choices[0].message.content") from None
        if not isinstance(content, str):
            raise self._malformed("choices[0].message.content is not text")
        usage = body.get("usage")
        if not isinstance(usage, dict):
            usage = {}
        return Completion(
            text=content,
            model=str(body.get("model") or self.model),
            prompt_tokens=_count(usage.get("prompt_tokens")),
            completion_tokens=_count(usage.get("completion_tokens")),
        )

    def models(self) -> list[str]:
        """Ids of the models the server offers (``GET /v1/models``)."""
        entries = self._request("/v1/models").get("data")
        if not isinstance(entries, list):
            raise self._malformed("no data list")
        return [str(e["id"]) for e in entries if isinstance(e, dict) and "id" in e]


# ---------------------------------------------------------------- budget


@dataclass
class TurnBudget:
    """How many LLM calls and tokens one turn may still spend.  Not thread-safe: one per turn."""

    max_calls: int = 4
    max_tokens: int = 4000
    calls: int = 0
    tokens: int = 0

    @classmethod
    def from_settings(cls, settings: LLMSettings) -> TurnBudget:
        return cls(max_calls=settings.max_calls_per_turn, max_tokens=settings.max_tokens_per_turn)

    @property
    def remaining_tokens(self) -> int:
        return max(0, self.max_tokens - self.tokens)

    def allows_call(self) -> bool:
        return self.calls < self.max_calls and self.remaining_tokens > 0

    def charge(self, messages: list[ChatMessage], completion: Completion | None) -> None:
        """Count one call; tokens as reported, or about four characters a token when not."""
        self.calls += 1
        if completion is None:
            return
        prompt = completion.prompt_tokens
        if prompt is None:
            prompt = sum(len(m.content) for m in messages) // 4 + 1
        answer = completion.completion_tokens
        if answer is None:
            answer = len(completion.text) // 4 + 1
        self.tokens += prompt + answer


# ---------------------------------------------------------------- safe helpers


def _call(
    llm: LLM,
    budget: TurnBudget | None,
    prompt_name: str,
    variables: dict[str, Any],
    *,
    json_mode: bool,
    max_tokens: int | None,
) -> str | None:
    """Render, check the budget, call; the answer text or ``None`` (with a warning) on failure."""
    system, user = render_prompt(prompt_name, variables)  # a missing variable is a bug: raise
    if not is_enabled(llm):
        log.debug("%s: no LLM configured; heuristic used", prompt_name)
        return None
    if budget is not None:
        if not budget.allows_call():
            log.warning(
                "%s: LLM turn budget spent (%d/%d calls, %d/%d tokens); heuristic used",
                prompt_name, budget.calls, budget.max_calls, budget.tokens, budget.max_tokens,
            )  # fmt: skip
            return None
        max_tokens = min(max_tokens or budget.remaining_tokens, budget.remaining_tokens)
    messages = [ChatMessage("system", system), ChatMessage("user", user)]
    started = time.perf_counter()
    try:
        completion = llm.complete(messages, json_mode=json_mode and llm.supports_json, max_tokens=max_tokens)
    except Exception as exc:  # any provider failure degrades, whatever raised it
        if budget is not None:
            budget.charge(messages, None)
        log.warning("%s: %s failed (%s); heuristic used", prompt_name, llm.identity, exc)
        return None
    if budget is not None:
        budget.charge(messages, completion)
    log.debug("%s: %s answered in %.0f ms", prompt_name, llm.identity, (time.perf_counter() - started) * 1000)
    return completion.text


def ask_json(
    llm: LLM,
    budget: TurnBudget | None,
    prompt_name: str,
    variables: dict[str, Any],
    validate: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    max_tokens: int | None = None,
) -> dict[str, Any] | None:
    """Ask for a JSON object and validate it; ``None`` (and a logged warning) on any failure.

    ``validate`` receives the parsed object and returns the cleaned one; it raises
    ValidationError (or KeyError/TypeError/ValueError) when the shape is wrong.
    The only exception that escapes is ValidationError for a bad prompt name or a
    missing template variable, which is a programming error.
    """
    text = _call(llm, budget, prompt_name, variables, json_mode=True, max_tokens=max_tokens)
    if text is None:
        return None
    obj = extract_json_object(text)
    if obj is None:
        log.warning("%s: %s answered without a JSON object: %.120r; heuristic used", prompt_name, llm.identity, text)
        return None
    try:
        return validate(obj)
    except (NarrativeError, KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        log.warning("%s: %s answer failed validation (%s); heuristic used", prompt_name, llm.identity, exc)
        return None


def ask_text(
    llm: LLM,
    budget: TurnBudget | None,
    prompt_name: str,
    variables: dict[str, Any],
    *,
    max_tokens: int | None = None,
) -> str | None:
    """Ask for free text (stripped of fences and quotes); ``None`` (and a warning) on failure or emptiness."""
    text = _call(llm, budget, prompt_name, variables, json_mode=False, max_tokens=max_tokens)
    if text is None:
        return None
    cleaned = _strip_fences(text).strip().strip('"').strip()
    if not cleaned:
        log.warning("%s: %s answered with empty text; heuristic used", prompt_name, llm.identity)
        return None
    return cleaned


def _strip_fences(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        stripped = stripped.rsplit("```", 1)[0]
    return stripped


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text``, tolerating code fences and prose around it."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            obj, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(obj, dict):
            return obj
        start = text.find("{", start + 1)
    return None


_Kind = type | tuple[type, ...]


def check_fields(obj: Mapping[str, Any], spec: Mapping[str, _Kind]) -> dict[str, Any]:
    """Validate that ``obj`` has each key of ``spec`` with a value of that type; return those keys.

    ``float`` accepts integers too; ``bool`` is never taken for a number.  Raises ValidationError.
    """
    out: dict[str, Any] = {}
    for key, kind in spec.items():
        if key not in obj:
            raise ValidationError(f"missing field {key!r}", field=key)
        value = obj[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, bool) and bool not in kinds:
            raise ValidationError(f"field {key!r} is a boolean", field=key)
        if not isinstance(value, kinds):
            raise ValidationError(f"field {key!r} has type {type(value).__name__}", field=key)
        out[key] = value
    return out
