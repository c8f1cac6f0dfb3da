"""Which embedder made the stored vectors, and whether a reindex is needed (``narrative reindex --status``)."""

from __future__ import annotations

from typing import Any

from narrative.store.protocol import Store

__all__ = ["vector_status"]


def vector_status(store: Store, identity: str | None, user_id: str | None) -> dict[str, Any]:
    """Stored vector identities with counts for ``user_id`` (None: every user), against the current ``identity``.

    ``reindex_needed``: some memory or routing embedding in scope was made by another embedder, or some memory
    has no vector.  ``search_blocked``: vector search would raise ``EmbeddingMismatch`` now (foreign memory
    vectors anywhere in the file).
    """
    memory_models = store.memory_vector_models(user_id)
    storyline_models = store.storyline_vector_models(user_id)
    memories = store.count_rows("memories", user_id)
    missing = memories - sum(memory_models.values())
    foreign_memories = sum(n for m, n in memory_models.items() if m != identity)
    foreign_storylines = sum(n for m, n in storyline_models.items() if m != identity)
    reasons = []
    if identity is not None:
        if foreign_memories:
            reasons.append(f"{foreign_memories} memory vectors were made by another embedder")
        if foreign_storylines:
            reasons.append(f"{foreign_storylines} storyline routing embeddings were made by another embedder")
        if missing:
            reasons.append(f"{missing} memories have no vector")
    unsplit = [m for owner, m in store.messages_without_passages(user_id)]
    if unsplit:
        reasons.append(f"{len(unsplit)} messages have no passages (stored before passages existed)")
    if identity is not None:
        owners = [user_id] if user_id is not None else sorted(u.id for u in store.list_users())
        bare = sum(len(store.passages_without_vectors(owner, identity)) for owner in owners)
        if bare:
            reasons.append(f"{bare} passages have no vector of this embedder")
    blocked = identity is not None and any(m != identity for m in store.memory_vector_models())
    return {
        "embedder": identity,
        "scope": "all users" if user_id is None else user_id,
        "users": 1 if user_id is not None else len(store.list_users()),
        "memories": memories,
        "memory_vectors": memory_models,
        "storyline_vectors": storyline_models,
        "memories_without_vector": missing,
        "reindex_needed": bool(reasons),
        "reasons": reasons,
        "search_blocked": blocked,
    }
