"""What the review lets in: the memory a person confirms, once, and nothing they took out.

Two rules the close path applies when a preview is confirmed (docs/decisions.md, "What a close stores"):

* an extracted item the person removed is not stored — neither the entity nor the turn note (the decision
  memory) the write path made from the same sentence;
* a closing memory the machine wrote that only restates one sentence of the conversation is not stored as a
  copy: confirming points at the conversation memory that holds the sentence (it becomes the reviewed memory,
  filed where the person chose).  A text the person wrote or edited is always stored as written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from narrative.model import DecisionDetails, EntityType, MemoryItem, Message, Stream
from narrative.store.filters import MemoryFilter
from narrative.store.protocol import Store
from narrative.text import patterns as P
from narrative.text.words import restated_in
from narrative.write.compress import PreviewEntity

__all__ = ["adopt", "removed_turn_notes", "restated_memory"]

EVERY = 100_000


class Reviewed(Protocol):
    """The parts of a preview these rules read."""

    conversation_id: int
    entities: list[PreviewEntity]
    removed: list[str]


def removed_turn_notes(store: Store, user_id: str, preview: Reviewed) -> list[int]:
    """Ids of the decision memories made from the decisions the person removed from the preview."""
    gone = [e for e in preview.entities if e.key in preview.removed and e.entity_type is EntityType.DECISION]
    if not gone:
        return []
    wanted = {(_message_of(e), _folded(str(e.data.get("what") or e.name))) for e in gone}
    notes = store.list_memories(
        user_id, MemoryFilter(conversation_ids=[preview.conversation_id], streams=[Stream.DECISION], limit=EVERY)
    )
    return [
        m.id
        for m in notes
        if isinstance(m.details, DecisionDetails)
        and m.message_ids
        and (m.message_ids[-1], _folded(m.details.decision)) in wanted
    ]


def restated_memory(
    store: Store, user_id: str, conversation_id: int, text: str, messages: Sequence[Message]
) -> MemoryItem | None:
    """The conversation memory that holds the one sentence ``text`` restates, when it restates one sentence said
    in the conversation (``messages``); else None.  Only for text the machine wrote: the caller asks."""
    if not messages:
        return None
    said = [(m, s) for m in messages for s in P.split_sentences(P.normalize(m.content))]
    names = {m.speaker for m in messages if m.speaker} | {"you", "the assistant", "someone"}
    sentence = restated_in(text, [s for _, s in said], names=names)
    if sentence is None:
        return None
    message = next(m for m, s in said if s == sentence)
    exchanges = store.list_memories(
        user_id, MemoryFilter(conversation_ids=[conversation_id], streams=[Stream.CONVERSATION], limit=EVERY)
    )
    own = [m for m in exchanges if m.message_ids and m.message_ids[-1] == message.id]
    return own[0] if own else None


def adopt(store: Store, user_id: str, source: MemoryItem, made: MemoryItem) -> MemoryItem:
    """``source`` becomes the reviewed memory ``made`` would have been: reviewed, in the chosen storyline."""
    return store.update_memory(
        user_id,
        source.id,
        user_reviewed=True,
        storyline_id=made.storyline_id,
        importance=max(source.importance, made.importance),
    )


def _message_of(entity: PreviewEntity) -> int | None:
    mid = entity.message_id if entity.message_id is not None else entity.data.get("message_id")
    return mid if isinstance(mid, int) else None


def _folded(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".")
