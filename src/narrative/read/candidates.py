"""A search in progress: its candidates (memories and passages of messages), their ranks, scores and units.

Shared by the steps of :mod:`narrative.read.search` and by :mod:`narrative.read.conflicting`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from narrative.model import Conflict, MemoryBrief, Passage, Stream
from narrative.store.protocol import Store


@dataclass(frozen=True)
class Unit:
    """One ranked candidate: a memory, or a passage of a message (shown through its message's own memory)."""

    memory_id: int
    stream: Stream
    when: datetime
    sources: tuple[int, ...]
    passage: Passage | None = None


Key = tuple[str, int]  # ("m", memory id) or ("p", passage id)


@dataclass
class Candidates:
    """What the lists found: ranks and scores by key, fused scores by key, and every unit by key."""

    keyword: dict[Key, tuple[int, float]] = field(default_factory=dict)
    vector: dict[Key, tuple[int, float]] = field(default_factory=dict)
    fused: dict[Key, float] = field(default_factory=dict)  # raw reciprocal-rank sums
    units: dict[Key, Unit] = field(default_factory=dict)
    fused_max: float = 1.0  # a first place in every list searched
    passages: list[Passage] = field(default_factory=list)  # every passage found, best first
    loaded: dict[int, Passage] = field(default_factory=dict)  # passages read while ranking
    holds: dict[int, tuple[int, ...]] = field(default_factory=dict)  # memory id → its messages (passage hits)
    valid_to: dict[int, datetime | None] = field(default_factory=dict)  # memory id → when it was superseded
    conflicts: dict[int, Conflict] = field(default_factory=dict)  # conflicts read, by id
    asked: set[int] = field(default_factory=set)  # memories whose conflicts were read
    briefs: dict[int, MemoryBrief] = field(default_factory=dict)  # memory id → its brief, read with the lists
    of_message: dict[int, list[Passage]] = field(default_factory=dict)  # message id → its passages ([]: none)

    def passages_of(self, store: Store, user_id: str, message_ids: Iterable[int]) -> dict[int, list[Passage]]:
        """:meth:`Store.passages_of_messages` read once a search: each message's passages are read the first time
        a step asks for them (on PostgreSQL a search asked four times, one round trip each)."""
        wanted = set(message_ids)
        if missing := wanted - self.of_message.keys():
            read = store.passages_of_messages(user_id, missing)
            self.of_message.update({m: read.get(m, []) for m in missing})
        return {m: self.of_message[m] for m in wanted if self.of_message[m]}
