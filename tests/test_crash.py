"""``kill -9`` during ingest loses nothing committed and leaves a consistent file (issue 12).

A child process remembers turns as fast as it can with the real model and prints each message id
once its turn has committed; once it has reported a few committed turns, the parent kills it with
SIGKILL (during a later turn), three times on one database (a SQLite file, and PostgreSQL).  After each
kill: ``narrative check`` (the real command, as a user would run it after a crash) finds no problem (an
interrupted turn is at most a note), every printed message is there, ``process_pending`` finishes the
interrupted turn's work without duplicates, ``narrative check`` then finds nothing pending, and the vector
index holds every memory.

The kill waits for the child's reports, never for the clock, so the test holds on a loaded machine:
``python bench/crash_under_load.py`` runs it with the CPU saturated (docs/reliability.md).
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import narrative

CHILD = textwrap.dedent(
    """
    import itertools, sys
    import narrative
    with narrative.Memory(sys.argv[1], user="alice", embedder="minilm", env={}) as mem:
        mem.process_pending()
        print("ready", flush=True)
        for i in itertools.count():
            result = mem.remember(f"turn {sys.argv[2]}-{i}: we decided to water the plot {i} at dawn", speaker="alice")
            print(result.message.id, flush=True)
    """
)


def ingest_then_kill(db: str, round_: int, turns: int, pause: float) -> list[int]:
    """Start a child, wait until it has reported ``turns`` committed turns, then SIGKILL it ``pause`` seconds
    later (mid-way through a later turn, at a moment the test does not choose).  The kill waits for the child's
    own reports, never for the machine's speed: on a loaded machine the child is just slower."""
    process = subprocess.Popen([sys.executable, "-c", CHILD, db, str(round_)], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    reported = [int(process.stdout.readline()) for _ in range(turns)]
    time.sleep(pause)  # only chooses where the kill lands; any moment is a valid moment
    process.send_signal(signal.SIGKILL)
    out, _ = process.communicate(timeout=600)
    assert process.returncode == -signal.SIGKILL
    return reported + [int(line) for line in out.split()]


def narrative_check(db: str) -> dict[str, Any]:
    """``narrative check --json`` on ``db``: the report, after asserting it found no problem."""
    done = subprocess.run(
        [sys.executable, "-m", "narrative.interfaces.cli", "--db", db, "--embedder", "minilm", "check", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    report: dict[str, Any] = json.loads(done.stdout)
    problems = [c for c in report["checks"] if c["status"] == "problem"]
    assert done.returncode == 0 and report["ok"] and not problems, problems or done.stderr
    return report


def pending_status(report: dict[str, Any]) -> str:
    return str(next(c["status"] for c in report["checks"] if c["check"] == "pending"))


def test_kill_9_during_ingest_loses_nothing(db: str, backend: str) -> None:
    rng = random.Random(12)
    committed: list[int] = []
    for round_ in range(3):
        committed += ingest_then_kill(db, round_, rng.randint(1, 4), rng.uniform(0.0, 0.05))
        assert pending_status(narrative_check(db)) in ("ok", "note")  # whole; an interrupted turn is a note
        with narrative.Memory(db, user="alice", embedder="minilm", env={}) as mem:
            stored = {m.id for m in mem.messages(limit=1_000_000)}
            assert set(committed) <= stored  # every turn reported as done is there
            before = mem.store.count_rows("memories")
            mem.process_pending()
            assert not mem.pending_messages()
            after = mem.store.count_rows("memories")
            assert mem.process_pending() == [] and mem.store.count_rows("memories") == after  # nothing twice
            assert pending_status(narrative_check(db)) == "ok"
            assert after >= before
            assert not mem.store.memories_without_vectors("alice")
            embedder = mem.embedder
            assert embedder is not None
            everything = mem.list_memories(limit=1_000_000)
            stored_vectors = mem.store.vectors_by_id("alice", embedder.identity, [m.id for m in everything[:5]])
            for memory in everything[:5]:  # the index holds every memory (ranking aside)
                query = stored_vectors[memory.id]  # a summary's vector is not its text's (the mean of its sources)
                twins = sum(m.content == memory.content for m in everything)  # reflections may repeat a text
                hits = mem.store.vector_search("alice", query, embedder.identity, k=twins + 5)
                assert memory.id in {memory_id for memory_id, _ in hits}
    assert committed, "the child never finished a turn"
