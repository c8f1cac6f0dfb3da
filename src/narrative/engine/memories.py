"""The facade's memories and the Koshi narrative chain."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from narrative import model
from narrative.checks import (
    require_choice,
    require_flag,
    require_importance,
    require_metadata,
    require_positive,
    require_text,
)
from narrative.engine.core import Runtime
from narrative.errors import ValidationError
from narrative.model import Narrative, Source, Stream
from narrative.read import chain, listing
from narrative.read.full_text import WholeMemory, whole_memory
from narrative.read.listing import Listed
from narrative.store.filter_tree import parse_filters
from narrative.store.filters import MemoryFilter
from narrative.write import by_hand, narrate, supersede
from narrative.write.history import history as events_of

if TYPE_CHECKING:
    from narrative.engine.followups import Followups


class Memories:
    """Memories (add, edit, list) and the Koshi narrative chain."""

    def __init__(self, runtime: Runtime, followups: Followups | None = None) -> None:
        self.rt = runtime
        self.followups = followups  # new decisions and research items get their links

    def _followed(self, user_id: str, made: list[model.MemoryItem]) -> list[model.MemoryItem]:
        if self.followups is not None:
            self.followups.after_memories(user_id, made)
        return made

    # --- memories ----------------------------------------------------------------------

    def add_memory(
        self,
        content: str,
        *,
        stream: str = "fact",
        source: str = "agent",
        importance: int = 2,
        emotions: Sequence[str] = (),
        message_ids: Sequence[int] = (),
        details: model.Details | None = None,
        storyline_id: int | None = None,
        conversation_id: int | None = None,
        event_at: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
        user: str | None = None,
    ) -> model.MemoryItem:
        """Store one memory, stamped with the narrative active now, embedded when an embedder is set."""
        memory = self._new_memory(  # checked first: a refused memory makes no user
            self.rt.reader_id(user),
            content,
            stream=stream,
            source=source,
            importance=importance,
            emotions=emotions,
            message_ids=message_ids,
            details=details,
            storyline_id=storyline_id,
            conversation_id=conversation_id,
            event_at=event_at,
            metadata=metadata,
        )
        embedder = self._embedder()
        held = _names_held(storyline_id, conversation_id, message_ids)  # then the user must hold them: made by now
        user_id = self.rt.owner_id(user) if held else self.rt.user_id(user)
        return self._followed(user_id, by_hand.add_memories(self.rt.store, user_id, [memory], embedder))[0]

    def add_memories(
        self,
        items: Sequence[Mapping[str, Any]],
        *,
        vectors: np.ndarray | None = None,
        user: str | None = None,
    ) -> list[model.MemoryItem]:
        """Bulk insert for importers and benchmarks: one transaction, embeddings in batches.

        Each item takes :meth:`add_memory`'s keyword arguments (``content`` required).
        ``vectors`` (one row per item, made by this engine's embedder) skips embedding.
        """
        reader = self.rt.reader_id(user)  # everything is checked before the user is made: a refused call makes none
        for index, item in enumerate(items):
            unknown = set(item) - _ITEM_KEYS if isinstance(item, Mapping) else {"(not an object)"}
            if unknown or "content" not in item:
                raise ValidationError(
                    f"items[{index}] takes content and add_memory's keyword arguments; got {sorted(map(str, unknown))}",
                    field="items",
                )
        memories = [self._new_memory(reader, **dict(item)) for item in items]
        if vectors is not None and (self.rt.embedder is None or len(vectors) != len(memories)):
            raise ValidationError("vectors need an embedder and one row per item", field="vectors")
        embedder = self._embedder()
        held = any(_names_held(m.storyline_id, m.conversation_id, m.message_ids) for m in memories)
        user_id = self.rt.owner_id(user) if held else self.rt.user_id(user)
        return self._followed(user_id, by_hand.add_memories(self.rt.store, user_id, memories, embedder, vectors))

    def _new_memory(
        self,
        user_id: str,
        content: str,
        *,
        stream: str = "fact",
        source: str = "agent",
        importance: int = 2,
        emotions: Sequence[str] = (),
        message_ids: Sequence[int] = (),
        details: model.Details | None = None,
        storyline_id: int | None = None,
        conversation_id: int | None = None,
        event_at: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> model.MemoryItem:
        if isinstance(emotions, str):
            emotions = [emotions]
        if any(isinstance(i, bool) or not isinstance(i, int) for i in message_ids):
            raise ValidationError("message_ids must be integers", field="message_ids")
        return model.MemoryItem(
            id=0,
            user_id=user_id,
            stream=require_choice(Stream, stream, "stream"),
            source=require_choice(Source, source, "source"),
            content=require_text(content, "content").strip(),
            importance=require_importance(importance),
            emotions=tuple(emotions),
            message_ids=tuple(message_ids),
            details=details,
            storyline_id=storyline_id,
            conversation_id=conversation_id,
            event_at=event_at,
            created_at=self.rt.clock(),
            metadata={} if metadata is None else require_metadata(metadata),
        )

    def _embedder(self) -> by_hand.Embedder:
        embedder = self.rt.embedder_for_writes()
        return None if embedder is None else (embedder.embed_batch, embedder.identity)

    def store_memories(
        self, user_id: str, memories: Sequence[model.MemoryItem], *, embed: bool = True
    ) -> list[model.MemoryItem]:
        """Insert memories (stamping their narrative) and their vectors in one transaction (``embed=False``:
        the caller embeds them, in a batch of its own)."""
        return by_hand.store_memories(self.rt.store, user_id, memories, self._embedder() if embed else None)

    def embed_memories(self, user_id: str, memories: Sequence[model.MemoryItem]) -> None:
        by_hand.put_vectors(self.rt.store, user_id, memories, self._embedder())

    def get_memory(self, memory_id: int, *, user: str | None = None) -> model.MemoryItem:
        return self.rt.store.get_memory(self.rt.reader_id(user), memory_id)

    def memory_text(self, memory_id: int, *, user: str | None = None) -> str:
        return self.whole_memory(memory_id, user=user).text

    def whole_memory(self, memory_id: int, *, user: str | None = None) -> WholeMemory:
        user_id = self.rt.reader_id(user)
        return whole_memory(self.rt.store, user_id, self.rt.store.get_memory(user_id, memory_id))

    def list_memories(
        self,
        *,
        stream: str | None = None,
        storyline_id: int | None = None,
        conversation_id: int | None = None,
        limit: int = 50,
        offset: int = 0,
        filters: Mapping[str, Any] | None = None,
        current_only: bool = False,
        user: str | None = None,
    ) -> list[model.MemoryItem]:
        """Memories newest first, optionally of one stream, storyline or conversation, matching ``filters``
        (:mod:`narrative.store.filter_tree`); ``current_only``: leave out what a later statement superseded."""
        where = self.where(stream, storyline_id, conversation_id, filters, current_only=current_only)
        paged = replace(where, limit=require_positive(limit, "limit"), offset=require_positive(offset, "offset", True))
        return self.rt.store.list_memories(self.rt.reader_id(user), paged)

    def count_memories(self, *, filters: Mapping[str, Any] | None = None, user: str | None = None) -> int:
        """How many memories match ``filters`` (all of the user's without)."""
        return self.rt.store.count_memories(self.rt.reader_id(user), self.where(None, None, None, filters))

    @staticmethod
    def where(
        stream: str | None,
        storyline_id: int | None,
        conversation_id: int | None,
        filters: Mapping[str, Any] | None,
        *,
        current_only: bool = False,
    ) -> MemoryFilter:
        return MemoryFilter(
            streams=None if stream is None else [require_choice(Stream, stream, "stream")],
            storyline_ids=None if storyline_id is None else [storyline_id],
            conversation_ids=None if conversation_id is None else [conversation_id],
            match=parse_filters(filters),
            current_only=require_flag(current_only, "current_only"),
        )

    def one_fact_once(self, memory_ids: Sequence[int], *, user: str | None = None) -> list[Listed]:
        """The memories ``memory_ids`` names, in that order, each with the text it shows in a list and what it
        folds in (an id of no memory of the user is left out)."""
        user_id = self.rt.reader_id(user)
        wanted = list(dict.fromkeys(memory_ids))
        found = {m.id: m for m in self.rt.store.get_memories(user_id, wanted)}
        return listing.one_fact_once(self.rt.store, user_id, [found[i] for i in wanted if i in found])

    def restore_memory(self, memory_id: int, *, user: str | None = None) -> model.MemoryItem:
        """Make a superseded memory current again (undo a correction the detector made); nothing else changes."""
        user_id = self.rt.owner_id(user)
        with self.rt.store.transaction():
            supersede.restore(self.rt.store, user_id, memory_id, self.rt.clock())
        return self.rt.store.get_memory(user_id, memory_id)

    def edit_memory(
        self,
        memory_id: int,
        *,
        content: str | None = None,
        importance: int | None = None,
        emotions: Sequence[str] | None = None,
        entities_to_remove: Iterable[int] = (),
        entities_to_add: Iterable[dict[str, Any]] = (),
        metadata: Mapping[str, Any] | None = None,
        user: str | None = None,
    ) -> model.MemoryItem:
        """Change a memory after the fact: text (the first edit keeps the original and marks it user_edited),
        importance, emotions, metadata (replaced whole) and its entities.

        ``entities_to_add``: ``[{"type": "task", "name": "…", "data": {...}}]``.
        """
        user_id = self.rt.owner_id(user)
        entities_to_remove, entities_to_add = list(entities_to_remove), list(entities_to_add)
        if (content, importance, emotions, metadata) == (None, None, None, None) and not (
            entities_to_remove or entities_to_add
        ):  # refused as the CLI, HTTP and MCP refuse it, not answered having done nothing
            raise ValidationError(
                f"nothing to change for memory {memory_id}: give content, importance, emotions, metadata,"
                " entities_to_remove or entities_to_add",
                field="memory_id",
            )
        changes = by_hand.memory_changes(self.rt.store, user_id, memory_id, content, importance, emotions, metadata)
        return by_hand.edit_memory(
            self.rt.store,
            user_id,
            memory_id,
            changes,
            entities_to_remove,
            entities_to_add,
            self._embedder(),
            self.rt.clock(),
        )

    def update_memories(
        self, updates: Sequence[Mapping[str, Any]], *, user: str | None = None
    ) -> list[model.MemoryItem]:
        """Edit several memories in one transaction, each as :meth:`edit_memory` edits one (``{"id": N,
        "content"?, "importance"?, "emotions"?, "metadata"?}``): all of them, or none when one is refused."""
        user_id = self.rt.owner_id(user)
        if isinstance(updates, str | bytes | Mapping) or not isinstance(updates, Sequence) or not updates:
            raise ValidationError("updates must be a non-empty list of {id, content?, ...} objects", field="updates")
        plans: list[tuple[int, dict[str, Any]]] = []
        for index, item in enumerate(updates):
            where = f"updates[{index}]"
            if not isinstance(item, Mapping):
                raise ValidationError(f"{where} must be an object", field="updates")
            unknown = sorted(set(map(str, item)) - _UPDATE_KEYS)
            memory_id = item.get("id", item.get("memory_id"))
            if unknown or isinstance(memory_id, bool) or not isinstance(memory_id, int):
                said = f"unknown {', '.join(unknown)}" if unknown else "no id"
                raise ValidationError(
                    f"{where}: {said}; each update takes id and content, importance, emotions, metadata",
                    field="updates",
                )
            changes = {k: item[k] for k in ("content", "importance", "emotions", "metadata") if k in item}
            if not changes:
                raise ValidationError(f"{where}: nothing to change for memory {memory_id}", field="updates")
            plans.append((memory_id, changes))
        if len({i for i, _ in plans}) != len(plans):
            raise ValidationError("updates name a memory twice: merge its changes into one", field="updates")
        with self.rt.store.transaction():
            return [self.edit_memory(memory_id, **changes, user=user_id) for memory_id, changes in plans]

    def history(self, memory_id: int, *, user: str | None = None) -> list[model.MemoryEvent]:
        """Every change to a memory, oldest first; after a delete, its tombstone (kinds and times, no text)."""
        return events_of(self.rt.store, self.rt.reader_id(user), memory_id)

    # --- the narrative chain (Koshi) ------------------------------------------------

    def narrative_update(
        self,
        summary: str,
        memory_ids: Sequence[int] = (),
        previous_narrative_id: int | None = None,
        topic: str = "",
        *,
        storyline_id: int | None = None,
        user: str | None = None,
    ) -> Narrative:
        """Append a sealed link: one-sentence summary, the memories it connects, the previous link."""
        self.rt.reader_id(user)
        require_text(summary, "summary", max_length=2000)  # checked again in the write: here before the user is made
        named = bool(memory_ids) or previous_narrative_id is not None or storyline_id is not None
        user_id = self.rt.owner_id(user) if named else self.rt.user_id(user)
        return narrate.narrative_update(
            self.rt.store,
            user_id,
            summary,
            memory_ids,
            previous_narrative_id,
            topic,
            self.rt.clock(),
            storyline_id=storyline_id,
        )

    def narrative_search(
        self, narrative_id: int | None = None, query: str | None = None, *, limit: int = 10, user: str | None = None
    ) -> list[Narrative]:
        """By id, by keyword, or (no arguments) the latest link: "where was I?"."""
        return chain.narrative_search(self.rt.store, self.rt.reader_id(user), narrative_id, query, limit)

    def narratives_after(self, narrative_id: int, *, user: str | None = None) -> list[Narrative]:
        """Forward traversal: the links whose previous link is this one."""
        user_id = self.rt.reader_id(user)
        self.rt.store.get_narrative(user_id, narrative_id)
        return self.rt.store.narratives_after(user_id, narrative_id)

    def walk_back(self, narrative_id: int, depth: int | None = None, *, user: str | None = None) -> list[Narrative]:
        return chain.walk_back(self.rt.store, self.rt.reader_id(user), narrative_id, depth)

    def walk_forward(self, narrative_id: int, depth: int | None = None, *, user: str | None = None) -> list[Narrative]:
        return chain.walk_forward(self.rt.store, self.rt.reader_id(user), narrative_id, depth)

    def recall_chain(self, memory_id: int, depth: int = 3, *, user: str | None = None) -> chain.RecallChain:
        """memory → narrative → sibling memories → earlier links."""
        return chain.recall_chain(self.rt.store, self.rt.reader_id(user), memory_id, depth)

    def list_narratives(
        self, *, storyline_id: int | None = None, limit: int = 50, offset: int = 0, user: str | None = None
    ) -> list[Narrative]:
        user_id = self.rt.reader_id(user)
        return self.rt.store.list_narratives(user_id, storyline_id=storyline_id, limit=limit, offset=offset)


#: The keys an ``update_memories`` item may carry.
_UPDATE_KEYS = frozenset({"id", "memory_id", "content", "importance", "emotions", "metadata"})
#: The keys an ``add_memories`` item may carry (``add_memory``'s arguments).
_ITEM_KEYS = frozenset(inspect.signature(Memories._new_memory).parameters) - {"self", "user_id"}


def _names_held(storyline_id: object, conversation_id: object, message_ids: object) -> bool:
    """Whether a new memory names what its user must hold already (a storyline, a conversation, messages): then
    the user is resolved with ``Runtime.owner_id``, so a user without a row fails on the name and is not made."""
    return storyline_id is not None or conversation_id is not None or bool(message_ids)
