"""Response bodies of the HTTP API, for ``/openapi.json``: what a generated client is typed against.

The routes answer with the engine's own values (``out()`` of dataclasses and ``to_dict()``); these models
describe those shapes.  The store's records (memory, conversation, storyline, link, entity, use, message)
are the model's dataclasses themselves, one memory fetched by id the read path's ``WholeMemory`` (the
memory with its whole ``text``) and a listed memory its ``ListedMemory`` (with what the list shows), so the
description cannot drift from them.  The review step's and
the read path's composite results name their top-level fields and allow more (``additionalProperties``):
the engine may add a field without breaking a client.  ``tests/test_http_openapi.py`` validates live
responses against this description.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from narrative import model
from narrative.read import full_text, listing

T = TypeVar("T")

Conversation = model.Conversation
MemoryItem = model.MemoryItem
Storyline = model.Storyline
Narrative = model.Narrative
Entity = model.Entity
Use = model.Use
Message = model.Message
MemoryEvent = model.MemoryEvent
WholeMemory = full_text.WholeMemory  # a memory with `text`: the whole text it stands for (GET /memories/{id})
ListedMemory = listing.ListedMemory  # a memory as a list shows it: `text`, `folded_into`, `also` (GET /memories)


class Closed(BaseModel):
    """A body whose fields are all listed."""

    model_config = ConfigDict(extra="forbid")


class Open(BaseModel):
    """A body whose listed fields are typed; the engine may add more."""

    model_config = ConfigDict(extra="allow")


# --- errors -------------------------------------------------------------------------------------


class FieldProblem(Closed):
    field: str = Field(description="The offending field, dotted (e.g. `parts.0.narrative`).")
    in_: str = Field(alias="in", description="Where it was: body, query, path or header.")
    message: str


class ErrorBody(Closed):
    """Every 4xx/5xx answer: a machine-readable kind and one plain sentence."""

    error: str = Field(description="not_found, validation_error, invalid_json, unauthorized, too_large, ...")
    message: str
    field: str | None = None
    fields: list[str] | None = None
    detail: list[FieldProblem] | None = None


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "A request the engine refuses (bad_request)."},
    401: {"model": ErrorBody, "description": "No key, a key nobody owns, or an Authorization header without Bearer."},
    404: {"model": ErrorBody, "description": "Not found (another user's ids answer the same)."},
    409: {"model": ErrorBody, "description": "A lifecycle conflict (invalid_transition, conversation_already_active)."},
    413: {"model": ErrorBody, "description": "The request body is over the size limit."},
    415: {"model": ErrorBody, "description": "A body sent without `Content-Type: application/json`."},
    422: {"model": ErrorBody, "description": "Invalid input: malformed JSON, a wrong content type, a bad field."},
}


# --- pages and small envelopes ------------------------------------------------------------------


class Page(Closed, Generic[T]):
    items: list[T]
    limit: int
    offset: int
    next_offset: int | None = Field(description="Offset of the next page; null on the last one.")


class Items(Closed, Generic[T]):
    items: list[T]


class Health(Closed):
    status: str = Field(description="`ok` when the database answers.")
    version: str


class Me(Closed):
    user: str
    counts: dict[str, int]


class Deleted(Closed):
    deleted: int | str
    result: dict[str, Any]


class ApiKey(Closed):
    """One API key as listed: never the key itself."""

    id: int
    label: str
    created_at: datetime
    fingerprint: str = Field(description="The first 12 hex digits of the stored SHA-256 digest.")


class BatchDeleted(Closed):
    deleted: list[int] = Field(description="The ids of the memories deleted.")
    result: dict[str, Any] = Field(
        description="What went with them: memories, narratives, uses, reopened_entities; restored: memories they had"
        " superseded, current again (only when there were some)."
    )


class ChatImport(Closed):
    format: str = Field(description="jsonl, chatgpt or claude (what auto found).")
    conversations: int
    messages: int
    memories: int
    skipped: int = Field(description="Empty or hidden messages of an export, left out.")
    already_imported: int = Field(
        description="Conversations of the log the user holds already, message for message: left out."
    )
    conversation_ids: list[int]


class Revoked(Closed):
    user: str
    revoked: int = Field(description="The id of the revoked key.")


class ActiveConversation(Closed):
    conversation: Conversation | None


class LatestNarrative(Closed):
    narrative: Narrative | None


class Influence(Closed):
    memory_id: int
    uses: list[Use]


class RecallChain(Closed):
    memory: MemoryItem
    narrative: Narrative | None
    siblings: list[MemoryItem]
    earlier: list[Narrative]


class MemoryHistory(Closed):
    """Every change to the memory, oldest first; after a delete, its tombstone (kinds and times, no text)."""

    memory_id: int
    deleted: bool = Field(description="The memory is gone; its events stay, without their texts.")
    events: list[MemoryEvent] = Field(
        description="created, edited, confirmed, superseded, restored, deleted: each with its time, the text"
        " before and after (`old_text`, `new_text`) and a `detail` of ids and words."
    )
    memory: MemoryItem | None = Field(description="The memory as it reads now (null after a delete).")


# --- search ---------------------------------------------------------------------------------------


class SearchHit(Closed):
    id: int = Field(description="The memory's id (a hit is a memory with its score and why).")
    content: str
    text: str = Field(description="What to show a reader: the memory's text, or the turns of it no better hit shows.")
    shown_message_ids: list[int] = Field(description="The source messages this hit shows (none for a summary).")
    also: list[int] = Field(description="Memories folded into this hit: they show the same messages.")
    stream: str
    source: str
    importance: int
    storyline_id: int | None
    conversation_id: int | None
    narrative_id: int | None = Field(description="The narrative link the memory belongs to (null: none).")
    message_ids: list[int] = Field(description="The memory's source messages (all of them; the hit shows some).")
    created_at: str = Field(description="When it happened: its event time, else when it was stored (ISO time).")
    valid_to: str | None = Field(
        description="When a later memory superseded this one (ISO time); null while it is current. Only"
        " `include_superseded` or `as_of` return a superseded memory."
    )
    superseded_by: int | None = Field(description="The memory that superseded this one; null while it is current.")
    metadata: dict[str, Any] = Field(description="The memory's metadata: the caller's own keys ({} when none).")
    score: float
    conflicts: list[int] = Field(
        description="Current memories that disagree with this one (both are shown; nothing decides which is true)."
    )
    why: dict[str, Any] = Field(
        description="Keyword rank, vector rank, similarity, recency and weights; the passage that matched; the"
        " memories this one supersedes and the ones it conflicts with."
    )


class SearchResult(Closed):
    query: str
    items: list[SearchHit]


# --- the agenda: goals, decisions, linked items, sources ---------------------------------------------


class GoalReminder(Open):
    """A stale goal: every field ``read.agenda.GoalReminder.to_dict`` gives."""

    binding_id: int = Field(description="The goal's binding (PATCH /bindings/{id} touches it).")
    goal: str = Field(description="The goal's name.")
    status: str = Field(description="The binding's status (an ongoing goal's).")
    storyline_id: int = Field(description="The storyline the goal is bound to.")
    storyline: str = Field(description="That storyline's name.")
    payload: dict[str, Any] = Field(description="The binding's payload, as the agent that bound it gave it.")
    why: dict[str, Any] = Field(description="The rule, when and by what it was last touched, and how many days ago.")


class DueDecision(Open):
    """A decision due for review: every field ``read.audit.DueDecision.to_dict`` gives."""

    memory_id: int = Field(description="The decision's memory.")
    decision: str = Field(description="What was decided (the memory's text when no decision was extracted).")
    content: str = Field(description="The memory's own text.")
    rationale: str = Field(description="Why it was decided (empty when nobody said).")
    alternatives: list[str] = Field(description="The alternatives it was chosen over.")
    decision_type: str = Field(description="methodological, interpretive or scope.")
    reversible: bool = Field(description="Whether the decision can be undone.")
    decided_at: datetime = Field(description="When it was decided (its event time, else when it was stored).")
    storyline_id: int | None = Field(description="The storyline the decision is filed in.")
    question: str = Field(description="The review question to put to the person.")
    why: dict[str, Any] = Field(description="The rule that made it due (age or reversible), since when, last review.")


class ChainLink(Open):
    """The link one step of a decision chain was reached by."""

    from_: int = Field(alias="from", description="The decision that links (the later one).")
    to: int = Field(description="The earlier decision it builds on or reverses.")
    kind: str = Field(description="builds_on or reverses.")
    origin: str = Field(
        description="What made the link: rule, llm (a model judged it) or user (the user or the agent said so)."
    )
    reason: str = Field(description="Why the two are linked, in a few words.")


class ChainStep(Open):
    """One decision of a chain: every field ``read.decision_chain.ChainStep.to_dict`` gives."""

    memory_id: int = Field(description="The decision's memory.")
    decision: str = Field(description="What was decided (the memory's text when no decision was extracted).")
    content: str = Field(description="The memory's own text.")
    rationale: str = Field(description="Why it was decided (empty when nobody said).")
    alternatives: list[str] = Field(description="The alternatives it was chosen over.")
    decided_at: datetime = Field(description="When it was decided (its event time, else when it was stored).")
    steps: int = Field(description="How many links away from the decision asked about.")
    link: ChainLink = Field(description="The link this step was reached by.")
    stands: bool = Field(description="Whether the decision still stands (no later decision reverses it).")


class DecisionChain(Open):
    """A decision and its chain both ways: every field ``read.decision_chain.DecisionChain.to_dict`` gives."""

    memory_id: int = Field(description="The decision asked about.")
    decision: str = Field(description="What was decided (the memory's text when no decision was extracted).")
    content: str = Field(description="The memory's own text.")
    stands: bool = Field(description="Whether it still stands (no later decision reverses it).")
    earlier: list[ChainStep] = Field(description="What it built on or reversed, nearest first.")
    later: list[ChainStep] = Field(description="What built on or reversed it, nearest first.")
    text: str = Field(description="The chain in plain words.")


class LinkedMemory(Open):
    """A memory linked to the one asked about: every field ``read.linked.LinkedMemory.to_dict`` gives."""

    memory_id: int = Field(description="The linked memory.")
    content: str = Field(description="Its text.")
    stream: str = Field(description="Its stream (research, decision, ...).")
    created_at: datetime = Field(description="When it happened (its event time, else when it was stored).")
    direction: str = Field(description="earlier: the asked memory links to it; later: it links to the asked one.")
    kind: str = Field(description="same_work, same_author, same_idea, builds_on or reverses.")
    why: dict[str, Any] = Field(description="The link's kind, origin, reason and score.")


class SourceUse(Open):
    """One source's use over the period: every field ``read.popularity.SourceUse.to_dict`` gives."""

    source: str = Field(description="How the source reads: its title (and author), a reference, or its item's words.")
    author: str | None = Field(description="Its author, when its research item names one.")
    work_title: str | None = Field(description="Its title, when its research item names one.")
    score: int = Field(description="2·cited + 2·annotated + 2·quoted + noted + recalled.")
    cited: int = Field(description="Its items of the period that cite it.")
    annotated: int = Field(description="Its items of the period that annotate it.")
    quoted: int = Field(description="Its items of the period that quote it.")
    noted: int = Field(description="Its items of the period that note it.")
    recalled: int = Field(description="Recorded uses of the period (searches, context blocks) that recalled its items.")
    last_used: datetime | None = Field(description="When its newest item of the period was made (null: only recalled).")
    memory_ids: list[int] = Field(description="The research items it is made of.")
    why: dict[str, Any] = Field(description="The counts, the score and the rule that makes it.")


# --- the write path and the review step ----------------------------------------------------------------


class StorylineRef(Open):
    id: int
    name: str


class TurnResult(Open):
    message_id: int
    position: int
    storyline: StorylineRef
    decision: str
    memory_ids: list[int]
    entities: list[dict[str, Any]]
    narrative_id: int | None


class TurnBatch(Closed):
    items: list[TurnResult]


class Preview(Open):
    conversation_id: int
    title: str
    narrative: str
    entities: list[dict[str, Any]]
    deltas: list[dict[str, Any]]
    destination: dict[str, Any]
    suggestion: dict[str, Any]
    message_ids: list[int]
    user_edited: bool


class ConfirmResult(Open):
    conversation_id: int
    status: str
    memories: list[dict[str, Any]]
    entity_ids: list[int]


class Archive(Open):
    conversation: dict[str, Any]
    messages: list[dict[str, Any]]
    memories: list[dict[str, Any]]


# --- the read path ------------------------------------------------------------------------------------


class ContextBlock(Open):
    text: str


class ReasoningContext(Open):
    use_id: int | None = None


class Explanation(Open):
    use: dict[str, Any]


class Greeting(Open):
    kind: str
    text: str


class ImportSummary(Open):
    pass


class OutcomeResult(Open):
    pass
