"""What each MCP tool returns, as a typed output schema (``outputSchema``) a client can check and generate from.

The records are the model's dataclasses themselves without ``user_id`` (a server serves one user and leaves it
out of every result), so a schema cannot drift from what the engine returns; one memory fetched by id is the
read path's ``WholeMemory``, the memory with ``text`` (the whole text it stands for) beside ``content``.
Composite results (a turn's result, a preview, a context block) name their top-level fields and allow more, as
the HTTP API's ``http_schemas`` do.  The server validates every structured result against its tool's model
before sending it, and the SDK's client validates it again against the published schema.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from narrative import model
from narrative.read import full_text

__all__ = ["OUTPUTS", "lean"]


class Open(BaseModel):
    """Listed fields typed; the engine may add more."""

    model_config = ConfigDict(extra="allow")


_LEAN: dict[type, type[BaseModel]] = {}


def lean(cls: type) -> type[BaseModel]:
    """A pydantic model of a model dataclass with every field but ``user_id`` (all present in a result; a
    field's ``description`` in its metadata describes it)."""
    if cls not in _LEAN:
        hints = typing.get_type_hints(cls, vars(model))
        fields: dict[str, Any] = {
            f.name: (hints[f.name], Field(..., description=f.metadata.get("description")))
            for f in dataclasses.fields(cls)
            if f.name != "user_id"
        }
        _LEAN[cls] = create_model(cls.__name__, __config__=ConfigDict(extra="allow"), **fields)
    return _LEAN[cls]


Memory = lean(model.MemoryItem)
Storyline = lean(model.Storyline)
Conversation = lean(model.Conversation)
Message = lean(model.Message)
Narrative = lean(model.Narrative)
Entity = lean(model.Entity)
Use = lean(model.Use)
Event = lean(model.MemoryEvent)
Binding = lean(model.Binding)
Link = lean(model.MemoryLink)
Review = lean(model.DecisionReview)
WholeMemory = lean(full_text.WholeMemory)  # a memory with `text`, the whole text it stands for


class Hit(Open):
    """One search hit: a memory with what to show, its score and why it was returned."""

    id: int = Field(description="The memory's id.")
    content: str
    text: str = Field(description="What to show: the memory's text, or the passage of a long message that answers.")
    stream: str
    source: str
    importance: int
    storyline_id: int | None
    conversation_id: int | None
    valid_to: str | None = Field(description="When a later memory superseded this one (ISO time); null while current.")
    superseded_by: int | None = Field(description="The memory that superseded this one; null while it is current.")
    metadata: dict[str, Any] = Field(description="The memory's metadata: the caller's own keys ({} when none).")
    score: float
    conflicts: list[int]
    why: dict[str, Any]


class RecallHit(Hit):
    chain: dict[str, Any] = Field(description="The hit's recall chain: its narrative link, siblings, earlier links.")


class Found(BaseModel):
    query: str
    items: list[Hit]


class Recalled(BaseModel):
    query: str
    items: list[RecallHit]


class Links(BaseModel):
    mode: str = Field(description="id, keyword or latest.")
    narratives: list[Narrative]  # type: ignore[valid-type]


class Walked(BaseModel):
    direction: str
    narratives: list[Narrative]  # type: ignore[valid-type]


class StorylineRef(Open):
    id: int
    name: str


class TurnOut(Open):
    message_id: int
    position: int
    storyline: StorylineRef
    decision: str
    memory_ids: list[int]
    entities: list[dict[str, Any]]
    narrative_id: int | None
    summary: str


class Texted(Open):
    text: str


class ContextOut(Texted):
    use_id: int | None


class GreetingOut(Texted):
    kind: str


class Storylines(BaseModel):
    storylines: list[Storyline]  # type: ignore[valid-type]


class Active(BaseModel):
    active: bool
    conversation: Conversation | None  # type: ignore[valid-type]
    awaiting_confirmation: list[int]


class PreviewOut(Texted):
    conversation_id: int
    narrative: str
    entities: list[dict[str, Any]]
    deltas: list[dict[str, Any]]
    destination: dict[str, Any]
    suggestion: dict[str, Any]


class Confirmed(Texted):
    conversation_id: int
    status: str
    memories: list[dict[str, Any]]
    entity_ids: list[int]


class Resumed(BaseModel):
    conversation: Conversation  # type: ignore[valid-type]


class Archive(Open):
    conversation: Conversation  # type: ignore[valid-type]
    messages: list[Message]  # type: ignore[valid-type]
    memories: list[dict[str, Any]]
    entities: list[dict[str, Any]]
    deltas: list[dict[str, Any]]


class StoryRef(BaseModel):
    id: int
    name: str
    summary: str


class YourStory(BaseModel):
    storyline: StoryRef
    memories: list[Memory]  # type: ignore[valid-type]
    limit: int
    offset: int
    next_offset: int | None


class Threads(BaseModel):
    threads: list[Entity]  # type: ignore[valid-type]


class OneMemory(BaseModel):
    memory: Memory  # type: ignore[valid-type]


class WholeOne(BaseModel):
    memory: WholeMemory  # type: ignore[valid-type]


class Memories(BaseModel):
    items: list[Memory]  # type: ignore[valid-type]
    limit: int
    offset: int
    next_offset: int | None


class Reasoning(Open):
    use_id: int | None
    kind: str
    memories: list[dict[str, Any]]
    entities: list[dict[str, Any]]
    prompt: str


class Explanation(Open):
    use: dict[str, Any]
    memories: list[dict[str, Any]]
    outcomes: list[dict[str, Any]]
    summary: str


class Influence(BaseModel):
    memory_id: int
    uses: list[Use]  # type: ignore[valid-type]


class History(BaseModel):
    memory_id: int
    deleted: bool
    events: list[Event]  # type: ignore[valid-type]


class Thread(BaseModel):
    thread: Entity  # type: ignore[valid-type]


class Outcome(BaseModel):
    outcome: Use  # type: ignore[valid-type]


class Forgotten(BaseModel):
    deleted: int
    counts: dict[str, int]


class Deleted(BaseModel):
    deleted: list[int] = Field(description="The ids of the memories deleted.")
    counts: dict[str, int]


class OneBinding(BaseModel):
    binding: Binding  # type: ignore[valid-type]


class Bindings(BaseModel):
    bindings: list[Binding]  # type: ignore[valid-type]


class Goals(BaseModel):
    goals: list[dict[str, Any]]


class Linked(BaseModel):
    link: Link  # type: ignore[valid-type]


class Chain(Texted):
    memory_id: int
    stands: bool
    earlier: list[dict[str, Any]]
    later: list[dict[str, Any]]


class Due(BaseModel):
    decisions: list[dict[str, Any]]


class Reviewed(BaseModel):
    review: Review  # type: ignore[valid-type]


class Consolidated(Open):
    items: int
    links: int
    by_kind: dict[str, int]
    by_origin: dict[str, int]


class Opened(BaseModel):
    linked: list[dict[str, Any]]


class Sources(BaseModel):
    sources: list[dict[str, Any]]


#: Every tool's output model, by tool name (a test checks that every tool has one).
OUTPUTS: dict[str, type[BaseModel]] = {
    "narrative_update": Narrative,
    "narrative_search": Links,
    "walk_narrative": Walked,
    "remember": TurnOut,
    "recall": Recalled,
    "get_context": ContextOut,
    "greet": GreetingOut,
    "list_storylines": Storylines,
    "get_active_conversation": Active,
    "close_conversation": PreviewOut,
    "get_memory_preview": PreviewOut,
    "edit_memory_preview": PreviewOut,
    "redirect_memory": PreviewOut,
    "confirm_memory": Confirmed,
    "split_memory": Confirmed,
    "resume_conversation": Resumed,
    "get_conversation_archive": Archive,
    "search_memories": Found,
    "get_your_story": YourStory,
    "get_open_threads": Threads,
    "edit_memory": OneMemory,
    "get_reasoning_context": Reasoning,
    "explain_classification": Explanation,
    "get_memory_influence_chain": Influence,
    "get_memory_history": History,
    "restore_memory": Memory,
    "resolve_thread": Thread,
    "record_outcome": Outcome,
    "forget_memory": Forgotten,
    "add_memory": OneMemory,
    "get_memory": WholeOne,
    "list_memories": Memories,
    "update_memory": OneMemory,
    "delete_memories": Deleted,
    "bind_to_storyline": OneBinding,
    "update_binding": OneBinding,
    "complete_binding": OneBinding,
    "list_bindings": Bindings,
    "get_stale_goals": Goals,
    "link_decision": Linked,
    "get_decision_chain": Chain,
    "get_decisions_to_review": Due,
    "review_decision": Reviewed,
    "consolidate_research": Consolidated,
    "open_linked": Opened,
    "get_popular_sources": Sources,
}
