"""The facade's user sovereignty: export, import and delete.

* ``export("json")`` is lossless (every row of the user; docs/export-format.md), ``export("markdown")``
  readable; ``import_data`` restores a JSON export into an empty user under fresh ids, re-embedding what
  the current embedder did not make.
* Deletes leave nothing behind: what a delete takes with it is decided in :mod:`narrative.write.forget`;
  afterwards the full-text indexes are merged, freed pages zeroed (``secure_delete``), the change log pruned
  and the WAL checkpointed (``store.scrub_deleted``), so a deleted word is nowhere in the file's bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any

from narrative.checks import require_choice, require_user
from narrative.engine.core import Runtime
from narrative.engine.memories import Memories
from narrative.errors import InvalidTransition
from narrative.model import StorylineKind
from narrative.read import export as exporting
from narrative.write import embedding, forget

REEMBED_CHUNK = 256  # memories per model call when an import re-embeds (a progress step each)


class _Format(StrEnum):
    JSON = "json"
    MARKDOWN = "markdown"


class Sovereignty:
    """Export, import and delete: the user's control over their data."""

    def __init__(self, runtime: Runtime, memories: Memories) -> None:
        self.rt = runtime
        self.memories = memories

    # --- export / import -------------------------------------------------------------------

    def export(self, format: str = "json", *, user: str | None = None) -> str:
        """Everything of one user: ``json`` (lossless, re-importable) or ``markdown`` (readable)."""
        user_id = self.rt.user_id(user)
        kind = require_choice(_Format, format, "format")
        if kind is _Format.JSON:
            return exporting.export_json(self.rt.store, user_id)
        return exporting.export_markdown(self.rt.store, user_id)

    def import_data(
        self, text: str, *, user: str | None = None, progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Any]:
        """Restore a JSON export into an empty user (refused otherwise), under fresh ids.

        Every row is checked as the write path checks input, and may only point at rows of the same
        export, so an import never touches (or learns about) other users' rows; the same export can
        be imported again under another user name in the same file.  All or nothing.  Vectors made
        by another embedder than this memory's are not restored; their memories and storylines are
        embedded again with the current one, ``REEMBED_CHUNK`` memories per model call, with
        ``progress(done, total)`` after each.
        """
        dump = exporting.parse_dump(text)
        user_id = self.rt.user_id(user)
        existing = self.rt.store.user_content(user_id)
        if existing:
            held = ", ".join(f"{n} {table}" for table, n in sorted(existing.items()))
            raise InvalidTransition(
                f"user {user_id!r} already has data ({held}): import only restores into an empty user;"
                " delete the user first or import under another user"
            )
        tables, dropped = self._vectors_to_keep({name: list(rows) for name, rows in dump.tables.items()})
        with self.rt.store.transaction():
            counts = self.rt.store.import_user_rows(user_id, tables)
            reembedded = self._reembed(user_id, dropped["storyline_vectors"], dump, progress)
        self.rt.store.drop_index()
        self.rt.forget_user(user_id)
        return {"user": user_id, "exported_user": dump.user, "rows": counts, "reembedded": reembedded}

    def _vectors_to_keep(
        self, tables: dict[str, list[dict[str, Any]]]
    ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, set[int]]]:
        """Keep the vectors this engine can search with; list the rows whose vectors must be made again.

        With an embedder: only its own identity's vectors.  Without one (keyword-only): only vectors of
        the one model the file already holds (or, in a file without vectors, of the export's one model),
        so an import never leaves the file with vectors of several embedders.
        """
        embedder = self.rt.embedder
        if embedder is not None:
            keep = {embedder.identity}
        else:
            held = set(self.rt.store.vector_models())
            models = set(exporting.Dump("", tables).models())
            keep = held if len(held) == 1 else models if not held and len(models) == 1 else set()
        dropped: dict[str, set[int]] = {"memory_vectors": set(), "storyline_vectors": set()}
        for table, key in (("memory_vectors", "memory_id"), ("storyline_vectors", "storyline_id")):
            rows = tables.get(table, [])
            dropped[table] = {r[key] for r in rows if r.get("model") not in keep and isinstance(r.get(key), int)}
            tables[table] = [r for r in rows if r.get("model") in keep]
        return tables, dropped

    def _reembed(
        self, user_id: str, old_storyline_ids: set[int], dump: exporting.Dump,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, int]:
        """Embed what came without a usable vector: memories without one, and the storylines whose
        vector was dropped (fresh ids follow the export's id order, so old and new ids pair up sorted)."""
        embedder = self.rt.embedder
        if embedder is None:
            return {"memories": 0, "storylines": 0}
        memories = self.rt.store.memories_without_vectors(user_id, model=embedder.identity)
        for start in range(0, len(memories), REEMBED_CHUNK):
            self.memories.embed_memories(user_id, memories[start : start + REEMBED_CHUNK])
            if progress is not None:
                progress(min(len(memories), start + REEMBED_CHUNK), len(memories))
        old = sorted(r["id"] for r in dump.tables.get("storylines", []))
        new = sorted(s.id for s in self.rt.store.list_storylines(user_id, include_archived=True))
        renamed = dict(zip(old, new, strict=False))
        storylines = [
            self.rt.store.get_storyline(user_id, renamed[i]) for i in sorted(old_storyline_ids) if i in renamed
        ]
        for sid, vector in embedding.routing_vectors(self.rt.store, embedder.embed_batch, storylines).items():
            self.rt.store.put_storyline_vector(user_id, sid, embedder.identity, vector)
        return {"memories": len(memories), "storylines": len(storylines)}

    # --- deletes -----------------------------------------------------------------------------

    def delete_memory(self, memory_id: int, *, user: str | None = None) -> dict[str, int]:
        """Delete one memory with its entities, deltas, sources, vector and full-text entry."""
        user_id = self.rt.user_id(user)
        self.rt.store.get_memory(user_id, memory_id)
        with self.rt.store.transaction():
            counts = forget.forget_memories(self.rt.store, user_id, [memory_id])
        self.rt.store.scrub_deleted()
        return counts

    def delete_conversation(self, conversation_id: int, *, user: str | None = None) -> dict[str, int]:
        """Delete a conversation and what came only from it: messages, memories, links, entities, uses."""
        user_id = self.rt.user_id(user)
        self.rt.store.get_conversation(user_id, conversation_id)
        embedder = self.rt.embedder
        embed, model = (None, None) if embedder is None else (embedder.embed_batch, embedder.identity)
        with self.rt.store.transaction():
            counts = forget.forget_conversation(self.rt.store, user_id, conversation_id, embed, model)
        self.rt.store.scrub_deleted()
        return counts

    def delete_storyline(
        self, storyline_id: int, *, move_to_your_story: bool = True, user: str | None = None
    ) -> dict[str, int]:
        """Delete a storyline; its memories move to Your Story, or (``move_to_your_story=False``) go with it.

        Your Story itself cannot be deleted.  Without moving, the storyline's memories, links,
        entities and the messages routed to it are deleted too.
        """
        user_id = self.rt.user_id(user)
        storyline = self.rt.store.get_storyline(user_id, storyline_id)
        if storyline.kind is StorylineKind.YOUR_STORY:
            raise InvalidTransition("Your Story is permanent: it cannot be deleted")
        with self.rt.store.transaction():
            target = self.rt.your_story_id(user_id) if move_to_your_story else None
            counts = forget.forget_storyline(self.rt.store, user_id, storyline_id, target)
        if storyline.kind is StorylineKind.DEFAULT:
            self.rt.forget_user(user_id)
        self.rt.store.scrub_deleted()
        return counts

    def delete_user(self, user: str) -> dict[str, Any]:
        """Delete a user and every row they own (the next use of the name starts afresh)."""
        user_id = require_user(user)
        self.rt.store.get_user(user_id)
        counts = {t: self.rt.store.count_rows(t, user_id) for t in ("conversations", "messages", "memories",
                                                                   "narratives", "storylines", "entities")}
        self.rt.store.delete_user(user_id)
        self.rt.store.scrub_deleted()
        self.rt.forget_user(user_id, known=False)
        return {"user": user_id, "deleted": counts}

