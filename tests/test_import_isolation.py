"""Crafted imports cannot reach other users (issue 12).

A real server over loopback, the real MiniLM model, on each store: alice and bob hold memories; mallory posts
crafted exports to ``POST /api/v1/import``.  Each is refused with a 4xx (or made harmless), and
afterwards alice's and bob's vector search, hybrid search and context still work, their rows are
untouched, and no reply names an id of theirs.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import narrative
from http_server import Client, LiveServer
from narrative.interfaces.http import create_app
from narrative.providers.embed import MiniLMEmbedder

API = "/api/v1"
Craft = Callable[[dict[str, Any], dict[str, Any]], None]  # (mallory's document, alice's export) → edit in place


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    embedder = MiniLMEmbedder()
    embedder.embed_batch(["warm up"])
    return embedder


@pytest.fixture(scope="module")
def world(module_db: str, minilm: MiniLMEmbedder) -> Iterator[dict[str, Any]]:
    engine = narrative.Memory(module_db, user="alice", embedder=minilm, env={})
    for user, lines in {
        "alice": ["I ride my bicycle to Lisbon in spring.", "The bicycle needs new brakes."],
        "bob": ["Priya and I plant tomatoes in raised beds.", "The tomatoes need more sun."],
    }.items():
        for line in lines:
            engine.remember(line, user=user)
    engine.search("bicycle", user="alice")  # a recorded use: uses and use_references rows
    keys = {user: engine.create_api_key(user=user) for user in ("alice", "bob", "mallory")}
    with LiveServer(create_app(engine, web=False)) as server:
        yield {"engine": engine, "server": server, "keys": keys, "alice": json.loads(engine.export("json"))}
    engine.close()


def client(world: dict[str, Any], user: str) -> Client:
    return Client(world["server"].port, world["keys"][user])


def mallory_document(alice: dict[str, Any]) -> dict[str, Any]:
    """A well-formed export to start from: alice's own, renamed."""
    document = copy.deepcopy(alice)
    document["user"] = "mallory"
    return document


def shorter_vector(doc: dict[str, Any], _alice: dict[str, Any]) -> None:
    row = doc["tables"]["memory_vectors"][0]
    row["vector"] = base64.b64encode(base64.b64decode(row["vector"])[:40]).decode()


def nan_vector(doc: dict[str, Any], _alice: dict[str, Any]) -> None:
    """One NaN in a vector of the right length (issue 24, F1: on SQLite it broke every user's search)."""
    row = doc["tables"]["memory_vectors"][0]
    values = np.frombuffer(base64.b64decode(row["vector"]), dtype="<f4").copy()
    values[7] = np.nan
    row["vector"] = base64.b64encode(values.tobytes()).decode()


def infinite_vector(doc: dict[str, Any], _alice: dict[str, Any]) -> None:
    row = doc["tables"]["memory_vectors"][-1]
    values = np.frombuffer(base64.b64decode(row["vector"]), dtype="<f4").copy()
    values[0] = -np.inf
    row["vector"] = base64.b64encode(values.tobytes()).decode()


def unknown_model_short_vector(doc: dict[str, Any], _alice: dict[str, Any]) -> None:
    row = doc["tables"]["memory_vectors"][0]
    row["model"], row["vector"] = "evil:3", base64.b64encode(b"\0" * 12).decode()
    for other in doc["tables"]["memory_vectors"][1:]:
        other["model"] = "evil:3"
        other["vector"] = base64.b64encode(b"\0" * 12).decode()


def foreign_conversation(doc: dict[str, Any], alice: dict[str, Any]) -> None:
    for table in ("conversations", "messages", "memory_sources", "routing_decisions", "entities", "state_deltas"):
        doc["tables"][table] = []
    doc["tables"]["memories"][0]["conversation_id"] = alice["tables"]["conversations"][0]["id"]


def foreign_memory_source(doc: dict[str, Any], alice: dict[str, Any]) -> None:
    doc["tables"]["memory_sources"][0]["memory_id"] = 10**6
    doc["tables"]["memory_sources"][0]["message_id"] = alice["tables"]["messages"][0]["id"]


def foreign_use_reference(doc: dict[str, Any], _alice: dict[str, Any]) -> None:
    """Drop the memory a use points at (and what hangs on it): the use reference then points outside."""
    gone = doc["tables"]["use_references"][0]["memory_id"]
    doc["tables"]["memories"] = [m for m in doc["tables"]["memories"] if m["id"] != gone]
    doc["tables"]["memory_vectors"] = [v for v in doc["tables"]["memory_vectors"] if v["memory_id"] != gone]
    doc["tables"]["memory_sources"] = [r for r in doc["tables"]["memory_sources"] if r["memory_id"] != gone]
    for table in ("entities", "state_deltas"):
        doc["tables"][table] = []


def huge_id(doc: dict[str, Any], _alice: dict[str, Any]) -> None:
    doc["tables"]["memories"][0]["importance"] = 2**70


def bad_time(doc: dict[str, Any], _alice: dict[str, Any]) -> None:
    doc["tables"]["memories"][0]["created_at"] = "yesterday-ish"


def lone_surrogate(doc: dict[str, Any], _alice: dict[str, Any]) -> None:
    doc["tables"]["messages"][0]["content"] = "broken \ud800 text"


def bad_details(doc: dict[str, Any], _alice: dict[str, Any]) -> None:
    doc["tables"]["memories"][0]["details"] = {"kind": "alien"}


REFUSED: dict[str, Craft] = {
    "vector of the wrong length": shorter_vector,
    "a NaN in a vector": nan_vector,
    "an infinity in a vector": infinite_vector,
    "another user's conversation": foreign_conversation,
    "another user's message and memory in a source row": foreign_memory_source,
    "a use reference to a memory not in the export": foreign_use_reference,
    "a number beyond 64 bits": huge_id,
    "a time that is not a time": bad_time,
    "text that is not Unicode": lone_surrogate,
    "details of an unknown kind": bad_details,
}


def others_still_work(world: dict[str, Any]) -> None:
    for user, query, word in (("alice", "bicycle brakes", "bicycle"), ("bob", "tomatoes sun", "tomatoes")):
        with client(world, user) as c:
            for mode in ("vector", "hybrid"):
                reply = c.get(f"{API}/search?q={query.replace(' ', '+')}&mode={mode}")
                assert reply.status == 200, reply
                assert any(word in item["content"].lower() for item in reply.json["items"]), reply
            reply = c.post(f"{API}/context", {"query": query})
            assert reply.status == 200, reply


@pytest.mark.parametrize("craft", REFUSED.values(), ids=REFUSED.keys())
def test_a_crafted_import_is_refused_and_leaves_everyone_working(world: dict[str, Any], craft: Craft) -> None:
    before = {u: world["engine"].export("json", user=u) for u in ("alice", "bob")}
    document = mallory_document(world["alice"])
    craft(document, world["alice"])
    with client(world, "mallory") as c:
        reply = c.post(f"{API}/import", document)
        assert 400 <= reply.status < 500, reply
        assert reply.json["error"] and reply.json["message"]
        assert c.get(f"{API}/export?format=json").json["counts"]["memories"] == 0  # nothing landed
    alice_ids = {str(r["id"]) for t in ("conversations", "messages", "memories") for r in world["alice"]["tables"][t]}
    assert not alice_ids & set(_numbers(reply.json["message"])) - _numbers_in_export_rows(document)
    assert {u: world["engine"].export("json", user=u) for u in ("alice", "bob")} == before
    others_still_work(world)


def test_vectors_of_another_embedder_are_dropped_and_made_again(world: dict[str, Any]) -> None:
    document = mallory_document(world["alice"])
    unknown_model_short_vector(document, world["alice"])
    with client(world, "mallory") as c:
        reply = c.post(f"{API}/import", document)
        assert reply.status == 200, reply
        assert reply.json["reembedded"]["memories"] == len(world["alice"]["tables"]["memories"])
        found = c.get(f"{API}/search?q=bicycle+brakes&mode=vector").json["items"]
        assert any("bicycle" in item["content"] for item in found)
        mine = {item["id"] for item in found}
    others_still_work(world)
    alice_memories = {m["id"] for m in world["alice"]["tables"]["memories"]}
    assert not mine & alice_memories  # fresh ids
    # alice deleting her conversation does not cascade into mallory's copy
    conversation = world["alice"]["tables"]["conversations"][0]["id"]
    copy_before = world["engine"].export("json", user="mallory")
    world["engine"].delete_conversation(conversation, user="alice")
    assert world["engine"].export("json", user="mallory") == copy_before
    world["engine"].delete_user("mallory")
    world["keys"]["mallory"] = world["engine"].create_api_key(user="mallory")


def _numbers(text: str) -> set[str]:
    import re

    return set(re.findall(r"\d+", text))


def _numbers_in_export_rows(document: dict[str, Any]) -> set[str]:
    """Numbers mallory sent herself (row numbers, her own ids): repeating them reveals nothing."""
    return _numbers(json.dumps(document)) | {str(n) for n in range(1, 1000)}


def test_a_crafted_import_through_python_is_refused_too(db: str) -> None:
    with narrative.Memory(db, user="alice", embedder="hashing", env={}) as mem:
        mem.add_memory("the lighthouse keeper painted the railing blue")
        document = mallory_document(json.loads(mem.export("json")))
        shorter_vector(document, document)
        with pytest.raises(narrative.ValidationError):
            mem.import_data(json.dumps(document), user="mallory")
        assert mem.search("lighthouse railing", mode="vector", record=False)


@pytest.mark.sqlite_only
def test_reindex_repairs_a_vector_of_the_wrong_length(tmp_path: Path) -> None:
    """A file damaged before imports were checked: one vector too short under the right name."""
    with narrative.Memory(tmp_path / "damaged.db", user="alice", embedder="hashing", env={}) as mem:
        kept = mem.add_memory("the lighthouse keeper painted the railing blue")
        mem.add_memory("the ferry leaves for the island on Friday", user="bob")
        mem.store.conn.execute("UPDATE memory_vectors SET vector = zeroblob(40) WHERE memory_id = ?", (kept.id,))  # type: ignore[attr-defined]
        mem.store.drop_index()
        with pytest.raises(narrative.EmbeddingMismatch):
            mem.search("ferry island", mode="vector", user="bob", record=False)
        assert mem.reindex()["memories"] == 1
        assert mem.search("ferry island", mode="vector", user="bob", record=False)
        assert mem.search("lighthouse railing", mode="vector", record=False)[0].memory.id == kept.id


def test_no_store_keeps_a_vector_that_is_not_finite(mem: narrative.Memory) -> None:
    """Issue 24 (F1): the stores refuse NaN and infinite vectors, whoever writes them."""
    kept = mem.add_memory("the lighthouse keeper painted the railing blue")
    for bad in (np.nan, np.inf, -np.inf):
        vector = np.ones(8, dtype=np.float32)
        vector[3] = bad
        with pytest.raises(narrative.ValidationError, match="finite"):
            mem.store.put_memory_vectors("alice", "hashing-test:8", {kept.id: vector})
        with pytest.raises(narrative.ValidationError, match="finite"):
            mem.store.put_storyline_vector("alice", mem.your_story().id, "hashing-test:8", vector)
    assert mem.store.memory_vector_models() == {}


class NaNEmbedder:
    """A broken embedder: every vector holds a NaN."""

    identity, dims, batch_size = "broken:4", 4, 8

    def embed_batch(self, texts: Any) -> np.ndarray:
        return np.full((len(list(texts)), 4), np.nan, dtype=np.float32)


def test_an_embedder_that_returns_nan_is_refused(db: str) -> None:
    with narrative.Memory(db, user="alice", embedder=NaNEmbedder(), env={}) as mem:
        with pytest.raises(narrative.NarrativeError):
            mem.add_memory("the ferry leaves for the island on Friday")
        with pytest.raises(narrative.ProviderError):
            mem.search("ferry", mode="vector", record=False)
        assert mem.store.count_rows("memory_vectors") == 0
