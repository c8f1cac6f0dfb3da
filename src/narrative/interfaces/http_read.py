"""/api/v1 search (with why), context, reasoning context, uses, greeting, export/import, the user."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from narrative.errors import ValidationError
from narrative.interfaces import http_schemas as S
from narrative.interfaces.http_common import Paging, Who, json_query, ok, paged
from narrative.interfaces.http_memories import Filters
from narrative.interfaces.http_models import ContextIn, Outcome, ReasoningIn, SearchIn, UseIn
from narrative.interfaces.serialize import hit_dict

router = APIRouter(prefix="/api/v1", responses=S.ERRORS)

StreamName = Literal["conversation", "research", "decision", "reflection", "narrative", "fact"]
SourceName = Literal["conversation", "agent", "extraction", "narrative", "reflection"]
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


@router.get("/me", tags=["user"], summary="Who this key belongs to, and what their memory holds", response_model=S.Me)
def me(who: Who) -> JSONResponse:
    info = who.memory.describe(user=who.user)
    return ok({"user": who.user, "counts": info.get("counts", {})})


@router.get(
    "/search",
    tags=["search"],
    summary="Hybrid search; every hit says why it was returned",
    response_model=S.SearchResult,
)
def search(
    who: Who,
    q: Annotated[str, Query(min_length=1, max_length=10_000, description="The query.")],
    limit: Annotated[int | None, Query(ge=1, le=100, description="How many hits (default 10).")] = None,
    k: Annotated[int | None, Query(ge=1, le=100, description="The same as limit (its older name).")] = None,
    mode: Literal["hybrid", "keyword", "vector"] = "hybrid",
    stream: Annotated[list[StreamName] | None, Query(description="Only these streams (repeatable).")] = None,
    storyline_id: Annotated[int | None, Query(ge=1)] = None,
    conversation_id: Annotated[int | None, Query(ge=1)] = None,
    source: Annotated[list[SourceName] | None, Query(description="Only these sources (repeatable).")] = None,
    entity_type: Annotated[
        list[EntityTypeName] | None, Query(description="Only memories carrying an entity of these types (repeatable).")
    ] = None,
    since: Annotated[datetime | None, Query(description="Only memories of this time or later (ISO 8601).")] = None,
    until: Annotated[datetime | None, Query(description="Only memories before this time (ISO 8601).")] = None,
    min_score: Annotated[float | None, Query(ge=0, le=1, description="Drop hits scoring below this (0-1).")] = None,
    record: Annotated[bool, Query(description="Record this search as a use of memory (default: no).")] = False,
    include_superseded: Annotated[
        bool, Query(description="Also what a later statement superseded (left out by default).")
    ] = False,
    as_of: Annotated[datetime | None, Query(description="What was current at this time (ISO 8601).")] = None,
    filters: Filters = None,
) -> JSONResponse:
    if limit is not None and k is not None and limit != k:
        raise ValidationError("give limit or k (the same count), not both", field="limit")
    count = limit or k or 10
    options: dict[str, Any] = {
        "streams": stream,
        "sources": source,
        "entity_types": entity_type,
        "since": since,
        "until": until,
        "storyline_id": storyline_id,
        "conversation_id": conversation_id,
        "as_of": as_of,
    }
    if include_superseded:
        options["include_superseded"] = True
    hits = search_with_floor(
        who.memory,
        q,
        count,
        min_score,
        mode=mode,
        record=record,
        filters=json_query(filters, "filters"),
        user=who.user,
        **{name: value for name, value in options.items() if value is not None},
    )
    return ok({"query": q, "items": [hit_dict(h) for h in hits]})


@router.post(
    "/search",
    tags=["search"],
    summary="Hybrid search with the query and a filter tree in the body (mem0's search(query, filters=…))",
    response_model=S.SearchResult,
)
def search_body(who: Who, body: SearchIn) -> JSONResponse:
    hits = who.memory.search(
        body.query,
        body.limit,
        mode=body.mode,
        filters=body.filters,
        min_score=body.min_score,
        include_superseded=body.include_superseded,
        as_of=body.as_of,
        record=body.record,
        user=who.user,
    )
    return ok({"query": body.query, "items": [hit_dict(h) for h in hits]})


def search_with_floor(memory: Any, query: str, k: int, min_score: float | None, **options: Any) -> list[Any]:
    """``memory.search`` with ``min_score`` when one is given."""
    return list(memory.search(query, k, min_score=min_score or 0.0, **options))


@router.post(
    "/context",
    tags=["context"],
    summary="The context block for a query, within a token budget",
    response_model=S.ContextBlock,
)
def context(who: Who, body: ContextIn) -> JSONResponse:
    block = who.memory.context(body.query, body.budget, record=body.record, user=who.user)
    return ok(block)


@router.post(
    "/reasoning-context",
    tags=["context"],
    summary="Memories and open entities as reasoning context (classification, decomposition, verification)",
    response_model=S.ReasoningContext,
)
def reasoning_context(who: Who, body: ReasoningIn) -> JSONResponse:
    found = who.memory.reasoning_context(
        body.request,
        body.kind,
        body.top_k,
        include_active_entities=body.include_active_entities,
        record=body.record,
        user=who.user,
    )
    return ok(found)


# --- uses: why did you think that? ------------------------------------------------------------


@router.get("/uses", tags=["uses"], summary="Recent uses of memory, newest first", response_model=S.Page[S.Use])
def list_uses(who: Who, at: Paging) -> JSONResponse:
    list_uses = who.memory.list_uses
    return paged(lambda limit, offset: list_uses(limit, offset=offset, user=who.user), at)


@router.post(
    "/uses",
    tags=["uses"],
    status_code=201,
    summary="Record a use: which memories shaped a decision",
    response_model=S.Use,
)
def record_use(who: Who, body: UseIn) -> JSONResponse:
    references = [(r.memory_id, r.influence_type, r.score, r.reasoning) for r in body.references]
    use = who.memory.record_use(body.kind, body.query, references, user=who.user)
    return ok(use, 201)


@router.get(
    "/uses/{use_id}",
    tags=["uses"],
    summary="Explain a use: the memories that shaped it and why",
    response_model=S.Explanation,
)
def explain(who: Who, use_id: int) -> JSONResponse:
    return ok(who.memory.explain(use_id, user=who.user))


@router.post(
    "/uses/{use_id}/outcome", tags=["uses"], summary="Learn from the outcome of a use", response_model=S.OutcomeResult
)
def outcome(who: Who, use_id: int, body: Outcome) -> JSONResponse:
    learn = who.memory.learn_from_outcome
    return ok(learn(use_id, body.outcome, body.correction, user=who.user))


# --- greeting, export/import, the user --------------------------------------------------------


@router.get(
    "/greeting",
    tags=["user"],
    summary="The startup greeting: where things stand, open threads",
    response_model=S.Greeting,
)
def greeting(who: Who) -> JSONResponse:
    return ok(who.memory.greet(user=who.user))


EXPORT_TYPES = {
    "json": "application/json",
    "markdown": "text/markdown; charset=utf-8",
    "jsonl": "application/x-ndjson; charset=utf-8",
    "csv": "text/csv; charset=utf-8",
}


@router.get(
    "/export",
    tags=["user"],
    summary="Everything of this user, as JSON or Markdown; or the memories one a line, as JSONL or CSV",
    responses={
        200: {
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/markdown": {"schema": {"type": "string"}},
                "application/x-ndjson": {"schema": {"type": "string"}},
                "text/csv": {"schema": {"type": "string"}},
            },
            "description": "The export.",
        }
    },
)
def export(who: Who, format: Literal["json", "markdown", "jsonl", "csv"] = "json") -> Response:
    text = who.memory.export(format, user=who.user)
    return Response(text, media_type=EXPORT_TYPES[format])


@router.post(
    "/import", tags=["user"], summary="Import a JSON export into this user's memory", response_model=S.ImportSummary
)
def import_data(who: Who, document: Annotated[dict[str, Any], Body(description="A JSON export.")]) -> JSONResponse:
    summary = who.memory.import_data(json.dumps(document), user=who.user)
    return ok(summary)


@router.post(
    "/import/chat",
    tags=["user"],
    summary="Import a chat log (JSONL of messages, ChatGPT's or Claude's conversations.json) into this user",
    response_model=S.ChatImport,
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "The chat log, as sent (any text type; JSON or JSONL).",
            "content": {
                "application/x-ndjson": {"schema": {"type": "string"}},
                "application/json": {"schema": {}},
                "text/plain": {"schema": {"type": "string"}},
            },
        }
    },
)
async def import_chat(
    who: Who,
    request: Request,
    format: Literal["auto", "jsonl", "chatgpt", "claude"] = "auto",
) -> JSONResponse:
    raw = await request.body()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValidationError(f"the chat log is not UTF-8 text (byte {error.start})", field="body") from None
    summary = await run_in_threadpool(who.memory.import_chat, text, format, user=who.user)
    return ok(summary)


@router.get(
    "/keys",
    tags=["user"],
    summary="This user's API keys (id, label, time, fingerprint; never the key)",
    response_model=S.Items[S.ApiKey],
)
def list_keys(who: Who) -> JSONResponse:
    return ok({"items": who.memory.list_api_keys(user=who.user)})


@router.delete(
    "/keys/{key_id}",
    tags=["user"],
    summary="Revoke one of this user's API keys (the memory stays)",
    response_model=S.Revoked,
)
def revoke_key(who: Who, key_id: Annotated[int, Path(ge=1)]) -> JSONResponse:
    return ok(who.memory.revoke_api_key(key_id, user=who.user))


@router.delete(
    "/user",
    tags=["user"],
    summary="Delete this user and everything of theirs (keys included)",
    response_model=S.Deleted,
)
def delete_user(who: Who) -> JSONResponse:
    result = who.memory.delete_user(who.user)
    return ok({"deleted": who.user, "result": result})
