"""One memory fetched by id carries the whole text it holds: ``GET /memories/{id}`` over HTTP and the MCP tool
``get_memory`` answer with ``text`` beside ``content``.  A memory of a long message quotes only the message's
first passage in ``content``; an agent or app that fetches that memory must still be able to read all of it.
Both run the real local model, on SQLite files, through a real socket and the official MCP client."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal

import narrative
from conftest import LONG_END as END
from conftest import long_reply
from http_server import Client, LiveServer
from narrative.interfaces.http import create_app
from test_http_contract import Contract
from test_mcp import Driver, stdio_session

API = "/api/v1"
CLI = [sys.executable, "-m", "narrative.interfaces.cli"]
QUESTION = "How should I plan the garden?"


def whole_exchange() -> str:
    """What the reply's memory stands for: the question it answers, a new line, then the reply whole."""
    return f"{QUESTION}\nAria: {long_reply()}"


def test_http_get_memory_gives_the_whole_text(tmp_path: Path, minilm: Any) -> None:
    engine = narrative.Memory(tmp_path / "http.db", user="default", embedder=minilm, env={})
    key = engine.create_api_key(user="alice")
    with LiveServer(create_app(engine)) as server, Client(server.port, key) as alice:
        assert alice.post(f"{API}/messages", {"content": QUESTION}).status == 201
        said = alice.post(f"{API}/messages", {"content": long_reply(), "role": "assistant", "speaker": "Aria"})
        memory_id = said.json["memory_ids"][0]
        note = alice.post(f"{API}/memories", {"content": "Decided: the blue tiles.", "stream": "decision"}).json
        reply = alice.get(f"{API}/memories/{memory_id}")
        short = alice.get(f"{API}/memories/{note['id']}").json
        spec = alice.get("/openapi.json").json
        markdown = alice.get(f"{API}/export?format=markdown").raw.decode("utf-8")
    stored = engine.get_memory(memory_id, user="alice")
    engine.close()
    assert reply.status == 200
    body = reply.json
    assert body["text"] == whole_exchange() and body["text"].endswith(END)
    assert body["content"] == stored.content and END not in body["content"]  # the excerpt, as before
    assert body["content"].endswith(" …") and body["id"] == memory_id
    assert short["text"] == short["content"] == "Decided: the blue tiles."  # nothing cut: the same text
    # the schema says so: `text` is declared and required, and the reply matches the schema
    described = Contract(spec).schema("GET", f"{API}/memories/{memory_id}", 200)
    declared = spec["components"]["schemas"][described["$ref"].rsplit("/", 1)[1]]
    assert "text" in declared["properties"] and "text" in declared["required"]
    assert "content" in declared["properties"]
    Contract(spec).check("GET", f"{API}/memories/{memory_id}", reply)
    # the Markdown export needs no `text`: its transcripts give every message whole, the long reply too (its later
    # lines indented into its list item: without that indentation, the item is the reply word for word)
    assert "- **Aria** " in markdown
    assert long_reply() in "\n".join(line.removeprefix("  ") for line in markdown.splitlines())


@pytest.fixture(scope="module")
def mcp_db(tmp_path_factory: pytest.TempPathFactory, minilm: Any) -> tuple[Path, int, str]:
    """A file holding a question and a long reply, written with the real local model; the reply's memory id and
    its stored text (the excerpt)."""
    db = tmp_path_factory.mktemp("whole") / "mcp.db"
    with narrative.Memory(db, user="alice", embedder=minilm, env={}) as mem:
        mem.remember(QUESTION)
        made = mem.remember(long_reply(), "assistant", speaker="Aria").memories[0]
    return db, made.id, made.content


@pytest.fixture(scope="module")
def server(mcp_db: tuple[Path, int, str]) -> Iterator[Driver]:
    """A stdio MCP server on that file, with the default embedder (the real local model)."""
    db = mcp_db[0]
    args = [*CLI, "--db", str(db), "--user", "alice", "mcp"]
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(stdio_session(args, db.with_name("stdio.log"))) as session,
    ):
        driver = Driver(portal, session)
        driver.tools()  # the client checks each result against the output schema it has listed
        yield driver


def test_mcp_get_memory_gives_the_whole_text(server: Driver, mcp_db: tuple[Path, int, str]) -> None:
    _, memory_id, content = mcp_db
    memory = server.ok("get_memory", memory_id=memory_id)["memory"]
    assert memory["text"] == whole_exchange() and memory["text"].endswith(END)
    assert memory["content"] == content and END not in memory["content"]  # the excerpt, as before
    note = server.ok("add_memory", content="Decided: the blue tiles.", stream="decision")["memory"]
    assert server.ok("get_memory", memory_id=note["id"])["memory"]["text"] == "Decided: the blue tiles."
    schema = next(t for t in server.tools() if t.name == "get_memory").output_schema
    assert schema is not None
    memory_schema = schema["$defs"][schema["properties"]["memory"]["$ref"].rsplit("/", 1)[1]]
    assert "text" in memory_schema["properties"] and "text" in memory_schema["required"]
    assert "user_id" not in memory_schema["properties"]
