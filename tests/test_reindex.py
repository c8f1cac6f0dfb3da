"""The vector's identity travels with it: ``embedding_status``, ``reindex`` and the ``narrative status`` /
``narrative reindex`` commands.

Memories are written with the hashing embedder, then the file is reopened with the real MiniLM model (loaded once
for the module): search must refuse the foreign vectors until a reindex re-embeds them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import narrative
from narrative.engine import Turn
from narrative.errors import EmbeddingMismatch, NotFound, ValidationError
from narrative.providers.embed import HashingEmbedder, MiniLMEmbedder, embed_one
from narrative.write.embedding import routing_text

HASHING = HashingEmbedder().identity
MINILM = MiniLMEmbedder().identity  # the default runtime's (onnx: "all-MiniLM-L6-v2:384")

TURNS = (
    "I adopted a greyhound called Pickles from the shelter.",
    "Pickles sleeps nineteen hours a day and loves the sofa.",
    "We decided to take Pickles to the vet on Friday because she limps.",
    "Switching topics: my pottery class on Thursday made a blue bowl.",
    "The pottery teacher Odile showed us how to centre clay on the wheel.",
)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    """The real local model, loaded once for the module."""
    embedder = MiniLMEmbedder()
    embedder.embed_batch(["warm up"])
    return embedder


def write_with_hashing(db: Path, user: str = "alice", turns: tuple[str, ...] = TURNS) -> dict[str, int]:
    """Turns through the real write path with the hashing embedder; returns what was stored."""
    with narrative.Memory(db, user=user, embedder="hashing", env={}) as mem:
        mem.remember_many([Turn(t, "user", speaker=user.title()) for t in turns])
        status = mem.embedding_status(user=user)
    assert status["memory_vectors"] == {HASHING: status["memories"]} and not status["reindex_needed"]
    return {"memories": status["memories"], "storylines": sum(status["storyline_vectors"].values())}


@pytest.fixture
def hashed(db_path: Path) -> dict[str, int]:
    counts = write_with_hashing(db_path)
    assert counts["storylines"] >= 2  # detected storylines got routing embeddings
    return counts


@pytest.fixture
def smem(db_path: Path, hashed: dict[str, int], minilm: MiniLMEmbedder) -> Iterator[narrative.Memory]:
    """The same file reopened with MiniLM."""
    memory = narrative.Memory(db_path, user="alice", embedder=minilm, env={})
    yield memory
    memory.close()


def vectors(mem: narrative.Memory, user: str = "alice") -> dict[int, bytes]:
    ids, _users, _models, matrix = mem.store.memory_vectors(user)
    return {i: matrix[row].tobytes() for row, i in enumerate(ids)}


# --- the mismatch --------------------------------------------------------------------------------------


def test_status_reports_the_foreign_identity(smem: narrative.Memory, hashed: dict[str, int]) -> None:
    status = smem.embedding_status()
    assert status["embedder"] == MINILM
    assert status["scope"] == "all users" and status["users"] == 1
    assert status["memories"] == hashed["memories"]
    assert status["memory_vectors"] == {HASHING: hashed["memories"]}
    assert status["storyline_vectors"] == {HASHING: hashed["storylines"]}
    assert status["reindex_needed"] and status["search_blocked"]
    assert any("another embedder" in reason for reason in status["reasons"])
    assert smem.embedding_status(user="alice")["scope"] == "alice"


@pytest.mark.parametrize("mode", ["hybrid", "vector"])
def test_search_refuses_foreign_vectors_and_names_the_fix(smem: narrative.Memory, mode: str) -> None:
    with pytest.raises(EmbeddingMismatch, match="narrative reindex") as raised:
        smem.search("greyhound", 5, mode=mode)
    assert HASHING in str(raised.value) and MINILM in str(raised.value)


def test_keyword_search_still_works_before_the_reindex(smem: narrative.Memory) -> None:
    assert smem.search("greyhound", 5, mode="keyword", record=False)


def test_a_write_with_another_embedder_is_refused_before_anything_is_stored(
    db_path: Path, hashed: dict[str, int], minilm: MiniLMEmbedder
) -> None:
    """Another user's write with another embedder was accepted, and then every user's search failed with "vectors
    were made by several embedders" (a new user's probe).  It is refused, naming the fix, and nothing is stored;
    after a reindex of the whole file the new embedder writes."""
    with narrative.Memory(db_path, user="bob", embedder=minilm, env={}) as bob:
        before = (bob.store.count_rows("memories"), bob.store.count_rows("messages"))
        for write in (lambda: bob.add_memory("Bob's note"), lambda: bob.remember("Bob says hi")):
            with pytest.raises(EmbeddingMismatch, match="narrative reindex") as raised:
                write()
            assert HASHING in str(raised.value) and MINILM in str(raised.value)
        assert (bob.store.count_rows("memories"), bob.store.count_rows("messages")) == before
    with narrative.Memory(db_path, user="alice", embedder="hashing", env={}) as alice:
        assert alice.search("greyhound", 5, record=False)  # the file is as it was
    with narrative.Memory(db_path, user="alice", embedder=minilm, env={}) as mem:
        mem.reindex()
    with narrative.Memory(db_path, user="bob", embedder=minilm, env={}) as bob:
        assert bob.add_memory("Bob's note").id
    with narrative.Memory(db_path, user="alice", embedder="hashing", env={}) as alice, pytest.raises(EmbeddingMismatch):
        alice.remember("Back to hashing")


# --- reindex -------------------------------------------------------------------------------------------


def test_reindex_reembeds_everything_and_search_works_again(
    smem: narrative.Memory, hashed: dict[str, int], minilm: MiniLMEmbedder
) -> None:
    report = smem.reindex()
    assert report["embedder"] == MINILM
    assert (report["memories"], report["storylines"]) == (hashed["memories"], hashed["storylines"])
    assert not report["reindex_needed"] and not report["search_blocked"]
    status = smem.embedding_status()
    assert status["memory_vectors"] == {MINILM: hashed["memories"]}
    assert status["storyline_vectors"] == {MINILM: hashed["storylines"]}
    assert not status["reindex_needed"] and status["memories_without_vector"] == 0
    # the stored vectors are MiniLM's own embedding of each memory ...
    for memory in smem.list_memories(limit=100):
        stored = smem.store.memory_vectors("alice")
        row = stored[0].index(memory.id)
        assert np.allclose(stored[3][row], embed_one(minilm, memory.content), atol=1e-5)
    # ... so meaning (not shared words) finds the dog now
    hits = smem.search("canine pet resting on the couch", 3, mode="vector", record=False)
    assert "sofa" in hits[0].memory.content


def test_reindex_remakes_storyline_routing_embeddings(smem: narrative.Memory, minilm: MiniLMEmbedder) -> None:
    smem.reindex()
    identities = smem.store.storyline_vector_identities("alice")
    assert identities and set(identities.values()) == {MINILM}
    routed = smem.store.storyline_vectors("alice", MINILM)
    for sid, vector in routed.items():
        assert vector.shape == (384,) and np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-4)
        own_text = embed_one(minilm, routing_text(smem.get_storyline(sid)))
        assert float(vector @ own_text) > 0.6  # half of it is the storyline's own text
    pottery = next(s for s in smem.list_storylines() if "ottery" in s.name)
    dog = next(s for s in smem.list_storylines() if s.id != pottery.id and s.id in routed)
    clay = embed_one(minilm, "throwing clay on the wheel")
    assert float(routed[pottery.id] @ clay) > float(routed[dog.id] @ clay)


def test_routing_after_reindex_uses_the_new_embeddings(smem: narrative.Memory) -> None:
    smem.reindex()
    result = smem.remember("Odile says the pottery bowl needs a second glaze.", speaker="Alice")
    assert "ottery" in result.storyline.name
    assert not smem.embedding_status()["reindex_needed"]


def test_reindex_is_idempotent(smem: narrative.Memory) -> None:
    smem.reindex()
    before = vectors(smem)
    again = smem.reindex()
    assert (again["memories"], again["storylines"]) == (0, 0)
    assert vectors(smem) == before
    forced = smem.reindex(force=True)
    assert forced["forced"] and forced["memories"] == len(before) and forced["storylines"] > 0
    after = vectors(smem)
    assert after.keys() == before.keys()
    assert all(
        np.allclose(np.frombuffer(after[i], np.float32), np.frombuffer(before[i], np.float32), atol=1e-5)
        for i in before
    )


def test_small_batches_give_the_same_vectors(db_path: Path, tmp_path: Path) -> None:
    write_with_hashing(db_path)
    other = tmp_path / "other.db"
    write_with_hashing(other)
    results = []
    for path, size in ((db_path, 2), (other, None)):
        with narrative.Memory(path, user="alice", embedder=HashingEmbedder(dims=64), env={}) as mem:
            report = mem.reindex(batch_size=size)
            results.append((report, vectors(mem)))
    (small, small_vectors), (default, default_vectors) = results
    assert small["batch_size"] == 2 and default["batch_size"] == 256
    assert small["memories"] == default["memories"] == len(small_vectors)
    assert small_vectors == default_vectors


@pytest.mark.parametrize("size", [0, -3, True, 2.5])
def test_reindex_refuses_a_bad_batch_size(smem: narrative.Memory, size: Any) -> None:
    with pytest.raises(ValidationError):
        smem.reindex(batch_size=size)
    assert smem.embedding_status()["memory_vectors"] == {HASHING: smem.embedding_status()["memories"]}


def test_one_user_at_a_time(db_path: Path, hashed: dict[str, int], minilm: MiniLMEmbedder) -> None:
    bobs = write_with_hashing(db_path, user="bob", turns=TURNS[:2])
    with narrative.Memory(db_path, user="alice", embedder=minilm, env={}) as mem:
        report = mem.reindex(user="alice")
        assert report["scope"] == "alice" and report["memories"] == hashed["memories"]
        assert not report["reindex_needed"]  # alice is done ...
        assert report["search_blocked"]  # ... but bob's vectors still block the shared index
        assert mem.embedding_status(user="bob")["memory_vectors"] == {HASHING: bobs["memories"]}
        with pytest.raises(EmbeddingMismatch):
            mem.search("greyhound", 3)
        rest = mem.reindex()
        assert rest["memories"] == bobs["memories"] and rest["users"] == 2
        assert {h.memory.user_id for h in mem.search("greyhound", 5, record=False)} == {"alice"}
        assert {h.memory.user_id for h in mem.search("greyhound", 5, user="bob", record=False)} == {"bob"}


def test_memories_written_without_an_embedder_get_vectors(db_path: Path) -> None:
    with narrative.Memory(db_path, user="alice", embedder="none", env={}) as mem:
        mem.add_memory("Tide tables for the island crossing.")
        mem.add_memory("Ferry timetable changes in winter.")
        status = mem.embedding_status()
        assert status["embedder"] is None and not status["reindex_needed"]
        with pytest.raises(ValidationError, match="embedder"):
            mem.reindex()
    with narrative.Memory(db_path, user="alice", embedder="hashing", env={}) as mem:
        status = mem.embedding_status()
        assert status["memories_without_vector"] == 2 and status["reindex_needed"]
        assert mem.search("tide tables", 5, mode="vector", record=False) == []  # invisible to vectors
        assert mem.reindex()["memories"] == 2
        assert mem.search("tide tables", 1, mode="vector", record=False)[0].memory.content.startswith("Tide")


def test_status_and_reindex_never_create_users(smem: narrative.Memory) -> None:
    with pytest.raises(NotFound):
        smem.embedding_status(user="nobody")
    with pytest.raises(NotFound):
        smem.reindex(user="nobody")
    with pytest.raises(ValidationError):
        smem.embedding_status(user="  ")
    assert [u.id for u in smem.store.list_users()] == ["alice"]


# --- the command line ----------------------------------------------------------------------------------


def run_cli(*args: str) -> Any:
    from narrative.interfaces.cli import _register, cli

    _register()
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_cli_status_and_reindex(db_path: Path, hashed: dict[str, int], minilm: MiniLMEmbedder) -> None:
    base = ("--db", str(db_path), "--embedder", "minilm")
    before = json.loads(run_cli(*base, "status", "--json"))
    assert before["embedder"] == MINILM and before["reindex_needed"] and before["search_blocked"]
    assert before["memory_vectors"] == {HASHING: hashed["memories"]}
    assert "narrative reindex" in run_cli(*base, "status")
    report = json.loads(run_cli(*base, "--json", "reindex"))
    assert (report["memories"], report["storylines"]) == (hashed["memories"], hashed["storylines"])
    after = json.loads(run_cli(*base, "status", "--json"))
    assert after["memory_vectors"] == {MINILM: hashed["memories"]} and not after["reindex_needed"]
    assert "re-embedded 0 memories" in run_cli(*base, "reindex")
    assert "reindex needed: no" in run_cli(*base, "status")


def test_cli_help_says_when_to_reindex() -> None:
    text = " ".join(run_cli("reindex", "--help").split())
    assert "changing the embedder" in text and "--json" in text
    assert "reindex" in " ".join(run_cli("status", "--help").split())
