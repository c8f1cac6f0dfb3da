"""Delete leaves nothing (issue 12): after deleting, a marker word is in no row of any table and no search
finds it (both stores), and it is nowhere in the SQLite file's bytes."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

import narrative
from conftest import FakeClock, take_snapshot
from narrative.providers.embed import MiniLMEmbedder

MARKER = "zqxmarkerword"


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    embedder = MiniLMEmbedder()
    embedder.embed_batch(["warm up"])
    return embedder


@pytest.fixture
def mem(db: str, minilm: MiniLMEmbedder) -> Iterator[narrative.Memory]:
    memory = narrative.Memory(db, user="alice", embedder=minilm, env={})
    for i in range(30):  # enough other text that the full-text index has several segments
        memory.add_memory(f"ordinary note number {i} about the garden, the bicycle and the weekly market")
    yield memory
    memory.close()


def file_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists())


def no_trace(mem: narrative.Memory, backend: str, db_path: Path, user: str = "alice") -> bool:
    """No row of any table holds the marker, no keyword search finds it, and (SQLite) nor do the file's bytes."""
    rows = take_snapshot(mem.store)
    if any(MARKER in repr(row) for table in rows.values() for row in table):
        return False
    if backend == "sqlite" and MARKER.encode() in file_bytes(db_path):
        return False
    if (
        mem.store._one(  # type: ignore[attr-defined]
            "SELECT 1 FROM users WHERE id = ?", (user,)
        )
        is None
    ):
        return True  # a search would make the user again
    return not mem.search(MARKER, mode="keyword", user=user, record=False)


def test_a_deleted_memory_leaves_no_marker_in_the_file(mem: narrative.Memory, backend: str, db_path: Path) -> None:
    memory = mem.add_memory(f"the locker code is {MARKER} and nobody else may know it")
    hits = mem.search(f"locker code {MARKER}", record=True)  # a recorded use quoting the marker
    assert hits and hits[0].memory.id == memory.id and mem.list_uses()
    assert not no_trace(mem, backend, db_path)
    mem.delete_memory(memory.id)
    assert no_trace(mem, backend, db_path)
    assert mem.search("garden bicycle market", mode="hybrid", record=False)  # the rest still works


def test_a_deleted_conversation_leaves_no_marker(mem: narrative.Memory, backend: str, db_path: Path) -> None:
    mem.remember(f"my passport number is {MARKER}", speaker="alice")
    mem.remember("and the weather is fine", speaker="alice")
    mem.search(MARKER, record=True)
    conversation = mem.active_conversation()
    assert conversation is not None
    mem.delete_conversation(conversation.id)
    assert no_trace(mem, backend, db_path)


def test_a_deleted_user_leaves_no_marker(mem: narrative.Memory, backend: str, db_path: Path) -> None:
    mem.remember(f"bob's secret is {MARKER}", user="bob")
    mem.add_memory(f"bob keeps {MARKER} in a drawer", user="bob")
    mem.search(MARKER, user="bob", record=True)
    assert not no_trace(mem, backend, db_path, "bob")
    mem.delete_user("bob")
    assert no_trace(mem, backend, db_path, "bob")


def test_the_change_log_is_pruned(mem: narrative.Memory) -> None:
    mem.store.prune_memory_changes(keep=5)
    assert mem.store.count_rows("memory_changes") == 5
    assert mem.search("garden bicycle", mode="keyword", record=False)  # the indexes follow the gap
    assert mem.search("garden bicycle", mode="vector", record=False)


@pytest.mark.sqlite_only
def test_several_deletes_leave_no_copy_in_the_file(db_path: Path, clock: FakeClock) -> None:
    """Issue 24 (F3): fourteen conversations of different lengths, each with its own marker, deleted one by one
    in a shuffled order; after every delete no deleted marker is anywhere in the file's bytes (nor the WAL's).

    ``secure_delete`` alone left copies: when SQLite rebalances a b-tree page (here FTS5 segments) it rewrites
    the page without clearing its unused middle, so a copy of a cell that moved away stays there after the cell
    itself is deleted.  The delete rebuilds the file (VACUUM)."""
    rng = random.Random(2)
    words = "garden bicycle market tomato river lantern copper violin meadow harbour".split()
    with narrative.Memory(db_path, user="alice", embedder="hashing", clock=clock, env={}) as mem:
        conversations = []
        for c in range(14):
            mem.start_conversation(f"c{c}")
            for t in range(rng.randint(3, 12)):
                filler = " ".join(rng.choice(words) for _ in range(rng.randint(5, 60)))
                mem.remember(f"turn {t} of conversation {c}: {filler} zqxmark{c:02d}x {filler[:40]}", speaker="alice")
            mem.search(f"zqxmark{c:02d}x", record=True)
            conversations.append(mem.close_conversation().conversation_id)
            mem.confirm_memory(conversations[-1])
            for i in range(rng.randint(0, 10)):
                mem.add_memory(f"other note {c}-{i}: " + " ".join(rng.choice(words) for _ in range(30)))
        order = list(range(14))
        rng.shuffle(order)
        deleted: list[bytes] = []
        for c in order:
            mem.delete_conversation(conversations[c])
            deleted.append(f"zqxmark{c:02d}x".encode())
            data = file_bytes(db_path)
            assert not [marker for marker in deleted if marker in data], f"after deleting conversation {c}"
        assert mem.search("garden bicycle", mode="keyword", record=False)


# --- what an edit put in the storyline card and the running link goes with the memory ------------------------


@pytest.fixture
def maya(db: str, clock: FakeClock, minilm: MiniLMEmbedder) -> Iterator[narrative.Memory]:
    memory = narrative.Memory(db, user="maya", embedder=minilm, clock=clock, env={})  # the real local model
    yield memory
    memory.close()


def card_and_link(mem: narrative.Memory, storyline_id: int) -> str:
    """What the storyline card and the running links say, as one text."""
    card = mem.store.get_storyline("maya", storyline_id)
    links = [n.summary for n in mem.store.list_narratives("maya")]
    return "\n".join([card.name, card.description, card.summary, *card.keywords, *links])


def test_an_edited_memory_leaves_no_edited_text_after_its_delete(
    maya: narrative.Memory, backend: str, db_path: Path
) -> None:
    """The tester's steps: a message, its memory edited, then deleted; the card had quoted the edit."""
    turn = maya.remember("My cat is called Tom.")
    memory = turn.memories[0]
    maya.edit_memory(memory.id, content=f"My cat is called {MARKER}, he is 12.")
    assert MARKER in card_and_link(maya, turn.storyline.id)  # the card quotes the edit
    maya.delete_memory(memory.id)
    assert MARKER not in card_and_link(maya, turn.storyline.id)
    assert MARKER not in maya.context("cat", record=False).text
    assert no_trace(maya, backend, db_path, "maya")


def test_a_memory_edited_twice_leaves_neither_edit(maya: narrative.Memory, backend: str, db_path: Path) -> None:
    first, second = f"{MARKER}one", f"{MARKER}two"
    turn = maya.remember("My cat is called Tom.")
    memory = turn.memories[0]
    maya.edit_memory(memory.id, content=f"My cat is called {first}, he is 12.")
    maya.edit_memory(memory.id, content=f"My cat is called {second}, he is 13.")
    assert second in card_and_link(maya, turn.storyline.id)
    # a card written while the first edit stood (by a model, say) quotes it: only the history still holds it
    maya.store.update_storyline("maya", turn.storyline.id, description=f"My cat is called {first}, he is 12.")
    maya.delete_memory(memory.id)
    left = card_and_link(maya, turn.storyline.id) + maya.context("cat", record=False).text
    assert first not in left and second not in left
    assert no_trace(maya, backend, db_path, "maya")  # MARKER is in both edits


def test_a_batch_delete_of_an_edited_memory_keeps_what_the_others_say(
    maya: narrative.Memory, backend: str, db_path: Path
) -> None:
    """The running link and the card keep the other memory's sentence; the edit's goes."""
    turn = maya.remember("My cat is called Tom.")
    other = maya.remember("My cat likes fish very much.")
    maya.edit_memory(turn.memories[0].id, content=f"My cat is called {MARKER}, he is 12.")
    assert MARKER in card_and_link(maya, turn.storyline.id)
    maya.delete_memories([turn.memories[0].id])
    left = card_and_link(maya, turn.storyline.id)
    assert MARKER not in left
    assert "My cat likes fish very much." in maya.store.get_storyline("maya", turn.storyline.id).summary
    link = maya.store.get_narrative("maya", other.memories[0].narrative_id or 0)
    assert not link.sealed and "likes fish" in link.summary
    assert no_trace(maya, backend, db_path, "maya")


def test_a_deleted_conversation_takes_an_edit_from_a_card_another_conversation_keeps(
    maya: narrative.Memory, backend: str, db_path: Path
) -> None:
    turn = maya.remember("My cat is called Tom.")
    maya.edit_memory(turn.memories[0].id, content=f"My cat is called {MARKER}, he is 12.")
    first = maya.close_conversation().conversation_id
    maya.start_conversation("second")
    later = maya.remember("My cat likes fish very much, the cat eats a lot.")
    assert later.storyline.id == turn.storyline.id and MARKER in card_and_link(maya, turn.storyline.id)
    maya.delete_conversation(first)
    assert MARKER not in card_and_link(maya, turn.storyline.id)
    assert "likes fish" in maya.store.get_storyline("maya", turn.storyline.id).summary
    assert no_trace(maya, backend, db_path, "maya")
