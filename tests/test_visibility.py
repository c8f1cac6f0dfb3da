"""Every connection sees every committed memory: the in-process indexes follow the change log.

Two ``Memory`` objects (and two processes) write to one database and search it; each must find every
memory, its own and the other's, by vector and by hybrid search (issue 12: a process that both
wrote and searched used to miss the other process's vectors).  On both stores.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

import narrative
from narrative.providers.embed import MiniLMEmbedder

TOPICS = [
    "the lighthouse keeper painted the railing blue",
    "our sourdough starter needs feeding twice a day",
    "the quarterly tax payment is due in September",
    "Marta adopted a grey kitten named Pepper",
    "the bicycle chain snapped on the mountain pass",
    "we booked the ferry to the island for Friday",
    "the violin teacher moved the lesson to Tuesday",
    "the greenhouse tomatoes caught blight this summer",
]


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    embedder = MiniLMEmbedder()
    embedder.embed_batch(["warm up"])
    return embedder


@pytest.fixture
def pair(db: str, minilm: MiniLMEmbedder) -> Iterator[tuple[narrative.Memory, narrative.Memory]]:
    first = narrative.Memory(db, user="alice", embedder=minilm, env={})
    second = narrative.Memory(db, user="alice", embedder=minilm, env={})
    yield first, second
    first.close()
    second.close()


def found(mem: narrative.Memory, text: str, memory_id: int, mode: str) -> bool:
    return memory_id in {hit.memory.id for hit in mem.search(text, k=3, mode=mode, record=False)}


def test_two_memory_objects_on_one_file_find_every_memory(pair: tuple[narrative.Memory, narrative.Memory]) -> None:
    first, second = pair
    written: list[tuple[str, int]] = []
    for i, text in enumerate(TOPICS):
        writer = first if i % 2 == 0 else second
        written.append((text, writer.add_memory(text).id))
        for earlier_text, earlier_id in written:  # the writer's own write must not hide the other's commits
            for mode in ("vector", "hybrid"):
                assert found(writer, earlier_text, earlier_id, mode), (mode, earlier_text)
    for mem in (first, second):
        for text, memory_id in written:
            assert found(mem, text, memory_id, "vector") and found(mem, text, memory_id, "hybrid")


def test_a_deleted_memory_leaves_the_other_objects_index(pair: tuple[narrative.Memory, narrative.Memory]) -> None:
    first, second = pair
    ids = [first.add_memory(text).id for text in TOPICS[:3]]
    assert found(second, TOPICS[0], ids[0], "vector")
    first.delete_memory(ids[0])
    assert all(hit.memory.id != ids[0] for hit in second.search(TOPICS[0], k=5, mode="vector", record=False))
    assert found(second, TOPICS[1], ids[1], "vector")


CHILD = textwrap.dedent(
    """
    import sys
    import narrative
    with narrative.Memory(sys.argv[1], user="alice", embedder="minilm", env={}) as mem:
        for line in sys.stdin:
            mem.add_memory(line.strip())
            print(mem.search(line.strip(), k=1, mode="vector", record=False)[0].memory.id, flush=True)
    """
)


def test_two_processes_writing_and_searching_see_each_other(
    db: str, pair: tuple[narrative.Memory, narrative.Memory]
) -> None:
    parent = pair[0]
    parent.search("warm the index", mode="vector", record=False)
    written: list[tuple[str, int]] = []
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, db], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdin is not None and child.stdout is not None
        for i, text in enumerate(TOPICS):
            if i % 2 == 0:
                written.append((text, parent.add_memory(text).id))
            else:
                child.stdin.write(text + "\n")
                child.stdin.flush()
                written.append((text, int(child.stdout.readline())))
            for earlier_text, earlier_id in written:
                for mode in ("vector", "hybrid"):
                    assert found(parent, earlier_text, earlier_id, mode), (mode, earlier_text)
        child.stdin.close()
        assert child.wait(timeout=60) == 0


def test_a_rolled_back_vector_leaves_the_index(pair: tuple[narrative.Memory, narrative.Memory]) -> None:
    first, _ = pair
    kept = first.add_memory(TOPICS[0]).id
    with pytest.raises(RuntimeError), first.store.transaction():
        undone = first.add_memory(TOPICS[1]).id
        assert found(first, TOPICS[1], undone, "vector")  # the index read the uncommitted vector
        raise RuntimeError("undo")
    later = first.add_memory(TOPICS[2]).id  # reuses the log positions (and the id) the undone work had taken
    hits = first.search(TOPICS[1], k=5, mode="vector", record=False)
    assert TOPICS[1] not in {h.memory.content for h in hits}
    assert found(first, TOPICS[0], kept, "vector")
    top = first.search(TOPICS[2], k=1, mode="vector", record=False)[0]
    assert (top.memory.id, top.memory.content) == (later, TOPICS[2])
    assert top.similarity is not None and top.similarity > 0.99  # its own vector, not the undone one


def test_the_change_log_prunes_itself(pair: tuple[narrative.Memory, narrative.Memory]) -> None:
    first, second = pair
    first.add_memory(TOPICS[0])
    assert found(second, TOPICS[0], first.list_memories(limit=1)[0].id, "vector")
    with first.store.transaction():  # 24,000 log entries at once (the same SQL on both stores)
        first.store._exec(  # type: ignore[attr-defined]
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 24000)"
            " INSERT INTO memory_changes(memory_id) SELECT 0 FROM n"
        )
    kept = 10_000 if first.store.backend == "postgres" else 5_000  # PostgreSQL logs sources and conflicts too
    assert first.store.count_rows("memory_changes") <= kept + 1_000
    late = first.add_memory(TOPICS[2]).id  # the other object's index is far behind: it rebuilds
    assert found(second, TOPICS[2], late, "vector") and found(second, TOPICS[2], late, "hybrid")
