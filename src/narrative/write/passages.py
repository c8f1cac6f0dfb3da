"""A message's passages: stored with the memory made for the message, with their vectors.

Every processed message gets its passages (``text.passages``: one for a message the embedding model reads
whole, several for a long reply or a document), stored as spans of the message under the message's own
conversation memory, each with its vector.  Search reaches a message through them, on its own, and shows
the passage that answers instead of the whole message.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from narrative.model import Message, Passage
from narrative.store.protocol import Store
from narrative.text.passages import Span, split_passages
from narrative.write.embedding import Embed, passage_text

__all__ = ["backfill_passages", "embed_passages", "store_passages"]


def store_passages(
    store: Store,
    model: str | None,
    message: Message,
    memory_id: int,
    spans: Sequence[Span] | None = None,
    vectors: Sequence[np.ndarray] | None = None,
) -> list[Passage]:
    """Store ``message``'s passages under ``memory_id`` (spans made here when not given) and their vectors."""
    cut = list(spans) if spans is not None else split_passages(message.content)
    passages = store.insert_passages(message.user_id, message.id, memory_id, [(s.start, s.end) for s in cut])
    if model is not None and vectors is not None and len(vectors) == len(passages):
        store.put_passage_vectors(message.user_id, model, {p.id: v for p, v in zip(passages, vectors, strict=True)})
    return passages


def embed_passages(
    store: Store, user_id: str, model: str, embed: Embed, passages: Sequence[Passage], batch: int = 256
) -> int:
    """Embed and store the vectors of these passages (reindex, import, a backfill), ``batch`` per model call."""
    messages = {m.id: m for m in store.get_messages(user_id, sorted({p.message_id for p in passages}))}
    done = 0
    for start in range(0, len(passages), batch):
        chunk = [p for p in passages[start : start + batch] if p.message_id in messages]
        texts = [passage_text(messages[p.message_id], p.start, p.end) for p in chunk]
        if not texts:
            continue
        vectors = np.asarray(embed(texts), dtype=np.float32)
        store.put_passage_vectors(user_id, model, {p.id: v for p, v in zip(chunk, vectors, strict=True)})
        done += len(chunk)
    return done


def backfill_passages(store: Store, user_id: str, model: str | None, embed: Embed | None) -> int:
    """Give processed messages stored before passages existed their passages (and vectors); returns how many
    messages got them.  A message whose own conversation memory is gone is left without."""
    missing = [message_id for owner, message_id in store.messages_without_passages(user_id) if owner == user_id]
    if not missing:
        return 0
    owners = store.own_memories(user_id, missing)
    made: list[Passage] = []
    with store.transaction():
        for message in store.get_messages(user_id, [m for m in missing if m in owners]):
            made += store_passages(store, None, message, owners[message.id])
    if model is not None and embed is not None:
        embed_passages(store, user_id, model, embed, made)
    return len({p.message_id for p in made})
