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
    narrative_id: int | None
    message_ids: list[int]
    created_at: str
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
