"""Other processes on the same database: writers for one user, and a user deleted under a running memory.

Two processes writing turns for one user at once: every turn is processed exactly once (issue 24, F2).

On PostgreSQL two writers could interleave inside one user's write path: one sealed the running narrative
link while the other was extending it, and the second failed with ``SealedNarrative`` (its turn stored but
never processed, so a client that retried stored it twice).  The store now serialises one user's write
transactions (PostgreSQL: a transaction-scoped advisory lock per user; SQLite: ``BEGIN IMMEDIATE`` already
does).  No timing: two child processes start together on a signal, each remembers many turns on topics that
change often (so links are sealed often), and the test counts what was stored.

A user deleted by another process while a memory (a server, an MCP server, a long-lived ``Memory``) holds
it: every later call of that memory for the user works again, on a fresh user (issue 24, F4; the memory had
cached that the user exists, and every write failed on the missing row until a restart).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import narrative
from narrative.providers.embed import HashingEmbedder

TURNS = 40

CHILD = textwrap.dedent(
    """
    import json, random, sys
    import narrative
    db, name, turns = sys.argv[1], sys.argv[2], int(sys.argv[3])
    topics = [
        "the garden beds need compost and the tomatoes need water",
        "the bicycle brakes squeal and the chain needs oil",
        "the tax return is due and the receipts are in a shoebox",
        "the violin lessons moved to Thursday with the new teacher",
    ]
    rng = random.Random(name)
    errors = []
    with narrative.Memory(db, user="ana", embedder="hashing", env={}) as mem:
        mem.list_storylines()
        print("ready", flush=True)
        sys.stdin.readline()  # go
        for i in range(turns):
            text = f"{name} turn {i}: {rng.choice(topics)}"
            try:
                mem.remember(text, speaker="Ana")
            except Exception as error:
                errors.append(f"{type(error).__name__}: {error}")
    print(json.dumps(errors), flush=True)
    """
)


def test_two_processes_writing_for_one_user_process_every_turn_once(db: str) -> None:
    with narrative.Memory(db, user="ana", embedder="hashing", env={}) as setup:
        setup.list_storylines()  # the user and Your Story exist before the race
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, db, name, str(TURNS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("left", "right")
    ]
    for child in children:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    for child in children:  # both are waiting: let them go together
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    errors = []
    for child in children:
        out, _ = child.communicate(timeout=600)
        assert child.returncode == 0
        errors += json.loads(out.strip().splitlines()[-1])
    assert errors == []
    with narrative.Memory(db, user="ana", embedder="hashing", env={}) as mem:
        assert mem.pending_messages() == []  # every turn's derived work is done
        texts = [m.content for m in mem.messages(limit=10_000)]
        expected = [f"{name} turn {i}:" for name in ("left", "right") for i in range(TURNS)]
        assert sorted(t.split(":")[0] + ":" for t in texts) == sorted(expected)  # each once
        assert mem.process_pending() == []
        positions = [m.position for m in mem.messages(limit=10_000)]
        assert positions == sorted(set(positions))  # no gap-less order broken, no duplicate


def test_a_user_deleted_by_another_process_starts_afresh_in_a_running_memory(db: str) -> None:
    with narrative.Memory(db, user="bob", embedder="hashing", env={}) as running:
        running.remember("the garden needs water before the heatwave", speaker="Bob")
        running.add_memory("Bob's locker is number 12")
        deleted = subprocess.run(
            [sys.executable, "-m", "narrative.interfaces.cli", "--db", db, "delete", "user", "bob", "--yes"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert deleted.returncode == 0, deleted.stderr
        assert running.search("garden", record=False) == []  # a read finds nothing and does not look the user up
        result = running.remember("the tomatoes came up this week", speaker="Bob")  # failed before: a cached id
        assert result.message.position == 1 and running.pending_messages() == []
        assert [m.content for m in running.messages()] == ["the tomatoes came up this week"]
        assert running.add_memory("a new fact after the delete").id
        hits = running.search("tomatoes", record=True)
        assert hits and "tomatoes came up" in hits[0].memory.content
        assert not [h for h in running.search("locker", record=False) if "locker" in h.memory.content]
        assert running.context("tomatoes").text
        assert running.your_story().name
        assert running.embedding_status()["memory_vectors"] == {HashingEmbedder().identity: 2}
