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
from collections.abc import Callable
from typing import Any

from narrative.checks import require_positive, require_user
from narrative.engine.core import Runtime
from narrative.errors import ValidationError
from narrative.read import vectors
from narrative.store.opening import safe_name
from narrative.write import embedding, reindex

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
        embedder = self.rt.embedder
        return vectors.vector_status(
            self.rt.store, None if embedder is None else embedder.identity, self._existing_user(user)
        )

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
            raise ValidationError(
                "reindex needs an embedder; this memory runs keyword-only (embedder 'none')", field="embedder"
            )
        user_id = self._existing_user(user)
        size = DEFAULT_BATCH if batch_size is None else require_positive(batch_size, "batch_size")
        started = time.perf_counter()
        model = embedder.identity
        memories = reindex.reembed_memories(
            self.rt.store, embedder.embed_batch, model, user_id, force=force, batch_size=size, progress=progress
        )
        storylines, users = reindex.reembed_routing(self.rt.store, embedder.embed_batch, model, user_id, force=force)
        backfilled, passages = reindex.reembed_passages(
            self.rt.store, embedder.embed_batch, model, user_id, force=force, batch_size=size
        )
        self.rt.store.drop_index()  # the next search builds the index from the new vectors
        embedding.record_file_embedder(self.rt.store, model)  # when every user's vectors are this model's now
        status = self.embedding_status(user=user_id)
        return {
            "embedder": model,
            "scope": status["scope"],
            "memories": memories,
            "storylines": storylines,
            "passages": passages,
            "messages_given_passages": backfilled,
            "users": users,
            "batch_size": size,
            "forced": force,
            "seconds": round(time.perf_counter() - started, 3),
            "reindex_needed": status["reindex_needed"],
            "search_blocked": status["search_blocked"],
        }

    def check(self) -> dict[str, Any]:
        """Is the database whole?  The store's checks (schema, pages, full-text, vectors, references, pending
        turns: see ``narrative.store.sqlite.integrity``) and whether the current embedder can search every
        memory.  ``ok`` is False when any finding is a ``problem``.  Reads only."""
        findings = [*self.rt.store.check_integrity(), self._embedder_finding()]
        problems = sum(f["status"] == "problem" for f in findings)
        return {
            "db": safe_name(self.rt.settings.db),
            "backend": self.rt.store.backend,
            "ok": problems == 0,
            "problems": problems,
            "checks": findings,
        }

    def _embedder_finding(self) -> dict[str, str]:
        embedder = self.rt.embedder
        if embedder is None:
            return {"check": "embedder", "status": "skipped", "detail": "keyword-only memory (embedder 'none')"}
        if embedding.keyword_only(self.rt.store):
            return {  # written keyword-only: nothing is damaged, search by meaning was never set up
                "check": "embedder",
                "status": "skipped",
                "detail": "the file holds no vectors (written keyword-only, embedder 'none'); for search by meaning"
                f" run `narrative reindex` with {embedder.identity}",
            }
        status = vectors.vector_status(self.rt.store, embedder.identity, None)
        if status["reindex_needed"]:
            reasons = "; ".join(status["reasons"]) or "some memories have no vector of the current embedder"
            return {"check": "embedder", "status": "problem", "detail": f"{reasons} (run `narrative reindex`)"}
        return {
            "check": "embedder",
            "status": "ok",
            "detail": f"every memory has a vector of {embedder.identity}, so vector search reaches it",
        }

    # --- internals ---------------------------------------------------------------------

    def _existing_user(self, user: str | None) -> str | None:
        """None (every user) or a validated user that exists (NotFound otherwise); never creates one."""
        if user is None:
            return None
        user_id = require_user(user)
        self.rt.store.get_user(user_id)
        return user_id

    def compact(self, *, keep_changes: int = 1_000) -> dict[str, int]:
        """Prune the memory change log to its newest ``keep_changes`` entries, merge the full-text
        indexes, rebuild the SQLite file (VACUUM) and checkpoint the WAL (deletes do this by themselves;
        ``narrative compact``)."""
        require_positive(keep_changes, "keep_changes", allow_zero=True)
        return self.rt.store.scrub_deleted(keep_changes)
