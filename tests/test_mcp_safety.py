"""The MCP server answers every malformed JSON-RPC line, and says so when it is reachable by others (issue 24).

F6: the MCP stdio server answers every malformed JSON-RPC line.
The SDK's stdio transport dropped 7 of 22 malformed requests without an answer; two carried a valid id, so the
client waited forever (``{"jsonrpc":"2.0","id":12,"method":"tools/call","params":[1]}``).  Now each line that is
not a JSON-RPC message is answered with a JSON-RPC error: with its id when it has a usable one, else ``null``;
a malformed response is not answered, a valid notification (even one with an ``id`` inside its params) is not
answered, and the server keeps serving.  A real ``narrative mcp`` process over pipes; nothing is timed: each
line is followed by a ping, so a line left unanswered shows as the ping's answer coming first.

F8: ``narrative mcp --transport http --host 0.0.0.0`` listened on every interface, without authentication and
without a word; now it warns on stderr before it starts (as ``narrative serve`` does), and stays quiet on loopback.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CLI = [sys.executable, "-m", "narrative.interfaces.cli"]

#: (the line sent, the id of the answer, the error code)
MALFORMED: list[tuple[str, Any, int]] = [
    ('{"jsonrpc":"2.0","id":12,"method":"tools/call","params":[1]}', 12, -32602),
    ('{"jsonrpc":"2.0","id":"twelve","method":"ping","params":"x"}', "twelve", -32602),
    ('{"jsonrpc":"2.0","id":13,"method":5}', 13, -32600),
    ('{"jsonrpc":"1.0","id":14,"method":"tools/list"}', 14, -32600),
    ('{"id":15,"method":"tools/list"}', 15, -32600),
    ('{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}', None, -32600),
    ('{"jsonrpc":"2.0","id":16.5,"method":"tools/list"}', None, -32600),
    ('{"jsonrpc":"2.0","id":null,"method":"tools/list"}', None, -32600),
    ('{"jsonrpc":"2.0","id":true,"method":"tools/list"}', None, -32600),
    ("{not json", None, -32700),
    ('{"jsonrpc":"2.0","id":17,"method":"tools/list"', None, -32700),
    ("[]", None, -32600),
    ('[{"jsonrpc":"2.0","id":18,"method":"tools/list"}]', None, -32600),
    ('"just a string"', None, -32600),
    ("42", None, -32600),
]


class Pipe:
    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        assert process.stdin is not None and process.stdout is not None
        self.stdin, self.stdout = process.stdin, process.stdout

    def send(self, line: str) -> None:
        self.stdin.write(line.encode() + b"\n")
        self.stdin.flush()

    def answer(self) -> dict[str, Any]:
        line = self.stdout.readline()
        assert line, "the server closed its output"
        reply: dict[str, Any] = json.loads(line)
        return reply


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Pipe]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen(
        [*CLI, "--db", str(tmp_path / "mcp.db"), "--user", "alice", "--embedder", "none", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    pipe = Pipe(process)
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    pipe.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}))
    assert pipe.answer()["id"] == 1
    pipe.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
    yield pipe
    pipe.stdin.close()
    process.wait(timeout=60)
    pipe.stdout.close()


def test_every_malformed_request_gets_a_json_rpc_error(server: Pipe) -> None:
    for number, (line, answer_id, code) in enumerate(MALFORMED):
        server.send(line)
        server.send(f'{{"jsonrpc":"2.0","id":"ping-{number}","method":"ping"}}')  # answered next: a dropped line shows
        reply = server.answer()
        assert reply["jsonrpc"] == "2.0" and reply["id"] == answer_id, line
        assert reply["error"]["code"] == code and reply["error"]["message"], line
        assert "result" not in reply
        assert server.answer() == {"jsonrpc": "2.0", "id": f"ping-{number}", "result": {}}
    server.send('{"jsonrpc":"2.0","id":99,"method":"tools/list"}')  # still serving
    reply = server.answer()
    assert reply["id"] == 99 and reply["result"]["tools"]


def test_responses_blank_lines_and_notifications_get_no_answer(server: Pipe) -> None:
    for line in (
        '{"jsonrpc":"2.0","id":27,"result":{}}',  # a response to nothing: never answered
        '{"jsonrpc":"2.0","id":28,"error":"bad"}',
        "",
        "   ",
        '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1,"id":3}}',
        '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":404}}',
    ):
        server.send(line)
    server.send('{"jsonrpc":"2.0","id":100,"method":"tools/call","params":{"name":"greet","arguments":{}}}')
    reply = server.answer()  # the first line out answers the request, not any of the lines above
    assert reply["id"] == 100 and "result" in reply


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def startup_lines(tmp_path: Path, host: str) -> list[str]:
    """What ``narrative mcp --transport http --host HOST`` says on stderr up to its "server for" line."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    args = [*CLI, "--db", str(tmp_path / "m.db"), "--embedder", "none", "mcp", "--transport", "http"]
    process = subprocess.Popen(
        [*args, "--host", host, "--port", str(free_port())], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env
    )
    assert process.stderr is not None
    lines: list[str] = []
    try:
        while not lines or "narrative MCP server for" not in lines[-1]:
            line = process.stderr.readline().decode()
            assert line, f"the server stopped: {lines}"
            lines.append(line)
    finally:
        process.terminate()
        process.wait()
        process.stderr.close()
    return lines


def test_mcp_over_http_warns_when_it_listens_beyond_loopback(tmp_path: Path) -> None:
    lines = startup_lines(tmp_path, "0.0.0.0")
    warning = "".join(lines[:-1])
    assert "warning: listening on 0.0.0.0" in warning and "no authentication" in warning
    assert not [line for line in startup_lines(tmp_path, "127.0.0.1") if line.startswith("warning")]
