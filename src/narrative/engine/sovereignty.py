"""The facade's user sovereignty: export, import and delete.

* ``export("json")`` is lossless (every row of the user; docs/export-format.md), ``export("markdown")``
  readable; ``import_data`` restores a JSON export into an empty user under fresh ids, re-embedding what
  the current embedder did not make.
* Deletes leave nothing behind: the rows, their full-text entries (triggers), their vectors (rows and
  the in-process index), the uses that drew on deleted memories (their recorded queries); afterwards
  the full-text indexes are merged, freed pages zeroed (``secure_delete``), the change log pruned and
  the WAL checkpointed, so a deleted word is nowhere in the file's bytes.  Entities a deleted memory
  had resolved are reopened (the resolution came from it); narrative links left without memories
  are spliced out of the chain; sealed links that keep other memories stay as they are (they are
  immutable), their pointer to a deleted memory simply resolves to nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any

from narrative.checks import require_choice, require_user
from narrative.engine.memories import MemoriesAPI
from narrative.engine.turns import TurnsAPI
from narrative.errors import InvalidTransition, NotFound
from narrative.model import Message, StorylineKind
from narrative.read import export as exporting
from narrative.store.filters import MemoryFilter
from narrative.write import storylines as storylines_

REEMBED_CHUNK = 256  # memories per model call when an import re-embeds (a progress step each)


class _Format(StrEnum):
    JSON = "json"
    MARKDOWN = "markdown"


class SovereigntyAPI(TurnsAPI, MemoriesAPI):
    # --- export / import -------------------------------------------------------------------

    def export(self, format: str = "json", *, user: str | None = None) -> str:
        """Everything of one user: ``json`` (lossless, re-importable) or ``markdown`` (readable)."""
        user_id = self._user(user)
        kind = require_choice(_Format, format, "format")
        if kind is _Format.JSON:
            return exporting.export_json(self.store, user_id)
        return exporting.export_markdown(self.store, user_id)

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
        user_id = self._user(user)
        existing = self.store.user_content(user_id)
        if existing:
            held = ", ".join(f"{n} {table}" for table, n in sorted(existing.items()))
            raise InvalidTransition(
                f"user {user_id!r} already has data ({held}): import only restores into an empty user;"
                " delete the user first or import under another user"
            )
        tables, dropped = self._vectors_to_keep({name: list(rows) for name, rows in dump.tables.items()})
        with self.store.transaction():
            counts = self.store.import_user_rows(user_id, tables)
            reembedded = self._reembed(user_id, dropped["storyline_vectors"], dump, progress)
        self.store.drop_index()
        self._forget_defaults(user_id)
        return {"user": user_id, "exported_user": dump.user, "rows": counts, "reembedded": reembedded}

    def _vectors_to_keep(
        self, tables: dict[str, list[dict[str, Any]]]
    ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, set[int]]]:
        """Keep the vectors this engine can search with; list the rows whose vectors must be made again.

        With an embedder: only its own identity's vectors.  Without one (keyword-only): only vectors of
        the one model the file already holds (or, in a file without vectors, of the export's one model),
        so an import never leaves the file with vectors of several embedders.
        """
        embedder = self.embedder
        if embedder is not None:
            keep = {embedder.identity}
        else:
            held = set(self.store.vector_models())
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
        embedder = self.embedder
        if embedder is None:
            return {"memories": 0, "storylines": 0}
        memories = self.store.memories_without_vectors(user_id, model=embedder.identity)
        for start in range(0, len(memories), REEMBED_CHUNK):
            self._embed_memories(user_id, memories[start : start + REEMBED_CHUNK])
            if progress is not None:
                progress(min(len(memories), start + REEMBED_CHUNK), len(memories))
        old = sorted(r["id"] for r in dump.tables.get("storylines", []))
        new = sorted(s.id for s in self.store.list_storylines(user_id, include_archived=True))
        renamed = dict(zip(old, new, strict=False))
        storylines = [self.store.get_storyline(user_id, renamed[i]) for i in sorted(old_storyline_ids) if i in renamed]
        if storylines:
            vectors = embedder.embed_batch([storylines_.routing_text(s) for s in storylines])
            for storyline, vector in zip(storylines, vectors, strict=True):
                self.store.put_storyline_vector(user_id, storyline.id, embedder.identity, vector)
        return {"memories": len(memories), "storylines": len(storylines)}

    def _forget_defaults(self, user_id: str) -> None:
        if self._defaults is not None:
            self._defaults.pop(user_id, None)

    # --- deletes -----------------------------------------------------------------------------

    def _forget_memories(
        self, user_id: str, memory_ids: Iterable[int], conversation_id: int | None = None
    ) -> dict[str, int]:
        """Delete memories and what only they held: resolutions they made, links left empty."""
        ids = sorted(set(memory_ids))
        gone = set(ids)
        reopened = self.store.reopen_resolved_by(user_id, ids)
        emptied: list[int] = []
        for nid in self.store.narratives_with_memories(user_id, ids):
            link = self.store.get_narrative(user_id, nid)
            alive = [m.id for m in self.store.get_memories(user_id, link.memory_ids) if m.id not in gone]
            if not alive:
                emptied.append(nid)
            elif not link.sealed:
                self.store.update_narrative(user_id, nid, memory_ids=alive)
        if conversation_id is not None:  # the conversation's own links that never held a memory
            emptied += [n.id for n in self.store.list_narratives(user_id, limit=1_000_000)
                        if n.conversation_id == conversation_id and n.id not in emptied
                        and not [m for m in self.store.get_memories(user_id, n.memory_ids) if m.id not in gone]]
        links = self.store.splice_out_narratives(user_id, emptied)
        uses = self.store.delete_uses_of_memories(user_id, ids)  # their recorded queries name what is deleted
        deleted = self.store.delete_memories(user_id, ids)
        return {"memories": deleted, "narratives": links, "reopened_entities": reopened, "uses": uses}

    def delete_memory(self, memory_id: int, *, user: str | None = None) -> dict[str, int]:
        """Delete one memory with its entities, deltas, sources, vector and full-text entry."""
        user_id = self._user(user)
        self.store.get_memory(user_id, memory_id)
        with self.store.transaction():
            counts = self._forget_memories(user_id, [memory_id])
        self.store.scrub_deleted()
        return counts

    def delete_conversation(self, conversation_id: int, *, user: str | None = None) -> dict[str, int]:
        """Delete a conversation and what came only from it: messages, memories, links, entities, uses."""
        user_id = self._user(user)
        self.store.get_conversation(user_id, conversation_id)
        messages = self.store.list_messages(user_id, conversation_id=conversation_id)
        with self.store.transaction():
            counts = self._forget_memories(
                user_id, self.store.conversation_memory_ids(user_id, conversation_id), conversation_id
            )
            counts["uses"] += self.store.delete_conversation_uses(user_id, conversation_id)
            counts["entities"] = len(self.store.list_entities(user_id, conversation_id=conversation_id,
                                                              limit=1_000_000))
            self.store.delete_conversation(user_id, conversation_id)
            counts["messages"] = len(messages)
            counts["storylines"] = self._tidy_storylines(user_id, messages)
        self.store.scrub_deleted()
        return counts

    def _tidy_storylines(self, user_id: str, messages: list[Message]) -> int:
        """Drop detected storylines left empty; in the others, scrub what quoted the deleted messages:
        summary lines, the description, keywords no remaining message supports, the routing embedding."""
        unused = self.store.unused_storylines(user_id)
        for sid in unused:
            self.store.delete_storyline(user_id, sid)
        said = [m.content.lower() for m in messages]
        for sid in {m.storyline_id for m in messages if m.storyline_id is not None} - set(unused):
            try:
                storyline = self.store.get_storyline(user_id, sid)
            except NotFound:
                continue
            remaining = " ".join(m.content.lower() for m in self.store.list_messages(user_id, storyline_id=sid))
            summary = "\n".join(line for line in storyline.summary.splitlines() if not _quotes(line, said))
            description = "" if _quotes(storyline.description, said) else storyline.description
            keywords = tuple(k for k in storyline.keywords if k.lower() in remaining)
            if (summary, description, keywords) != (storyline.summary, storyline.description, storyline.keywords):
                storyline = self.store.update_storyline(user_id, sid, summary=summary, description=description,
                                                        keywords=keywords)
            embedder = self.embedder
            if embedder is not None and self.store.storyline_vector(user_id, sid, embedder.identity) is not None:
                vector = embedder.embed_batch([storylines_.routing_text(storyline)])[0]
                self.store.put_storyline_vector(user_id, sid, embedder.identity, vector)
        return len(unused)

    def delete_storyline(
        self, storyline_id: int, *, move_to_your_story: bool = True, user: str | None = None
    ) -> dict[str, int]:
        """Delete a storyline; its memories move to Your Story, or (``move_to_your_story=False``) go with it.

        Your Story itself cannot be deleted.  Without moving, the storyline's memories, links,
        entities and the messages routed to it are deleted too.
        """
        user_id = self._user(user)
        storyline = self.store.get_storyline(user_id, storyline_id)
        if storyline.kind is StorylineKind.YOUR_STORY:
            raise InvalidTransition("Your Story is permanent: it cannot be deleted")
        counts: dict[str, int] = {}
        with self.store.transaction():
            if move_to_your_story:
                target = self._your_story_id(user_id)
                counts["moved_memories"] = self.store.count_memories(
                    user_id, MemoryFilter(storyline_ids=[storyline_id])
                )
                self.store.move_storyline_rows(user_id, storyline_id, target)
            else:
                ids = self.store.memory_ids_matching(user_id, MemoryFilter(storyline_ids=[storyline_id]))
                counts.update(self._forget_memories(user_id, ids))
                links = [n.id for n in self.store.list_narratives(user_id, storyline_id=storyline_id,
                                                                  limit=1_000_000)]
                counts["narratives"] += self.store.splice_out_narratives(user_id, links)
                entities = self.store.list_entities(user_id, storyline_id=storyline_id, limit=1_000_000)
                self.store.delete_entities(user_id, [e.id for e in entities])
                routed = self.store.list_messages(user_id, storyline_id=storyline_id)
                counts["entities"], counts["messages"] = len(entities), self.store.delete_messages(
                    user_id, [m.id for m in routed]
                )
            self.store.delete_storyline(user_id, storyline_id)
        counts["storylines"] = 1
        if storyline.kind is StorylineKind.DEFAULT:
            self._forget_defaults(user_id)
        self.store.scrub_deleted()
        return counts

    def delete_user(self, user: str) -> dict[str, Any]:
        """Delete a user and every row they own (the next use of the name starts afresh)."""
        user_id = require_user(user)
        self.store.get_user(user_id)
        counts = {t: self.store.count_rows(t, user_id) for t in ("conversations", "messages", "memories",
                                                                   "narratives", "storylines", "entities")}
        self.store.delete_user(user_id)
        self.store.scrub_deleted()
        self._known_users.discard(user_id)
        self._forget_defaults(user_id)
        return {"user": user_id, "deleted": counts}


def _quotes(text: str, said: list[str]) -> bool:
    """Does a summary line (or description) repeat one of these (lowercased) messages?"""
    body = text.strip().lstrip("-• ").strip()
    if ": " in body:
        body = body.split(": ", 1)[1]
    probe = body.rstrip("…").strip().lower()[:40]
    return len(probe) >= 12 and any(probe in s for s in said)

