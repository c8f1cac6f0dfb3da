"""The small core tool set a user of any memory library looks for (mem0's add, search, get, list, update,
delete, history), beside the Talking Rock flow: ``add_memory``, ``get_memory``, ``list_memories``,
``update_memory``, ``delete_memories`` here; ``search_memories`` and ``get_memory_history`` in
:mod:`narrative.interfaces.mcp_tools`.  Filters take the grammar every interface shares (docs/http.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from narrative.errors import ValidationError
from narrative.interfaces.mcp_tools import page, plain_dict, tool
from narrative.interfaces.numbers import Int
from narrative.interfaces.serialize import plain

if TYPE_CHECKING:
    from narrative.engine import Memory

Filters = Annotated[
    dict[str, Any] | None,
    Field(
        description='Which memories: {"metadata.project": "garden"}, {"stream": "decision"}, {"importance": {"gte":'
        ' 4}}, {"time": {"gte": "2026-03-01"}}, combined with {"AND": [...]}, {"OR": [...]}, {"NOT": {...}};'
        " operators eq, ne, gt, gte, lt, lte, in, nin, contains, icontains, exists."
    ),
]
Metadata = Annotated[
    dict[str, Any] | None,
    Field(description="Your own keys (letters, digits, _ and -) and JSON values, for filters; at most 64 keys."),
]
StreamName = Literal["fact", "decision", "research", "conversation", "reflection", "narrative"]


class CoreTools:
    """add, get, list, update, delete: one memory (or several) by id or by filter."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    @tool(destructive=False)
    def add_memory(
        self,
        content: Annotated[str, Field(description="The fact to remember, in one or two sentences.")],
        stream: Annotated[StreamName, Field(description="What kind of memory: usually fact or decision.")] = "fact",
        importance: Annotated[Int, Field(ge=1, le=5, description="1 (trivial) to 5 (life-changing).")] = 2,
        metadata: Metadata = None,
        storyline_id: Annotated[Int | None, Field(description="File it under this storyline.")] = None,
    ) -> dict[str, Any]:
        """Remember one plain fact directly, without a conversation turn (an agent's note, a preference, a
        setting). A later fact that corrects an earlier one of the same stream supersedes it.

        Use remember instead for what the user says in conversation. Returns {memory: {id, content, stream,
        importance, metadata, created_at, ...}}.
        """
        made = self.memory.add_memory(
            content, stream=stream, importance=importance, metadata=metadata, storyline_id=storyline_id
        )
        return {"memory": plain_dict(made)}

    @tool(read_only=True)
    def get_memory(self, memory_id: Annotated[Int, Field(description="The memory to read.")]) -> dict[str, Any]:
        """Read one memory by id: its text, stream, importance, metadata, storyline, source messages and whether
        it is current (valid_to null) or was superseded (superseded_by). `text` is everything the memory holds:
        a long message whole, where `content` quotes only its first passage (ending " …"). Returns {memory:
        {...}}."""
        return {"memory": plain_dict(self.memory.whole_memory(memory_id))}

    @tool(read_only=True, aliases={"act_id": "storyline_id"})
    def list_memories(
        self,
        filters: Filters = None,
        storyline_id: Annotated[Int | None, Field(description="Only this storyline's memories.")] = None,
        current_only: Annotated[bool, Field(description="Leave out what a later statement superseded.")] = False,
        limit: Annotated[Int, Field(ge=1, le=200, description="How many memories.")] = 20,
        offset: Annotated[Int, Field(ge=0, description="Skip this many (pagination).")] = 0,
    ) -> dict[str, Any]:
        """List memories newest first, optionally only those matching filters (fields and metadata, joined with
        AND/OR/NOT). Use search_memories to find memories by meaning. Returns {items: [...], limit, offset,
        next_offset} (next_offset: pass it as offset for the next page; null on the last page)."""
        if storyline_id is not None:
            self.memory.get_storyline(storyline_id)  # NotFound, not an empty list
        found = self.memory.list_memories(
            storyline_id=storyline_id, filters=filters, current_only=current_only, limit=limit + 1, offset=offset
        )
        return {"items": plain(found[:limit]), **page(limit, offset, more=len(found) > limit)}

    @tool(destructive=True)
    def update_memory(
        self,
        memory_id: Annotated[Int, Field(description="The memory to change.")],
        content: Annotated[str | None, Field(description="The corrected text.")] = None,
        importance: Annotated[Int | None, Field(ge=1, le=5, description="A new importance, 1 to 5.")] = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="New metadata (replaces the memory's metadata whole).")
        ] = None,
    ) -> dict[str, Any]:
        """Change one memory's text, importance or metadata; the first text edit keeps the original and the
        history records every change (get_memory_history). Returns {memory: {...}}."""
        if content is None and importance is None and metadata is None:
            raise ValidationError("nothing to change: give content, importance or metadata")
        edited = self.memory.edit_memory(memory_id, content=content, importance=importance, metadata=metadata)
        return {"memory": plain_dict(edited)}

    @tool(destructive=True)
    def delete_memories(
        self,
        memory_ids: Annotated[list[Int] | None, Field(description="The memories to delete, by id.")] = None,
        filters: Filters = None,
    ) -> dict[str, Any]:
        """Delete memories for good, by ids or by filters (one of the two): all of them, or none when an id is
        unknown. Each keeps a history without its text. Call it only when the user asks to forget.
        Returns {deleted: [ids], counts: {memories, narratives, uses, reopened_entities, restored?}}."""
        result = self.memory.delete_memories(memory_ids, filters=filters)
        deleted = result.pop("ids")
        return {"deleted": deleted, "counts": result}


__all__ = ["CoreTools"]
