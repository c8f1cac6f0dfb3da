"""/api/v1 memories, storylines, narratives (the Koshi chain) and entities (open threads)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from narrative.errors import ValidationError
from narrative.interfaces import http_schemas as S
from narrative.interfaces.http_common import Paging, Who, id_list, json_query, ok, paged, sliced
from narrative.interfaces.http_models import (
    MemoryChange,
    MemoryIn,
    MemoryUpdates,
    NarrativeIn,
    Resolve,
    StorylineIn,
    StorylineRename,
)
from narrative.model import EventKind

router = APIRouter(prefix="/api/v1", responses=S.ERRORS)

StreamName = Literal["conversation", "research", "decision", "reflection", "narrative", "fact"]
EntityTypeName = Literal[
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
Depth = Annotated[int | None, Query(ge=1, le=1000)]
Filters = Annotated[
    str | None,
    Query(
        description='A filter in JSON (mem0\'s grammar): {"metadata.project": "garden"},'
        ' {"AND": [{"stream": "decision"}, {"importance": {"gte": 4}}]}, {"OR": [...]}, {"NOT": {...}};'
        " operators eq, ne, gt, gte, lt, lte, in, nin, contains, icontains, exists (docs/http.md, Filters).",
        max_length=20_000,
    ),
]


# --- memories ---------------------------------------------------------------------------------


@router.get(
    "/memories",
    tags=["memories"],
    summary="List memories, newest first; each fact once (`text`, `folded_into`, `also`)",
    response_model=S.Page[S.ListedMemory],
)
def list_memories(
    who: Who,
    at: Paging,
    stream: StreamName | None = None,
    storyline_id: Annotated[int | None, Query(ge=1)] = None,
    conversation_id: Annotated[int | None, Query(ge=1)] = None,
    filters: Filters = None,
    current: Annotated[bool, Query(description="Leave out what a later statement superseded.")] = False,
) -> JSONResponse:
    chosen = json_query(filters, "filters")

    def fetch(limit: int, offset: int) -> list[Any]:
        found = who.memory.list_memories(
            stream=stream,
            storyline_id=storyline_id,
            conversation_id=conversation_id,
            limit=limit,
            offset=offset,
            filters=chosen,
            current_only=current,
            user=who.user,
        )
        page, probe = found[: at.limit], found[at.limit :]  # ``probe``: the one beyond the page, if any
        return [*who.memory.one_fact_once([m.id for m in page], user=who.user), *probe]  # each fact once on the page

    if storyline_id is not None:
        who.memory.get_storyline(storyline_id, user=who.user)
    if conversation_id is not None:
        who.memory.get_conversation(conversation_id, user=who.user)
    return paged(fetch, at)


@router.post(
    "/memories",
    tags=["memories"],
    status_code=201,
    summary="Add a memory directly (an agent's note)",
    response_model=S.MemoryItem,
)
def add_memory(who: Who, body: MemoryIn) -> JSONResponse:
    memory = who.memory.add_memory(
        body.content,
        stream=body.stream,
        source=body.source,
        importance=body.importance,
        emotions=body.emotions,
        message_ids=body.message_ids,
        storyline_id=body.storyline_id,
        conversation_id=body.conversation_id,
        metadata=body.metadata,
        user=who.user,
    )
    return ok(memory, 201)


@router.patch(
    "/memories",
    tags=["memories"],
    summary="Edit several memories at once (all of them, or none when one is refused)",
    response_model=S.Items[S.MemoryItem],
)
def update_memories(who: Who, body: MemoryUpdates) -> JSONResponse:
    updates = [item.model_dump(exclude_none=True) for item in body.memories]  # null changes nothing, as left out
    return ok({"items": who.memory.update_memories(updates, user=who.user)})


@router.delete(
    "/memories",
    tags=["memories"],
    summary="Delete several memories at once: ?ids=1,2 or ?filters=JSON (all of them, or none when an id is unknown)",
    response_model=S.BatchDeleted,
)
def delete_memories(
    who: Who,
    ids: Annotated[list[str] | None, Query(description="Memory ids: ?ids=1,2 or ?ids=1&ids=2.")] = None,
    filters: Filters = None,
) -> JSONResponse:
    if (ids is None) == (filters is None):  # the query's names, not the engine's (memory_ids)
        raise ValidationError("give ids=1,2 or filters=JSON (one of the two)", field="ids")
    result = who.memory.delete_memories(id_list(ids), filters=json_query(filters, "filters"), user=who.user)
    deleted = result.pop("ids")
    return ok({"deleted": deleted, "result": result})


@router.get(
    "/memories/{memory_id}",
    tags=["memories"],
    summary="One memory, with `text`: the whole text it holds (a long message whole; `content` may be an excerpt)",
    response_model=S.WholeMemory,
)
def get_memory(who: Who, memory_id: int) -> JSONResponse:
    return ok(who.memory.whole_memory(memory_id, user=who.user))


@router.patch(
    "/memories/{memory_id}",
    tags=["memories"],
    summary="Edit a memory (text, importance, emotions, entities)",
    response_model=S.MemoryItem,
)
def edit_memory(who: Who, memory_id: int, body: MemoryChange) -> JSONResponse:
    changes = body.changes()
    if not changes:  # refused as the batch route, MCP and the CLI refuse it, not answered 200 having done nothing
        raise ValidationError(
            f"nothing to change for memory {memory_id}: give content, importance, emotions, metadata,"
            " entities_to_remove or entities_to_add",
            field="body",
        )
    return ok(who.memory.edit_memory(memory_id, **changes, user=who.user))


@router.delete("/memories/{memory_id}", tags=["memories"], summary="Delete a memory", response_model=S.Deleted)
def delete_memory(who: Who, memory_id: int) -> JSONResponse:
    who.memory.get_memory(memory_id, user=who.user)
    result = who.memory.delete_memory(memory_id, user=who.user)
    return ok({"deleted": memory_id, "result": result})


@router.get(
    "/memories/{memory_id}/chain",
    tags=["memories"],
    summary="Recall chain: the memory's narrative, its siblings and earlier links",
    response_model=S.RecallChain,
)
def recall_chain(who: Who, memory_id: int, depth: Annotated[int, Query(ge=0, le=100)] = 3) -> JSONResponse:
    found = who.memory.recall_chain(memory_id, depth, user=who.user)
    return ok(
        {
            "memory": found.memory,
            "narrative": found.narrative,
            "siblings": list(found.siblings),
            "earlier": list(found.earlier),
        }
    )


@router.get(
    "/memories/{memory_id}/influence",
    tags=["uses"],
    summary="The uses this memory has shaped",
    response_model=S.Influence,
)
def influence(who: Who, memory_id: int, limit: Annotated[int, Query(ge=1, le=200)] = 20) -> JSONResponse:
    who.memory.get_memory(memory_id, user=who.user)
    uses = who.memory.influence_chain(memory_id, limit, user=who.user)
    return ok({"memory_id": memory_id, "uses": uses})


@router.post(
    "/memories/{memory_id}/restore",
    tags=["memories"],
    response_model=S.MemoryItem,
    summary="Make a memory a later statement superseded current again (undo a correction)",
)
def restore_memory(who: Who, memory_id: int) -> JSONResponse:
    return ok(who.memory.restore_memory(memory_id, user=who.user))


@router.get(
    "/memories/{memory_id}/history",
    tags=["memories"],
    response_model=S.MemoryHistory,
    summary="A memory's history: every change as an event (also after a delete: a tombstone without text)",
)
def memory_history(who: Who, memory_id: int) -> JSONResponse:
    events = who.memory.history(memory_id, user=who.user)
    deleted = bool(events) and events[-1].kind is EventKind.DELETED
    memory = None if deleted else who.memory.get_memory(memory_id, user=who.user)
    return ok({"memory_id": memory_id, "deleted": deleted, "events": events, "memory": memory})


# --- storylines -------------------------------------------------------------------------------


@router.get(
    "/storylines",
    tags=["storylines"],
    summary="Storylines (Your Story first is not guaranteed)",
    response_model=S.Page[S.Storyline],
)
def list_storylines(who: Who, at: Paging, include_archived: bool = False) -> JSONResponse:
    return sliced(who.memory.list_storylines(include_archived=include_archived, user=who.user), at)


@router.post(
    "/storylines", tags=["storylines"], status_code=201, summary="Create a storyline", response_model=S.Storyline
)
def create_storyline(who: Who, body: StorylineIn) -> JSONResponse:
    made = who.memory.create_storyline(
        body.name, description=body.description, keywords=tuple(body.keywords), user=who.user
    )
    return ok(made, 201)


@router.get(
    "/storylines/your-story",
    tags=["storylines"],
    summary="Your Story, the permanent storyline",
    response_model=S.Storyline,
)
def your_story(who: Who) -> JSONResponse:
    return ok(who.memory.your_story(user=who.user))


@router.get("/storylines/{storyline_id}", tags=["storylines"], summary="One storyline", response_model=S.Storyline)
def get_storyline(who: Who, storyline_id: int) -> JSONResponse:
    return ok(who.memory.get_storyline(storyline_id, user=who.user))


@router.patch(
    "/storylines/{storyline_id}", tags=["storylines"], summary="Rename a storyline", response_model=S.Storyline
)
def rename_storyline(who: Who, storyline_id: int, body: StorylineRename) -> JSONResponse:
    return ok(who.memory.rename_storyline(storyline_id, body.name, user=who.user))


@router.post(
    "/storylines/{storyline_id}/archive", tags=["storylines"], summary="Archive a storyline", response_model=S.Storyline
)
def archive_storyline(who: Who, storyline_id: int) -> JSONResponse:
    return ok(who.memory.archive_storyline(storyline_id, user=who.user))


@router.delete(
    "/storylines/{storyline_id}",
    tags=["storylines"],
    summary="Delete a storyline (its memories move to Your Story unless move_to_your_story=false)",
    response_model=S.Deleted,
)
def delete_storyline(who: Who, storyline_id: int, move_to_your_story: bool = True) -> JSONResponse:
    who.memory.get_storyline(storyline_id, user=who.user)
    result = who.memory.delete_storyline(storyline_id, move_to_your_story=move_to_your_story, user=who.user)
    return ok({"deleted": storyline_id, "result": result})


# --- narratives (the chain) -------------------------------------------------------------------


@router.get(
    "/narratives", tags=["narratives"], summary="Narrative links, newest first", response_model=S.Page[S.Narrative]
)
def list_narratives(who: Who, at: Paging, storyline_id: Annotated[int | None, Query(ge=1)] = None) -> JSONResponse:
    return paged(
        lambda limit, offset: who.memory.list_narratives(
            storyline_id=storyline_id, limit=limit, offset=offset, user=who.user
        ),
        at,
    )


@router.post(
    "/narratives",
    tags=["narratives"],
    status_code=201,
    summary="narrative_update: append a sealed link to the chain",
    response_model=S.Narrative,
)
def narrative_update(who: Who, body: NarrativeIn) -> JSONResponse:
    if body.storyline_id is not None:  # the engine checks memories and the previous link; the storyline here
        who.memory.get_storyline(body.storyline_id, user=who.user)
    link = who.memory.narrative_update(
        body.summary,
        body.memory_ids,
        body.previous_narrative_id,
        body.topic,
        storyline_id=body.storyline_id,
        user=who.user,
    )
    return ok(link, 201)


@router.get(
    "/narratives/latest", tags=["narratives"], summary="The latest link: where was I?", response_model=S.LatestNarrative
)
def latest_narrative(who: Who) -> JSONResponse:
    found = who.memory.narrative_search(user=who.user)
    return ok({"narrative": found[0] if found else None})


@router.get(
    "/narratives/search",
    tags=["narratives"],
    summary="Keyword search over link summaries and topics",
    response_model=S.Items[S.Narrative],
)
def search_narratives(
    who: Who,
    q: Annotated[str, Query(min_length=1, max_length=1000)],
    limit: Annotated[int, Query(ge=1, le=200)] = 10,
) -> JSONResponse:
    return ok({"items": who.memory.narrative_search(query=q, limit=limit, user=who.user)})


@router.get("/narratives/{narrative_id}", tags=["narratives"], summary="One link", response_model=S.Narrative)
def get_narrative(who: Who, narrative_id: int) -> JSONResponse:
    found = who.memory.narrative_search(narrative_id, user=who.user)
    return ok(found[0])


@router.get(
    "/narratives/{narrative_id}/back",
    tags=["narratives"],
    summary="Walk back along previous links",
    response_model=S.Items[S.Narrative],
)
def walk_back(who: Who, narrative_id: int, depth: Depth = None) -> JSONResponse:
    return ok({"items": who.memory.walk_back(narrative_id, depth, user=who.user)})


@router.get(
    "/narratives/{narrative_id}/forward",
    tags=["narratives"],
    summary="Walk forward to later links",
    response_model=S.Items[S.Narrative],
)
def walk_forward(who: Who, narrative_id: int, depth: Depth = None) -> JSONResponse:
    return ok({"items": who.memory.walk_forward(narrative_id, depth, user=who.user)})


# --- entities (open threads) ------------------------------------------------------------------


@router.get(
    "/entities/open",
    tags=["entities"],
    summary="Open threads: tasks, waiting-ons, open questions",
    response_model=S.Page[S.Entity],
)
def open_threads(
    who: Who,
    at: Paging,
    entity_type: EntityTypeName | None = None,
    storyline_id: Annotated[int | None, Query(ge=1)] = None,
) -> JSONResponse:
    found = who.memory.open_threads(entity_type, storyline_id, user=who.user)
    return sliced(found, at)


@router.post(
    "/entities/{entity_id}/resolve", tags=["entities"], summary="Mark an open thread resolved", response_model=S.Entity
)
def resolve_thread(who: Who, entity_id: int, body: Resolve | None = None) -> JSONResponse:
    by = body.by_memory_id if body is not None else None
    return ok(who.memory.resolve_thread(entity_id, by_memory_id=by, user=who.user))
