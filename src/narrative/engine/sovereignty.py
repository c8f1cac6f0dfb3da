"""The facade's user sovereignty: export, import and delete.

* ``export("json")`` is lossless (every row of the user; docs/export-format.md), ``export("markdown")``
  readable; ``import_data`` restores a JSON export into an empty user under fresh ids, re-embedding what
  the current embedder did not make.
* Deletes leave nothing behind (:mod:`narrative.write.forget`); imports are restored by
  :mod:`narrative.write.restore`.  This service resolves the user, hands the embedder over and forgets
  what the runtime cached about a deleted or restored user.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any

from narrative.checks import require_choice, require_user
from narrative.engine.core import Runtime
from narrative.errors import ValidationError
from narrative.model import StorylineKind
from narrative.read import export
from narrative.store.filter_tree import parse_filters
from narrative.store.filters import MemoryFilter
from narrative.write import forget, restore


class _Format(StrEnum):
    JSON = "json"
    MARKDOWN = "markdown"
    JSONL = "jsonl"
    CSV = "csv"


class Sovereignty:
    """Export, import and delete: the user's control over their data."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime

    # --- export / import -------------------------------------------------------------------

    def export(self, format: str = "json", *, user: str | None = None) -> str:
        """Everything of one user: ``json`` (lossless, re-importable) or ``markdown`` (readable); or the
        memories alone, one a line: ``jsonl`` or ``csv`` (columns ``read.export.MEMORY_COLUMNS``)."""
        user_id = self.rt.reader_id(user)
        kind = require_choice(_Format, format, "format")
        writers = {
            _Format.JSON: export.export_json,
            _Format.MARKDOWN: export.export_markdown,
            _Format.JSONL: export.export_jsonl,
            _Format.CSV: export.export_csv,
        }
        return writers[kind](self.rt.store, user_id)

    def import_data(
        self, text: str, *, user: str | None = None, progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Any]:
        """Restore a JSON export into an empty user (refused otherwise), under fresh ids.

        Every row is checked as the write path checks input, and may only point at rows of the same
        export, so an import never touches (or learns about) other users' rows; the same export can
        be imported again under another user name in the same file.  All or nothing.  Vectors made
        by another embedder than this memory's are not restored; their memories and storylines are
        embedded again with the current one, ``restore.REEMBED_CHUNK`` memories per model call, with
        ``progress(done, total)`` after each.
        """
        dump = export.parse_dump(text)
        user_id = self.rt.user_id(user)
        embedder = self.rt.embedder
        embed, identity = (None, None) if embedder is None else (embedder.embed_batch, embedder.identity)
        counts, reembedded = restore.restore_user(
            self.rt.store, user_id, dict(dump.tables), dump.models(), embed, identity, progress
        )
        self.rt.forget_user(user_id)
        return {"user": user_id, "exported_user": dump.user, "rows": counts, "reembedded": reembedded}

    # --- deletes -----------------------------------------------------------------------------

    def delete_memory(self, memory_id: int, *, user: str | None = None) -> dict[str, int]:
        """Delete one memory with its entities, deltas, sources, vector and full-text entry."""
        return forget.delete_memory(self.rt.store, self.rt.owner_id(user), memory_id, self.rt.clock())

    def delete_memories(
        self,
        memory_ids: Sequence[int] | None = None,
        *,
        filters: Mapping[str, Any] | None = None,
        user: str | None = None,
    ) -> dict[str, Any]:
        """Delete several memories at once, by id or by filter (one of the two), all or none: an unknown id
        deletes nothing.  Returns the counts and the ``ids`` deleted."""
        user_id = self.rt.owner_id(user)
        if (memory_ids is None) == (filters is None):
            raise ValidationError("give memory_ids or filters (one of the two)", field="memory_ids")
        if filters is not None:
            tree = parse_filters(filters)
            if tree is None:
                raise ValidationError(
                    "filters are empty: a delete by filter needs at least one condition (delete_user deletes"
                    " everything)",
                    field="filters",
                )
            ids = sorted(self.rt.store.memory_ids_matching(user_id, MemoryFilter(match=tree)))
        else:
            ids = sorted(set(memory_ids or ()))
            if not ids:
                raise ValidationError("memory_ids is empty: name at least one memory", field="memory_ids")
        counts: dict[str, Any] = dict(forget.delete_memories(self.rt.store, user_id, ids, self.rt.clock()))
        return {**counts, "ids": ids}

    def delete_conversation(self, conversation_id: int, *, user: str | None = None) -> dict[str, int]:
        """Delete a conversation and what came only from it: messages, memories, links, entities, uses."""
        embedder = self.rt.embedder
        embed, model = (None, None) if embedder is None else (embedder.embed_batch, embedder.identity)
        return forget.delete_conversation(
            self.rt.store, self.rt.owner_id(user), conversation_id, embed, model, self.rt.clock()
        )

    def delete_storyline(
        self, storyline_id: int, *, move_to_your_story: bool = True, user: str | None = None
    ) -> dict[str, int]:
        """Delete a storyline; its memories move to Your Story, or (``move_to_your_story=False``) go with it.

        Your Story itself cannot be deleted.  Without moving, the storyline's memories, links,
        entities and the messages routed to it are deleted too, and the conversations left without a message
        (but the active one).
        """
        user_id = self.rt.owner_id(user)
        storyline, counts = forget.delete_storyline(
            self.rt.store, user_id, storyline_id, move_to_your_story=move_to_your_story, now=self.rt.clock()
        )
        if storyline.kind is StorylineKind.DEFAULT:
            self.rt.forget_user(user_id)  # the default storylines' ids are cached
        return counts

    def delete_user(self, user: str) -> dict[str, Any]:
        """Delete a user and every row they own (the next use of the name starts afresh)."""
        user_id = require_user(user)
        counts = forget.delete_user(self.rt.store, user_id)
        self.rt.forget_user(user_id, known=False)
        return {"user": user_id, "deleted": counts}
