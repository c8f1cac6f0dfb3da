"""The facade's maintenance: embedder identity checks and re-embedding (``narrative reindex``).

Every stored vector records the identity (``model:dims``) of the embedder that
made it.  Search refuses to compare a query with vectors of another identity
(``EmbeddingMismatch``); :meth:`MaintenanceAPI.reindex` re-embeds the memories
and storyline routing embeddings with the current embedder so search works again.

Both methods work on the database file: ``user=None`` means every user (the
vector index is one per file, so one user's foreign vectors block everyone's
vector search), ``user="alice"`` narrows the work to one user.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from narrative.checks import require_positive, require_user
from narrative.engine.core import Runtime
from narrative.errors import ValidationError
from narrative.write import embedding

if TYPE_CHECKING:
    from narrative.providers.embed import Embedder

DEFAULT_BATCH = 256  # memories per transaction: an interrupted reindex keeps what it finished


class Maintenance:
    """Embedder identity checks, reindex and compaction."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime

    def embedding_status(self, *, user: str | None = None) -> dict[str, Any]:
        """The embedder identity, stored vector identities with counts, and whether a reindex is needed.

        ``reindex_needed``: some memory or routing embedding in scope was made by another
        embedder, or some memory has no vector.  ``search_blocked``: vector search would
        raise ``EmbeddingMismatch`` now (foreign memory vectors anywhere in the file).
        """
        user_id = self._existing_user(user)
        embedder = self.rt.embedder
        identity = None if embedder is None else embedder.identity
        memory_models = self.rt.store.memory_vector_models(user_id)
        storyline_models = self.rt.store.storyline_vector_models(user_id)
        memories = self.rt.store.count_rows("memories", user_id)
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
        blocked = identity is not None and any(m != identity for m in self.rt.store.memory_vector_models())
        return {
            "embedder": identity,
            "scope": "all users" if user_id is None else user_id,
            "users": 1 if user_id is not None else len(self.rt.store.list_users()),
            "memories": memories,
            "memory_vectors": memory_models,
            "storyline_vectors": storyline_models,
            "memories_without_vector": missing,
            "reindex_needed": bool(reasons),
            "reasons": reasons,
            "search_blocked": blocked,
        }

    def reindex(
        self,
        *,
        user: str | None = None,
        batch_size: int | None = None,
        force: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Re-embed memories and storyline routing embeddings with the current embedder.

        Needed after changing the embedder.  Only what is stale is redone (no vector,
        or a vector of another identity), so running it again changes nothing and an
        interrupted run resumes where it stopped; ``force=True`` redoes everything.
        Memories are written in transactions of ``batch_size``; ``progress(done, total)`` is called after
        each one (memories re-embedded so far, of all).  Returns the counts.
        """
        embedder = self.rt.embedder
        if embedder is None:
            raise ValidationError("reindex needs an embedder; this memory runs keyword-only (embedder 'none')",
                                  field="embedder")
        user_id = self._existing_user(user)
        size = DEFAULT_BATCH if batch_size is None else require_positive(batch_size, "batch_size")
        started = time.perf_counter()
        model = embedder.identity
        targets = self.rt.store.memory_ids_to_embed(None if force else model, user_id)
        for start in range(0, len(targets), size):
            self._reembed_batch(embedder, targets[start : start + size])
            if progress is not None:
                progress(min(start + size, len(targets)), len(targets))
        users = sorted(self._users_in_scope(user_id))
        storylines = sum(self._reembed_storylines(embedder, uid, force) for uid in users)
        self.rt.store.drop_index()  # the next search builds the index from the new vectors
        status = self.embedding_status(user=user_id)
        return {
            "embedder": model,
            "scope": status["scope"],
            "memories": len(targets),
            "storylines": storylines,
            "users": len(users),
            "batch_size": size,
            "forced": force,
            "seconds": round(time.perf_counter() - started, 3),
            "reindex_needed": status["reindex_needed"],
            "search_blocked": status["search_blocked"],
        }

    # --- internals ---------------------------------------------------------------------

    def _existing_user(self, user: str | None) -> str | None:
        """None (every user) or a validated user that exists (NotFound otherwise); never creates one."""
        if user is None:
            return None
        user_id = require_user(user)
        self.rt.store.get_user(user_id)
        return user_id

    def _users_in_scope(self, user_id: str | None) -> set[str]:
        return {user_id} if user_id is not None else {u.id for u in self.rt.store.list_users()}

    def _reembed_batch(self, embedder: Embedder, batch: Sequence[tuple[str, int]]) -> None:
        """Embed one batch (outside any transaction: no write lock while the model works), then store it."""
        by_user: dict[str, list[int]] = {}
        for owner, memory_id in batch:
            by_user.setdefault(owner, []).append(memory_id)
        made: dict[str, dict[int, np.ndarray]] = {}
        for owner, ids in by_user.items():
            memories = self.rt.store.get_memories(owner, ids)
            if memories:
                made[owner] = embedding.memory_vectors(embedder.embed_batch, memories)
        with self.rt.store.transaction():
            for owner, vectors_by_id in made.items():
                self.rt.store.put_memory_vectors(owner, embedder.identity, vectors_by_id)

    def _reembed_storylines(self, embedder: Embedder, user_id: str, force: bool) -> int:
        """Rebuild the routing embeddings of ``user_id`` that are stale (or all of them with ``force``)."""
        model = embedder.identity
        stale = sorted(sid for sid, made_by in self.rt.store.storyline_vector_identities(user_id).items()
                       if force or made_by != model)
        storylines = [self.rt.store.get_storyline(user_id, sid) for sid in stale]
        made = embedding.routing_vectors(self.rt.store, embedder.embed_batch, storylines)
        with self.rt.store.transaction():
            for sid, vector in made.items():
                self.rt.store.put_storyline_vector(user_id, sid, model, vector)
        return len(made)

    def compact(self, *, keep_changes: int = 1_000) -> dict[str, int]:
        """Prune the memory change log to its newest ``keep_changes`` entries, merge the full-text
        indexes and checkpoint the WAL (deletes do this by themselves; ``narrative compact``)."""
        require_positive(keep_changes, "keep_changes", allow_zero=True)
        return self.rt.store.scrub_deleted(keep_changes)
