"""The HTTP API's contract: /openapi.json describes what the live server answers, /docs is offline, and the
additions of issue 16 (health, a batch of messages, search filters and min_score, no recorded use unless
asked, a memory's history, plain messages for malformed JSON, a missing content type, a key without Bearer).

Every reply made here is validated against the schema /openapi.json gives for its route and status.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from jsonschema.validators import Draft202012Validator

import narrative
from conftest import FakeClock
from http_server import Client, LiveServer, Reply
from narrative.interfaces.http import create_app
from narrative.model import DecisionDetails, ResearchDetails
from test_http import World, build_user

API = "/api/v1"


class Contract:
    """The live /openapi.json, and a check of one reply against the route's schema for its status."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.routes = [(re.compile("^" + re.sub(r"\{[^}]+\}", r"[^/]+", path) + "$"), path) for path in spec["paths"]]
        self.checked: set[tuple[str, str, int]] = set()

    def schema(self, method: str, path: str, status: int) -> dict[str, Any]:
        bare = path.split("?")[0]
        matches = [template for pattern, template in self.routes if pattern.match(bare)]
        assert matches, f"{bare} is not in /openapi.json"
        template = min(matches, key=lambda t: t.count("{"))  # /narratives/latest before /narratives/{id}
        operation = self.spec["paths"][template][method.lower()]
        described = operation["responses"].get(str(status))
        assert described is not None, f"{method} {template} answered {status}, not in the contract"
        self.checked.add((method, template, status))
        content = described.get("content", {})
        if "application/json" not in content:
            return {}
        return dict(content["application/json"]["schema"])

    def check(self, method: str, path: str, reply: Reply) -> Any:
        schema = self.schema(method, path, reply.status)
        if not schema:
            return None
        body = reply.json
        validator = Draft202012Validator({**schema, "components": self.spec["components"]})
        try:
            validator.validate(body)
        except jsonschema.ValidationError as error:
            raise AssertionError(f"{method} {path} → {reply.status}: {error.message} at {list(error.path)}") from None
        return body


class Checked:
    """A client whose every reply is validated against the contract."""

    def __init__(self, client: Client, contract: Contract) -> None:
        self.client = client
        self.contract = contract

    def call(self, method: str, path: str, body: Any = None, **options: Any) -> Reply:
        reply = self.client.call(
            method, API + path if path.startswith("/") and not path.startswith("/health") else path, body, **options
        )
        self.contract.check(method, API + path if not path.startswith("/health") else path, reply)
        return reply

    def get(self, path: str) -> Reply:
        return self.call("GET", path)

    def post(self, path: str, body: Any = None) -> Reply:
        return self.call("POST", path, body if body is not None else {})


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    db = tmp_path_factory.mktemp("contract") / "contract.db"
    engine = narrative.Memory(db, user="default", embedder="none", clock=FakeClock(), env={})
    with LiveServer(create_app(engine)) as server:
        built = World(engine, server)
        for user in ("alice", "bob"):
            built.ids[user] = build_user(engine, user)
            built.keys[user] = engine.create_api_key(user=user)
        yield built
        built.close()


@pytest.fixture(scope="module")
def contract(world: World) -> Contract:
    return Contract(world.client().get("/openapi.json").json)


def test_every_route_declares_its_2xx_body_and_the_error_body(contract: Contract) -> None:
    for path, operations in contract.spec["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            ok = [status for status in responses if status.startswith("2")]
            assert ok, f"{method} {path} has no 2xx"
            for status in ok:
                content = responses[status].get("content", {})
                media: dict[str, Any] = next(iter(content.values()), {})
                schema = media.get("schema", {})
                assert schema and schema != {}, f"{method} {path} {status} has no response schema"
            if path.startswith(API):
                for status in ("400", "401", "404", "409", "413", "422"):
                    assert responses[status]["content"]["application/json"]["schema"] == {
                        "$ref": "#/components/schemas/ErrorBody"
                    }, (method, path, status)
    assert "HTTPValidationError" not in contract.spec["components"]["schemas"]


def test_live_replies_match_the_contract(world: World, contract: Contract) -> None:
    alice = Checked(world.client("alice"), contract)
    ids = world.ids["alice"]
    for path in (
        "/me",
        "/conversations",
        "/conversations/active",
        f"/conversations/{ids['closing']}",
        f"/conversations/{ids['closing']}/preview",
        f"/conversations/{ids['closing']}/messages",
        "/messages",
        "/memories",
        f"/memories/{ids['memory']}",
        f"/memories/{ids['memory']}/chain",
        f"/memories/{ids['memory']}/influence",
        f"/memories/{ids['memory']}/history",
        "/storylines",
        "/storylines/your-story",
        f"/storylines/{ids['storyline']}",
        "/narratives",
        "/narratives/latest",
        f"/narratives/{ids['narrative']}",
        f"/narratives/{ids['narrative']}/back",
        f"/narratives/{ids['narrative']}/forward",
        "/narratives/search?q=bicycle",
        "/entities/open",
        "/search?q=bicycle",
        "/uses",
        f"/uses/{ids['use']}",
        "/greeting",
    ):
        assert alice.get(path).status == 200, path
    assert alice.post("/context", {"query": "bicycle", "budget": 300}).status == 200
    assert alice.post("/reasoning-context", {"request": "which bicycle?"}).status == 200
    edit = {"content": "alice notes: a touring bicycle"}
    assert alice.call("PATCH", f"/memories/{ids['memory']}", edit).status == 200
    assert alice.call("PATCH", f"/storylines/{ids['storyline']}", {"name": "Bicycle trip"}).status == 200
    assert alice.post(f"/conversations/{ids['closing']}/confirm").status == 200
    assert alice.get(f"/conversations/{ids['closing']}/archive").status == 200
    assert alice.post("/messages", {"content": "Lisbon has seven hills, I read."}).status == 201
    assert alice.post("/messages/batch", {"messages": [{"content": "one"}, {"content": "two"}]}).status == 201
    made = alice.post("/memories", {"content": "a spare inner tube"})
    assert made.status == 201
    assert alice.post(f"/entities/{ids['entity']}/resolve").status == 200
    assert alice.post("/uses", {"query": "tube?", "references": [{"memory_id": made.json["id"]}]}).status == 201
    assert alice.call("DELETE", f"/memories/{made.json['id']}").status == 200
    # the error bodies: 404, 409, 422, 401, 415 are all the one ErrorBody
    assert alice.get("/memories/999999").status == 404
    assert alice.post(f"/conversations/{ids['closing']}/resume").status == 409
    assert alice.get("/search").status == 422
    assert alice.call("POST", "/memories", raw=b"{nope").status == 422
    assert Checked(world.client(), contract).get("/me").status == 401
    assert Checked(world.client(), contract).get("/health").status == 200
    statuses = {status for _, _, status in contract.checked}
    assert {200, 201, 401, 404, 409, 422} <= statuses


def test_health_needs_no_key_and_says_the_version(world: World) -> None:
    reply = world.client().get("/health")
    assert reply.status == 200 and reply.json == {"status": "ok", "version": narrative.__version__}


def test_docs_are_served_from_the_package(world: World) -> None:
    client = world.client()
    page = client.get("/docs")
    assert page.status == 200
    html = page.raw.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', html) + re.findall(r"url: ?'([^']+)'", html)
    assert sources and all(s.startswith("/") for s in sources), sources  # nothing from another host
    for source in sources:
        assert client.get(source).status == 200, source
    assert client.get("/docs/assets/nothing.js").status == 404


def test_search_records_a_use_only_when_asked(world: World) -> None:
    alice = world.client("alice")
    before = len(alice.get(API + "/uses?limit=200").json["items"])
    assert alice.get(API + "/search?q=Lisbon").status == 200
    assert len(alice.get(API + "/uses?limit=200").json["items"]) == before
    assert alice.get(API + "/search?q=Lisbon&record=true").status == 200
    after = alice.get(API + "/uses?limit=200").json["items"]
    assert len(after) == before + 1 and after[0]["query"] == "Lisbon"


def test_search_filters_and_min_score(world: World) -> None:
    alice = world.client("alice")
    every = alice.get(API + "/search?q=bicycle%20Lisbon&k=20").json["items"]
    assert len(every) >= 2
    scores = sorted(hit["score"] for hit in every)
    floor = scores[len(scores) // 2]
    above = alice.get(f"{API}/search?q=bicycle%20Lisbon&k=20&min_score={floor}").json["items"]
    assert above and all(hit["score"] >= floor for hit in above) and len(above) < len(every)
    agent = alice.get(API + "/search?q=bicycle%20Lisbon&k=20&source=agent").json["items"]
    assert agent and {hit["source"] for hit in agent} == {"agent"}
    later = alice.get(API + "/search?q=bicycle&k=20&since=2100-01-01T00:00:00Z").json["items"]
    assert later == []
    assert alice.get(API + "/search?q=bicycle&min_score=-1").status == 422
    assert alice.get(API + "/search?q=bicycle&source=gossip").status == 422


def test_a_superseded_hit_says_so_and_a_current_one_says_null(world: World, contract: Contract) -> None:
    """Both searches (GET and POST) with include_superseded: each hit has ``valid_to`` and ``superseded_by``, set
    on the memory a later one superseded and null on the current one, and the replies match the contract."""
    engine = world.engine
    engine.remember("I keep my canoe in Utrecht.", user="carol")
    engine.remember("Actually, I moved it: I keep my canoe in Delft now, not Utrecht.", user="carol")
    world.keys["carol"] = engine.create_api_key(user="carol")
    carol = Checked(world.client("carol"), contract)
    for reply in (
        carol.get("/search?q=where%20is%20my%20canoe&include_superseded=true&record=false"),
        carol.post("/search", {"query": "where is my canoe", "include_superseded": True, "record": False}),
    ):
        assert reply.status == 200, reply
        hits = reply.json["items"]
        old = [h for h in hits if h["valid_to"] is not None]
        current = [h for h in hits if h["valid_to"] is None]
        assert old and current, hits
        for hit in old:
            memory = carol.get(f"/memories/{hit['id']}").json
            assert hit["superseded_by"] == memory["superseded_by"] is not None
            assert hit["valid_to"] == memory["valid_to"]
            assert hit["why"]["summary"].startswith(f"superseded by #{hit['superseded_by']} on ")
        assert all(h["superseded_by"] is None for h in current)
    now = carol.get("/search?q=where%20is%20my%20canoe&record=false").json["items"]
    assert now and all(h["valid_to"] is None and h["superseded_by"] is None for h in now)


def test_a_batch_of_messages_in_one_call(world: World) -> None:
    bob = world.client("bob")
    reply = bob.post(
        API + "/messages/batch",
        {
            "messages": [
                {"content": "The tomatoes need stakes this week."},
                {"content": "Ok, I will buy them.", "role": "assistant"},
            ]
        },
    )
    assert reply.status == 201
    items = reply.json["items"]
    assert len(items) == 2 and items[0]["position"] < items[1]["position"]
    latest = bob.get(API + "/messages?limit=2").json["items"]
    assert [m["content"] for m in latest] == ["Ok, I will buy them.", "The tomatoes need stakes this week."]
    assert bob.post(API + "/messages/batch", {"messages": []}).status == 422


def test_a_memory_history_lists_every_change_and_outlives_a_delete(world: World, contract: Contract) -> None:
    alice = world.client("alice")
    made = alice.post(API + "/memories", {"content": "the frame is steel"}).json
    first = alice.get(f"{API}/memories/{made['id']}/history").json
    assert [(e["kind"], e["new_text"]) for e in first["events"]] == [("created", "the frame is steel")]
    assert first["deleted"] is False and first["memory"]["content"] == "the frame is steel"
    alice.patch(f"{API}/memories/{made['id']}", {"content": "the frame is aluminium"})
    alice.patch(f"{API}/memories/{made['id']}", {"content": "the frame is titanium", "importance": 4})
    history = alice.get(f"{API}/memories/{made['id']}/history").json
    assert [(e["kind"], e["old_text"], e["new_text"]) for e in history["events"]] == [
        ("created", "", "the frame is steel"),
        ("edited", "the frame is steel", "the frame is aluminium"),
        ("edited", "the frame is aluminium", "the frame is titanium"),
    ]
    assert history["events"][2]["detail"] == {"fields": ["content", "importance"]}
    stamps = [e["created_at"] for e in history["events"]]
    assert stamps == sorted(stamps) and all(e["memory_id"] == made["id"] for e in history["events"])
    assert world.client("bob").get(f"{API}/memories/{made['id']}/history").status == 404
    assert alice.delete(f"{API}/memories/{made['id']}").status == 200
    assert alice.get(f"{API}/memories/{made['id']}").status == 404
    tombstone = Checked(alice, contract).get(f"/memories/{made['id']}/history")  # the contract holds after a delete
    assert tombstone.status == 200 and tombstone.json["deleted"] is True and tombstone.json["memory"] is None
    assert [e["kind"] for e in tombstone.json["events"]] == ["created", "edited", "edited", "deleted"]
    assert "steel" not in json.dumps(tombstone.json) and "titanium" not in json.dumps(tombstone.json)
    assert world.client("bob").get(f"{API}/memories/{made['id']}/history").status == 404


def test_malformed_json_says_so(world: World) -> None:
    reply = world.client("alice").call("POST", API + "/memories", raw=b'{"content": "x",}')
    assert reply.status == 422 and reply.json["error"] == "invalid_json"
    assert reply.json["message"].startswith("the request body is not valid JSON")


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_body_without_the_json_content_type_says_so(world: World, content_type: str | None) -> None:
    client = world.client("alice")
    headers = {"Content-Type": content_type} if content_type else {}
    client.conn.putrequest("POST", API + "/memories")
    raw = json.dumps({"content": "x"}).encode()
    for name, value in {**client.headers(), **headers, "Content-Length": str(len(raw))}.items():
        client.conn.putheader(name, value)
    client.conn.endheaders(raw)
    response = client.conn.getresponse()
    body = json.loads(response.read())
    assert response.status == 415 and body["error"] == "unsupported_media_type"
    assert "Content-Type: application/json" in body["message"]
    assert (repr(content_type) if content_type else "missing") in body["message"]


@pytest.mark.parametrize("header", ["{key}", "Token {key}", "bearer{key}"])
def test_a_key_without_bearer_says_so(world: World, header: str) -> None:
    key = world.keys["alice"]
    reply = world.client().call("GET", API + "/me", headers={"Authorization": header.format(key=key)})
    assert reply.status == 401 and "must read 'Bearer <key>'" in reply.json["message"]
    assert key not in reply.raw.decode()


def test_lowercase_bearer_is_accepted(world: World) -> None:
    reply = world.client().call("GET", API + "/me", headers={"Authorization": "bearer " + world.keys["alice"]})
    assert reply.status == 200


def test_docs_off_without_the_bundle(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from narrative.interfaces import http

    monkeypatch.setattr(http, "swagger_ui_dir", lambda: None)
    engine = narrative.Memory(tmp_path / "x.db", user="default", embedder="none", env={})
    try:
        app = create_app(engine)
        assert "/docs" not in {getattr(route, "path", "") for route in app.routes}
    finally:
        engine.close()


def _item_schema(spec: dict[str, Any], path: str) -> dict[str, Any]:
    """The schema /openapi.json gives one item of a list route's ``items`` (its 200 reply)."""
    components = spec["components"]["schemas"]

    def resolve(schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            schema = components[schema["$ref"].rsplit("/", 1)[-1]]
        return schema

    body = spec["paths"][API + path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    return resolve(resolve(body)["properties"]["items"]["items"])


def test_every_field_a_list_item_answers_with_is_declared(tmp_path: Path) -> None:
    """A list item's schema names every key a live item has, typed and described where the list adds it: the
    validation above passes undeclared keys (a record allows more), so a generated client would never see them."""
    clock = FakeClock()
    engine = narrative.Memory(tmp_path / "lists.db", user="erin", embedder="none", clock=clock, env={})
    engine.remember("I live in Berlin.")
    engine.remember("Noted: you live in Berlin.", role="assistant")
    engine.remember("Actually, I moved: I live in Lisbon now, not Berlin.")
    garden = engine.create_storyline("Garden app").id
    engine.bind(garden, "goal", "Launch before spring")
    engine.add_memory(
        "water in the evening",
        stream="decision",
        details=DecisionDetails("water in the evening", rationale="less evaporation"),
        event_at=clock.now - timedelta(days=40),
    )
    details = ResearchDetails(source_type="citation", work_title="Thinking in Systems", author="Donella Meadows")
    cite = engine.add_memory("Meadows on stocks", stream="research", details=details)
    engine.add_memory(
        "bathtubs", stream="research", details=ResearchDetails(source_type="quote", work_title="Thinking in Systems")
    )
    clock.advance(days=8)
    key = engine.create_api_key(user="erin")
    try:
        with LiveServer(create_app(engine, web=False)) as server, Client(server.port, key) as client:
            spec = client.get("/openapi.json").json
            routes = (
                "/memories",
                "/search?q=Lisbon",
                "/goals/stale",
                "/decisions/review",
                f"/memories/{cite.id}/linked",
                "/sources/popular?days=0",
            )
            for route in routes:
                items = client.get(API + route).json["items"]
                assert items, route
                declared = _item_schema(spec, route.split("?")[0].replace(str(cite.id), "{memory_id}"))
                for item in items:
                    missing = sorted(set(item) - set(declared["properties"]))
                    assert not missing, f"GET {route}: items answer {missing}, not in /openapi.json"
            listed = _item_schema(spec, "/memories")["properties"]
            assert all(listed[name].get("description") for name in ("text", "folded_into", "also"))
            for route in ("/goals/stale", "/decisions/review", "/memories/{memory_id}/linked", "/sources/popular"):
                undescribed = [
                    n for n, s in _item_schema(spec, route)["properties"].items() if not s.get("description")
                ]
                assert not undescribed, (route, undescribed)
    finally:
        engine.close()
