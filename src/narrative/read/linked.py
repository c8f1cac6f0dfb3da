"""Opening a memory's links: the research items about the same work, author or idea (consolidation), and the
decisions it builds on or reverses or that build on or reverse it (decision chains)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from narrative.model import LinkKind, MemoryItem, MemoryLink
from narrative.store.protocol import Store

__all__ = ["LinkedMemory", "linked_memories"]


@dataclass(frozen=True)
class LinkedMemory:
    """A memory linked to the one asked about; ``direction`` is ``earlier`` (the asked one links to it) or
    ``later`` (it links to the asked one)."""

    memory: MemoryItem
    link: MemoryLink
    direction: str

    def why(self) -> dict[str, Any]:
        return {
            "kind": self.link.kind.value,
            "origin": self.link.origin.value,
            "reason": self.link.reason,
            "score": self.link.score,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory.id,
            "content": self.memory.content,
            "stream": self.memory.stream.value,
            "created_at": (self.memory.event_at or self.memory.created_at).isoformat(),
            "direction": self.direction,
            "kind": self.link.kind.value,
            "why": self.why(),
        }


def linked_memories(
    store: Store, user_id: str, memory_id: int, kinds: Sequence[LinkKind] | None = None
) -> list[LinkedMemory]:
    """Every memory linked to ``memory_id`` (either way), the strongest link first, then the newest memory."""
    links = store.memory_links(user_id, [memory_id], kinds=kinds)
    others = {k.linked_id if k.memory_id == memory_id else k.memory_id for k in links}
    found = {m.id: m for m in store.get_memories(user_id, others)}
    opened = [
        LinkedMemory(found[other], k, "earlier" if k.memory_id == memory_id else "later")
        for k in links
        if (other := k.linked_id if k.memory_id == memory_id else k.memory_id) in found
    ]
    opened.sort(key=lambda o: (-o.link.score, -o.memory.id))
    return opened
