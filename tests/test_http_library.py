"""What users of memory libraries expect from the HTTP API, over a real socket: metadata and filters on lists and
search, batch updates and deletes (by ids and by filter), chat-log import, JSONL/CSV export, unknown query
parameters refused, readable operationIds, CORS off unless configured, and mem0's calls side by side."""

from __future__ import annotations

import csv
import io
import json
import os
import socket
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

import narrative
from conftest import FakeClock
from http_server import Client, LiveServer
from narrative.interfaces.http import create_app

API = "/api/v1"
DATA = Path(__file__).parent / "data"


@pytest.fixture
def alice(db_path: Path, clock: FakeClock) -> Iterator[Client]:
    engine = narrative.Memory(db_path, user="default", embedder="none", clock=clock, env={})
    key = engine.create_api_key(user="alice")
    with LiveServer(create_app(engine)) as server, Client(server.port, key) as client:
        yield client
    engine.close()


def q(filters: object) -> str:
    return urllib.parse.quote(json.dumps(filters))


def test_metadata_and_filters_like_mem0(alice: Client) -> None:
    made = [
        alice.post(f"{API}/memories", {"content": text, "metadata": meta}).json
        for text, meta in (
            ("Water the tomatoes every morning.", {"project": "garden", "priority": 3}),
            ("Basil grows next to the tomatoes.", {"project": "garden", "priority": 1}),
            ("Send the tomato invoice to Lena.", {"project": "work", "priority": 5}),
        )
    ]
    assert made[0]["metadata"] == {"project": "garden", "priority": 3}
    listed = alice.get(f"{API}/memories?filters=" + q({"metadata.project": "garden"})).json["items"]
    assert {m["id"] for m in listed} == {made[0]["id"], made[1]["id"]}
    ranged = {"AND": [{"metadata.priority": {"gte": 2}}, {"NOT": {"metadata.project": "work"}}]}
    found = alice.get(f"{API}/search?q=tomatoes&filters=" + q(ranged)).json["items"]
    assert [h["id"] for h in found] == [made[0]["id"]]
    assert found[0]["metadata"] == {"project": "garden", "priority": 3}  # a hit carries its metadata, as in mem0
    body = alice.post(f"{API}/search", {"query": "tomatoes", "limit": 5, "filters": {"metadata.project": "work"}})
    assert body.status == 200 and [h["id"] for h in body.json["items"]] == [made[2]["id"]]
    bad = alice.get(f"{API}/memories?filters=" + q({"projekt": "garden"}))
    assert bad.status == 422 and bad.json["field"] == "filters" and "no field 'projekt'" in bad.json["message"]
    assert alice.get(f"{API}/memories?filters=%7Bnot").json["error"] == "validation_error"
    edited = alice.patch(f"{API}/memories/{made[1]['id']}", {"metadata": {"project": "kitchen"}}).json
    assert edited["metadata"] == {"project": "kitchen"}
    too_big = alice.post(f"{API}/memories", {"content": "x", "metadata": {"k": "v" * 20_000}})
    assert too_big.status == 422 and too_big.json["field"] == "metadata"


def test_batch_update_and_delete(alice: Client) -> None:
    ids = [alice.post(f"{API}/memories", {"content": f"Note {n}.", "metadata": {"n": n}}).json["id"] for n in range(4)]
    updated = alice.patch(
        f"{API}/memories", {"memories": [{"id": ids[0], "importance": 5}, {"id": ids[1], "content": "Note one."}]}
    )
    assert updated.status == 200 and [m["importance"] for m in updated.json["items"]] == [5, 2]
    refused = alice.patch(
        f"{API}/memories", {"memories": [{"id": ids[2], "importance": 4}, {"id": 999999, "importance": 4}]}
    )
    assert refused.status == 404 and alice.get(f"{API}/memories/{ids[2]}").json["importance"] == 2
    gone = alice.delete(f"{API}/memories?ids={ids[0]},{ids[1]}")
    assert gone.status == 200 and gone.json["deleted"] == ids[:2] and gone.json["result"]["memories"] == 2
    assert alice.delete(f"{API}/memories?ids={ids[2]},999999").status == 404
    by_filter = alice.delete(f"{API}/memories?filters=" + q({"metadata.n": {"gte": 3}}))
    assert by_filter.json["deleted"] == [ids[3]]
    assert [m["id"] for m in alice.get(f"{API}/memories").json["items"]] == [ids[2]]
    neither = alice.delete(f"{API}/memories")  # neither ids nor filters (or both): nothing is deleted
    assert neither.status == 422 and neither.json["field"] == "ids" and "one of the two" in neither.json["message"]
    assert alice.delete(f"{API}/memories?ids={ids[2]}&filters=" + q({"stream": "fact"})).json["field"] == "ids"
    assert alice.delete(f"{API}/memories?ids=1,x").json["field"] == "ids"


def test_an_edit_that_changes_nothing_is_refused_as_the_batch_refuses_it(alice: Client) -> None:
    """PATCH /memories/{id} with {} or only nulls answered 200 and changed nothing, where the batch route, MCP
    and the CLI refuse "nothing to change"; null means "no change" in both routes."""
    made = alice.post(f"{API}/memories", {"content": "The shed key is under the pot.", "metadata": {"n": 1}}).json
    nothing: list[dict[str, object]] = [{}, {"content": None}, {"importance": None, "entities_to_remove": []}]
    for body in nothing:
        refused = alice.patch(f"{API}/memories/{made['id']}", body)
        assert refused.status == 422 and refused.json["error"] == "validation_error", (body, refused)
        assert refused.json["message"].startswith(f"nothing to change for memory {made['id']}: give content"), body
        assert refused.json["field"] == "body"
    for item in ({"id": made["id"]}, {"id": made["id"], "content": None}):
        batch = alice.patch(f"{API}/memories", {"memories": [item]})
        assert batch.status == 422 and batch.json["error"] == "validation_error", (item, batch)
        assert batch.json["message"] == f"updates[0]: nothing to change for memory {made['id']}"
    assert [e["kind"] for e in alice.get(f"{API}/memories/{made['id']}/history").json["events"]] == ["created"]
    cleared = alice.patch(f"{API}/memories/{made['id']}", {"content": None, "metadata": {}})  # {} is a change
    assert cleared.status == 200 and cleared.json["metadata"] == {} and cleared.json["content"] == made["content"]


def test_chat_import_and_row_exports(alice: Client) -> None:
    log = (DATA / "chatgpt-conversations.json").read_bytes()
    done = alice.call("POST", f"{API}/import/chat", raw=log)
    assert done.status == 200, done
    assert done.json["format"] == "chatgpt" and done.json["conversations"] == 2 and done.json["skipped"] == 2
    lines = b'{"content": "ok"}\n{"content": "x", "role": "narrator"}\n'
    bad = alice.call(
        "POST", f"{API}/import/chat?format=jsonl", raw=lines, headers={"Content-Type": "application/x-ndjson"}
    )
    assert bad.status == 422 and bad.json["message"].startswith("line 2: role must be one of")
    rows = alice.get(f"{API}/export?format=jsonl")
    assert rows.headers["content-type"].startswith("application/x-ndjson")
    first = json.loads(rows.raw.decode().splitlines()[0])
    assert first["id"] and first["metadata"] == {"imported_from": "chatgpt"}
    table = alice.get(f"{API}/export?format=csv")
    assert table.headers["content-type"].startswith("text/csv")
    assert next(iter(csv.DictReader(io.StringIO(table.raw.decode()))))["id"] == str(first["id"])


def test_row_exports_carry_a_long_message_whole(alice: Client) -> None:
    end = "The last line says: the heron key is under the red bucket."
    reply = "\n\n".join(["The garden plan covers beds, soil, watering and the order of planting. " * 4] * 17) + end
    lines = [{"content": "How should I plan the garden?"}, {"content": reply, "role": "assistant"}]
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    assert alice.call("POST", f"{API}/import/chat?format=jsonl", raw=body).status == 200
    rows = [json.loads(line) for line in alice.get(f"{API}/export?format=jsonl").raw.decode().splitlines()]
    [long] = [r for r in rows if "…" in r["content"]]  # the memory quotes the reply's first passage
    assert end not in long["content"] and long["text"] == f"How should I plan the garden?\n{reply}"
    table = list(csv.DictReader(io.StringIO(alice.get(f"{API}/export?format=csv").raw.decode())))
    assert [r["text"] for r in table if r["id"] == str(long["id"])] == [long["text"]]


def test_unknown_query_parameters_are_refused(alice: Client) -> None:
    reply = alice.get(f"{API}/memories?storyline=99999")
    assert reply.status == 422 and reply.json["field"] == "storyline"
    assert "unknown query parameter" in reply.json["message"] and "storyline_id" in reply.json["message"]
    assert alice.get(f"{API}/search?q=x&kk=3").json["fields"] == ["kk"]
    assert alice.get(f"{API}/memories?limit=5&offset=0&stream=fact").status == 200
    assert alice.get(f"{API}/search?q=tomatoes&limit=3&k=3").status == 200
    assert alice.get(f"{API}/search?q=tomatoes&limit=3&k=4").json["field"] == "limit"


def test_a_method_the_path_does_not_take_is_405_naming_those_it_does(alice: Client) -> None:
    reply = alice.call("PUT", f"{API}/memories", body={"memories": []})
    assert reply.status == 405 and reply.json["error"] == "method_not_allowed"
    assert reply.json["message"] == "PUT is not allowed on /api/v1/memories; it takes GET, POST, PATCH, DELETE"
    assert reply.headers["allow"] == "GET, POST, PATCH, DELETE"
    assert alice.call("POST", f"{API}/memories/1/history").headers["allow"] == "GET"


def test_operation_ids_are_readable_and_unique(alice: Client) -> None:
    spec = alice.get("/openapi.json").json
    ids = [op["operationId"] for path in spec["paths"].values() for op in path.values()]
    assert len(ids) == len(set(ids))
    assert {"list_memories", "search", "search_body", "update_memories", "delete_memories", "import_chat"} <= set(ids)
    assert all(i.isidentifier() and "api_v1" not in i for i in ids)


def test_the_mem0_table_names_routes_calls_and_tools_that_exist(alice: Client) -> None:
    """docs/http.md, "Coming from mem0": every route is in the API, every call is a method of Memory, every tool
    is served by `narrative mcp`."""
    import re

    from narrative.interfaces.mcp import TOOLSETS

    docs = (Path(__file__).parent.parent / "docs" / "http.md").read_text("utf-8")
    table = docs.split("## Coming from mem0", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| `")]
    assert len(rows) >= 12
    spec = {re.sub(r"\{\w+\}", "{}", path): ops for path, ops in alice.get("/openapi.json").json["paths"].items()}
    tools = {name for toolset in TOOLSETS for name in dir(toolset) if not name.startswith("_")}
    for _, python, http, mcp in rows:
        for method, path in re.findall(r"`(GET|POST|PATCH|DELETE) (/[^`?]*)", http):
            assert method.lower() in spec[API + re.sub(r"\{\w+\}", "{}", path)], (method, path)
        for call in re.findall(r"mem\.(\w+)\(", python):
            assert callable(getattr(narrative.Memory, call)), call
        for tool in set(re.findall(r"`(\w+)`", mcp)) - {"filters"}:  # tools and their argument
            assert tool in tools, tool


def test_cors_is_off_by_default_and_configurable(db_path: Path, clock: FakeClock) -> None:
    engine = narrative.Memory(db_path, user="default", embedder="none", clock=clock, env={})
    key = engine.create_api_key(user="alice")
    preflight = {
        "Origin": "https://app.example",
        "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "authorization",
    }
    with LiveServer(create_app(engine)) as server, Client(server.port, key) as client:
        plain = client.call("GET", f"{API}/me", headers={"Origin": "https://app.example"})
        assert plain.status == 200 and "access-control-allow-origin" not in plain.headers
        assert "access-control-allow-origin" not in client.call("OPTIONS", f"{API}/me", headers=preflight).headers
    with LiveServer(create_app(engine, cors_origins=["https://app.example"])) as server, Client(server.port, key) as c:
        allowed = c.call("OPTIONS", f"{API}/me", headers=preflight)
        assert allowed.status == 200 and allowed.headers["access-control-allow-origin"] == "https://app.example"
        other = c.call("GET", f"{API}/me", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in other.headers
    engine.close()


def _serve(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NARRATIVE_")}
    env["PYTHONPATH"] = str(Path(narrative.__file__).parent.parent)
    command = [sys.executable, "-m", "narrative.interfaces.cli", "--db", str(tmp_path / "s.db"), "--embedder",
               "none", "serve", *args]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)


def test_serve_on_a_taken_port_fails_before_it_says_anything(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _serve(tmp_path, "--port", str(port), "--open-user", "maya")
    assert done.returncode == 1
    assert done.stdout == "" and f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "user 'default'" not in done.stderr and "Traceback" not in done.stderr
