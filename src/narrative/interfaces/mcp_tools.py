"""The tools the MCP server offers, one method each, written against the engine facade only.

Each public method marked with :func:`tool` becomes one MCP tool: its name is the
method name, its input schema comes from the typed parameters (``Annotated`` with a
``Field`` description), and its docstring is the description a model reads when it
decides whether to call it.  Every tool returns a JSON-able ``dict``.

Three families:

* Koshi's narrative chain: ``narrative_update``, ``narrative_search``, ``walk_narrative``
* Talking Rock's lifecycle and reasoning tools (``get_active_conversation`` … ``get_memory_influence_chain``)
* everyday memory: ``remember``, ``recall``, ``get_context``, ``greet``, ``list_storylines``
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import Field

from narrative.errors import ValidationError
from narrative.interfaces.numbers import Int, Number
from narrative.interfaces.serialize import hit_dict, plain

if TYPE_CHECKING:
    from narrative.engine import Memory

F = TypeVar("F", bound=Callable[..., Any])

# --- tool marking ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolSpec:
    """How one tool is announced: its name, description, behaviour hints and the seeds' names it accepts."""

    name: str
    description: str
    read_only: bool
    destructive: bool
    aliases: dict[str, str] = field(default_factory=dict)  # {seed's argument name: our argument name}


def tool(
    *, read_only: bool = False, destructive: bool = False, aliases: dict[str, str] | None = None
) -> Callable[[F], F]:
    """Mark a method as an MCP tool (``read_only``: changes nothing stored; ``aliases``: other names an
    argument may be given under, e.g. the Talking Rock document's ``act_id`` for ``storyline_id``)."""

    def mark(fn: F) -> F:
        fn.__dict__["narrative_tool"] = (read_only, destructive, dict(aliases or {}))
        return fn

    return mark


# --- parameter types (the schema a model sees) -----------------------------------------------------

ConversationId = Annotated[
    Int | None, Field(description="Conversation id; omit (null) to mean the current conversation.")
]
StorylineId = Annotated[Int | None, Field(description="Storyline id (see list_storylines); omit for all.")]
Query = Annotated[str, Field(description="What to look for, in plain words.")]
IncludeSuperseded = Annotated[bool, Field(description="Also what a later statement superseded (left out by default).")]
AsOf = Annotated[
    datetime | None,
    Field(
        description="What was current at this time (ISO 8601, e.g. 2026-03-01T12:00:00Z; without a zone: UTC):"
        " what was said after it is left out, and what a later statement superseded is back."
    ),
]
Role = Literal["user", "assistant", "system", "tool"]
EntityType = Literal[
    "person",
    "task",
    "decision",
    "waiting_on",
    "question_opened",
    "question_resolved",
    "blocker_cleared",
    "priority_change",
    "storyline_reference",
    "insight",
]


def page(limit: int, offset: int, *, more: bool) -> dict[str, int | None]:
    """A page's place in a list: ``next_offset`` is the offset of the next page, None on the last one."""
    return {"limit": limit, "offset": offset, "next_offset": offset + limit if more else None}


def plain_dict(value: Any) -> dict[str, Any]:
    data = plain(value)
    return data if isinstance(data, dict) else {"value": data}


def with_text(value: Any) -> dict[str, Any]:
    """The engine object as a dict, plus its human-readable ``text`` when it has one."""
    data = plain_dict(value)
    text = getattr(value, "text", None)
    if callable(text):
        text = text()
    if isinstance(text, str):
        data.setdefault("text", text)
    return data


class NarrativeTools:
    """The MCP tools over one :class:`narrative.Memory` (one user's memory)."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    # --- the narrative chain (Koshi) -------------------------------------------------------------

    @tool(destructive=False)
    def narrative_update(
        self,
        summary: Annotated[str, Field(description="One sentence: where the reasoning arc stands now.")],
        memory_ids: Annotated[
            list[Int] | None, Field(description="Ids of the memories this link connects (from recall/remember).")
        ] = None,
        previous_narrative_id: Annotated[
            Int | None,
            Field(description="The link this one continues (same topic); null starts a new thread (topic shift)."),
        ] = None,
        topic: Annotated[str, Field(description="A short topic label, e.g. 'storage choice'.")] = "",
    ) -> dict[str, Any]:
        """Append one link to the narrative chain: a one-sentence summary of the reasoning so far, the memory ids
        it connects and the link it continues.

        Call it when a line of reasoning reaches a point worth keeping (a decision, a finding, a change of plan).
        Same topic: pass the latest link's id as previous_narrative_id. New topic: pass null. Links are immutable.
        Returns the stored link: id, summary, memory_ids, previous_narrative_id, topic, created_at.
        """
        link = self.memory.narrative_update(summary, tuple(memory_ids or ()), previous_narrative_id, topic)
        return plain_dict(link)

    @tool(read_only=True)
    def narrative_search(
        self,
        narrative_id: Annotated[Int | None, Field(description="Fetch exactly this link (chain walking).")] = None,
        query: Annotated[str | None, Field(description="Keywords to match in summaries and topics.")] = None,
        limit: Annotated[Int, Field(ge=1, le=100, description="Most links to return in keyword mode.")] = 10,
    ) -> dict[str, Any]:
        """Read the narrative chain, newest first. Three modes: narrative_id → that link; query → keyword search
        over link summaries and topics; neither → the latest link (session recovery: "where was I?").

        Call it with no arguments at the start of a session to catch up in one step; then follow
        previous_narrative_id backwards (or use walk_narrative) for deeper history.
        Returns {mode, narratives: [{id, summary, memory_ids, previous_narrative_id, topic, created_at, ...}]}.
        """
        mode = "id" if narrative_id is not None else "keyword" if query and query.strip() else "latest"
        found = self.memory.narrative_search(narrative_id, query, limit=limit)
        return {"mode": mode, "narratives": plain(found)}

    @tool(read_only=True)
    def walk_narrative(
        self,
        narrative_id: Annotated[Int, Field(description="The link to start from.")],
        direction: Annotated[
            Literal["back", "forward"], Field(description="back: earlier links; forward: what came next.")
        ] = "back",
        depth: Annotated[Int | None, Field(ge=1, description="How many links at most; omit for all.")] = None,
    ) -> dict[str, Any]:
        """Walk the narrative chain from one link: backward through previous links (newest first, the start link
        included) or forward through the links that continued it (oldest first).

        Call it to reconstruct a whole reasoning thread, e.g. "how did we get to this decision?".
        Returns {direction, narratives: [...]}.
        """
        if direction == "back":
            found = self.memory.walk_back(narrative_id, depth)
        else:
            found = self.memory.walk_forward(narrative_id, depth)
        return {"direction": direction, "narratives": plain(found)}

    # --- everyday memory ---------------------------------------------------------------------------

    @tool(destructive=False)
    def remember(
        self,
        text: Annotated[str, Field(description="The message text, exactly as said.")],
        role: Annotated[Role, Field(description="Who said it.")] = "user",
        speaker: Annotated[str, Field(description="The speaker's name, if known.")] = "",
    ) -> dict[str, Any]:
        """Store one conversation turn and build memory from it: the message is routed to a storyline, facts,
        decisions and open threads are extracted, and the running narrative is updated.

        Call it for every user message (and your own replies worth keeping). A conversation is started if none
        is active. Returns {message_id, position, storyline, decision, memory_ids, entities, narrative_id,
        summary}.
        """
        result = self.memory.remember(text, role, speaker=speaker)
        return {**plain_dict(result), "summary": result.describe()}

    @tool(read_only=True, aliases={"k": "limit"})
    def recall(
        self,
        query: Query,
        limit: Annotated[Int, Field(ge=1, le=100, description="How many memories.")] = 10,
        depth: Annotated[Int, Field(ge=0, le=10, description="Earlier narrative links to include per hit.")] = 1,
        include_superseded: IncludeSuperseded = False,
        as_of: AsOf = None,
    ) -> dict[str, Any]:
        """Hybrid search (keywords + meaning) over everything remembered, each hit opened into its recall chain:
        the narrative it belongs to, sibling memories of the same arc and earlier links.

        Call it when you need facts, decisions or history about something. Every hit says why it was returned
        (keyword rank, vector rank, recency). Reading only: nothing is recorded (get_context records a use).
        Returns {query, items: [{id, content, text, stream, score, why, chain, ...}]}.
        """
        pairs = self.memory.recall(
            query, limit, depth=depth, record=False, include_superseded=include_superseded, as_of=as_of
        )
        return {"query": query, "items": [{**hit_dict(hit), "chain": plain(chain)} for hit, chain in pairs]}

    @tool(destructive=False)
    def get_context(
        self,
        query: Annotated[str, Field(description="The request you are about to answer.")],
        budget: Annotated[Int, Field(ge=50, le=100_000, description="Token budget for the context text.")] = 2000,
    ) -> dict[str, Any]:
        """Build a ready-to-use memory context for a request within a token budget: the <scene_memory> block of
        relevant memories (with gaps, causality and importance marks), the storyline summary, recent messages
        and open threads.

        Call it before answering when past context matters; paste `text` into your reasoning. The use is
        recorded (use_id) so explain_classification(use_id) can show what influenced you.
        Returns {text, use_id, ...structure}.
        """
        block = self.memory.context(query, budget)
        data = with_text(block)
        data.setdefault("use_id", getattr(block, "use_id", None))
        return data

    @tool(read_only=True)
    def greet(self) -> dict[str, Any]:
        """The start-of-session greeting: what happened last time, open threads and what is waiting on whom.

        Call it once when a new session starts. Returns {text, ...structure}.
        """
        return with_text(self.memory.greet())

    @tool(read_only=True)
    def list_storylines(
        self, include_archived: Annotated[bool, Field(description="Also list archived storylines.")] = False
    ) -> dict[str, Any]:
        """List the user's storylines (topic containers): Your Story, the defaults and every topic storyline,
        most recently active first, with summaries and keywords.

        Call it to pick a destination for confirm_memory or a filter for search_memories.
        Returns {storylines: [{id, name, kind, status, summary, keywords, ...}]}.
        """
        return {"storylines": plain(self.memory.list_storylines(include_archived=include_archived))}

    # --- the conversation lifecycle (Talking Rock) ------------------------------------------------

    @tool(read_only=True)
    def get_active_conversation(self) -> dict[str, Any]:
        """Get the currently active conversation, if any (there is at most one per user), and the ids of
        conversations whose closing preview still waits for the user's confirmation.

        Returns {active: bool, conversation: {id, status, started_at, message_count, ...} | null,
        awaiting_confirmation: [conversation ids]}.
        """
        conversation = self.memory.active_conversation()
        waiting = self.memory.list_conversations("ready_to_close", limit=20)
        return {
            "active": conversation is not None,
            "conversation": plain(conversation),
            "awaiting_confirmation": [c.id for c in waiting],
        }

    @tool(destructive=False)
    def close_conversation(self, conversation_id: ConversationId = None) -> dict[str, Any]:
        """Start closing a conversation: it becomes ready_to_close and a memory preview is computed (the narrative
        memory, extracted entities, state changes and a suggested storyline). Nothing is archived yet.

        Call it when the user is done; show the preview's text to the user, then call confirm_memory (or
        resume_conversation to cancel). Returns the preview: {conversation_id, narrative, entities, deltas,
        destination, suggestion, ..., text}.
        """
        return with_text(self.memory.close_conversation(conversation_id))

    @tool(read_only=True)
    def get_memory_preview(self, conversation_id: ConversationId = None) -> dict[str, Any]:
        """Get the memory preview of a conversation that is ready to close (what confirm_memory would store).

        Returns the preview: {conversation_id, narrative, entities, deltas, destination, suggestion, ..., text}.
        """
        return with_text(self.memory.get_memory_preview(conversation_id))

    @tool(aliases={"memory_id": "conversation_id", "destination_act_id": "destination_storyline_id"})
    def confirm_memory(
        self,
        conversation_id: Annotated[
            Int | None,
            Field(
                description="The conversation whose preview to confirm (the memory awaiting confirmation is "
                "named by its conversation; memory_id is accepted for it); omit for the current one."
            ),
        ] = None,
        destination_storyline_id: Annotated[
            Int | None, Field(description="Storyline to file the memory under; omit for the suggested one.")
        ] = None,
        edited_narrative: Annotated[
            str | None, Field(description="The user's corrected narrative text, if they edited it.")
        ] = None,
    ) -> dict[str, Any]:
        """Confirm a previewed memory: store the narrative memory and its entities, route it to a storyline and
        archive the conversation.

        Call it only after the user reviewed the preview from close_conversation / get_memory_preview.
        Returns {conversation_id, memory ids, storyline, ...}.
        """
        result = self.memory.confirm_memory(
            conversation_id, destination_storyline_id=destination_storyline_id, edited_narrative=edited_narrative
        )
        return with_text(result)

    @tool(destructive=False)
    def resume_conversation(self, conversation_id: ConversationId = None) -> dict[str, Any]:
        """Cancel a closure: a ready_to_close conversation becomes active again and its preview is dropped.

        Returns {conversation: {...}}.
        """
        return {"conversation": plain(self.memory.resume_conversation(conversation_id))}

    @tool(read_only=True)
    def get_conversation_archive(
        self, conversation_id: Annotated[Int, Field(description="The conversation to open.")]
    ) -> dict[str, Any]:
        """Retrieve a conversation's full transcript with the memories that were made from it.

        Call it when a summary is not enough and you need the exact words. Returns {conversation, messages,
        memories (the confirmed narrative memories), derived, entities, deltas}.
        """
        return plain_dict(self.memory.get_conversation_archive(conversation_id))

    # --- memories -------------------------------------------------------------------------------------

    @tool(read_only=True, aliases={"act_id": "storyline_id"})
    def search_memories(
        self,
        query: Query,
        storyline_id: StorylineId = None,
        your_story_only: Annotated[bool, Field(description="Only memories filed under Your Story.")] = False,
        limit: Annotated[Int, Field(ge=1, le=100, description="How many results.")] = 10,
        min_score: Annotated[Number, Field(ge=0, le=1, description="Drop hits scoring below this.")] = 0.0,
        include_superseded: IncludeSuperseded = False,
        as_of: AsOf = None,
        filters: Annotated[
            dict[str, Any] | None,
            Field(
                description='Only memories matching: {"metadata.project": "garden"}, {"stream": "decision"},'
                ' {"importance": {"gte": 4}}, joined with {"AND": [...]}, {"OR": [...]}, {"NOT": {...}}.'
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Search all memories by meaning and keywords, optionally within one storyline or only Your Story, or
        only those matching filters (fields and metadata).

        Only what is current is returned: a statement a later one corrected is left out (and named in the newer
        hit's why); two that disagree with no order between them are both shown, each naming the other in
        ``conflicts``.  Each hit says why it was returned. Use recall instead when you also want each hit's
        narrative thread.
        An unknown storyline_id is an error.
        Returns {query, items: [{id, content, text, stream, importance, storyline_id, score, why, ...}]}.
        """
        if your_story_only:
            if storyline_id is not None:
                raise ValidationError("give storyline_id or your_story_only, not both", field="your_story_only")
            storyline_id = self.memory.your_story().id
        elif storyline_id is not None:
            self.memory.get_storyline(storyline_id)  # NotFound, not an empty result
        hits = self.memory.search(
            query,
            limit,
            storyline_id=storyline_id,
            record=False,
            min_score=min_score,
            include_superseded=include_superseded,
            as_of=as_of,
            filters=filters,
        )
        return {"query": query, "items": [hit_dict(h) for h in hits]}

    @tool(read_only=True)
    def get_your_story(
        self,
        limit: Annotated[Int, Field(ge=1, le=200, description="Most memories to return.")] = 20,
        offset: Annotated[Int, Field(ge=0, description="Skip this many (pagination).")] = 0,
    ) -> dict[str, Any]:
        """Get recent memories from Your Story, the permanent storyline of who the user is across all topics.

        Returns {storyline: {id, name, summary}, memories: [...] newest first, limit, offset, next_offset}
        (next_offset: pass it as offset for the next page; null on the last page).
        """
        story = self.memory.your_story()
        found = self.memory.list_memories(storyline_id=story.id, limit=limit + 1, offset=offset)
        about = {"id": story.id, "name": story.name, "summary": story.summary}
        return {"storyline": about, "memories": plain(found[:limit]), **page(limit, offset, more=len(found) > limit)}

    @tool(read_only=True, aliases={"act_id": "storyline_id"})
    def get_open_threads(
        self,
        entity_type: Annotated[
            EntityType | None, Field(description="Only this kind, e.g. waiting_on, task, question_opened.")
        ] = None,
        storyline_id: StorylineId = None,
    ) -> dict[str, Any]:
        """Get unresolved threads across all memories: open tasks, questions and things waiting on someone.

        Call it to see what is still pending before planning. Returns {threads: [{id, entity_type, name, data,
        memory_id, storyline_id, created_at, ...}]}.
        """
        if storyline_id is not None:
            self.memory.get_storyline(storyline_id)  # NotFound, not an empty result
        return {"threads": plain(self.memory.open_threads(entity_type, storyline_id))}

    @tool(destructive=True)
    def edit_memory(
        self,
        memory_id: Annotated[Int, Field(description="The memory to change.")],
        narrative: Annotated[str | None, Field(description="The corrected memory text.")] = None,
        entities_to_remove: Annotated[
            list[Int] | None, Field(description="Ids of entities to detach from this memory.")
        ] = None,
        entities_to_add: Annotated[
            list[dict[str, Any]] | None,
            Field(description='New entities, each {"type": "task|waiting_on|person|...", "name": "...", "data"?: {}}.'),
        ] = None,
    ) -> dict[str, Any]:
        """Edit a stored memory after the fact: correct its text and add or remove its entities. The original
        text is kept and the memory is marked as edited by the user.

        Call it when the user says a memory is wrong. Returns {memory: {...}}.
        """
        changes: dict[str, Any] = {}
        if narrative is not None:
            changes["content"] = narrative
        if entities_to_remove:
            changes["entities_to_remove"] = tuple(entities_to_remove)
        if entities_to_add:
            changes["entities_to_add"] = tuple(entities_to_add)
        if not changes:
            raise ValidationError("nothing to change: give narrative, entities_to_remove or entities_to_add")
        return {"memory": plain(self.memory.edit_memory(memory_id, **changes))}

    # --- memory as reasoning context ----------------------------------------------------------------

    @tool(destructive=False)
    def get_reasoning_context(
        self,
        query: Annotated[str, Field(description="The user request or intent to contextualise.")],
        context_type: Annotated[
            Literal["classification", "decomposition", "verification"],
            Field(description="Which reasoning step the context is for."),
        ] = "classification",
        include_active_entities: Annotated[
            bool, Field(description="Also include open threads and waiting-ons.")
        ] = True,
        top_k: Annotated[Int, Field(ge=1, le=50, description="How many memories.")] = 5,
    ) -> dict[str, Any]:
        """Retrieve memory-augmented context for one reasoning step (classifying, decomposing or verifying a
        request): the most relevant memories, active entities and a ready prompt.

        The use is recorded; keep use_id to explain the decision later with explain_classification.
        Returns {use_id, kind, memories: [{memory_id, content, influence_type, score, ...}], entities, prompt}.
        """
        found = self.memory.reasoning_context(
            query, kind=context_type, top_k=top_k, include_active_entities=include_active_entities
        )
        data = plain_dict(found)
        data.setdefault("use_id", getattr(found, "use_id", None))
        return data

    @tool(read_only=True)
    def explain_classification(
        self, classification_id: Annotated[Int, Field(description="The use_id of a recorded decision.")]
    ) -> dict[str, Any]:
        """Show which memories influenced a recorded decision (a classification, context build or recall), with
        their scores and the reason each was used: the answer to "why did you think that?".

        Returns {use, memories: [{memory_id, content, influence_type, score, reasoning, ...}], outcomes, ...}.
        """
        return plain_dict(self.memory.explain(classification_id))

    @tool(read_only=True)
    def get_memory_influence_chain(
        self,
        memory_id: Annotated[Int, Field(description="The memory to trace.")],
        limit: Annotated[Int, Field(ge=1, le=200, description="Most influence events to return.")] = 20,
    ) -> dict[str, Any]:
        """Trace how one memory has influenced later reasoning: every recorded use that drew on it, newest first.

        Returns {memory_id, uses: [{id, kind, query, created_at, references, outcome}]}.
        """
        return {"memory_id": memory_id, "uses": plain(self.memory.influence_chain(memory_id, limit))}

    @tool(read_only=True)
    def get_memory_history(
        self, memory_id: Annotated[Int, Field(description="The memory whose changes to list.")]
    ) -> dict[str, Any]:
        """Every change to one memory, oldest first: created, edited, confirmed (the user's review), superseded
        (a later memory corrected it), restored, deleted; each with its time, the text before and after, and a
        detail. A deleted memory still answers, with its events but none of its text.

        Call it when the user asks how a memory came to read as it does, or what it said before.
        Returns {memory_id, deleted, events: [{id, kind, created_at, old_text, new_text, detail}]}.
        """
        events = self.memory.history(memory_id)
        deleted = bool(events) and events[-1].kind.value == "deleted"
        return {"memory_id": memory_id, "deleted": deleted, "events": plain(events)}

    @tool()
    def restore_memory(
        self, memory_id: Annotated[Int, Field(description="A memory a later statement superseded.")]
    ) -> dict[str, Any]:
        """Make a superseded memory current again: undo a correction the memory made by itself (the history
        records it). Call it only when the user says the older statement is still true.
        Returns the memory {id, content, valid_to (null now), superseded_by (null now), ...}.
        """
        return dict(plain(self.memory.restore_memory(memory_id)))


def tool_specs(owner: type = NarrativeTools) -> list[ToolSpec]:
    """Every tool of the class ``owner``, in definition order."""
    specs = []
    for name, member in vars(owner).items():
        marked = getattr(member, "__dict__", {}).get("narrative_tool")
        if marked is not None:
            read_only, destructive, aliases = marked
            specs.append(ToolSpec(name, _description(member.__doc__ or ""), read_only, destructive, aliases))
    return specs


def _description(doc: str) -> str:
    """The docstring with each paragraph on one line (models read it; line breaks carry nothing)."""
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


__all__ = ["ConversationId", "NarrativeTools", "ToolSpec", "plain_dict", "tool", "tool_specs", "with_text"]
