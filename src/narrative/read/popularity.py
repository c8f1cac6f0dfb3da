"""Source popularity (ITSERR): "Source popularity tracking" — which sources were most used over a period.

A source is one work: the research items naming it (``narrative.text.sources``: same title, else same reference
without pages), joined with the items consolidation linked to them as ``same_work`` (an untitled annotation right
after its citation, or a model's link).  Over the period ``[since, until)`` each source counts

* the research items about it made then, by kind: **cited** (citations), **annotated** (annotations),
  **quoted** (quotes), **noted** (notes); and
* how often any of its items was **recalled**: the recorded uses (searches, recalls, context blocks, reasoning)
  that showed one, in the period (an old source recalled this month counts this month).

``score = 2·cited + 2·annotated + 2·quoted + noted + recalled``: engaging with a source counts twice a look at it.
Sources are ranked by score, then by their newest item; a source with nothing in the period is left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from narrative.model import LinkKind, MemoryItem, Stream
from narrative.store.filters import MemoryFilter
from narrative.store.protocol import Store
from narrative.text.sources import research_details, source_label, work_key

__all__ = ["WEIGHTS", "SourceUse", "source_popularity"]

WEIGHTS = {"cited": 2, "annotated": 2, "quoted": 2, "noted": 1, "recalled": 1}
_KINDS = {"citation": "cited", "annotation": "annotated", "quote": "quoted", "note": "noted"}
EVERYTHING = 100_000


@dataclass(frozen=True)
class SourceUse:
    """One source's use over a period, with the items it is made of."""

    source: str
    memory_ids: tuple[int, ...]
    counts: dict[str, int] = field(default_factory=dict)
    score: int = 0
    last_used: datetime | None = None
    author: str | None = None
    work_title: str | None = None

    def why(self) -> dict[str, Any]:
        return {
            "counts": dict(self.counts),
            "score": self.score,
            "rule": "score = 2·cited + 2·annotated + 2·quoted + noted + recalled (items made, and uses, in the period)",
            "items": list(self.memory_ids),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "author": self.author,
            "work_title": self.work_title,
            "score": self.score,
            **{name: self.counts.get(name, 0) for name in WEIGHTS},
            "last_used": None if self.last_used is None else self.last_used.isoformat(),
            "memory_ids": list(self.memory_ids),
            "why": self.why(),
        }

    def summary(self) -> str:
        """ "Thinking in Systems (Donella Meadows): cited 1, annotated 1, recalled 3"."""
        said = [f"{name} {n}" for name in WEIGHTS if (n := self.counts.get(name, 0))]
        return f"{self.source}: {', '.join(said)}" if said else self.source


def _groups(store: Store, user_id: str, items: Sequence[MemoryItem]) -> list[list[MemoryItem]]:
    """Items of one work together: same work key, or joined by a ``same_work`` link (union-find)."""
    parent = {m.id: m.id for m in items}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(a: int, b: int) -> None:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    by_work: dict[str, int] = {}
    for memory in items:
        details = research_details(memory)
        key = work_key(details) if details is not None else None
        if key is not None:
            if key in by_work:
                join(memory.id, by_work[key])
            else:
                by_work[key] = memory.id
    for link in store.memory_links(user_id, [m.id for m in items], kinds=[LinkKind.SAME_WORK]):
        if link.memory_id in parent and link.linked_id in parent:
            join(link.memory_id, link.linked_id)
    grouped: dict[int, list[MemoryItem]] = {}
    for memory in items:
        grouped.setdefault(root(memory.id), []).append(memory)
    return list(grouped.values())


def _named(group: Sequence[MemoryItem]) -> MemoryItem:
    """The item that names the group best: one with a title, else a reference, else the first."""
    titled = [m for m in group if (d := research_details(m)) is not None and d.work_title]
    referenced = [m for m in group if (d := research_details(m)) is not None and d.source_reference and work_key(d)]
    return (titled or referenced or list(group))[0]


def source_popularity(
    store: Store, user_id: str, since: datetime | None = None, until: datetime | None = None, limit: int = 10
) -> list[SourceUse]:
    """The most used sources of the period, best first (module docstring)."""
    items = store.list_memories(user_id, MemoryFilter(streams=[Stream.RESEARCH], limit=EVERYTHING))
    if not items:
        return []
    recalls = store.use_counts(user_id, [m.id for m in items], since, until)
    found = []
    for group in _groups(store, user_id, sorted(items, key=lambda m: m.id)):
        counts: Counter[str] = Counter()
        last: datetime | None = None
        for memory in group:
            when = memory.event_at or memory.created_at
            details = research_details(memory)
            if (since is None or when >= since) and (until is None or when < until):
                counts[_KINDS.get(details.source_type if details else "note", "noted")] += 1
                last = max(last or when, when)
            counts["recalled"] += recalls.get(memory.id, 0)
        score = sum(WEIGHTS[k] * n for k, n in counts.items())
        if not score:
            continue
        name = _named(group)
        details = research_details(name)
        found.append(
            SourceUse(
                source=source_label(details, name.content),
                memory_ids=tuple(m.id for m in group),
                counts={k: n for k, n in counts.items() if n},
                score=score,
                last_used=last,
                author=details.author if details else None,
                work_title=details.work_title if details else None,
            )
        )
    found.sort(key=lambda s: (-s.score, -(s.last_used.timestamp() if s.last_used else 0), s.source))
    return found[:limit]
