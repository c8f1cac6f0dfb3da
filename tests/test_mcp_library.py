"""What users of memory libraries expect from the MCP server, through the official SDK client over stdio: the
core tool set (add, search, get, list, update, delete, history) with metadata and filters, typed output schemas
the client checks every result against, resources and prompts, one name for a count (``limit``), and engine
errors as the engine says them (no "Error executing tool" prefix)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

import narrative
from test_mcp import Driver, stdio_session

pytestmark = pytest.mark.timeout(300)

CLI = [sys.executable, "-m", "narrative.interfaces.cli"]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server's file; what the server writes to stderr goes to ``stdio.log`` beside it."""
    return tmp_path_factory.mktemp("mcp-lib") / "lib.db"


@pytest.fixture(scope="module")
def server(db: Path) -> Iterator[Driver]:
    """A keyword-only server (no model to load) over a file holding one closed and one waiting conversation."""
    with narrative.Memory(db, user="alice", embedder="none", env={}) as mem:
        mem.remember("We decided to keep the garden app offline because the plots have no signal.")
        mem.close_conversation()
        mem.confirm_memory()
        mem.remember("Sam will send the bed measurements on Friday.")
        mem.close_conversation()
    args = [*CLI, "--db", str(db), "--user", "alice", "--embedder", "none", "mcp"]
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(stdio_session(args, db.with_name("stdio.log"))) as session,
    ):
        driver = Driver(portal, session)
        driver.tools()  # the client caches the output schemas it checks results against
        yield driver


def test_the_core_tool_set(server: Driver) -> None:
    made = server.ok("add_memory", content="The watering can is in the shed.", metadata={"place": "shed", "n": 1})
    memory = made["memory"]
    assert memory["metadata"] == {"n": 1, "place": "shed"} and memory["stream"] == "fact"
    assert server.ok("get_memory", memory_id=memory["id"])["memory"]["content"] == "The watering can is in the shed."
    listed = server.ok("list_memories", filters={"metadata.place": "shed"})
    assert [m["id"] for m in listed["items"]] == [memory["id"]] and listed["limit"] == 20
    found = server.ok("search_memories", query="watering can", filters={"metadata": {"n": {"gte": 1}}})
    assert [h["id"] for h in found["items"]] == [memory["id"]]
    assert server.ok("search_memories", query="watering can", filters={"metadata.place": "kitchen"})["items"] == []
    changed = server.ok("update_memory", memory_id=memory["id"], importance=4, metadata={"place": "garage"})
    assert changed["memory"]["importance"] == 4 and changed["memory"]["metadata"] == {"place": "garage"}
    history = server.ok("get_memory_history", memory_id=memory["id"])
    assert [e["kind"] for e in history["events"]] == ["created", "edited"]
    gone = server.ok("delete_memories", filters={"metadata.place": "garage"})
    assert gone["deleted"] == [memory["id"]] and gone["counts"]["memories"] == 1
    assert server.ok("get_memory_history", memory_id=memory["id"])["deleted"] is True


def test_one_name_for_a_count(server: Driver) -> None:
    assert len(server.ok("recall", query="garden offline", limit=1)["items"]) == 1
    assert len(server.ok("recall", query="garden offline", k=1)["items"]) == 1  # the older name, as an alias
    assert "give limit or k" in server.error("recall", query="garden", limit=1, k=2)


def test_engine_errors_read_as_the_engine_says_them(server: Driver) -> None:
    assert server.error("get_memory", memory_id=999999) == "NotFound: memory 999999 not found"
    said = server.error("list_memories", filters={"projekt": "garden"})
    assert said.startswith("ValidationError: filters.projekt: no field 'projekt'")
    assert (
        server.error("update_memory", memory_id=1)
        == "ValidationError: nothing to change: give content, importance or metadata"
    )
    assert server.error("search_memories", query="x", limit=500).startswith("search_memories: limit must be")
    assert "Error executing tool" not in server.error("delete_memories", memory_ids=[999999])


def test_true_and_false_are_not_ids_or_numbers(server: Driver) -> None:
    """Pydantic's lax mode read ``true`` as 1: memory 1 was returned, importance 1 stored."""
    assert server.error("get_memory", memory_id=True) == "get_memory: memory_id must be a valid integer (got true)."
    said = server.error("add_memory", content="A note.", importance=True)
    assert said == "add_memory: importance must be a valid integer (got true)."
    assert "memory_ids.0 must be a valid integer" in server.error("delete_memories", memory_ids=[False])
    assert "min_score must be a valid number" in server.error("search_memories", query="garden", min_score=True)
    assert server.ok("search_memories", query="garden", min_score=0)["items"] is not None  # an integer is a number


def test_every_result_matches_its_output_schema(server: Driver) -> None:
    tools = {t.name: t for t in server.tools()}
    hit = tools["search_memories"].output_schema
    assert hit is not None and "items" in hit["properties"]
    memory = tools["get_memory"].output_schema
    assert memory is not None and "user_id" not in json.dumps(memory)
    # The client checks each structured result against the published schema (it raises otherwise).
    arguments: dict[str, object]
    for name, arguments in [
        ("greet", {}),
        ("list_storylines", {}),
        ("get_your_story", {}),
        ("get_open_threads", {}),
        ("get_active_conversation", {}),
        ("get_memory_preview", {}),
        ("narrative_search", {}),
    ]:
        server.ok(name, **arguments)


def test_resources(server: Driver) -> None:
    portal, session = server.portal, server.session
    listed = {str(r.uri) for r in portal.call(session.list_resources).resources}
    assert {"narrative://your-story", "narrative://storylines"} <= listed
    templates = {t.uri_template for t in portal.call(session.list_resource_templates).resource_templates}
    assert {"narrative://storylines/{storyline_id}", "narrative://conversations/{conversation_id}"} <= templates

    def read(uri: str) -> dict[str, object]:
        result = portal.call(session.read_resource, uri)
        [content] = result.contents
        assert content.mime_type == "application/json"
        loaded: dict[str, object] = json.loads(content.text)  # type: ignore[union-attr]
        return loaded

    story = read("narrative://your-story")
    assert story["storyline"]["name"] == "Your Story" and "user_id" not in json.dumps(story)  # type: ignore[index]
    storylines = read("narrative://storylines")["storylines"]
    topic = next(s for s in storylines if s["kind"] == "detected")  # type: ignore[attr-defined]
    one = read(f"narrative://storylines/{topic['id']}")
    assert one["storyline"]["id"] == topic["id"] and one["memories"]  # type: ignore[index]
    talk = read("narrative://conversations/1")
    assert talk["messages"][0]["content"].startswith("We decided to keep the garden app offline")  # type: ignore[index]
    with pytest.raises(Exception, match="NotFound"):
        read("narrative://conversations/999")


def test_prompts(server: Driver) -> None:
    portal, session = server.portal, server.session
    names = {p.name for p in portal.call(session.list_prompts).prompts}
    assert names == {"greeting", "close_review"}
    greeting = portal.call(session.get_prompt, "greeting", {})
    text = greeting.messages[0].content.text  # type: ignore[union-attr]
    assert "where we left off" in text and "Sam" in text
    review = portal.call(session.get_prompt, "close_review", {})
    said = review.messages[0].content.text  # type: ignore[union-attr]
    assert "Conversation 2 is closing" in said and "confirm_memory" in said and "Sam" in said


def test_a_prompt_that_cannot_be_given_says_why_without_a_traceback(server: Driver, db: Path) -> None:
    """close_review with an unknown conversation answered a bare "Error rendering prompt close_review" (code 0)
    and the server printed a traceback; now the engine's reason comes back, as the resource and the tool say it."""
    portal, session = server.portal, server.session
    log = db.with_name("stdio.log")
    before = log.stat().st_size
    refusals = [
        ({"conversation_id": "99"}, "NotFound: conversation 99 not found"),
        ({"conversation_id": "abc"}, "ValidationError: conversation_id must be an id (an integer from 1), got 'abc'"),
    ]
    for arguments, said in refusals:
        with pytest.raises(MCPError) as refused:
            portal.call(session.get_prompt, "close_review", arguments)
        assert (refused.value.code, refused.value.message) == (INVALID_PARAMS, said)
    with pytest.raises(MCPError, match="NotFound: conversation 99 not found"):
        portal.call(session.read_resource, "narrative://conversations/99")  # the same words as the resource
    still = portal.call(session.get_prompt, "close_review", {})  # and the server keeps serving
    assert "Conversation 2 is closing" in still.messages[0].content.text  # type: ignore[union-attr]
    with log.open("rb") as written:
        written.seek(before)
        assert b"Traceback" not in written.read()


def test_the_error_texts_in_the_docs_are_what_clients_receive(server: Driver) -> None:
    docs = (Path(__file__).parent.parent / "docs" / "mcp.md").read_text("utf-8")
    received = [
        server.error("get_memory", memory_id=999),
        server.error("search_memories", query="x", limit=500),
        server.error("recall"),
        server.error("search_memories", query="x", act=3),
        server.error("add_memory", content=" "),
    ]
    for said in received:
        assert f"`{said}`" in docs, said
    assert all("Error executing tool" not in said for said in received)
