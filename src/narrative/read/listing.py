"""A list of memories that shows each fact once (the memories list, a storyline's memories, the page).

An exchange holds the turn it answers and the turn itself, so consecutive exchanges share a turn; a decision or
research note is made from one turn an exchange also holds.  Listed as they are stored, a 20-message storyline
would show most sentences twice.  Walking the list in its order (memories a person reviewed first), each memory
shows only the messages no memory above it showed; one whose messages were all shown already is folded into the
memory that showed the first of them (``folded_into``; that one names it in ``also``).  Summaries (reflections,
closing memories) are always listed: they quote no single message.  Nothing is hidden from the API: a folded
memory is still in the list, marked, so it can be opened, edited or deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from narrative.model import SUMMARY_STREAMS, MemoryItem
from narrative.read.current import stale_messages
from narrative.store.filters import MemoryFilter
from narrative.store.protocol import Store
from narrative.text.lines import turn_line

__all__ = ["Listed", "ListedMemory", "count_in_conversations", "one_fact_once"]


@dataclass(frozen=True, kw_only=True)
class ListedMemory(MemoryItem):
    """A memory as a list gives it (``Listed.to_dict``): the memory as stored, and what the list shows of it.

    The type the HTTP list's schema is made of; the metadata's descriptions are what that schema says."""

    text: str = field(
        metadata={
            "description": "What the list shows of the memory: its text, or only its turns no memory above it in"
            " the list shows (each fact once). Not the whole text: GET /memories/{id} gives that."
        }
    )
    folded_into: int | None = field(
        default=None,
        metadata={
            "description": "The memory above it in this list that shows all its messages (null when it shows"
            " something of its own); it is still listed, to be opened, edited or deleted."
        },
    )
    also: list[int] = field(
        default_factory=list,
        hash=False,
        metadata={"description": "The memories of this list folded into this one: they show the same messages."},
    )


@dataclass
class Listed:
    """One memory of a list: the text it shows there and what it folds in (or which memory folds it in)."""

    memory: MemoryItem
    text: str
    folded_into: int | None = None
    also: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The fields of :class:`ListedMemory`, in its order: the memory's, then ``text``, ``folded_into``, ``also``."""
        memory = {f.name: getattr(self.memory, f.name) for f in fields(MemoryItem)}
        return {f.name: memory[f.name] if f.name in memory else getattr(self, f.name) for f in fields(ListedMemory)}


def one_fact_once(store: Store, user_id: str, memories: Sequence[MemoryItem]) -> list[Listed]:
    """``memories`` in their order, each with the text it shows and what it folds in (see the module text)."""
    listed = [Listed(m, m.content) for m in memories]
    order = sorted(range(len(listed)), key=lambda i: (not memories[i].user_reviewed, i))
    quoting = [m for m in memories if m.stream not in SUMMARY_STREAMS and len(m.message_ids) > 1]
    wanted = sorted({i for m in quoting for i in m.message_ids})
    said = {m.id: m for m in store.get_messages(user_id, wanted)} if wanted else {}
    stale = stale_messages(store, user_id, wanted)  # a later statement superseded them
    owner: dict[int, Listed] = {}
    for index in order:
        item = listed[index]
        memory = item.memory
        if memory.stream in SUMMARY_STREAMS or not memory.message_ids:
            continue
        hidden = stale if memory.is_current else set()  # a current exchange does not show what it corrected
        new = [i for i in memory.message_ids if i not in owner and i not in hidden]
        holder = next((owner[i] for i in memory.message_ids if i in owner), None)
        if not new and not memory.user_reviewed and holder is not None:
            item.folded_into = holder.memory.id
            holder.also.append(memory.id)
            continue
        new = new or [i for i in memory.message_ids if i not in owner]
        if len(new) < len(memory.message_ids) and all(i in said for i in new):
            item.text = "\n".join(turn_line(said[i]) for i in new)
        owner.update(dict.fromkeys(new, item))
    return listed


def count_in_conversations(store: Store, user_id: str, conversation_ids: Sequence[int]) -> int:
    """How many memories these conversations hold (0 for none)."""
    if not conversation_ids:
        return 0
    return store.count_memories(user_id, MemoryFilter(conversation_ids=list(conversation_ids)))
