"""Memories written by hand (``add_memory``, ``add_memories``, ``edit_memory``), not by a turn or a close.

* Every reference must exist for the user: the storyline, the conversation, each message.
* A memory is stamped with the narrative active when it is stored (Koshi): the running link of its
  storyline, else the user's latest link.
* Memories and their vectors are stored in one transaction; the vector is made from the memory's text
  (:func:`narrative.write.embedding.memory_vectors`), or given by the caller (bulk importers).
* An edit of the text keeps the first original and marks the memory ``user_edited``; entities are removed
  (only the memory's own) and added in the same transaction, and the new text is embedded again.
* Every memory stored gets its ``created`` event from the store; an edit that changes something appends
  ``edited`` (:mod:`narrative.write.history`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np

from narrative.checks import require_choice, require_importance, require_metadata, require_text
from narrative.errors import NotFound, ValidationError
from narrative.model import EntityType, MemoryItem, Stream
from narrative.store.protocol import Store
from narrative.write import history, storylines, supersede
from narrative.write.embedding import Embed, memory_vectors

__all__ = [
    "Embedder",
    "add_memories",
    "check_refs",
    "edit_memory",
    "memory_changes",
    "narrative_stamp",
    "put_vectors",
    "store_memories",
]

#: Streams whose hand-written memories are read for corrections of earlier ones of the same stream.
HAND_STREAMS = frozenset({Stream.FACT, Stream.DECISION, Stream.RESEARCH})

#: The current embedder as the write path needs it: how to embed, and the identity its vectors carry.
Embedder = tuple[Embed, str] | None


def check_refs(store: Store, user_id: str, memory: MemoryItem) -> None:
    """NotFound / ValidationError unless the memory's storyline, conversation and messages are the user's."""
    if memory.storyline_id is not None:
        store.get_storyline(user_id, memory.storyline_id)
    if memory.conversation_id is not None:
        store.get_conversation(user_id, memory.conversation_id)
    if memory.message_ids:
        found = {m.id for m in store.get_messages(user_id, list(memory.message_ids))}
        missing = [i for i in memory.message_ids if i not in found]
        if missing:
            raise ValidationError(f"messages not found: {missing}", field="message_ids")


def narrative_stamp(store: Store, user_id: str, storyline_id: int | None) -> int | None:
    """Koshi stamping: the storyline's running link, else the user's latest link."""
    if storyline_id is not None:
        running = store.open_narrative(user_id, storyline_id)
        if running is not None:
            return running.id
    latest = store.latest_narrative(user_id)
    return None if latest is None else latest.id


def store_memories(store: Store, user_id: str, memories: Sequence[MemoryItem], embedder: Embedder) -> list[MemoryItem]:
    """Insert memories (stamping their narrative) and, with an embedder, their vectors, in one transaction."""
    stored: list[MemoryItem] = []
    with store.transaction():
        for memory in memories:
            if memory.narrative_id is None:
                memory = replace(memory, narrative_id=narrative_stamp(store, user_id, memory.storyline_id))
            stored.append(store.insert_memory(memory))
        put_vectors(store, user_id, stored, embedder)
    return stored


def put_vectors(store: Store, user_id: str, memories: Sequence[MemoryItem], embedder: Embedder) -> None:
    """Embed the memories (one model call) and store their vectors; nothing without an embedder."""
    if embedder is None or not memories:
        return
    embed, identity = embedder
    store.put_memory_vectors(user_id, identity, memory_vectors(embed, memories))


def add_memories(
    store: Store,
    user_id: str,
    memories: Sequence[MemoryItem],
    embedder: Embedder,
    vectors: np.ndarray | None = None,
) -> list[MemoryItem]:
    """Check every memory's references, then store them all in one transaction, embedded by ``embedder`` or
    (``vectors``: one row per memory, made by that embedder) with the caller's vectors."""
    with store.transaction():
        for memory in memories:
            check_refs(store, user_id, memory)
        if vectors is None or embedder is None:
            stored = store_memories(store, user_id, memories, embedder)
        else:
            stored = [store.insert_memory(m) for m in memories]
            store.put_memory_vectors(user_id, embedder[1], {m.id: vectors[i] for i, m in enumerate(stored)})
        for memory in stored:  # a fact noted by hand can correct an earlier one too
            if not memory.message_ids and memory.stream in HAND_STREAMS:
                supersede.settle_memory(store, memory, memory.created_at)
        return [store.get_memory(user_id, m.id) if m.valid_to is None else m for m in stored]


def edit_memory(
    store: Store,
    user_id: str,
    memory_id: int,
    changes: dict[str, Any],
    remove: Iterable[int],
    add: Iterable[object],
    embedder: Embedder,
    now: datetime,
) -> MemoryItem:
    """Apply ``changes`` (see :func:`memory_changes`), remove the memory's entities ``remove``, add ``add``."""
    with store.transaction():
        before = memory = store.get_memory(user_id, memory_id)
        if changes:
            memory = store.update_memory(user_id, memory_id, **changes)
            if "content" in changes:
                put_vectors(store, user_id, [memory], embedder)
                storylines.restate_edited(store, user_id, before, memory)
        removing = list(remove)
        for eid in removing:
            if store.get_entity(user_id, eid).memory_id != memory_id:
                raise NotFound(f"entity {eid} does not belong to memory {memory_id}")
        store.delete_entities(user_id, removing)
        adding = list(add)
        for item in adding:
            _add_entity(store, user_id, memory, item, now)
        history.edited(store, before, memory, now, entities=bool(removing or adding))
    return memory


def memory_changes(
    store: Store,
    user_id: str,
    memory_id: int,
    content: str | None,
    importance: int | None,
    emotions: Sequence[str] | None,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The checked fields an edit changes; the first edit of the text keeps the original; metadata is
    replaced whole."""
    current = store.get_memory(user_id, memory_id)
    changes: dict[str, Any] = {}
    if content is not None:
        changes["content"] = require_text(content, "content").strip()
        changes["user_edited"] = True
        if current.original_content is None:
            changes["original_content"] = current.content
    if importance is not None:
        changes["importance"] = require_importance(importance)
    if emotions is not None:
        changes["emotions"] = tuple(emotions)
    if metadata is not None:
        changes["metadata"] = require_metadata(metadata)
    return changes


def _add_entity(store: Store, user_id: str, memory: MemoryItem, item: object, now: datetime) -> None:
    if not isinstance(item, dict):
        raise ValidationError("each entity to add must be an object", field="entities_to_add")
    kind = require_choice(EntityType, item.get("type") or item.get("entity_type"), "entities_to_add.type")
    name = require_text(item.get("name"), "entities_to_add.name", 500).strip()
    store.insert_entity(
        user_id,
        kind,
        name,
        now,
        data=dict(item.get("data") or {}),
        memory_id=memory.id,
        conversation_id=memory.conversation_id,
        storyline_id=memory.storyline_id,
    )
