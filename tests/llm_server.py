"""A scripted stand-in LLM server that speaks the real wire formats, for tests.

It is a real HTTP server on 127.0.0.1 (a free port) answering

* Ollama: ``POST /api/chat`` and ``GET /api/tags``
* OpenAI-compatible: ``POST /v1/chat/completions`` and ``GET /v1/models``

Chat requests take the next scripted :class:`Reply` (or ``fallback`` when the
script is empty; with neither, a 503).  Every request is recorded.  Use it from
any test file::

    from llm_server import Reply, ScriptedLLMServer

    with ScriptedLLMServer() as server:
        server.script(Reply.json({"shift": False, "topic": "x"}), Reply.error(500))
        llm = OllamaLLM("llama3.2", base_url=server.url)
        ...
        assert server.requests[0].body["format"] == "json"

or with the ``llm_server`` fixture defined in ``tests/conftest.py`` when there is one
(``scripted_llm_server`` below is a generator usable as a fixture body).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["RecordedRequest", "Reply", "ScriptedLLMServer", "scripted_llm_server"]

MODELS = ("llama3.2:latest", "qwen2.5:1.5b")


@dataclass(frozen=True)
class Reply:
    """One scripted answer to one chat request."""

    content: str = ""
    status: int = 200
    delay_s: float = 0.0
    raw_body: bytes | None = None  # sent as is, instead of a well-formed body
    prompt_tokens: int | None = 11
    completion_tokens: int | None = 7

    @classmethod
    def text(cls, content: str, **kw: Any) -> Reply:
        return cls(content=content, **kw)

    @classmethod
    def json(cls, obj: Any, **kw: Any) -> Reply:
        return cls(content=json.dumps(obj), **kw)

    @classmethod
    def malformed(cls, content: str = '{"shift": true, "topic": ') -> Reply:
        """Well-formed HTTP and envelope, but the model's content is broken JSON."""
        return cls(content=content)

    @classmethod
    def slow(cls, delay_s: float, content: str = "{}") -> Reply:
        return cls(content=content, delay_s=delay_s)

    @classmethod
    def error(cls, status: int = 500, message: str = "model runner crashed") -> Reply:
        return cls(status=status, raw_body=json.dumps({"error": message}).encode())

    @classmethod
    def garbled(cls) -> Reply:
        """HTTP 200 with a body that is not JSON at all."""
        return cls(raw_body=b"<html>\x00\xffnot json at all")


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None = None


@dataclass
class _State:
    replies: deque[Reply] = field(default_factory=deque)
    requests: list[RecordedRequest] = field(default_factory=list)
    fallback: Reply | None = None
    standing: dict[str, Reply] = field(default_factory=dict)  # system-prompt opening → the reply, every time
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)


def _ollama_body(model: str, reply: Reply) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "message": {"role": "assistant", "content": reply.content},
        "done_reason": "stop",
        "done": True,
        "total_duration": 1_000_000,
        "load_duration": 100_000,
        "eval_duration": 500_000,
    }
    if reply.prompt_tokens is not None:
        body["prompt_eval_count"] = reply.prompt_tokens
    if reply.completion_tokens is not None:
        body["eval_count"] = reply.completion_tokens
    return body


def _openai_body(model: str, reply: Reply) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.content}, "finish_reason": "stop"}],
    }
    if reply.prompt_tokens is not None and reply.completion_tokens is not None:
        body["usage"] = {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        }
    return body


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        self._record(None)
        if self.path == "/api/tags":
            models = [{"name": m, "model": m, "size": 1_000_000, "digest": "0" * 64, "details": {}} for m in MODELS]
            self._send(200, {"models": models})
        elif self.path == "/v1/models":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "tests"} for m in MODELS]
            self._send(200, {"object": "list", "data": data})
        else:
            self._send(404, {"error": f"no route {self.path}"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except json.JSONDecodeError:
            body = None
        self._record(body if isinstance(body, dict) else None)
        if self.path not in ("/api/chat", "/v1/chat/completions"):
            self._send(404, {"error": f"no route {self.path}"})
            return
        if not isinstance(body, dict) or not body.get("model") or not isinstance(body.get("messages"), list):
            self._send(400, {"error": "model and messages are required"})
            return
        reply = self.server.next_reply(_system_text(body))
        if reply is None:
            self._send(503, {"error": "the script has no reply left"})
            return
        if reply.delay_s and self.server.state.stopping.wait(reply.delay_s):
            return  # server shutting down
        if reply.raw_body is not None:
            self._send_bytes(reply.status, reply.raw_body)
            return
        make = _ollama_body if self.path == "/api/chat" else _openai_body
        self._send(reply.status, make(str(body["model"]), reply))

    def _record(self, body: dict[str, Any] | None) -> None:
        request = RecordedRequest(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        with self.server.state.lock:
            self.server.state.requests.append(request)

    def _send(self, status: int, obj: Any) -> None:
        self._send_bytes(status, json.dumps(obj).encode())

    def _send_bytes(self, status: int, payload: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test); nothing to tell


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: _State) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state

    def next_reply(self, system: str = "") -> Reply | None:
        with self.state.lock:
            for opening, reply in self.state.standing.items():
                if system.startswith(opening):
                    return reply
            return self.state.replies.popleft() if self.state.replies else self.state.fallback


def _system_text(body: dict[str, Any]) -> str:
    first = body["messages"][0] if body["messages"] else {}
    return str(first.get("content", "")) if isinstance(first, dict) and first.get("role") == "system" else ""


class ScriptedLLMServer:
    """Start on ``__enter__`` (or :meth:`start`), stop on ``__exit__`` (or :meth:`stop`)."""

    def __init__(self, fallback: Reply | None = None) -> None:
        self._state = _State(fallback=fallback)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the server is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._state.lock:
            return list(self._state.requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == "POST"]

    @property
    def pending(self) -> int:
        """Scripted replies not used yet."""
        with self._state.lock:
            return len(self._state.replies)

    def script(self, *replies: Reply) -> ScriptedLLMServer:
        """Queue replies, served in order to the following chat requests."""
        with self._state.lock:
            self._state.replies.extend(replies)
        return self

    def answer(self, opening: str, reply: Reply) -> ScriptedLLMServer:
        """Answer every request whose system prompt starts with ``opening`` with ``reply`` (before the script)."""
        with self._state.lock:
            self._state.standing[opening] = reply
        return self

    def set_fallback(self, reply: Reply | None) -> None:
        """The reply given when the script is empty (``None``: answer 503)."""
        with self._state.lock:
            self._state.fallback = reply

    def start(self) -> ScriptedLLMServer:
        self._server = _Server(self._state)
        serve = self._server.serve_forever
        self._thread = threading.Thread(target=serve, args=(0.05,), name="scripted-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._state.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def scripted_llm_server() -> Iterator[ScriptedLLMServer]:
    """Fixture body: ``llm_server = pytest.fixture(scripted_llm_server)`` in a test module or conftest."""
    with ScriptedLLMServer() as server:
        yield server
