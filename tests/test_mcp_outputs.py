"""Every field a read tool's result carries is named in the tool's published output schema.

The server and the SDK's client validate each result against that schema, but a record allows more keys, so a
field the engine adds passed unseen and a client generated from ``outputSchema`` never had it (search hits lacked
``shown_message_ids``, ``also``, ``narrative_id``, ``message_ids`` and ``created_at``).  Driven by the official
client over stdio, on the bundled demo embedded with the real MiniLM model, as ``test_mcp.py`` does."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal

from conftest import DemoBuilder, copy_db
from test_mcp import Driver, stdio_session

CLI = [sys.executable, "-m", "narrative.interfaces.cli"]

#: Fields whose keys are data, not field names: the caller's metadata, a binding's payload, counts by kind, a
#: use's meta, a prompt's variables, an item's data, a hit's ``why`` (its keys depend on how it was found).
MAPS = {"metadata", "payload", "counts", "by_kind", "by_origin", "meta", "variables", "data", "detail",
        "why"}  # fmt: skip


def undeclared(value: Any, schema: dict[str, Any], defs: dict[str, Any], path: str) -> list[str]:
    """Every key of ``value`` (recursively into objects and lists of objects) that ``schema`` does not name."""
    while "$ref" in schema or ("allOf" in schema and len(schema["allOf"]) == 1):
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]] if "$ref" in schema else schema["allOf"][0]
    if "anyOf" in schema:  # the option that names the most of it (a nullable record, a union of details)
        options = [undeclared(value, s, defs, path) for s in schema["anyOf"] if s.get("type") != "null"]
        return min(options, key=len)
    if isinstance(value, list):
        return [miss for item in value for miss in undeclared(item, schema.get("items", {}), defs, path + "[]")]
    if not isinstance(value, dict):
        return []
    named = schema.get("properties")
    if not named:
        field = path.rsplit(".", 1)[-1]
        return [] if field in MAPS else [f"{path}: an object whose schema names no field ({sorted(value)})"]
    missing = [f"{path}.{key}" for key in value if key not in named]
    return missing + [
        m for key, v in value.items() if key in named for m in undeclared(v, named[key], defs, path + "." + key)
    ]


@pytest.fixture(scope="module")
def server(build_demo: DemoBuilder, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    """One stdio server on a copy of the demo for alice (real MiniLM model, real clock)."""
    db = copy_db(build_demo(user="alice", loaded_at=None), tmp_path_factory.mktemp("mcp-outputs") / "demo.db")
    args = [*CLI, "--db", str(db), "--user", "alice", "mcp"]
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(stdio_session(args, db.with_name("stdio.log"))) as session,
    ):
        yield Driver(portal, session)


def test_every_field_a_read_tool_answers_with_is_declared(server: Driver) -> None:
    schemas = {t.name: t.output_schema for t in server.tools()}
    found: dict[str, dict[str, Any]] = {}

    def check(tool: str, **arguments: Any) -> dict[str, Any]:
        result = server.ok(tool, **arguments)
        schema = schemas[tool]
        assert schema is not None, tool
        missing = undeclared(result, schema, schema.get("$defs", {}), tool)
        assert not missing, f"{tool} answers with fields its outputSchema does not name: {missing}"
        found[tool] = result
        return result

    hits = check("search_memories", query="SQLite offline garden app")["items"]
    recalled = check("recall", query="which database did we choose", limit=5)["items"]
    assert hits and recalled and any(h["chain"]["linked"] for h in check("recall", query="SQLite", limit=10)["items"])
    memory_id = hits[0]["id"]
    check("get_memory", memory_id=memory_id)
    check("list_memories", limit=200)
    check("get_your_story")
    check("get_open_threads")
    check("list_storylines")
    link = check("narrative_search")["narratives"][0]["id"]
    check("walk_narrative", narrative_id=link)
    check("get_memory_history", memory_id=memory_id)
    check("get_active_conversation")
    check("get_conversation_archive", conversation_id=1)
    check("list_bindings")
    assert check("get_stale_goals")["goals"]
    due = check("get_decisions_to_review", limit=10)["decisions"]
    assert check("get_decision_chain", memory_id=due[0]["memory_id"])["later"]
    sources = check("get_popular_sources", days=0)["sources"]
    assert check("open_linked", memory_id=sources[0]["memory_ids"][0])["linked"]
    reasoning = check("get_reasoning_context", query="which database for the garden app")
    assert reasoning["memories"] and reasoning["use_id"]
    assert check("explain_classification", classification_id=reasoning["use_id"])["memories"]
    assert check("get_memory_influence_chain", memory_id=reasoning["memories"][0]["memory_id"])["uses"]
    described = schemas["search_memories"]["$defs"]["Hit"]["properties"]  # type: ignore[index]
    assert all(described[n].get("description") for n in ("shown_message_ids", "also", "narrative_id", "created_at"))
