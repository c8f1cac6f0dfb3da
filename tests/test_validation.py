"""One validation layer for every entry point (issue 12): Python, CLI, HTTP and MCP refuse bad input
with a NarrativeError, a 4xx, a tool error result, or an ``error:`` line and exit code 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel
from pydantic import ValidationError as PydanticError

import narrative
from conftest import pg_server
from http_server import Client, LiveServer
from narrative.errors import NotFound, ValidationError
from narrative.interfaces import http_models
from narrative.interfaces.http import create_app
from narrative.interfaces.mcp import build_tools, mark_surrogates

BIG = 2**63
CLI = [sys.executable, "-m", "narrative.interfaces.cli"]


# --- Python --------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [True, False, 0, -1, BIG, 2**64, "1", 1.0])
def test_ids_are_integers_from_1_to_2_63_minus_1(mem: narrative.Memory, bad: Any) -> None:
    with pytest.raises(ValidationError, match="memory_id"):
        mem.get_memory(bad)
    with pytest.raises(NotFound):
        mem.get_memory(BIG - 1)  # the largest id is an id: simply not found


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.add_memory("lone \ud800 surrogate"),
        lambda m: m.remember("fine", speaker="\udcff"),
        lambda m: m.search("\ud83d"),
        lambda m: m.context("query \udfff"),
        lambda m: m.add_message("text", meta={"note": "\ud800"}),
        lambda m: m.remember("fine", speaker="s" * 5_000_000),
        lambda m: m.add_memory("x" * 100_001),
        lambda m: m.add_memory("year one", event_at=datetime(1, 1, 1)),
        lambda m: m.search("garden", since=datetime(9999, 1, 1)),
        lambda m: m.narrative_update("summary", [1, BIG]),
        lambda m: m.add_memory("fine", importance=2**70),
        lambda m: m.revoke_api_key(True),
    ],
)
def test_bad_input_is_a_validation_error(mem: narrative.Memory, call: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        call(mem)
    str(caught.value).encode("utf-8")  # the message itself is always valid text


def test_a_non_database_file_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(os.urandom(4096))
    before = path.read_bytes()
    with pytest.raises(narrative.StoreError, match="not a narrative database"):
        narrative.Memory(path, user="alice", embedder="none", env={})
    assert path.read_bytes() == before


# --- CLI -----------------------------------------------------------------------------------------


def run_cli(*args: str | bytes, db: Path) -> subprocess.CompletedProcess[bytes]:
    argv: list[str | bytes] = [*CLI, "--db", str(db), "--user", "alice", "--embedder", "none", *args]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(argv, capture_output=True, timeout=120, env=env)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("delete", "memory", str(BIG), "--yes"), "memory_id must be an integer id"),
        (("chain", str(2**64)), "memory_id must be an integer id"),
        (("add", "memory", b"not utf-8 \xff\xfe"), "not valid Unicode"),  # surrogateescape: lone surrogates
        (("keys", "revoke", "0"), "key_id must be an integer id"),
    ],
)
def test_the_cli_prints_an_error_line_and_exits_1(tmp_path: Path, args: tuple[str | bytes, ...], says: str) -> None:
    db = tmp_path / "cli.db"
    assert run_cli("add", "memory", "the market opens at nine", db=db).returncode == 0
    done = run_cli(*args, db=db)
    assert done.returncode == 1, done
    error = done.stderr.decode(errors="replace")
    assert error.startswith("error: ") and says in error and "Traceback" not in error, error


def test_the_cli_refuses_a_non_database_file(tmp_path: Path) -> None:
    path = tmp_path / "photo.db"
    path.write_bytes(os.urandom(8192))
    done = run_cli("search", "garden", db=path)
    assert done.returncode == 1 and done.stderr.decode().startswith("error: ") and b"Traceback" not in done.stderr


# --- HTTP ----------------------------------------------------------------------------------------


@pytest.fixture
def served(mem: narrative.Memory) -> Iterator[tuple[LiveServer, dict[str, str]]]:
    keys = {user: mem.create_api_key(user=user, label=user) for user in ("alice", "bob")}
    with LiveServer(create_app(mem, web=False)) as server:
        yield server, keys


def test_http_refuses_bad_input_with_422(served: tuple[LiveServer, dict[str, str]]) -> None:
    server, keys = served
    with Client(server.port, keys["alice"]) as alice:
        for path in (f"/api/v1/memories/{BIG}", f"/api/v1/memories/{2**64}/chain", f"/api/v1/uses/{BIG}"):
            reply = alice.get(path)
            assert reply.status == 422 and reply.json["error"] == "validation_error", reply
        raw = b'{"content": "lone \\ud800 surrogate"}'
        reply = alice.call("POST", "/api/v1/memories", raw=raw)
        assert reply.status == 422 and reply.json["field"] == "content", reply
        reply = alice.call("POST", "/api/v1/messages", raw=b'{"content": "hi", "meta": {"x": "\\udfff"}}')
        assert 400 <= reply.status < 500, reply


def test_keys_list_and_revoke_over_http(served: tuple[LiveServer, dict[str, str]], mem: narrative.Memory) -> None:
    server, keys = served
    spare = mem.create_api_key(user="alice", label="spare")
    with Client(server.port, keys["alice"]) as alice, Client(server.port, keys["bob"]) as bob:
        listed = alice.get("/api/v1/keys").json["items"]
        assert [k["label"] for k in listed] == ["alice", "spare"]
        assert not any(keys["alice"] in json.dumps(k) or spare in json.dumps(k) for k in listed)
        spare_id = listed[1]["id"]
        assert bob.delete(f"/api/v1/keys/{spare_id}").status == 404  # not bob's key
        assert alice.delete(f"/api/v1/keys/{spare_id}").json == {"user": "alice", "revoked": spare_id}
        with Client(server.port, spare) as revoked:
            assert revoked.get("/api/v1/me").status == 401
        assert alice.get("/api/v1/me").status == 200  # the other key and the memory stay


# --- MCP -----------------------------------------------------------------------------------------


def test_mcp_lines_with_lone_surrogates_are_marked() -> None:
    line = b'{"jsonrpc":"2.0","id":2,"params":{"arguments":{"text":"hi \\ud800"}}}\n'
    marked = json.loads(mark_surrogates(line))
    assert marked["params"]["arguments"]["text"] == "hi \uffff"
    pair = b'{"text":"\\ud83d\\ude00"}\n'  # a valid surrogate pair is an emoji: left alone
    assert mark_surrogates(pair) == pair


def test_the_mcp_stdio_server_answers_requests_with_bad_text(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen(
        [*CLI, "--db", str(tmp_path / "mcp.db"), "--user", "alice", "--embedder", "none", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None

    def ask(message: dict[str, Any]) -> dict[str, Any] | None:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(message).encode() + b"\n")
        process.stdin.flush()
        return json.loads(process.stdout.readline()) if "id" in message else None

    try:
        ask(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
        )
        ask({"jsonrpc": "2.0", "method": "notifications/initialized"})
        calls = [
            ("remember", {"text": "hi \ud800 there"}),
            ("recall", {"query": "\udcff"}),
            ("get_memory_influence_chain", {"memory_id": 2**64}),
        ]
        for number, (tool, arguments) in enumerate(calls, start=2):
            reply = ask(
                {
                    "jsonrpc": "2.0",
                    "id": number,
                    "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments},
                }
            )
            assert reply is not None and reply["id"] == number
            assert reply["result"]["isError"] and "ValidationError" in reply["result"]["content"][0]["text"]
    finally:
        process.stdin.close()
        process.wait(timeout=30)
        process.stdout.close()


# --- true and false are not ids or numbers, on any interface -----------------------------------------------


def models_within(model: type[BaseModel]) -> Iterator[type[BaseModel]]:
    """The model and every model its fields hold (a split's parts, a batch's updates)."""
    yield model
    pending = [field.annotation for field in model.model_fields.values()]
    while pending:
        hint = pending.pop()
        if isinstance(hint, type) and issubclass(hint, BaseModel):
            yield from models_within(hint)
        else:
            pending.extend(typing.get_args(hint))


def numeric_fields(model: type[BaseModel]) -> Iterator[tuple[str, Any, tuple[Any, ...]]]:
    """(field, a boolean where the field takes a number, where pydantic reports it) for every integer or
    number the model's JSON schema declares, alone or in a list."""

    def kinds(schema: dict[str, Any]) -> set[str]:
        return {schema.get("type", "")} | {kind for one in schema.get("anyOf", []) for kind in kinds(one)}

    def items(schema: dict[str, Any]) -> list[dict[str, Any]]:
        return [schema.get("items", {}), *(one.get("items", {}) for one in schema.get("anyOf", []))]

    for name, schema in model.model_json_schema(by_alias=True).get("properties", {}).items():
        if kinds(schema) & {"integer", "number"}:
            yield name, True, (name,)
        elif any(kinds(item) & {"integer", "number"} for item in items(schema)):
            yield name, [False], (name, 0)


def refuses_booleans(model: type[BaseModel]) -> list[str]:
    """The integer and number fields of ``model`` (and of the models it holds) that take a boolean."""
    taken = []
    for each in models_within(model):
        for name, value, where in numeric_fields(each):
            try:
                each.model_validate({name: value})
            except PydanticError as error:
                said = [e["type"] for e in error.errors() if e["loc"][: len(where)] == where]  # Int | str adds "int"
                if {"int_type", "float_type"} & set(said):  # refused as not a number, not for its range
                    continue
            taken.append(f"{each.__name__}.{name}")
    return taken


def test_no_http_body_takes_a_boolean_for_an_id_or_a_number() -> None:
    """docs/reliability.md: True/False are not ids.  Pydantic's lax mode read ``true`` as 1, so
    ``{"message_ids": [true], "conversation_id": true}`` linked message 1 and conversation 1."""
    bodies, pending = [], [http_models.Body]
    while pending:
        model = pending.pop()
        bodies.append(model)
        pending.extend(model.__subclasses__())
    assert len(bodies) > 25  # http_agenda's bodies too
    checked = [name for body in bodies for name, _, _ in numeric_fields(body)]
    assert {"message_ids", "conversation_id", "importance", "min_score", "earlier_id", "entity_ids"} <= set(checked)
    assert [taken for body in bodies for taken in refuses_booleans(body)] == []


def test_no_mcp_tool_takes_a_boolean_for_an_id_or_a_number(mem: narrative.Memory) -> None:
    """``get_memory {"memory_id": true}`` returned memory 1 and ``add_memory {"importance": true}`` stored 1."""
    _, checks = build_tools(mem)
    checked = {f"{tool}.{name}" for tool, check in checks.items() for name, _, _ in numeric_fields(check.model)}
    assert {"get_memory.memory_id", "add_memory.importance", "search_memories.min_score"} <= checked
    assert "delete_memories.memory_ids" in checked  # a list of ids: each item is checked
    assert [taken for check in checks.values() for taken in refuses_booleans(check.model)] == []
    with pytest.raises(ToolError) as refused:
        checks["get_memory"].check({"memory_id": True})
    assert str(refused.value) == "get_memory: memory_id must be a valid integer (got true)."
    assert checks["search_memories"].check({"query": "x", "min_score": 1})["min_score"] == 1  # a number still


# --- one rule for NUL on both stores (issue 24, item 12) -------------------------------------------


def test_nul_is_refused_alike_by_both_stores(mem: narrative.Memory) -> None:
    """PostgreSQL cannot store U+0000 and SQLite could: an SQLite export holding one did not import into
    PostgreSQL.  Now every entry point refuses it, on both stores, naming the field."""
    for call, field in (
        (lambda: mem.add_memory("the code is 12\x0034"), "content"),
        (lambda: mem.remember("hello\x00"), "content"),
        (lambda: mem.add_message("hi", speaker="Ana\x00"), "speaker"),
        (lambda: mem.add_message("hi", meta={"note": "a\x00b"}), "meta.note"),
        (lambda: mem.create_storyline("Garden\x00"), "name"),
    ):
        with pytest.raises(ValidationError, match="NUL") as refused:
            call()
        assert refused.value.field == field
    assert mem.list_memories() == []


def test_an_export_moves_between_the_stores_and_nul_is_refused_on_import(tmp_path: Path) -> None:
    """An SQLite export imports into PostgreSQL and back; a NUL smuggled into an export is refused by both."""
    server = pg_server()
    url = server.fresh_schema()
    try:
        with narrative.Memory(tmp_path / "a.db", user="ana", embedder="none", env={}) as lite:
            lite.remember("We planted the tomatoes — 🍅 — beside the shed.", speaker="Ana")
            lite.add_memory("Ünïcödé, tabs\tand\nnew lines survive the trip")
            exported = lite.export("json")
            with narrative.Memory(url, user="ana", embedder="none", env={}) as pg:
                pg.import_data(exported)
                back = pg.export("json")
                assert json.loads(back)["counts"] == json.loads(exported)["counts"]
            lite.import_data(back, user="ana-again")
            document = json.loads(exported)
            document["tables"]["messages"][0]["content"] = "smuggled \x00 byte"
            with narrative.Memory(url, user="ana", embedder="none", env={}) as pg:
                for target in (lite, pg):
                    with pytest.raises(ValidationError, match="NUL"):
                        target.import_data(json.dumps(document), user="mallory")
    finally:
        server.release(url)
