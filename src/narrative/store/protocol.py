"""The store protocol: what the pipelines and the engine may ask of any backend.

``Store`` is composed of role protocols (one per concept of the glossary), so a
method has one home and a second backend can be written and checked role by role.
The embedded SQLite store and the PostgreSQL (pgvector) store implement them all.
Every method takes the user id and never returns another user's rows.  Nothing above the store writes SQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import numpy as np

from narrative.model import (
    Binding,
    BindingKind,
    Conflict,
    Conversation,
    ConversationStatus,
    DecisionReview,
    DeltaType,
    Entity,
    EntityType,
    EventKind,
    LinkKind,
    MemoryBrief,
    MemoryEvent,
    MemoryItem,
    MemoryLink,
    Message,
    Narrative,
    Passage,
    Retention,
    ReviewOutcome,
    Role,
    RoutingDecision,
    StateDelta,
    Storyline,
    StorylineKind,
    StorylineStatus,
    Use,
    UseKind,
    User,
    UseReference,
)
from narrative.store.filters import MemoryFilter

#: (memory hits, passage hits) of one search, each (id, score) best first.
Ranked = tuple[list[tuple[int, float]], list[tuple[int, float]]]

__all__ = [
    "BindingsStore",
    "ConversationsStore",
    "EntitiesStore",
    "KeysStore",
    "LifecycleStore",
    "LinksStore",
    "MemoriesStore",
    "MemoryEventsStore",
    "MessagesStore",
    "NarrativesStore",
    "PassagesStore",
    "PortabilityStore",
    "Store",
    "StorylinesStore",
    "UsersStore",
    "UsesStore",
    "VectorsStore",
]


@runtime_checkable
class LifecycleStore(Protocol):
    """Transactions, migrations and the connection."""

    backend: str

    def transaction(self) -> AbstractContextManager[None]: ...
    @property
    def in_transaction(self) -> bool: ...  # inside a transaction block of this thread
    def lock_user(self, user_id: str) -> None: ...
    def close(self) -> None: ...
    def migrate(self) -> list[str]: ...
    def applied_migrations(self) -> list[str]: ...
    def count_rows(self, table: str, user_id: str | None = None) -> int: ...
    def get_meta(self, key: str) -> str | None: ...
    def check_integrity(self) -> list[dict[str, str]]: ...
    def set_meta(self, key: str, value: str) -> None: ...


@runtime_checkable
class UsersStore(Protocol):
    """Users (created on first use) and the removal of everything a user owns."""

    def ensure_user(self, user_id: str, now: datetime) -> bool: ...
    def get_user(self, user_id: str) -> User: ...
    def list_users(self) -> list[User]: ...
    def delete_user(self, user_id: str) -> None: ...


@runtime_checkable
class ConversationsStore(Protocol):
    """Conversations: at most one active per user."""

    def active_conversation(self, user_id: str) -> Conversation | None: ...
    def get_conversation(self, user_id: str, conversation_id: int) -> Conversation: ...
    def insert_conversation(self, user_id: str, now: datetime, title: str = "") -> Conversation: ...
    def list_conversations(
        self, user_id: str, status: ConversationStatus | None = None, limit: int = 100, offset: int = 0
    ) -> list[Conversation]: ...
    def update_conversation(self, user_id: str, conversation_id: int, **changes: Any) -> Conversation: ...
    def get_preview(self, user_id: str, conversation_id: int) -> dict[str, Any] | None: ...
    def set_preview(self, user_id: str, conversation_id: int, preview: dict[str, Any] | None) -> None: ...
    def delete_conversation(self, user_id: str, conversation_id: int) -> None: ...


@runtime_checkable
class MessagesStore(Protocol):
    """Messages, positioned per user without gaps or duplicates."""

    def get_message(self, user_id: str, message_id: int) -> Message: ...
    def get_messages(self, user_id: str, message_ids: list[int]) -> list[Message]: ...
    def insert_message(
        self,
        user_id: str,
        conversation_id: int,
        role: Role,
        content: str,
        now: datetime,
        speaker: str = "",
        meta: dict[str, Any] | None = None,
    ) -> Message: ...
    def last_position(self, user_id: str) -> int: ...
    def list_messages(
        self,
        user_id: str,
        conversation_id: int | None = None,
        storyline_id: int | None = None,
        limit: int | None = None,
        latest: bool = False,
    ) -> list[Message]: ...
    def previous_message(self, user_id: str, conversation_id: int, position: int) -> Message | None: ...
    def search_messages(self, user_id: str, query: str, limit: int = 20) -> list[tuple[Message, float]]: ...
    def set_message_storyline(self, user_id: str, message_id: int, storyline_id: int) -> None: ...


@runtime_checkable
class MemoriesStore(Protocol):
    """Memories, their provenance and their keyword search."""

    def count_memories(self, user_id: str, where: MemoryFilter | None = None) -> int: ...
    def get_memories(self, user_id: str, memory_ids: Iterable[int]) -> list[MemoryItem]: ...
    def get_memory(self, user_id: str, memory_id: int) -> MemoryItem: ...
    def insert_memory(self, memory: MemoryItem) -> MemoryItem: ...
    def keyword_search_memories(
        self, user_id: str, query: str, where: MemoryFilter | None = None, limit: int = 50
    ) -> list[tuple[int, float]]: ...
    def list_memories(self, user_id: str, where: MemoryFilter | None = None) -> list[MemoryItem]: ...
    def memories_from_messages(self, user_id: str, message_ids: Iterable[int]) -> list[int]: ...
    def memory_briefs(self, user_id: str, memory_ids: Iterable[int]) -> dict[int, MemoryBrief]: ...
    def memory_ids_matching(
        self, user_id: str, where: MemoryFilter, among: Iterable[int] | None = None
    ) -> set[int]: ...
    def memory_tiers(self, user_id: str, where: MemoryFilter) -> list[tuple[int, Retention, str]]: ...
    def update_memory(self, user_id: str, memory_id: int, **changes: Any) -> MemoryItem: ...
    def update_memories(self, user_id: str, memory_ids: Iterable[int], **changes: Any) -> int: ...
    def delete_memories(self, user_id: str, memory_ids: Iterable[int]) -> int: ...


@runtime_checkable
class MemoryEventsStore(Protocol):
    """History: every change to a memory as an appended event; ``insert_memory`` appends ``created`` itself.

    The events outlive their memory (a tombstone): a delete blanks their texts and details and appends
    ``deleted``.  They go with their user.
    """

    def insert_memory_event(
        self,
        user_id: str,
        memory_id: int,
        kind: EventKind,
        now: datetime,
        old_text: str = "",
        new_text: str = "",
        detail: Mapping[str, Any] | None = None,
    ) -> MemoryEvent: ...
    def memory_events(self, user_id: str, memory_id: int) -> list[MemoryEvent]: ...
    def tombstone_memory_events(self, user_id: str, memory_ids: Iterable[int]) -> int: ...


@runtime_checkable
class VectorsStore(Protocol):
    """Memory vectors (model:dims travels with each) and the search over them."""

    def memories_without_vectors(self, user_id: str | None = None, model: str | None = None) -> list[MemoryItem]: ...
    def memory_ids_to_embed(self, model: str | None, user_id: str | None = None) -> list[tuple[str, int]]: ...
    def memory_vector_models(self, user_id: str | None = None) -> dict[str, int]: ...
    def memory_vectors(self, user_id: str | None = None) -> tuple[list[int], list[str], list[str], np.ndarray]: ...
    def vector_models(self) -> dict[str, int]: ...
    def put_memory_vectors(self, user_id: str, model: str, vectors: dict[int, np.ndarray]) -> None: ...
    def vectors_by_id(self, user_id: str, model: str, memory_ids: Iterable[int]) -> dict[int, np.ndarray]: ...
    def vector_search(
        self, user_id: str, query: np.ndarray, model: str, k: int = 50, where: MemoryFilter | None = None
    ) -> list[tuple[int, float]]: ...
    def clear_vectors(self, user_id: str | None = None) -> None: ...
    def drop_index(self) -> None: ...


@runtime_checkable
class PassagesStore(Protocol):
    """Passages (a message's searchable units: spans with their own vectors and keyword entries), the validity
    of passages and memories (superseded, restored), and conflicts between current statements."""

    def insert_passages(
        self, user_id: str, message_id: int, memory_id: int, spans: Sequence[tuple[int, int]]
    ) -> list[Passage]: ...
    def get_passages(self, user_id: str, passage_ids: Iterable[int]) -> list[Passage]: ...
    def passages_of_messages(self, user_id: str, message_ids: Iterable[int]) -> dict[int, list[Passage]]: ...
    def passages_of_memories(self, user_id: str, memory_ids: Iterable[int]) -> list[Passage]: ...
    def messages_without_passages(self, user_id: str | None = None) -> list[tuple[str, int]]: ...
    def own_memories(self, user_id: str, message_ids: Iterable[int]) -> dict[int, int]: ...
    def put_passage_vectors(self, user_id: str, model: str, vectors: dict[int, np.ndarray]) -> None: ...
    def passage_vectors_by_id(self, user_id: str, model: str, passage_ids: Iterable[int]) -> dict[int, np.ndarray]: ...
    def passages_without_vectors(self, user_id: str, model: str) -> list[Passage]: ...
    def keyword_search_passages(
        self, user_id: str, query: str, where: MemoryFilter | None = None, limit: int = 50
    ) -> list[tuple[int, float]]: ...
    def keyword_search_memories_and_passages(
        self, user_id: str, query: str, where: MemoryFilter | None = None, limit: int = 50
    ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]: ...
    def passage_vector_search(
        self, user_id: str, query: np.ndarray, model: str, k: int = 50, where: MemoryFilter | None = None
    ) -> list[tuple[int, float]]: ...
    def vector_search_memories_and_passages(
        self, user_id: str, query: np.ndarray, model: str, k: int = 50, where: MemoryFilter | None = None
    ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]: ...
    def keyword_and_vector_search(
        self,
        user_id: str,
        words: str | None,
        vector: np.ndarray | None,
        model: str,
        limit: int = 50,
        where: MemoryFilter | None = None,
    ) -> tuple[Ranked, Ranked]: ...
    def reading(self, user_id: str) -> AbstractContextManager[None]:
        """One search's reads of a user: a store that keeps indexes in process brings them up to date once, at the
        first read that needs them, and the search's later reads use that view (PostgreSQL; SQLite's indexes are
        always current)."""
        ...

    def supersede_passages(self, user_id: str, passage_ids: Iterable[int], by: int, now: datetime) -> int: ...
    def restore_passages(self, user_id: str, passage_ids: Iterable[int]) -> int: ...
    def passages_superseded_by(self, user_id: str, passage_ids: Iterable[int]) -> list[Passage]: ...
    def supersede_memories(self, user_id: str, memory_ids: Iterable[int], by: int, now: datetime) -> list[int]: ...
    def restore_memories(self, user_id: str, memory_ids: Iterable[int]) -> list[int]: ...
    def superseded_by_memories(self, user_id: str, memory_ids: Iterable[int]) -> dict[int, list[MemoryItem]]: ...
    def memories_and_superseded(
        self, user_id: str, memory_ids: Iterable[int]
    ) -> tuple[list[MemoryItem], dict[int, list[MemoryItem]]]: ...
    def insert_conflict(
        self,
        user_id: str,
        memory_id: int,
        other_memory_id: int,
        now: datetime,
        passage_id: int | None = None,
        other_passage_id: int | None = None,
        reason: str = "",
    ) -> Conflict | None: ...
    def conflicts_of(self, user_id: str, memory_ids: Iterable[int]) -> list[Conflict]: ...
    def memory_briefs_and_conflicts(
        self, user_id: str, memory_ids: Iterable[int]
    ) -> tuple[dict[int, MemoryBrief], list[Conflict]]: ...


@runtime_checkable
class NarrativesStore(Protocol):
    """The narrative chain; sealed links are immutable."""

    def delete_narratives(self, user_id: str, narrative_ids: Iterable[int]) -> None: ...
    def get_narrative(self, user_id: str, narrative_id: int) -> Narrative: ...
    def insert_narrative(
        self,
        user_id: str,
        summary: str,
        memory_ids: Iterable[int],
        previous_narrative_id: int | None,
        topic: str,
        now: datetime,
        storyline_id: int | None = None,
        conversation_id: int | None = None,
        sealed: bool = False,
    ) -> Narrative: ...
    def latest_narrative(self, user_id: str, storyline_id: int | None = None) -> Narrative | None: ...
    def list_narratives(
        self, user_id: str, storyline_id: int | None = None, limit: int = 100, offset: int = 0
    ) -> list[Narrative]: ...
    def narratives_after(self, user_id: str, narrative_id: int) -> list[Narrative]: ...
    def open_narrative(self, user_id: str, storyline_id: int | None) -> Narrative | None: ...
    def seal_narrative(self, user_id: str, narrative_id: int, now: datetime) -> Narrative: ...
    def search_narratives(self, user_id: str, query: str, limit: int = 10) -> list[Narrative]: ...
    def update_narrative(
        self,
        user_id: str,
        narrative_id: int,
        summary: str | None = None,
        memory_ids: Iterable[int] | None = None,
        topic: str | None = None,
    ) -> Narrative: ...


@runtime_checkable
class StorylinesStore(Protocol):
    """Storylines, their vectors and routing decisions."""

    def delete_storyline(self, user_id: str, storyline_id: int) -> None: ...
    def find_storyline(self, user_id: str, name: str) -> Storyline | None: ...
    def get_storyline(self, user_id: str, storyline_id: int) -> Storyline: ...
    def insert_routing_decision(
        self, user_id: str, message_id: int, storyline_id: int, decision: str, scores: dict[str, Any], now: datetime
    ) -> RoutingDecision: ...
    def insert_storyline(
        self,
        user_id: str,
        name: str,
        kind: StorylineKind,
        now: datetime,
        description: str = "",
        keywords: tuple[str, ...] = (),
        status: StorylineStatus = StorylineStatus.ACTIVE,
    ) -> Storyline: ...
    def keyword_search_storylines(self, user_id: str, query: str, limit: int = 10) -> list[tuple[int, float]]: ...
    def list_storylines(self, user_id: str, include_archived: bool = False) -> list[Storyline]: ...
    def participant_names(self, user_id: str) -> set[str]: ...
    def move_storyline_rows(self, user_id: str, from_id: int, to_id: int) -> None: ...
    def put_storyline_vector(self, user_id: str, storyline_id: int, model: str, vector: np.ndarray) -> None: ...
    def routing_decisions(
        self, user_id: str, message_id: int | None = None, limit: int = 100
    ) -> list[RoutingDecision]: ...
    def storyline_vector(self, user_id: str, storyline_id: int, model: str) -> np.ndarray | None: ...
    def storyline_vector_identities(self, user_id: str) -> dict[int, str]: ...
    def storyline_vector_models(self, user_id: str | None = None) -> dict[str, int]: ...
    def storyline_vectors(self, user_id: str, model: str) -> dict[int, np.ndarray]: ...
    def update_storyline(self, user_id: str, storyline_id: int, **changes: Any) -> Storyline: ...
    def your_story(self, user_id: str) -> Storyline | None: ...


@runtime_checkable
class EntitiesStore(Protocol):
    """Entities (people, tasks, waiting-ons...) and state deltas."""

    def delete_entities(self, user_id: str, entity_ids: Iterable[int]) -> None: ...
    def get_entity(self, user_id: str, entity_id: int) -> Entity: ...
    def insert_entity(
        self,
        user_id: str,
        entity_type: EntityType,
        name: str,
        now: datetime,
        data: dict[str, Any] | None = None,
        memory_id: int | None = None,
        conversation_id: int | None = None,
        storyline_id: int | None = None,
        is_active: bool = True,
    ) -> Entity: ...
    def insert_state_delta(
        self,
        user_id: str,
        delta_type: DeltaType,
        data: dict[str, Any],
        now: datetime,
        memory_id: int | None = None,
        conversation_id: int | None = None,
        applied: bool = False,
    ) -> StateDelta: ...
    def list_entities(
        self,
        user_id: str,
        entity_types: Sequence[EntityType] | None = None,
        active: bool | None = None,
        memory_id: int | None = None,
        conversation_id: int | None = None,
        storyline_id: int | None = None,
        since: datetime | None = None,
        limit: int = 500,
    ) -> list[Entity]: ...
    def list_state_deltas(
        self, user_id: str, memory_id: int | None = None, conversation_id: int | None = None
    ) -> list[StateDelta]: ...
    def resolve_entity(
        self,
        user_id: str,
        entity_id: int,
        now: datetime,
        resolved_by_memory_id: int | None = None,
        resolved_by_entity_id: int | None = None,
    ) -> Entity: ...
    def update_entity(
        self, user_id: str, entity_id: int, memory_id: int | None = None, storyline_id: int | None = None
    ) -> Entity: ...


@runtime_checkable
class UsesStore(Protocol):
    """Uses: which memories shaped a recall or a context, and why."""

    def get_use(self, user_id: str, use_id: int) -> Use: ...
    def insert_use(
        self,
        user_id: str,
        kind: UseKind,
        query: str,
        references: Sequence[UseReference],
        now: datetime,
        conversation_id: int | None = None,
        outcome: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Use: ...
    def list_uses(self, user_id: str, limit: int = 50, offset: int = 0) -> list[Use]: ...
    def uses_of_memory(self, user_id: str, memory_id: int, limit: int = 50) -> list[Use]: ...
    def delete_uses_of_memories(self, user_id: str, memory_ids: Iterable[int]) -> int: ...
    def use_counts(
        self, user_id: str, memory_ids: Iterable[int], since: datetime | None = None, until: datetime | None = None
    ) -> dict[int, int]: ...


@runtime_checkable
class BindingsStore(Protocol):
    """Storyline bindings (NarraNexus): named instances bound to a storyline, active or history."""

    def insert_binding(self, binding: Binding) -> Binding: ...
    def get_binding(self, user_id: str, binding_id: int) -> Binding: ...
    def list_bindings(
        self,
        user_id: str,
        storyline_ids: Sequence[int] | None = None,
        kinds: Sequence[BindingKind] | None = None,
        active: bool | None = True,
        limit: int = 500,
    ) -> list[Binding]: ...
    def update_binding(self, user_id: str, binding_id: int, **changes: Any) -> Binding: ...
    def delete_binding(self, user_id: str, binding_id: int) -> None: ...


@runtime_checkable
class LinksStore(Protocol):
    """Links between memories (research consolidation, decision chains) and answers to the decision audit."""

    def insert_memory_links(self, links: Sequence[MemoryLink]) -> int: ...
    def memory_links(
        self, user_id: str, memory_ids: Iterable[int] | None = None, kinds: Sequence[LinkKind] | None = None
    ) -> list[MemoryLink]: ...
    def delete_memory_link(self, user_id: str, memory_id: int, linked_id: int, kind: LinkKind) -> int: ...
    def insert_decision_review(
        self, user_id: str, memory_id: int, outcome: ReviewOutcome, note: str, now: datetime
    ) -> DecisionReview: ...
    def decision_reviews(self, user_id: str, memory_ids: Iterable[int] | None = None) -> list[DecisionReview]: ...


@runtime_checkable
class KeysStore(Protocol):
    """API keys (stored as hashes)."""

    def delete_api_keys(self, user_id: str) -> int: ...
    def insert_api_key(self, user_id: str, key_hash: str, label: str, now: datetime) -> int: ...
    def list_keys(self, user_id: str) -> list[dict[str, Any]]: ...
    def revoke_key(self, user_id: str, key_id: int) -> bool: ...
    def user_for_key_hash(self, key_hash: str) -> str | None: ...


@runtime_checkable
class PortabilityStore(Protocol):
    """Export, import and the bookkeeping of deletes."""

    def conversation_memory_ids(self, user_id: str, conversation_id: int) -> list[int]: ...
    def delete_conversation_uses(self, user_id: str, conversation_id: int) -> int: ...
    def delete_messages(self, user_id: str, message_ids: Iterable[int]) -> int: ...
    def export_user_rows(self, user_id: str) -> dict[str, list[dict[str, Any]]]: ...
    def import_user_rows(self, user_id: str, tables: dict[str, list[dict[str, Any]]]) -> dict[str, int]: ...
    def narratives_with_memories(self, user_id: str, memory_ids: Iterable[int]) -> list[int]: ...
    def reopen_resolved_by(self, user_id: str, memory_ids: Iterable[int]) -> int: ...
    def splice_out_narratives(self, user_id: str, narrative_ids: Iterable[int]) -> int: ...
    def scrub_deleted(self, keep_changes: int = 1_000) -> dict[str, int]: ...
    def prune_memory_changes(self, keep: int = 1_000) -> int: ...
    def table_columns(self, table: str) -> list[str]: ...
    def unused_storylines(self, user_id: str) -> list[int]: ...
    def user_content(self, user_id: str) -> dict[str, int]: ...


@runtime_checkable
class Store(
    LifecycleStore,
    UsersStore,
    ConversationsStore,
    MessagesStore,
    MemoriesStore,
    MemoryEventsStore,
    VectorsStore,
    PassagesStore,
    NarrativesStore,
    StorylinesStore,
    EntitiesStore,
    UsesStore,
    BindingsStore,
    LinksStore,
    KeysStore,
    PortabilityStore,
    Protocol,
):
    """Every role: what the engine asks of a backend."""

    backend: str


def searched_in_turn(
    store: PassagesStore,
    user_id: str,
    words: str | None,
    vector: np.ndarray | None,
    model: str,
    limit: int,
    where: MemoryFilter | None,
) -> tuple[Ranked, Ranked]:
    """:meth:`PassagesStore.keyword_and_vector_search` done one search after the other."""
    keywords: Ranked = ([], [])
    vectors: Ranked = ([], [])
    if words is not None:
        keywords = store.keyword_search_memories_and_passages(user_id, words, where, limit)
    if vector is not None:
        vectors = store.vector_search_memories_and_passages(user_id, vector, model, limit, where)
    return keywords, vectors
