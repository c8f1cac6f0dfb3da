"""Bindings, stale goals, decision chains and audit, consolidation, linked items and popular sources over the HTTP API
(a real uvicorn server, keys per user) and the command line (the console script's own entry point)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import narrative
from conftest import FakeClock
from http_server import Client, LiveServer
from narrative.interfaces.cli import main
from narrative.interfaces.http import create_app
from narrative.model import DecisionDetails, ResearchDetails

API = "/api/v1"


@pytest.fixture
def served(mem: narrative.Memory) -> Iterator[tuple[narrative.Memory, Client, Client]]:
    """alice's memory served over HTTP, with a client for alice and one for bob."""
    alice, bob = mem.create_api_key(user="alice"), mem.create_api_key(user="bob")
    with (
        LiveServer(create_app(mem, web=False)) as server,
        Client(server.port, alice) as as_alice,
        Client(server.port, bob) as as_bob,
    ):
        yield mem, as_alice, as_bob


def test_bindings_and_stale_goals_over_http(served: tuple[narrative.Memory, Client, Client], clock: FakeClock) -> None:
    mem, alice, bob = served
    garden = mem.create_storyline("Garden app").id
    made = alice.post(f"{API}/storylines/{garden}/bindings", {"kind": "goal", "name": "Launch before spring"})
    assert made.status == 201 and made.json["status"] == "ongoing" and made.json["touched_by"] == "bound"
    job = alice.post(
        f"{API}/storylines/{garden}/bindings", {"kind": "job", "name": "Import beds", "payload": {"n": 24}}
    )
    assert job.json["payload"] == {"n": 24}
    listed = alice.get(f"{API}/storylines/{garden}/bindings")
    assert [b["name"] for b in listed.json["items"]] == ["Import beds", "Launch before spring"]
    patched = alice.patch(f"{API}/bindings/{job.json['id']}", {"status": "paused"})
    assert patched.status == 200 and patched.json["status"] == "paused"
    done = alice.post(f"{API}/bindings/{job.json['id']}/complete")
    assert done.json["status"] == "done" and done.json["completed_at"]
    assert [b["name"] for b in alice.get(f"{API}/bindings?history=true").json["items"]] == ["Import beds"]
    bad = alice.post(f"{API}/storylines/{garden}/bindings", {"kind": "goal", "name": "x", "status": "done"})
    assert bad.status == 422 and bad.json["field"] == "status"
    clock.advance(days=8)
    stale = alice.get(f"{API}/goals/stale").json["items"]
    assert [g["goal"] for g in stale] == ["Launch before spring"] and stale[0]["why"]["quiet_days"] == 8
    assert alice.get(f"{API}/goals/stale?days=30").json["items"] == []
    # another user's storyline and binding answer 404, exactly like ids that do not exist
    assert bob.post(f"{API}/storylines/{garden}/bindings", {"kind": "goal", "name": "x"}).status == 404
    assert bob.patch(f"{API}/bindings/{made.json['id']}", {"status": "paused"}).status == 404
    assert bob.get(f"{API}/goals/stale").json["items"] == []
    assert alice.delete(f"{API}/bindings/{made.json['id']}").json["deleted"] == made.json["id"]
    # greeting and context carry the agenda
    assert "stale_goals" in alice.get(f"{API}/greeting").json


def test_decisions_over_http(served: tuple[narrative.Memory, Client, Client], clock: FakeClock) -> None:
    mem, alice, bob = served
    old = mem.add_memory(
        "go with SQLite",
        stream="decision",
        details=DecisionDetails("go with SQLite", rationale="it works offline"),
        event_at=clock.now - timedelta(days=20),
    )
    new = mem.add_memory("store beds as rows", stream="decision")
    link = alice.post(f"{API}/decisions/{new.id}/links", {"earlier_id": old.id, "reason": "rows in SQLite"})
    assert link.status == 201 and (link.json["kind"], link.json["origin"]) == ("builds_on", "user")
    chain = alice.get(f"{API}/decisions/{old.id}/chain").json
    assert chain["stands"] and [s["memory_id"] for s in chain["later"]] == [new.id] and chain["text"]
    mem.link_decision(new.id, old.id, "reverses")
    assert alice.get(f"{API}/decisions/{old.id}/chain").json["stands"] is False
    third = mem.add_memory("water in the evening", stream="decision", event_at=clock.now - timedelta(days=40))
    due = alice.get(f"{API}/decisions/review").json["items"]
    assert [d["memory_id"] for d in due] == [third.id] and due[0]["question"].endswith("Does it still stand?")
    answer = alice.post(f"{API}/decisions/{third.id}/reviews", {"outcome": "kept", "note": "still right"})
    assert answer.status == 201 and answer.json["outcome"] == "kept"
    assert alice.get(f"{API}/decisions/review").json["items"] == []
    assert alice.post(f"{API}/decisions/{third.id}/reviews", {"outcome": "maybe"}).status == 422
    assert bob.get(f"{API}/decisions/{old.id}/chain").status == 404
    assert bob.post(f"{API}/decisions/{new.id}/links", {"earlier_id": old.id}).status == 404


def test_research_over_http(served: tuple[narrative.Memory, Client, Client]) -> None:
    mem, alice, bob = served
    details = ResearchDetails(source_type="citation", work_title="Thinking in Systems", author="Donella Meadows")
    cite = mem.add_memory("Meadows on stocks", stream="research", details=details)
    quote = mem.add_memory(
        "bathtubs", stream="research", details=ResearchDetails(source_type="quote", work_title="Thinking in Systems")
    )
    linked = alice.get(f"{API}/memories/{cite.id}/linked").json["items"]
    assert [(o["memory_id"], o["kind"], o["direction"]) for o in linked] == [(quote.id, "same_work", "later")]
    again = alice.post(f"{API}/research/consolidate")
    assert again.status == 200 and (again.json["items"], again.json["links"]) == (2, 0)
    popular = alice.get(f"{API}/sources/popular?days=0").json["items"]
    assert popular[0]["source"] == "Thinking in Systems (Donella Meadows)" and popular[0]["score"] == 4
    assert bob.get(f"{API}/memories/{cite.id}/linked").status == 404
    assert bob.get(f"{API}/sources/popular").json["items"] == []


# --- the command line -------------------------------------------------------------------------------------------------

Run = Callable[..., Any]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Run:
    """``cli(*args)`` → the parsed JSON (``--json``) or the text of ``narrative ARGS`` on a file of maya's."""
    monkeypatch.chdir(tmp_path)
    for name in ("NARRATIVE_DB", "NARRATIVE_USER", "NARRATIVE_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))

    def invoke(*args: str, as_json: bool = True) -> Any:
        capsys.readouterr()
        try:
            main(["--embedder", "none", "--db", "notes.db", "--user", "maya", *args, *(["--json"] if as_json else [])])
        except SystemExit as stop:
            assert not stop.code, capsys.readouterr()
        out = capsys.readouterr().out
        return json.loads(out) if as_json else out

    return invoke


def test_the_command_line(cli: Run, tmp_path: Path) -> None:
    cli("add", "message", "I want to build a community garden app.")
    [storyline] = [s for s in cli("storylines") if s["kind"] == "detected"]
    goal = cli("bindings", "add", str(storyline["id"]), "goal", "Launch before spring")
    tools = cli("bindings", "add", str(storyline["id"]), "toolset", "map tools", "--payload", '{"tools": ["draw"]}')
    assert tools["payload"] == {"tools": ["draw"]} and goal["status"] == "ongoing"
    assert "toolset 'map tools'" in cli("bindings", as_json=False)
    assert cli("bindings", "complete", str(tools["id"]))["status"] == "retired"
    assert [b["name"] for b in cli("bindings", "list", "--history")] == ["map tools"]
    assert [g["goal"] for g in cli("goals", "stale", "--days", "0")] == ["Launch before spring"]
    cli("add", "message", "We decided to go with SQLite instead of Firebase because it works offline.")
    cli("add", "message", "We decided to use Postgres instead of SQLite because several people write at once.")
    with narrative.Memory(tmp_path / "notes.db", user="maya", embedder="none", env={}) as mem:
        newest, oldest = (m.id for m in mem.list_memories(stream="decision"))
    chain = cli("decisions", "chain", str(oldest))
    assert chain["stands"] is False and chain["later"][0]["link"]["kind"] == "reverses"
    assert "reverses" in cli("decisions", "chain", str(newest), as_json=False)
    assert cli("decisions", "review") == []
    assert cli("decisions", "answer", str(newest), "kept", "--note", "fine")["outcome"] == "kept"
    cli("add", "message", "I've been reading Thinking in Systems by Donella Meadows.")
    cli("add", "message", "On p. 45 she says a system's behaviour comes from its structure.")
    assert cli("research", "consolidate")["links"] == 0  # the turns already linked them
    sources = cli("research", "sources")
    assert sources[0]["source"].startswith("Thinking in Systems") and sources[0]["annotated"] == 1
    assert "Thinking in Systems" in cli("research", "sources", as_json=False)
    cite = sources[0]["memory_ids"][0]
    assert cli("research", "linked", str(cite))[0]["kind"] == "same_work"
