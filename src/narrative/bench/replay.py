"""Replaying a benchmark's conversations through the write path, as a user would: one fresh store per benchmark
conversation, each of its sessions a conversation (started, its turns through ``remember_many``, closed and
confirmed).

A message the write path refuses (too long, say) is left out and reported, the way a user would see the error and
go on: ``remember_many`` checks every turn before it stores any, so a refused batch is retried in halves until
the refused messages stand alone, and everything else is stored, in order.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from narrative.engine import Memory, Turn
from narrative.errors import ValidationError


@dataclass(frozen=True)
class Refusal:
    """A message the write path would not store: its benchmark id, its length and what the engine said."""

    key: str
    characters: int
    error: str


@dataclass
class Ingested:
    turns: int = 0  # messages stored
    seconds: float = 0.0  # in ``remember_many`` (the write path, embeddings included)
    closing_seconds: float = 0.0  # closing and confirming the conversations
    refused: list[Refusal] = field(default_factory=list)
    storylines: int = 0
    narratives: int = 0
    memories_by_stream: dict[str, int] = field(default_factory=dict)


def replay(mem: Memory, start: datetime, turns: Sequence[Turn], end: datetime, into: Ingested, key: str) -> None:
    """One session as one conversation: started at ``start``, its turns remembered, closed and confirmed at
    ``end``; the timings and counts go ``into`` the running totals (``key``: the metadata naming a message)."""
    mem.start_conversation(at=start)
    started = time.perf_counter()
    into.turns += remember(mem, list(turns), into.refused, key)
    into.seconds += time.perf_counter() - started
    started = time.perf_counter()
    mem.close_conversation(at=end)
    mem.confirm_memory(at=end)
    into.closing_seconds += time.perf_counter() - started


def remember(mem: Memory, turns: Sequence[Turn], refused: list[Refusal], key: str) -> int:
    """``remember_many(turns)``; when it refuses the batch, each half on its own, down to the refused messages.
    Returns how many turns were stored."""
    if not turns:
        return 0
    try:
        mem.remember_many(turns)
        return len(turns)
    except ValidationError as error:
        if len(turns) == 1:
            refused.append(Refusal(str(turns[0].meta.get(key, "")), len(turns[0].content), str(error)))
            return 0
    half = len(turns) // 2
    return remember(mem, turns[:half], refused, key) + remember(mem, turns[half:], refused, key)


def count_memories(mem: Memory, into: Ingested) -> None:
    """What the store holds after the replay: storylines, narrative links, memories per stream."""
    into.storylines = len(mem.list_storylines())
    into.narratives = len(mem.list_narratives(limit=10_000))
    for memory in mem.list_memories(limit=100_000):
        into.memories_by_stream[memory.stream.value] = into.memories_by_stream.get(memory.stream.value, 0) + 1


@contextmanager
def workdir(keep: str | None, prefix: str) -> Iterator[Path]:
    """The folder of the per-conversation databases: ``keep`` (kept afterwards), or a scratch folder."""
    if keep:
        path = Path(keep)
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch:
        yield Path(scratch)


def fresh_memory(folder: Path, name: str, embedder: str, db: str | None = None) -> Memory:
    """An empty store for one benchmark conversation: its own SQLite file in ``folder`` (removed first), or, with
    ``db`` (a ``postgresql://`` URL), its own user ``name`` in that database (emptied first)."""
    if db is None:
        target = folder / f"{name}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{target}{suffix}").unlink(missing_ok=True)
        return Memory(target, user=name, embedder=embedder)
    with Memory(db, user=name, embedder=embedder) as old:
        old.store.delete_user(name)
    return Memory(db, user=name, embedder=embedder)
