"""The whole text a memory stands for.

A memory of a long message quotes it by its first passage and a mark of the rest (``text.passages.excerpt``):
the message keeps every word, the memory need not copy it.  A reader who asks for the memory in full (``memory
show``) or takes it away (the JSONL and CSV exports) must not get the excerpt for the whole: this gives the
memory's text with each cut turn put back whole, read from its source messages.

Only a memory whose text is still exactly what the excerpts of its messages make is given back whole; any other
(a memory edited by hand, a decision or note in its own words, a summary, a message shortened since) is its own
text, as it is.

One memory fetched by id (``GET /memories/{id}``, MCP ``get_memory``) is a :class:`WholeMemory`: the memory as
stored, ``content`` unchanged, with ``text`` beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace

from narrative.model import MemoryItem, Message, Stream
from narrative.store.protocol import Store
from narrative.text.lines import exchange_text
from narrative.text.passages import excerpt

__all__ = ["WholeMemory", "full_text", "full_texts", "whole_memory"]

_CUT = " …"  # what an excerpt ends with when it left something out


def full_texts(store: Store, user_id: str, memories: Sequence[MemoryItem]) -> dict[int, str]:
    """Each memory's whole text by its id: its own text, or, for an excerpt of long messages, their words."""
    cut = [m for m in memories if _may_be_cut(m)]
    wanted = sorted({i for m in cut for i in m.message_ids})
    messages = {x.id: x for x in store.get_messages(user_id, wanted)} if wanted else {}
    return {m.id: _whole(m, messages) if _may_be_cut(m) else m.content for m in memories}


def full_text(store: Store, user_id: str, memory: MemoryItem) -> str:
    """One memory's whole text (see :func:`full_texts`)."""
    return full_texts(store, user_id, [memory])[memory.id]


@dataclass(frozen=True, kw_only=True)
class WholeMemory(MemoryItem):
    """A memory as stored (``content`` its own text) and ``text``, the whole text it stands for."""

    text: str = field(  # the metadata's description is what the HTTP and MCP schemas say of the field
        metadata={
            "description": "The whole text the memory holds: `content`, except that a memory of a long message"
            " (whose `content` quotes only its first passage, ending ' …') gives the message whole."
        }
    )


def whole_memory(store: Store, user_id: str, memory: MemoryItem) -> WholeMemory:
    """``memory`` with its whole text (one read of its messages when it may be an excerpt, none otherwise)."""
    held = {f.name: getattr(memory, f.name) for f in fields(MemoryItem)}  # a WholeMemory given: its text is new
    return WholeMemory(**held, text=full_text(store, user_id, memory))


def _may_be_cut(m: MemoryItem) -> bool:
    """A conversation memory of one turn or an exchange of two, with an excerpt's mark in its text."""
    return m.stream is Stream.CONVERSATION and 1 <= len(m.message_ids) <= 2 and _CUT in m.content


def _whole(m: MemoryItem, messages: dict[int, Message]) -> str:
    turns = [messages.get(i) for i in m.message_ids]
    held = [t for t in turns if t is not None]
    if len(held) != len(turns):
        return m.content  # a source message is gone: the memory's own text is all there is
    held.sort(key=lambda t: (t.position, t.id))
    quoted = [replace(t, content=excerpt(t.content)) for t in held]
    if _exchange(quoted) != m.content:
        return m.content  # not (or no longer) the excerpt of these messages: the memory says it its own way
    return _exchange(held)


def _exchange(turns: list[Message]) -> str:
    return exchange_text(None, turns[0]) if len(turns) == 1 else exchange_text(turns[0], turns[1])
