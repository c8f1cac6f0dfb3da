"""What each MCP tool returns, as a typed output schema (``outputSchema``) a client can check and generate from.

The records are the model's dataclasses themselves without ``user_id`` (a server serves one user and leaves it
out of every result), so a schema cannot drift from what the engine returns; one memory fetched by id is the
read path's ``WholeMemory``, the memory with ``text`` (the whole text it stands for) beside ``content``.
Composite results (a turn's result, a preview, a context block) name their top-level fields and allow more, as
the HTTP API's ``http_schemas`` do.  What a read tool returns in a list (search hits and their recall chains,
goals, decisions, linked items, sources, the memories of a reasoning context or an explanation) names every
field it carries, typed and described; the items the HTTP API answers with too are the same models
(``http_schemas``), so the two descriptions cannot drift.  The server validates every structured result against its
tool's model before sending it, and the SDK's client validates it again against the published schema.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from narrative import model
from narrative.interfaces import http_schemas as S
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


Delta = lean(model.StateDelta)


class Hit(S.SearchHit):
    """One search hit: a memory with what to show, its score and why it was returned (``serialize.hit_dict``, as
    the HTTP API's hit; more keys allowed)."""

    model_config = ConfigDict(extra="allow")


class NarrativeRef(BaseModel):
    id: int = Field(description="The narrative link's id (narrative_search takes it).")
    summary: str = Field(description="The link's one sentence: where the reasoning stood.")
    topic: str = Field(description="The link's short topic label.")


class RecallChain(Open):
    """A hit opened into its recall chain (``read.chain.RecallChain.to_dict``)."""

    memory_id: int = Field(description="The hit's memory.")
    narrative: NarrativeRef | None = Field(description="The narrative link the memory belongs to (null: none).")
    sibling_ids: list[int] = Field(description="The other memories of that link.")
    earlier: list[NarrativeRef] = Field(description="Earlier links of the chain, nearest first (up to depth).")
    linked: list[S.LinkedMemory] = Field(
        description="Memories linked to it: research items of the same work, author or idea; decisions it builds"
        " on or reverses, or that build on or reverse it."
    )


class RecallHit(Hit):
    chain: RecallChain = Field(description="The hit's recall chain: its narrative link, siblings, earlier links.")


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
    memories: list[Memory] = Field(description="The memories the user confirmed from it.")  # type: ignore[valid-type]
    derived: list[Memory] = Field(  # type: ignore[valid-type]
        description="The memories made from it as it went (its exchanges, extracted facts and decisions)."
    )
    entities: list[Entity] = Field(description="The items extracted from it.")  # type: ignore[valid-type]
    deltas: list[Delta] = Field(description="The state changes it made (threads opened or resolved, ...).")  # type: ignore[valid-type]


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


class EntityRef(BaseModel):
    id: int = Field(description="The extracted item's id (resolve_thread takes an open thread's).")
    type: str = Field(description="person, task, decision, waiting_on, question_opened, ...")
    name: str = Field(description="What it is called or says.")


class ActiveEntity(EntityRef):
    active: bool = Field(description="Still open (a task not done, a question not answered, ...).")
    memory_id: int | None = Field(description="The memory it was extracted from.")
    storyline_id: int | None = Field(description="The storyline it belongs to.")
    created_at: str = Field(description="When it was extracted (ISO time).")


class ReasoningMemory(BaseModel):
    """One memory of a reasoning context (``read.reasoning.ReasonedMemory.to_dict``)."""

    memory_id: int = Field(description="The memory.")
    content: str = Field(description="Its text.")
    stream: str = Field(description="Its stream (fact, decision, conversation, ...).")
    importance: int = Field(description="1 (trivial) to 5 (life-changing).")
    storyline_id: int | None = Field(description="The storyline it is filed in.")
    conversation_id: int | None = Field(description="The conversation it came from.")
    created_at: str = Field(description="When it happened (its event time, else when it was stored; ISO time).")
    influence_type: str = Field(description="How it bears on the request: disambiguation, pattern_match, ...")
    score: float = Field(description="Its search score.")
    reasoning: str = Field(description="Why it was chosen, in words.")
    found_by: list[str] = Field(description="What found it: search, an entity of the request, a correction, ...")
    entities: list[EntityRef] = Field(description="The items extracted from it.")
    corrections: list[Any] = Field(description="Corrections recorded for uses that drew on it.")


class Reasoning(Open):
    request: str = Field(description="The request the context is for.")
    use_id: int | None
    kind: str
    memories: list[ReasoningMemory]
    entities: list[ActiveEntity] = Field(description="Open threads and waiting-ons (include_active_entities).")
    matched_entities: list[ActiveEntity] = Field(description="Extracted items the request names.")
    variables: dict[str, Any] = Field(description="The values the prompt was filled with, by name.")
    prompt: str


class Reference(BaseModel):
    memory_id: int = Field(description="A memory the use drew on.")
    influence_type: str = Field(description="How it was used: retrieval, disambiguation, pattern_match, ...")
    score: float = Field(description="Its score in the use.")
    reasoning: str = Field(description="Why it was used, in words.")
    rank: int = Field(description="Its place in the use, from 1.")


class UseOut(BaseModel):
    """A recorded use as an explanation gives it (``read.explain.use_dict``)."""

    id: int = Field(description="The use's id (use_id).")
    kind: str = Field(description="recall, context, classification, decomposition, verification or outcome.")
    query: str = Field(description="What was asked.")
    created_at: str = Field(description="When (ISO time).")
    conversation_id: int | None = Field(description="The conversation it happened in.")
    outcome: str | None = Field(description="How it turned out (approved, corrected, rejected); null: not said.")
    meta: dict[str, Any] = Field(description="What else was recorded: budget, tokens, storyline, the judged use.")
    references: list[Reference] = Field(description="The memories it drew on, in rank order.")


class ShownMessage(BaseModel):
    message_id: int = Field(description="A source message of the memory.")
    position: int = Field(description="Its place in its conversation, from 1.")
    role: str = Field(description="user, assistant, system or tool.")
    speaker: str = Field(description="Who said it, when known.")
    conversation_id: int = Field(description="Its conversation.")
    created_at: str = Field(description="When it was said (ISO time).")
    text: str = Field(description="What was said (a long message shortened, ending with …).")


class StorylineName(BaseModel):
    id: int = Field(description="The storyline.")
    name: str = Field(description="Its name.")


class ExplainedMemory(BaseModel):
    """One memory a use drew on, with the messages it came from (``read.explain``)."""

    memory_id: int = Field(description="The memory.")
    rank: int = Field(description="Its place in the use, from 1.")
    influence_type: str = Field(description="How it was used: retrieval, disambiguation, pattern_match, ...")
    score: float = Field(description="Its score in the use.")
    why: str = Field(description="Why it was used, in words.")
    content: str = Field(description="Its text.")
    stream: str = Field(description="Its stream.")
    source: str = Field(description="How it was made: conversation, extraction, direct, ...")
    importance: int = Field(description="1 (trivial) to 5 (life-changing).")
    created_at: str = Field(description="When it happened (its event time, else when it was stored; ISO time).")
    storyline: StorylineName | None = Field(description="The storyline it is filed in.")
    narrative_id: int | None = Field(description="Its narrative link.")
    conversation_id: int | None = Field(description="The conversation it came from.")
    message_ids: list[int] = Field(description="Its source messages.")
    messages: list[ShownMessage] = Field(description="The last of its source messages, as said.")
    messages_not_shown: int = Field(description="How many of its source messages are not in messages.")


class OutcomeRef(BaseModel):
    use_id: int = Field(description="The use that recorded the outcome.")
    outcome: str | None = Field(description="approved, corrected or rejected.")
    correction: str | None = Field(description="What was right instead (corrected).")
    message_id: int | None = Field(description="The message the outcome was said in, when known.")
    created_at: str = Field(description="When it was recorded (ISO time).")


class Explanation(Open):
    use: UseOut
    memories: list[ExplainedMemory]
    outcomes: list[OutcomeRef] = Field(description="How the use turned out, as recorded (record_outcome).")
    original: UseOut | None = Field(description="For an outcome: the use it judged; else null.")
    summary: str = Field(description="The explanation in plain words.")


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
    goals: list[S.GoalReminder]


class Linked(BaseModel):
    link: Link  # type: ignore[valid-type]


Chain = S.DecisionChain


class Due(BaseModel):
    decisions: list[S.DueDecision]


class Reviewed(BaseModel):
    review: Review  # type: ignore[valid-type]


class Consolidated(Open):
    items: int
    links: int
    by_kind: dict[str, int]
    by_origin: dict[str, int]


class Opened(BaseModel):
    linked: list[S.LinkedMemory]


class Sources(BaseModel):
    sources: list[S.SourceUse]


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
