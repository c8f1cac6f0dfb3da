"""The glossary as dataclasses and enums.

Every concept of ARCHITECTURE.md lives here: user, conversation, message,
storyline, memory, narrative, entity, state delta, use.  This module imports
nothing of ours; every other layer imports it.

Words with one meaning each:

* **memory** — one remembered item (:class:`MemoryItem`: a stream, a source, a text, an importance).
  ``narrative.Memory`` is something else: the facade a user holds, one user's whole memory in one file;
  inside the package the item is always ``MemoryItem``, the facade always ``Memory``.
* **narrative** — one link of the Koshi chain (:class:`Narrative`); the links of a storyline form its
  **chain** (``walk_back``, ``walk_forward``, ``recall_chain``); the running link is the one still open.
* **thread** — an *open item*: an active entity of one of the :data:`OPEN_ENTITY_TYPES` (a task, a
  waiting-on, an opened question) that a later turn or the user resolves (``open_threads``,
  ``stale_threads``, ``resolve_thread``; ``DeltaType.NEW_THREAD``).  Never a chain of links.
* **storyline** — a topic the turns are routed to (:class:`Storyline`); Your Story is the permanent one.

Ids are integers assigned by the store (Koshi's schema uses integer ids and the
narrative tools pass ``memory_ids: number[]``); users are identified by a
caller-chosen string such as ``"alice"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple


class ConversationStatus(StrEnum):
    """Talking Rock lifecycle states.  ``paused`` is a flag on an active conversation."""

    ACTIVE = "active"
    READY_TO_CLOSE = "ready_to_close"
    COMPRESSING = "compressing"
    ARCHIVED = "archived"


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class Stream(StrEnum):
    """ITSERR streams, plus the reflection stream and closed-conversation memories."""

    CONVERSATION = "conversation"
    RESEARCH = "research"
    DECISION = "decision"
    REFLECTION = "reflection"
    NARRATIVE = "narrative"
    FACT = "fact"


# Streams whose memories summarise many messages (reflections, narrative links, closing memories): they quote no
# single message, rank below the words themselves, and their vectors are made from the memories they summarise.
SUMMARY_STREAMS = frozenset({Stream.REFLECTION, Stream.NARRATIVE})


class Source(StrEnum):
    """Koshi provenance tags (``source:conversation`` …) plus ITSERR reflections."""

    CONVERSATION = "conversation"
    AGENT = "agent"
    EXTRACTION = "extraction"
    NARRATIVE = "narrative"
    REFLECTION = "reflection"


class StorylineKind(StrEnum):
    YOUR_STORY = "your_story"  # permanent, one per user
    DEFAULT = "default"  # small-talk catch-alls with strict boundaries
    USER = "user"  # made by the user
    DETECTED = "detected"  # created by routing from conversation


class StorylineStatus(StrEnum):
    PERMANENT = "permanent"
    ACTIVE = "active"
    ARCHIVED = "archived"


class EntityType(StrEnum):
    PERSON = "person"
    TASK = "task"
    DECISION = "decision"
    WAITING_ON = "waiting_on"
    QUESTION_OPENED = "question_opened"
    QUESTION_RESOLVED = "question_resolved"
    BLOCKER_CLEARED = "blocker_cleared"
    PRIORITY_CHANGE = "priority_change"
    STORYLINE_REFERENCE = "storyline_reference"
    INSIGHT = "insight"


#: Entity types that stay "open" until a later conversation resolves them.
OPEN_ENTITY_TYPES = frozenset({EntityType.TASK, EntityType.WAITING_ON, EntityType.QUESTION_OPENED})


class DeltaType(StrEnum):
    NEW_WAITING_ON = "new_waiting_on"
    RESOLVED_WAITING_ON = "resolved_waiting_on"
    NEW_THREAD = "new_thread"
    RESOLVED_THREAD = "resolved_thread"
    PRIORITY_CHANGE = "priority_change"
    STORYLINE_UPDATE = "storyline_update"


class UseKind(StrEnum):
    RECALL = "recall"
    CONTEXT = "context"
    CLASSIFICATION = "classification"
    DECOMPOSITION = "decomposition"
    VERIFICATION = "verification"
    OUTCOME = "outcome"


class InfluenceType(StrEnum):
    DISAMBIGUATION = "disambiguation"
    PATTERN_MATCH = "pattern_match"
    ENTITY_REFERENCE = "entity_reference"
    INTENT_VERIFICATION = "intent_verification"
    RETRIEVAL = "retrieval"


class EventKind(StrEnum):
    """What happened to a memory (one row of its history, :class:`MemoryEvent`)."""

    CREATED = "created"
    EDITED = "edited"
    CONFIRMED = "confirmed"  # the review step: the person confirmed what the close proposed
    SUPERSEDED = "superseded"  # a later memory corrected it (it stays, no longer current)
    RESTORED = "restored"  # a supersession undone: current again
    DELETED = "deleted"  # the tombstone: the memory is gone, its events keep kind and time only


class Retention(StrEnum):
    """ITSERR conversation-stream retention tiers (originals are never deleted)."""

    FULL = "full"
    KEY_POINTS = "key_points"
    THEME = "theme"


IMPORTANCE_MIN = 1
IMPORTANCE_MAX = 5


@dataclass(frozen=True)
class User:
    id: str
    created_at: datetime


@dataclass(frozen=True)
class Conversation:
    id: int
    user_id: str
    status: ConversationStatus
    started_at: datetime
    last_message_at: datetime | None = None
    closed_at: datetime | None = None
    archived_at: datetime | None = None
    message_count: int = 0
    is_paused: bool = False
    paused_at: datetime | None = None
    title: str = ""
    compression_model: str | None = None
    compression_duration_ms: int | None = None
    compression_passes: int | None = None
    idle_notified_at: datetime | None = None


@dataclass(frozen=True)
class Message:
    id: int
    user_id: str
    conversation_id: int
    position: int  # per-user, strictly increasing: the "message number"
    role: Role
    content: str
    created_at: datetime
    speaker: str = ""
    storyline_id: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Participant:
    name: str
    role: str  # creator | participant | agent | system


@dataclass(frozen=True)
class Storyline:
    id: int
    user_id: str
    name: str
    kind: StorylineKind
    status: StorylineStatus
    created_at: datetime
    updated_at: datetime
    description: str = ""
    keywords: tuple[str, ...] = ()
    summary: str = ""
    interaction_count: int = 0
    participants: tuple[Participant, ...] = ()
    last_message_at: datetime | None = None

    @property
    def is_your_story(self) -> bool:
        return self.kind is StorylineKind.YOUR_STORY


# --- stream-specific details (ITSERR) ---------------------------------------


@dataclass(frozen=True)
class ConversationDetails:
    user_input: str = ""
    agent_response: str = ""
    question_type: str | None = None  # factual | interpretive | methodological
    clarification_count: int = 0
    topic_tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class ResearchDetails:
    source_type: str = "note"  # citation | annotation | note | quote
    source_reference: str | None = None
    author: str | None = None
    work_title: str | None = None
    page_reference: str | None = None
    user_annotation: str | None = None


@dataclass(frozen=True)
class DecisionDetails:
    decision: str = ""
    rationale: str = ""
    alternatives_considered: tuple[str, ...] = ()
    decision_type: str = "scope"  # methodological | interpretive | scope
    confidence: float = 0.5
    reversible: bool = True


@dataclass(frozen=True)
class ReflectionDetails:
    reflection_type: str = "questions"  # questions | positions | sources
    covered_from: datetime | None = None
    covered_to: datetime | None = None
    exchange_count: int = 0


Details = ConversationDetails | ResearchDetails | DecisionDetails | ReflectionDetails


@dataclass(frozen=True)
class MemoryItem:
    id: int
    user_id: str
    stream: Stream
    source: Source
    content: str
    importance: int
    created_at: datetime
    emotions: tuple[str, ...] = ()
    conversation_id: int | None = None
    storyline_id: int | None = None
    narrative_id: int | None = None  # the narrative active when stored (Koshi)
    message_ids: tuple[int, ...] = ()  # provenance down to the message
    positions: tuple[int, ...] = ()  # message positions of those messages
    details: Details | None = None
    retention: Retention = Retention.FULL
    key_points: str = ""
    user_reviewed: bool = False
    user_edited: bool = False
    original_content: str | None = None
    extraction_model: str | None = None
    extraction_confidence: float | None = None
    event_at: datetime | None = None  # when it happened (defaults to created_at)
    valid_to: datetime | None = None  # when it stopped being current (a later memory superseded it)
    superseded_by: int | None = None  # the memory that superseded it
    metadata: dict[str, Any] = field(
        default_factory=dict, hash=False
    )  # the caller's own keys (checks.require_metadata)

    @property
    def is_current(self) -> bool:
        """Not superseded: what search, context and the greeting use by default."""
        return self.valid_to is None


class MemoryBrief(NamedTuple):
    """What ranking needs of a memory, cheaply: its stream, time (event or creation), source message ids, and
    when a later statement superseded it (None while it is current)."""

    stream: Stream
    when: datetime
    sources: tuple[int, ...]
    valid_to: datetime | None = None


@dataclass(frozen=True)
class Passage:
    """One searchable unit of a message: characters ``[start, end)`` of it, with its own vector and keyword
    entry.  A message the embedding model reads whole is one passage; a long reply or a document is several.
    ``memory_id`` is the conversation memory made when the message was processed (filters follow it)."""

    id: int
    user_id: str
    message_id: int
    memory_id: int
    seq: int
    start: int
    end: int
    valid_to: datetime | None = None
    superseded_by: int | None = None  # the passage that superseded it
    parts: int = 1  # how many passages its message has (1: the passage is the whole message)

    @property
    def is_current(self) -> bool:
        return self.valid_to is None


@dataclass(frozen=True)
class Conflict:
    """Two current memories (or passages of their messages) that disagree with no update order between them."""

    id: int
    user_id: str
    memory_id: int
    other_memory_id: int
    created_at: datetime
    passage_id: int | None = None
    other_passage_id: int | None = None
    reason: str = ""


@dataclass(frozen=True)
class MemoryEvent:
    """One change to a memory: append-only, kept after the memory is deleted (without any text).

    ``old_text``/``new_text``: the memory's text before and after (empty where there is none: before a
    ``created``, and in every event of a deleted memory).  ``detail`` holds ids and words, never text:
    ``conversation_id`` of a confirm, ``fields`` of an edit, ``superseded_by`` (a memory id), ``with``
    (what a delete came with: memory, conversation, storyline).
    """

    id: int
    user_id: str
    memory_id: int
    kind: EventKind
    created_at: datetime
    old_text: str = ""
    new_text: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Narrative:
    """One link of the Koshi chain: a sentence, the memories it connects, the previous link."""

    id: int
    user_id: str
    summary: str
    memory_ids: tuple[int, ...]
    previous_narrative_id: int | None
    topic: str
    created_at: datetime
    storyline_id: int | None = None
    conversation_id: int | None = None
    sealed: bool = False
    sealed_at: datetime | None = None


@dataclass(frozen=True)
class Entity:
    id: int
    user_id: str
    entity_type: EntityType
    name: str
    created_at: datetime
    data: dict[str, Any] = field(default_factory=dict)
    memory_id: int | None = None
    conversation_id: int | None = None
    storyline_id: int | None = None
    is_active: bool = True
    resolved_by_memory_id: int | None = None
    resolved_by_entity_id: int | None = None
    resolved_at: datetime | None = None


@dataclass(frozen=True)
class StateDelta:
    id: int
    user_id: str
    delta_type: DeltaType
    data: dict[str, Any]
    created_at: datetime
    memory_id: int | None = None
    conversation_id: int | None = None
    applied: bool = False
    applied_at: datetime | None = None


@dataclass(frozen=True)
class UseReference:
    """One memory's part in one use (Talking Rock classification_memory_references)."""

    memory_id: int
    influence_type: InfluenceType
    score: float
    reasoning: str = ""
    rank: int = 0


@dataclass(frozen=True)
class Use:
    id: int
    user_id: str
    kind: UseKind
    query: str
    created_at: datetime
    references: tuple[UseReference, ...] = ()
    conversation_id: int | None = None
    outcome: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RoutingDecision:
    """Why a message went to its storyline (NarraNexus routing, explainable)."""

    id: int
    user_id: str
    message_id: int
    storyline_id: int
    decision: str  # continue | switch | create | default
    scores: dict[str, Any]
    created_at: datetime


# --- storyline bindings (NarraNexus) ------------------------------------------------------------


class BindingKind(StrEnum):
    """What an agent binds to a storyline: a tool set, a job, a goal, or any other module instance."""

    TOOLSET = "toolset"
    JOB = "job"
    GOAL = "goal"
    MODULE = "module"  # a chat history, a skill study session, anything else with a name and a payload


@dataclass(frozen=True)
class BindingStatuses:
    """The statuses one kind of binding may take: the first of ``active`` is the default; a status in
    ``final`` moves the binding to history, and ``finish`` is what completing it sets."""

    active: tuple[str, ...]
    final: tuple[str, ...]
    finish: str

    @property
    def all(self) -> tuple[str, ...]:
        return (*self.active, *self.final)


BINDING_STATUSES: dict[BindingKind, BindingStatuses] = {
    BindingKind.TOOLSET: BindingStatuses(("active",), ("retired",), "retired"),
    BindingKind.JOB: BindingStatuses(("running", "pending", "paused"), ("done", "failed", "cancelled"), "done"),
    BindingKind.GOAL: BindingStatuses(("ongoing", "paused"), ("achieved", "abandoned"), "achieved"),
    BindingKind.MODULE: BindingStatuses(("active",), ("closed",), "closed"),
}


@dataclass(frozen=True)
class Binding:
    """A named instance bound to a storyline: it lives with the storyline and moves to history when completed
    (``completed_at`` set).  ``touched_at`` is the last time anything moved it; ``touched_by`` says what."""

    id: int
    user_id: str
    storyline_id: int
    kind: BindingKind
    name: str
    status: str
    created_at: datetime
    updated_at: datetime
    touched_at: datetime
    payload: dict[str, Any] = field(default_factory=dict)
    touched_by: str = ""
    completed_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.completed_at is None


# --- links between memories (ITSERR consolidation and decision chains) -----------------------------------


class LinkKind(StrEnum):
    SAME_WORK = "same_work"  # research items about one work
    SAME_AUTHOR = "same_author"  # ... by one author
    SAME_IDEA = "same_idea"  # ... about one idea
    BUILDS_ON = "builds_on"  # a decision that builds on an earlier one
    REVERSES = "reverses"  # a decision that reverses an earlier one


RESEARCH_LINKS = frozenset({LinkKind.SAME_WORK, LinkKind.SAME_AUTHOR, LinkKind.SAME_IDEA})
DECISION_LINKS = frozenset({LinkKind.BUILDS_ON, LinkKind.REVERSES})


class LinkOrigin(StrEnum):
    RULE = "rule"  # a deterministic rule made it (``reason`` names the rule)
    LLM = "llm"  # a model judged it (``reason`` is its reason)
    USER = "user"  # the user or the agent recorded it


@dataclass(frozen=True)
class MemoryLink:
    """``memory_id`` (the later item) is linked to ``linked_id`` (the earlier one); research links are mutual,
    decision links point back in time.  Links never merge or change the memories they join."""

    user_id: str
    memory_id: int
    linked_id: int
    kind: LinkKind
    origin: LinkOrigin
    created_at: datetime
    reason: str = ""
    score: float = 0.0


class ReviewOutcome(StrEnum):
    KEPT = "kept"  # the decision still stands: the audit clock starts again
    REVERSED = "reversed"  # it no longer stands: never offered for review again


@dataclass(frozen=True)
class DecisionReview:
    """One answer to a decision audit prompt."""

    id: int
    user_id: str
    memory_id: int
    outcome: ReviewOutcome
    created_at: datetime
    note: str = ""
