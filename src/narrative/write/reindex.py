"""Re-embedding with the current embedder (``narrative reindex``): what is stale is made again.

A memory vector is stale when it is missing or was made by another embedder identity (``model:dims``); a
routing embedding when it was made by another identity.  Memories are embedded in batches, each outside any
transaction (no write lock while the model works) and then stored in one; routing embeddings follow the one
recipe of :func:`narrative.write.embedding.routing_vectors`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from narrative.store.protocol import Store
from narrative.write.embedding import Embed, remade_vectors, routing_vectors
from narrative.write.passages import backfill_passages, embed_passages

__all__ = ["reembed_memories", "reembed_passages", "reembed_routing"]


def reembed_memories(
    store: Store,
    embed: Embed,
    identity: str,
    user_id: str | None,
    *,
    force: bool,
    batch_size: int,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Embed again the memories of ``user_id`` (None: every user) whose vector is stale (all with ``force``),
    ``batch_size`` per transaction, ``progress(done, total)`` after each; returns how many."""
    targets = store.memory_ids_to_embed(None if force else identity, user_id)
    for start in range(0, len(targets), batch_size):
        _reembed_batch(store, embed, identity, targets[start : start + batch_size])
        if progress is not None:
            progress(min(start + batch_size, len(targets)), len(targets))
    return len(targets)


def reembed_passages(
    store: Store, embed: Embed, identity: str, user_id: str | None, *, force: bool, batch_size: int
) -> tuple[int, int]:
    """Give processed messages stored before passages existed their passages, and embed every passage of
    ``user_id`` (None: every user) whose vector is missing or stale (all with ``force``); returns (messages
    that got passages, passages embedded)."""
    users = [user_id] if user_id is not None else sorted(u.id for u in store.list_users())
    messages = embedded = 0
    for uid in users:
        messages += backfill_passages(store, uid, None, None)
        stale = store.passages_without_vectors(uid, "" if force else identity)
        embedded += embed_passages(store, uid, identity, embed, stale, batch=batch_size)
    return messages, embedded


def reembed_routing(store: Store, embed: Embed, identity: str, user_id: str | None, *, force: bool) -> tuple[int, int]:
    """Rebuild the stale routing embeddings of ``user_id`` (None: every user); returns (storylines, users)."""
    users = [user_id] if user_id is not None else sorted(u.id for u in store.list_users())
    return sum(_reembed_storylines(store, embed, identity, uid, force) for uid in users), len(users)


def _reembed_batch(store: Store, embed: Embed, identity: str, batch: Sequence[tuple[str, int]]) -> None:
    by_user: dict[str, list[int]] = {}
    for owner, memory_id in batch:
        by_user.setdefault(owner, []).append(memory_id)
    for owner, ids in by_user.items():
        memories = store.get_memories(owner, ids)
        if memories:
            remade_vectors(store, owner, identity, embed, memories)


def _reembed_storylines(store: Store, embed: Embed, identity: str, user_id: str, force: bool) -> int:
    stale = sorted(
        sid for sid, made_by in store.storyline_vector_identities(user_id).items() if force or made_by != identity
    )
    made = routing_vectors(store, embed, [store.get_storyline(user_id, sid) for sid in stale])
    with store.transaction():
        for sid, vector in made.items():
            store.put_storyline_vector(user_id, sid, identity, vector)
    return len(made)
