"""Request bodies of the HTTP API (pydantic): malformed input is answered with 422 naming the field."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from narrative.interfaces.numbers import Int, Number

Text = Annotated[str, Field(min_length=1, max_length=100_000)]
MessageText = Annotated[str, Field(min_length=1, max_length=5_000_000)]  # checks.MAX_MESSAGE: a document fits
Name = Annotated[str, Field(min_length=1, max_length=200)]
Id = Annotated[Int, Field(ge=1)]
Metadata = Annotated[
    dict[str, Any],
    Field(description="Your own keys (letters, digits, _ and -) and JSON values: at most 64 keys, 16 KiB as JSON."),
]

Role = Literal["user", "assistant", "system", "tool"]
StreamName = Literal["conversation", "research", "decision", "reflection", "narrative", "fact"]
SourceName = Literal["conversation", "agent", "extraction", "narrative", "reflection"]
InfluenceName = Literal["disambiguation", "pattern_match", "entity_reference", "intent_verification", "retrieval"]
UseKindName = Literal["recall", "context", "classification", "decomposition", "verification", "outcome"]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StartConversation(Body):
    title: Annotated[str, Field(max_length=500)] = ""


class CloseConversation(Body):
    at: Annotated[datetime | None, Field(description="When the conversation ended (default: now).")] = None


class PreviewChange(Body):
    """Edit the narrative memory, drop over-extracted entities (by preview key), redirect it; any of these."""

    narrative: Annotated[str | None, Field(min_length=1, max_length=100_000)] = None
    remove_entities: Annotated[list[str], Field(max_length=500, description="Preview entity keys (e1, e2…).")] = []
    storyline_id: Annotated[Int | None, Field(ge=1)] = None

    @model_validator(mode="after")
    def something(self) -> Self:
        if self.narrative is None and self.storyline_id is None and not self.remove_entities:
            raise ValueError("give narrative, remove_entities and/or storyline_id")
        return self


class Confirm(Body):
    storyline_id: Annotated[Int | None, Field(ge=1, description="Destination (default: the preview's).")] = None
    narrative: Annotated[str | None, Field(min_length=1, max_length=100_000, description="Edited narrative.")] = None
    at: datetime | None = None


class SplitPart(Body):
    narrative: Text
    storyline_id: Annotated[Int | None, Field(ge=1, description="Default: Your Story.")] = None
    entity_ids: Annotated[list[Int | str], Field(max_length=500, description="Entity ids or preview keys.")] = []


class Split(Body):
    parts: Annotated[list[SplitPart], Field(min_length=2, max_length=20)]


class TurnIn(Body):
    """One turn to remember (runs the write path: route, extract, narrate)."""

    content: MessageText
    role: Role = "user"
    speaker: Annotated[str, Field(max_length=200)] = ""
    at: datetime | None = None
    meta: dict[str, Any] = Field(default_factory=dict)


class TurnBatchIn(Body):
    """Turns to remember in order; the turns before a failing one stay stored (see remember_many)."""

    messages: Annotated[list[TurnIn], Field(min_length=1, max_length=500)]


class MemoryIn(Body):
    content: Text
    stream: StreamName = "fact"
    source: SourceName = "agent"
    importance: Annotated[Int, Field(ge=1, le=5)] = 2
    emotions: list[str] = Field(default_factory=list, max_length=20)
    message_ids: list[Int] = Field(default_factory=list, max_length=1000)
    storyline_id: Annotated[Int | None, Field(ge=1)] = None
    conversation_id: Annotated[Int | None, Field(ge=1)] = None
    metadata: Metadata = Field(default_factory=dict)


class MemoryChange(Body):
    content: Annotated[str | None, Field(min_length=1, max_length=100_000)] = None
    importance: Annotated[Int | None, Field(ge=1, le=5)] = None
    emotions: Annotated[list[str] | None, Field(max_length=20)] = None
    entities_to_remove: list[Int] = Field(default_factory=list, max_length=500)
    entities_to_add: list[dict[str, Any]] = Field(default_factory=list, max_length=500)
    metadata: Annotated[dict[str, Any] | None, Field(description="Replaces the memory's metadata whole.")] = None

    def changes(self) -> dict[str, Any]:
        """What the request changes: a field left out or null changes nothing, nor does an empty list of entities
        to remove or add (``emotions: []`` and ``metadata: {}`` do change: they clear them)."""
        given = self.model_dump(exclude_none=True)
        return {name: value for name, value in given.items() if value != [] or name == "emotions"}


class MemoryUpdate(Body):
    """One memory's changes in a batch (the fields of PATCH /memories/{id}, entities aside)."""

    id: Id
    content: Annotated[str | None, Field(min_length=1, max_length=100_000)] = None
    importance: Annotated[Int | None, Field(ge=1, le=5)] = None
    emotions: Annotated[list[str] | None, Field(max_length=20)] = None
    metadata: dict[str, Any] | None = None


class MemoryUpdates(Body):
    memories: Annotated[list[MemoryUpdate], Field(min_length=1, max_length=500)]


class SearchIn(Body):
    """A search as a body: the query, a filter tree and the options of GET /search."""

    query: Annotated[str, Field(min_length=1, max_length=10_000)]
    limit: Annotated[Int, Field(ge=1, le=100)] = 10
    mode: Literal["hybrid", "keyword", "vector"] = "hybrid"
    filters: Annotated[dict[str, Any] | None, Field(description="AND/OR/NOT over fields and metadata.")] = None
    min_score: Annotated[Number, Field(ge=0, le=1)] = 0.0
    include_superseded: bool = False
    as_of: datetime | None = None
    record: bool = False


class StorylineIn(Body):
    name: Name
    description: Annotated[str, Field(max_length=5000)] = ""
    keywords: list[str] = Field(default_factory=list, max_length=50)


class StorylineRename(Body):
    name: Name


class NarrativeIn(Body):
    summary: Annotated[str, Field(min_length=1, max_length=10_000)]
    memory_ids: list[Int] = Field(default_factory=list, max_length=1000)
    previous_narrative_id: Annotated[Int | None, Field(ge=1)] = None
    topic: Annotated[str, Field(max_length=200)] = ""
    storyline_id: Annotated[Int | None, Field(ge=1)] = None


class Resolve(Body):
    by_memory_id: Annotated[Int | None, Field(ge=1)] = None


class ContextIn(Body):
    query: Annotated[str, Field(min_length=1, max_length=10_000)]
    budget: Annotated[Int, Field(ge=50, le=100_000)] = 2000
    record: bool = True


class ReasoningIn(Body):
    request: Annotated[str, Field(min_length=1, max_length=10_000)]
    kind: Literal["classification", "decomposition", "verification"] = "classification"
    top_k: Annotated[Int, Field(ge=1, le=50)] = 5
    include_active_entities: bool = True
    record: bool = True


class ReferenceIn(Body):
    memory_id: Id
    influence_type: InfluenceName = "retrieval"
    score: Annotated[Number, Field(ge=-1e6, le=1e6)] = 0.0
    reasoning: Annotated[str, Field(max_length=2000)] = ""


class UseIn(Body):
    kind: UseKindName = "classification"
    query: Annotated[str, Field(min_length=1, max_length=10_000)]
    references: list[ReferenceIn] = Field(default_factory=list, max_length=200)


class Outcome(Body):
    outcome: Annotated[str, Field(min_length=1, max_length=200)]
    correction: Annotated[str | None, Field(max_length=10_000)] = None
