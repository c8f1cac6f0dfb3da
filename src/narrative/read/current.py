"""What is current: the one rule every reader applies (search, context, scene memory, greeting).

A memory is current until a later statement supersedes it (``valid_to``).  A message is current while any of
its passages is; a message whose every passage a correction superseded is no longer shown as what is true
(it stays stored, searchable with ``include_superseded`` or ``as_of`` a time before the correction).  A message
whose own memory a person deleted is not shown either: its passages went with that memory, and "forget this"
must reach what an agent is told (the message stays in its conversation's record until the conversation is
deleted).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime

from narrative.model import Message, Passage
from narrative.store.protocol import Store

__all__ = ["current_messages", "forgotten_messages", "stale_messages"]


def stale_messages(
    store: Store,
    user_id: str,
    message_ids: Iterable[int],
    as_of: datetime | None = None,
    passages_of: Callable[[set[int]], Mapping[int, list[Passage]]] | None = None,
) -> set[int]:
    """The messages none of whose passages is current (now, or at ``as_of``); ``passages_of``: how to read the
    messages' passages (a search's cache), else the store."""
    ids = set(message_ids)
    if not ids:
        return set()
    stale = set()
    found = passages_of(ids) if passages_of is not None else store.passages_of_messages(user_id, ids)
    for message_id, passages in found.items():
        ends = [p.valid_to for p in passages]
        if all(end is not None and (as_of is None or end <= as_of) for end in ends):
            stale.add(message_id)
    return stale | forgotten_messages(store, user_id, ids - found.keys())


def forgotten_messages(store: Store, user_id: str, message_ids: Iterable[int]) -> set[int]:
    """Of messages without passages, those whose own memory was deleted: processed (routed to a storyline) and
    without their own conversation memory.  A message stored before there were passages still has its memory
    (``narrative reindex`` gives it passages); one not processed yet has neither and is shown."""
    bare = sorted(set(message_ids))
    if not bare:
        return set()
    owned = store.own_memories(user_id, bare)
    return {
        m.id for m in store.get_messages(user_id, [i for i in bare if i not in owned]) if m.storyline_id is not None
    }


def current_messages(store: Store, user_id: str, messages: Sequence[Message]) -> list[Message]:
    """``messages`` without those a later correction superseded, in order."""
    stale = stale_messages(store, user_id, (m.id for m in messages))
    return [m for m in messages if m.id not in stale]
