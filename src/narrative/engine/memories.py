"""The facade's memories and the Koshi narrative chain."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from narrative import model
from narrative.checks import require_choice, require_importance, require_text
from narrative.engine.core import Runtime
from narrative.errors import NotFound, ValidationError
from narrative.model import EntityType, Narrative, Source, Stream
from narrative.read import chain
from narrative.store.filters import MemoryFilter
from narrative.write import embedding, narrate


class Memories:
    """Memories (add, edit, list) and the Koshi narrative chain."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime

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
        user: str | None = None,
    ) -> model.MemoryItem:
        """Store one memory, stamped with the narrative active now, embedded when an embedder is set."""
        user_id = self.rt.user_id(user)
        memory = self._new_memory(
            user_id, content, stream=stream, source=source, importance=importance, emotions=emotions,
            message_ids=message_ids, details=details, storyline_id=storyline_id, conversation_id=conversation_id,
            event_at=event_at,
        )
        with self.rt.store.transaction():
            self._check_refs(user_id, memory)
            return self.store_memories(user_id, [memory])[0]

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
        user_id = self.rt.user_id(user)
        for index, item in enumerate(items):
            unknown = set(item) - _ITEM_KEYS if isinstance(item, Mapping) else {"(not an object)"}
            if unknown or "content" not in item:
                raise ValidationError(
                    f"items[{index}] takes content and add_memory's keyword arguments; got {sorted(map(str, unknown))}",
                    field="items",
                )
        memories = [self._new_memory(user_id, **dict(item)) for item in items]
        if vectors is not None and (self.rt.embedder is None or len(vectors) != len(memories)):
            raise ValidationError("vectors need an embedder and one row per item", field="vectors")
        with self.rt.store.transaction():
            for memory in memories:
                self._check_refs(user_id, memory)
            if vectors is None:
                return self.store_memories(user_id, memories)
            stored = [self.rt.store.insert_memory(m) for m in memories]
            assert self.rt.embedder is not None
            self.rt.store.put_memory_vectors(
                user_id, self.rt.embedder.identity, {m.id: vectors[i] for i, m in enumerate(stored)}
            )
            return stored

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
        )

    def _check_refs(self, user_id: str, memory: model.MemoryItem) -> None:
        if memory.storyline_id is not None:
            self.rt.store.get_storyline(user_id, memory.storyline_id)
        if memory.conversation_id is not None:
            self.rt.store.get_conversation(user_id, memory.conversation_id)
        if memory.message_ids:
            found = {m.id for m in self.rt.store.get_messages(user_id, list(memory.message_ids))}
            missing = [i for i in memory.message_ids if i not in found]
            if missing:
                raise ValidationError(f"messages not found: {missing}", field="message_ids")

    def _active_narrative_id(self, user_id: str, storyline_id: int | None) -> int | None:
        """Koshi stamping: the storyline's running link, else the user's latest link."""
        if storyline_id is not None:
            running = self.rt.store.open_narrative(user_id, storyline_id)
            if running is not None:
                return running.id
        latest = self.rt.store.latest_narrative(user_id)
        return None if latest is None else latest.id

    def store_memories(
        self, user_id: str, memories: Sequence[model.MemoryItem], *, embed: bool = True
    ) -> list[model.MemoryItem]:
        """Insert memories (stamping their narrative) and their vectors in one transaction (``embed=False``:
        the caller embeds them, in a batch of its own)."""
        stored: list[model.MemoryItem] = []
        with self.rt.store.transaction():
            for memory in memories:
                if memory.narrative_id is None:
                    stamp = self._active_narrative_id(user_id, memory.storyline_id)
                    memory = model.MemoryItem(**{**memory.__dict__, "narrative_id": stamp})
                stored.append(self.rt.store.insert_memory(memory))
            if embed:
                self.embed_memories(user_id, stored)
        return stored

    def embed_memories(self, user_id: str, memories: Sequence[model.MemoryItem]) -> None:
        embedder = self.rt.embedder
        if embedder is None or not memories:
            return
        vectors = embedding.memory_vectors(embedder.embed_batch, memories)
        self.rt.store.put_memory_vectors(user_id, embedder.identity, vectors)

    def get_memory(self, memory_id: int, *, user: str | None = None) -> model.MemoryItem:
        return self.rt.store.get_memory(self.rt.user_id(user), memory_id)

    def list_memories(
        self,
        *,
        stream: str | None = None,
        storyline_id: int | None = None,
        conversation_id: int | None = None,
        limit: int = 50,
        offset: int = 0,
        user: str | None = None,
    ) -> list[model.MemoryItem]:
        """Memories newest first, optionally of one stream, storyline or conversation."""
        where = MemoryFilter(
            streams=None if stream is None else [require_choice(Stream, stream, "stream")],
            storyline_ids=None if storyline_id is None else [storyline_id],
            conversation_ids=None if conversation_id is None else [conversation_id],
            limit=limit,
            offset=offset,
        )
        return self.rt.store.list_memories(self.rt.user_id(user), where)

    def edit_memory(
        self,
        memory_id: int,
        *,
        content: str | None = None,
        importance: int | None = None,
        emotions: Sequence[str] | None = None,
        entities_to_remove: Iterable[int] = (),
        entities_to_add: Iterable[dict[str, Any]] = (),
        user: str | None = None,
    ) -> model.MemoryItem:
        """Change a memory after the fact: text (the first edit keeps the original and marks it user_edited),
        importance, emotions and its entities.

        ``entities_to_add``: ``[{"type": "task", "name": "…", "data": {...}}]``.
        """
        user_id = self.rt.user_id(user)
        changes = self._memory_changes(user_id, memory_id, content, importance, emotions)
        remove, add = list(entities_to_remove), list(entities_to_add)
        with self.rt.store.transaction():
            memory = self.rt.store.get_memory(user_id, memory_id)
            if changes:
                memory = self.rt.store.update_memory(user_id, memory_id, **changes)
                if content is not None:
                    self.embed_memories(user_id, [memory])
            for eid in remove:
                if self.rt.store.get_entity(user_id, eid).memory_id != memory_id:
                    raise NotFound(f"entity {eid} does not belong to memory {memory_id}")
            self.rt.store.delete_entities(user_id, remove)
            for item in add:
                self._add_entity(user_id, memory, item)
        return memory

    def _memory_changes(
        self, user_id: str, memory_id: int, content: str | None, importance: int | None,
        emotions: Sequence[str] | None,
    ) -> dict[str, object]:
        current = self.rt.store.get_memory(user_id, memory_id)
        changes: dict[str, object] = {}
        if content is not None:
            changes["content"] = require_text(content, "content").strip()
            changes["user_edited"] = True
            if current.original_content is None:
                changes["original_content"] = current.content
        if importance is not None:
            changes["importance"] = require_importance(importance)
        if emotions is not None:
            changes["emotions"] = tuple(emotions)
        return changes

    def _add_entity(self, user_id: str, memory: model.MemoryItem, item: object) -> None:
        if not isinstance(item, dict):
            raise ValidationError("each entity to add must be an object", field="entities_to_add")
        kind = require_choice(EntityType, item.get("type") or item.get("entity_type"), "entities_to_add.type")
        name = require_text(item.get("name"), "entities_to_add.name", 500).strip()
        self.rt.store.insert_entity(user_id, kind, name, self.rt.clock(), data=dict(item.get("data") or {}),
                                 memory_id=memory.id, conversation_id=memory.conversation_id,
                                 storyline_id=memory.storyline_id)

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
        user_id = self.rt.user_id(user)
        return narrate.narrative_update(
            self.rt.store, user_id, summary, memory_ids, previous_narrative_id, topic, self.rt.clock(),
            storyline_id=storyline_id,
        )

    def narrative_search(
        self, narrative_id: int | None = None, query: str | None = None, *, limit: int = 10, user: str | None = None
    ) -> list[Narrative]:
        """By id, by keyword, or (no arguments) the latest link: "where was I?"."""
        return chain.narrative_search(self.rt.store, self.rt.user_id(user), narrative_id, query, limit)

    def narratives_after(self, narrative_id: int, *, user: str | None = None) -> list[Narrative]:
        """Forward traversal: the links whose previous link is this one."""
        user_id = self.rt.user_id(user)
        self.rt.store.get_narrative(user_id, narrative_id)
        return self.rt.store.narratives_after(user_id, narrative_id)

    def walk_back(self, narrative_id: int, depth: int | None = None, *, user: str | None = None) -> list[Narrative]:
        return chain.walk_back(self.rt.store, self.rt.user_id(user), narrative_id, depth)

    def walk_forward(
        self, narrative_id: int, depth: int | None = None, *, user: str | None = None
    ) -> list[Narrative]:
        return chain.walk_forward(self.rt.store, self.rt.user_id(user), narrative_id, depth)

    def recall_chain(self, memory_id: int, depth: int = 3, *, user: str | None = None) -> chain.RecallChain:
        """memory → narrative → sibling memories → earlier links."""
        return chain.recall_chain(self.rt.store, self.rt.user_id(user), memory_id, depth)

    def list_narratives(
        self, *, storyline_id: int | None = None, limit: int = 50, offset: int = 0, user: str | None = None
    ) -> list[Narrative]:
        user_id = self.rt.user_id(user)
        return self.rt.store.list_narratives(user_id, storyline_id=storyline_id, limit=limit, offset=offset)


#: The keys an ``add_memories`` item may carry (``add_memory``'s arguments).
_ITEM_KEYS = frozenset(inspect.signature(Memories._new_memory).parameters) - {"self", "user_id"}
