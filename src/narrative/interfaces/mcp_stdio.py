"""The MCP stdio transport as narrative runs it: every line the client sends gets an answer.

The SDK's stdio transport drops a line it cannot read as a JSON-RPC message: a client that sent
``{"jsonrpc":"2.0","id":12,"method":"tools/call","params":[1]}`` waits forever.  So the lines pass through
two checks before the SDK sees them:

* each lone surrogate (escaped or not) is replaced by U+FFFF (:func:`mark_surrogates`): the SDK's JSON
  parser would reject the line outright; marked, it reaches the tool and comes back as a tool error
  naming the argument (the validation layer refuses U+FFFF);
* a line that is still not a JSON-RPC message is answered here with a JSON-RPC error (:func:`error_for`):
  ``-32700`` for text that is not JSON, ``-32602`` for a request whose params are not an object, ``-32600``
  for anything else (an id that is null, fractional or an object included), with the request's id when it has a
  usable one, else ``null``.  A malformed
  *response* from the client is never answered, and blank lines are skipped.

The answers go out through the SDK's own write stream, so they never interleave with its replies.
"""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, BinaryIO, cast

import anyio
import mcp_types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602


async def serve_stdio(server: MCPServer) -> None:
    """Serve ``server`` over this process's stdin and stdout until the client closes stdin."""
    lines = CheckedLines(anyio.wrap_file(marked_stdin(sys.stdin.buffer)))
    async with stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream):
        lines.answer_through(write_stream)
        # the SDK runs a server over given streams only through its low-level server (MCPServer.run_stdio_async
        # does the same with the SDK's own stdin reader)
        lowlevel = server._lowlevel_server
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


class CheckedLines:
    """The client's lines for the SDK, less those that are not JSON-RPC messages: each of those is answered."""

    def __init__(self, source: Any) -> None:
        self._source = source
        self._answers: Any = None
        self._ready = anyio.Event()

    def answer_through(self, write_stream: Any) -> None:
        self._answers = write_stream
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in self._source:
            if not line.strip():
                continue
            try:
                message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except Exception:
                message = None
            # a request whose id is null, fractional or an object reads as a notification: it is answered too
            if message is None or (isinstance(message, mcp_types.JSONRPCNotification) and _has_id(line)):
                answer = error_for(line)
                if answer is not None:
                    await self._ready.wait()
                    await self._answers.send(SessionMessage(answer))
                continue
            yield line


def _has_id(line: str) -> bool:
    if '"id"' not in line:
        return False
    message = json.loads(line)
    return isinstance(message, dict) and "id" in message


def error_for(line: str) -> mcp_types.JSONRPCError | None:
    """The JSON-RPC error answering a line that is not a JSON-RPC message (None for a malformed response)."""
    try:
        message = json.loads(line)
    except ValueError:
        return _error(None, PARSE_ERROR, "Parse error: the line is not JSON (send one JSON-RPC message per line)")
    if isinstance(message, list):
        return _error(None, INVALID_REQUEST, "Invalid Request: batches are not supported; send one request per line")
    if not isinstance(message, dict):
        return _error(None, INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
    if "method" not in message and ("result" in message or "error" in message):
        return None  # a response (to no request of ours, or malformed): never answered
    request_id = message.get("id")
    usable = isinstance(request_id, str) or (isinstance(request_id, int) and not isinstance(request_id, bool))
    answer_id = request_id if usable else None
    if message.get("jsonrpc") != "2.0":
        return _error(answer_id, INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"')
    if not isinstance(message.get("method"), str):
        return _error(answer_id, INVALID_REQUEST, 'Invalid Request: "method" must be a string')
    if "id" in message and not usable:
        return _error(None, INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer')
    if "params" in message and not isinstance(message["params"], dict):
        return _error(answer_id, INVALID_PARAMS, 'Invalid params: "params" must be an object')
    return _error(answer_id, INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message")


def _error(request_id: str | int | None, code: int, text: str) -> mcp_types.JSONRPCError:
    return mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=mcp_types.ErrorData(code=code, message=text))


# --- lone surrogates -------------------------------------------------------------------------------------


class _MarkedLines(io.RawIOBase):
    """The lines of a binary stream, each JSON message's lone surrogates replaced by U+FFFF."""

    def __init__(self, source: BinaryIO) -> None:
        super().__init__()
        self._source = source
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if not self._pending:
            line = self._source.readline()
            if not line:
                return 0
            self._pending = mark_surrogates(line)
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size


def marked_stdin(source: BinaryIO) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BufferedReader(_MarkedLines(source)), encoding="utf-8", errors="replace")


def mark_surrogates(line: bytes) -> bytes:
    """One JSON-RPC line with every lone surrogate (escaped or not) replaced by U+FFFF."""
    if b"\\ud" not in line.lower():
        return line
    try:
        message = json.loads(line)
    except ValueError:
        return line
    marked = _mark(message)
    return line if marked == message else json.dumps(marked, ensure_ascii=False).encode("utf-8") + b"\n"


def _mark(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\uffff", value)
    if isinstance(value, list):
        return [_mark(v) for v in value]
    if isinstance(value, dict):
        return {_mark(k): _mark(v) for k, v in value.items()}
    return value


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

__all__ = ["CheckedLines", "error_for", "mark_surrogates", "marked_stdin", "serve_stdio"]
