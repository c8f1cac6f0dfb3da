"""MCP tools for the rest of the review step and for the user's say over memory: edit the preview, redirect
it, split it, resolve a thread, record how a decision turned out, forget a memory.

Written against the engine facade only, like :mod:`narrative.interfaces.mcp_tools` (same ``tool`` marking).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from narrative.errors import ValidationError
from narrative.interfaces.mcp_tools import ConversationId, plain_dict, tool, with_text
from narrative.interfaces.numbers import Int

if TYPE_CHECKING:
    from narrative.engine import Memory


class SplitPart(BaseModel):
    """One memory of a split: its text, its storyline and the extracted items it carries."""

    model_config = ConfigDict(extra="forbid")

    narrative: Annotated[str, Field(min_length=1, description="The text of this memory.")]
    storyline_id: Annotated[Int | None, Field(description="Where it goes; omit for Your Story.")] = None
    entity_ids: Annotated[
        list[str | Int],
        Field(description="Preview entity keys (e1, e2, … from the preview) this part carries."),
    ] = []


class ReviewTools:
    """The review-step and sovereignty tools over one :class:`narrative.Memory`."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    @tool(destructive=False)
    def edit_memory_preview(
        self,
        conversation_id: ConversationId = None,
        narrative: Annotated[str | None, Field(description="The corrected narrative text.")] = None,
        remove_entities: Annotated[
            list[str] | None,
            Field(
                description="Preview entity keys (e1, e2, …) of extracted items that are wrong or not worth keeping."
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Edit the memory preview before it is confirmed: rewrite its narrative and/or drop extracted items
        (people, tasks, decisions, waiting-ons) the user says are wrong.

        Call it while the user reviews the preview from close_conversation; confirm_memory then stores the edited
        version. Returns the updated preview: {conversation_id, narrative, entities, removed, ..., text}.
        """
        if narrative is None and not remove_entities:
            raise ValidationError("nothing to change: give narrative or remove_entities", field="narrative")
        preview = self.memory.edit_preview(conversation_id, narrative, remove_entities=tuple(remove_entities or ()))
        return with_text(preview)

    @tool(destructive=False, aliases={"act_id": "storyline_id"})
    def redirect_memory(
        self,
        storyline_id: Annotated[Int, Field(description="The storyline the memory should go to (see list_storylines).")],
        conversation_id: ConversationId = None,
    ) -> dict[str, Any]:
        """Send the memory awaiting confirmation to another storyline than the suggested one (Your Story
        included).

        Returns the updated preview: {conversation_id, destination, suggestion, ..., text}.
        """
        return with_text(self.memory.redirect_preview(conversation_id, storyline_id))

    @tool(destructive=False)
    def split_memory(
        self,
        parts: Annotated[
            list[SplitPart], Field(min_length=2, max_length=20, description="Two or more memories to store instead.")
        ],
        conversation_id: ConversationId = None,
    ) -> dict[str, Any]:
        """Confirm the conversation as several memories instead of one, each with its own text, storyline and
        extracted items, all linking back to the one archived transcript.

        Call it when one conversation covered separate topics. Items assigned to no part follow their
        storyline, else go to the first part. Returns {conversation_id, status, memories: [{id, storyline_id,
        content}], ...}.
        """
        found = self.memory.split_memory(conversation_id, [part.model_dump() for part in parts])
        return with_text(found)

    @tool(destructive=False)
    def resolve_thread(
        self,
        entity_id: Annotated[Int, Field(description="The open thread (see get_open_threads).")],
        by_memory_id: Annotated[Int | None, Field(description="The memory that settled it, if any.")] = None,
    ) -> dict[str, Any]:
        """Mark an open thread (a task, a question, something waiting on someone) as resolved.

        Call it when the user says something is done or no longer pending. Returns {thread: {id, entity_type,
        name, is_active: false, resolved_at, ...}}.
        """
        return {"thread": plain_dict(self.memory.resolve_thread(entity_id, by_memory_id=by_memory_id))}

    @tool(destructive=False)
    def record_outcome(
        self,
        use_id: Annotated[Int, Field(description="The use_id of get_context / get_reasoning_context.")],
        outcome: Annotated[
            Literal["approved", "corrected", "rejected"], Field(description="How the decision turned out.")
        ],
        correction: Annotated[str | None, Field(description="What was right instead (needed for corrected).")] = None,
    ) -> dict[str, Any]:
        """Record how a memory-informed decision turned out, so later explanations show it: approved,
        corrected (with the correction) or rejected.

        Returns {outcome: {id, kind: outcome, query, references, meta: {use_id, ...}}}.
        """
        return {"outcome": plain_dict(self.memory.learn_from_outcome(use_id, outcome, correction))}

    @tool(destructive=True)
    def forget_memory(
        self, memory_id: Annotated[Int, Field(description="The memory to delete for good.")]
    ) -> dict[str, Any]:
        """Delete one memory for good, with its extracted items, its vector and its search entry (the
        conversation transcript stays).

        Call it only when the user asks to forget something. Returns {deleted: memory_id, counts: {...}}.
        """
        return {"deleted": memory_id, "counts": plain_dict(self.memory.delete_memory(memory_id))}


__all__ = ["ReviewTools", "SplitPart"]
