"""Reading the Koshi chain: the three search modes, walks, and the recall chain."""

from __future__ import annotations

from dataclasses import dataclass

from narrative.checks import require_positive
from narrative.errors import ValidationError
from narrative.model import MemoryItem, Narrative
from narrative.read.linked import LinkedMemory, linked_memories
from narrative.store.protocol import Store


def narrative_search(
    store: Store, user_id: str, narrative_id: int | None = None, query: str | None = None, limit: int = 10
) -> list[Narrative]:
    """Koshi's three modes, newest first: by id, by keyword (FTS5), or the latest one (session recovery)."""
    if narrative_id is not None and query:
        raise ValidationError("give either an id or a keyword query, not both", field="query")
    if narrative_id is not None:
        return [store.get_narrative(user_id, narrative_id)]
    if query is not None and query.strip():
        return store.search_narratives(user_id, query, limit=limit)
    latest = store.latest_narrative(user_id)
    return [] if latest is None else [latest]


def walk_back(store: Store, user_id: str, narrative_id: int, depth: int | None = None) -> list[Narrative]:
    """The link and its predecessors, newest first, to ``depth`` links (all when None)."""
    if depth is not None:
        require_positive(depth, "depth")
    chain = [store.get_narrative(user_id, narrative_id)]
    seen = {narrative_id}
    while chain[-1].previous_narrative_id is not None and (depth is None or len(chain) < depth):
        previous_id = chain[-1].previous_narrative_id
        if previous_id in seen:  # a cycle cannot be written through the API, but never loop
            break
        seen.add(previous_id)
        chain.append(store.get_narrative(user_id, previous_id))
    return chain


def walk_forward(store: Store, user_id: str, narrative_id: int, depth: int | None = None) -> list[Narrative]:
    """Every link that continues this one, on every branch, up to ``depth`` steps away (all when None).

    Depth first, the continuations of a link oldest first: an unbranched chain comes out oldest first, and a
    later branch follows the whole of the earlier one; each link's ``previous_narrative_id`` says where it hangs.
    """
    if depth is not None:
        require_positive(depth, "depth")
    store.get_narrative(user_id, narrative_id)
    chain: list[Narrative] = []
    seen = {narrative_id}
    stack = [(n, 1) for n in store.narratives_after(user_id, narrative_id)]  # newest first: the oldest pops first
    while stack:
        link, steps = stack.pop()
        if link.id in seen:  # a cycle cannot be written through the API, but never loop
            continue
        seen.add(link.id)
        chain.append(link)
        if depth is None or steps < depth:
            stack += [(n, steps + 1) for n in store.narratives_after(user_id, link.id) if n.id not in seen]
    return chain


@dataclass(frozen=True)
class RecallChain:
    """Koshi's door into a chain: the memory, its narrative, its siblings, and earlier links."""

    memory: MemoryItem
    narrative: Narrative | None
    siblings: tuple[MemoryItem, ...]
    earlier: tuple[Narrative, ...]
    linked: tuple[LinkedMemory, ...] = ()  # research items of the same work, author or idea; decision chain links

    def to_dict(self) -> dict[str, object]:
        return {
            "memory_id": self.memory.id,
            "narrative": None
            if self.narrative is None
            else {
                "id": self.narrative.id,
                "summary": self.narrative.summary,
                "topic": self.narrative.topic,
            },
            "sibling_ids": [m.id for m in self.siblings],
            "earlier": [{"id": n.id, "summary": n.summary, "topic": n.topic} for n in self.earlier],
            "linked": [item.to_dict() for item in self.linked],
        }


def recall_chain(store: Store, user_id: str, memory_id: int, depth: int = 3) -> RecallChain:
    """memory → its narrative → sibling memories of that arc → ``depth`` earlier links; and the memories linked
    to it (consolidation, decision chains)."""
    memory = store.get_memory(user_id, memory_id)
    linked = tuple(linked_memories(store, user_id, memory_id))
    if memory.narrative_id is None:
        return RecallChain(memory, None, (), (), linked)
    narrative = store.get_narrative(user_id, memory.narrative_id)
    sibling_ids = [i for i in narrative.memory_ids if i != memory.id]
    siblings = tuple(store.get_memories(user_id, sibling_ids))
    earlier: tuple[Narrative, ...] = ()
    if narrative.previous_narrative_id is not None and depth > 0:
        earlier = tuple(walk_back(store, user_id, narrative.previous_narrative_id, depth))
    return RecallChain(memory, narrative, siblings, earlier, linked)
