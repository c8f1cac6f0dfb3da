"""Walking a decision chain (ITSERR: "Decision chains tracked (how one decision influenced others)").

From any decision: the earlier decisions it builds on or reverses, and theirs in turn (``earlier``), and the later
decisions that build on or reverse it, and theirs in turn (``later``).  A decision some later decision reverses no
longer stands (``stands`` is False).  The links themselves are made on the write path (``write/chains.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from narrative.errors import ValidationError
from narrative.model import DECISION_LINKS, LinkKind, MemoryItem, MemoryLink, Stream
from narrative.read.audit import decision_details
from narrative.store.protocol import Store

__all__ = ["ChainStep", "DecisionChain", "decision_chain"]

MAX_STEPS = 200  # decisions one walk visits at most


@dataclass(frozen=True)
class ChainStep:
    """One decision of a chain, ``steps`` links away, with the link that reached it (``via``)."""

    memory: MemoryItem
    steps: int
    via: MemoryLink
    stands: bool

    def to_dict(self) -> dict[str, Any]:
        details = decision_details(self.memory)
        return {
            "memory_id": self.memory.id,
            "decision": details.decision or self.memory.content,
            "content": self.memory.content,
            "rationale": details.rationale,
            "alternatives": list(details.alternatives_considered),
            "decided_at": (self.memory.event_at or self.memory.created_at).isoformat(),
            "steps": self.steps,
            "link": {
                "from": self.via.memory_id,
                "to": self.via.linked_id,
                "kind": self.via.kind.value,
                "origin": self.via.origin.value,
                "reason": self.via.reason,
            },
            "stands": self.stands,
        }


@dataclass(frozen=True)
class DecisionChain:
    """A decision with what it built on or reversed (``earlier``) and what built on or reversed it (``later``)."""

    decision: MemoryItem
    stands: bool
    earlier: tuple[ChainStep, ...]
    later: tuple[ChainStep, ...]

    def text(self) -> str:
        def line(step: ChainStep) -> str:
            verb = "builds on" if step.via.kind is LinkKind.BUILDS_ON else "reverses"
            gone = "" if step.stands else " (reversed)"
            return (
                f"{'  ' * step.steps}#{step.via.memory_id} {verb} #{step.via.linked_id}: "
                f"{step.memory.content}{gone} — {step.via.reason}"
            )

        head = f"#{self.decision.id} {self.decision.content}" + ("" if self.stands else " (reversed)")
        lines = [head]
        if self.earlier:
            lines += ["Earlier:", *(line(s) for s in self.earlier)]
        if self.later:
            lines += ["Later:", *(line(s) for s in self.later)]
        if not (self.earlier or self.later):
            lines.append("No decision builds on it or reverses it, and it builds on none.")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        details = decision_details(self.decision)
        return {
            "memory_id": self.decision.id,
            "decision": details.decision or self.decision.content,
            "content": self.decision.content,
            "stands": self.stands,
            "earlier": [s.to_dict() for s in self.earlier],
            "later": [s.to_dict() for s in self.later],
            "text": self.text(),
        }


def decision_chain(store: Store, user_id: str, memory_id: int) -> DecisionChain:
    """The chain through one decision, both ways, breadth first (nearest links first)."""
    start = store.get_memory(user_id, memory_id)
    if start.stream is not Stream.DECISION:
        raise ValidationError(f"memory {memory_id} is not a decision (stream {start.stream.value})", field="memory_id")
    kinds = sorted(DECISION_LINKS)
    earlier = _walk(store, user_id, start.id, kinds, backward=True)
    later = _walk(store, user_id, start.id, kinds, backward=False)
    reached = [s.memory.id for s in (*earlier, *later)]
    reversed_ids = {k.linked_id for k in store.memory_links(user_id, [start.id, *reached], kinds=[LinkKind.REVERSES])}
    return DecisionChain(
        start,
        start.id not in reversed_ids,
        tuple(_stand(s, reversed_ids) for s in earlier),
        tuple(_stand(s, reversed_ids) for s in later),
    )


def _stand(step: ChainStep, reversed_ids: set[int]) -> ChainStep:
    return ChainStep(step.memory, step.steps, step.via, step.memory.id not in reversed_ids)


def _walk(store: Store, user_id: str, start: int, kinds: list[LinkKind], *, backward: bool) -> list[ChainStep]:
    seen, frontier, steps = {start}, [start], 0
    found: list[ChainStep] = []
    while frontier and len(found) < MAX_STEPS:
        steps += 1
        links = store.memory_links(user_id, frontier, kinds=kinds)
        if backward:
            nxt = [(k, k.linked_id) for k in links if k.memory_id in frontier]
        else:
            nxt = [(k, k.memory_id) for k in links if k.linked_id in frontier]
        fresh = [(k, other) for k, other in nxt if other not in seen]
        memories = {m.id: m for m in store.get_memories(user_id, {other for _, other in fresh})}
        frontier = []
        for link, other in sorted(fresh, key=lambda p: (-p[1], p[0].kind.value)):
            if other in seen or other not in memories:
                continue
            seen.add(other)
            frontier.append(other)
            found.append(ChainStep(memories[other], steps, link, True))
    return found[:MAX_STEPS]
