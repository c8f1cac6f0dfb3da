"""/api/v1/conversations and /api/v1/messages: the lifecycle and the Talking Rock review step."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from narrative.engine import Turn
from narrative.interfaces import http_schemas as S
from narrative.interfaces.http_common import Paging, Who, ok, paged, sliced
from narrative.interfaces.http_models import (
    CloseConversation,
    Confirm,
    PreviewChange,
    Split,
    StartConversation,
    TurnBatchIn,
    TurnIn,
)

router = APIRouter(prefix="/api/v1", responses=S.ERRORS)

Status = Literal["active", "ready_to_close", "compressing", "archived"]


# --- conversations ----------------------------------------------------------------------------


@router.get(
    "/conversations",
    tags=["conversations"],
    summary="List conversations, newest first",
    response_model=S.Page[S.Conversation],
)
def list_conversations(who: Who, at: Paging, status: Annotated[Status | None, Query()] = None) -> JSONResponse:
    return paged(
        lambda limit, offset: who.memory.list_conversations(status, limit=limit, offset=offset, user=who.user), at
    )


@router.post(
    "/conversations",
    tags=["conversations"],
    status_code=201,
    summary="Start a conversation",
    response_model=S.Conversation,
)
def start_conversation(who: Who, body: StartConversation | None = None) -> JSONResponse:
    title = body.title if body is not None else ""
    return ok(who.memory.start_conversation(title, user=who.user), 201)


@router.get(
    "/conversations/active",
    tags=["conversations"],
    summary="The active conversation (or null)",
    response_model=S.ActiveConversation,
)
def active_conversation(who: Who) -> JSONResponse:
    return ok({"conversation": who.memory.active_conversation(user=who.user)})


@router.get(
    "/conversations/{conversation_id}",
    tags=["conversations"],
    summary="One conversation",
    response_model=S.Conversation,
)
def get_conversation(who: Who, conversation_id: int) -> JSONResponse:
    return ok(who.memory.get_conversation(conversation_id, user=who.user))


@router.delete(
    "/conversations/{conversation_id}",
    tags=["conversations"],
    summary="Delete a conversation",
    response_model=S.Deleted,
)
def delete_conversation(who: Who, conversation_id: int) -> JSONResponse:
    who.memory.get_conversation(conversation_id, user=who.user)
    result = who.memory.delete_conversation(conversation_id, user=who.user)
    return ok({"deleted": conversation_id, "result": result})


@router.post(
    "/conversations/{conversation_id}/close",
    tags=["review"],
    summary="Close: active → ready_to_close; returns the memory preview",
    response_model=S.Preview,
)
def close_conversation(who: Who, conversation_id: int, body: CloseConversation | None = None) -> JSONResponse:
    who.memory.get_conversation(conversation_id, user=who.user)
    at = body.at if body is not None else None
    close: Any = who.memory.close_conversation
    preview = close(conversation_id, at=at, user=who.user) if at else close(conversation_id, user=who.user)
    return ok(preview)


@router.get(
    "/conversations/{conversation_id}/preview",
    tags=["review"],
    summary="The preview awaiting review",
    response_model=S.Preview,
)
def get_preview(who: Who, conversation_id: int) -> JSONResponse:
    return ok(who.memory.get_memory_preview(conversation_id, user=who.user))


@router.patch(
    "/conversations/{conversation_id}/preview",
    tags=["review"],
    summary="Edit the narrative and/or redirect the preview to another storyline",
    response_model=S.Preview,
)
def change_preview(who: Who, conversation_id: int, body: PreviewChange) -> JSONResponse:
    preview = None
    if body.narrative is not None or body.remove_entities:
        edit = who.memory.edit_preview
        preview = edit(conversation_id, body.narrative, remove_entities=body.remove_entities, user=who.user)
    if body.storyline_id is not None:
        redirect = who.memory.redirect_preview
        preview = redirect(conversation_id, body.storyline_id, user=who.user)
    return ok(preview)


@router.post(
    "/conversations/{conversation_id}/confirm",
    tags=["review"],
    summary="Confirm the memory and archive the conversation",
    response_model=S.ConfirmResult,
)
def confirm(who: Who, conversation_id: int, body: Confirm | None = None) -> JSONResponse:
    body = body or Confirm()
    result = who.memory.confirm_memory(
        conversation_id,
        destination_storyline_id=body.storyline_id,
        edited_narrative=body.narrative,
        at=body.at,
        user=who.user,
    )
    return ok(result)


@router.post(
    "/conversations/{conversation_id}/split",
    tags=["review"],
    summary="Split the memory into parts, each routed to its storyline",
    response_model=S.ConfirmResult,
)
def split(who: Who, conversation_id: int, body: Split) -> JSONResponse:
    parts = [part.model_dump() for part in body.parts]
    return ok(who.memory.split_memory(conversation_id, parts, user=who.user))


@router.post(
    "/conversations/{conversation_id}/resume",
    tags=["review"],
    summary="Resume: cancel the closure, back to active",
    response_model=S.Conversation,
)
def resume(who: Who, conversation_id: int) -> JSONResponse:
    return ok(who.memory.resume_conversation(conversation_id, user=who.user))


@router.post(
    "/conversations/{conversation_id}/pause", tags=["conversations"], summary="Pause", response_model=S.Conversation
)
def pause(who: Who, conversation_id: int) -> JSONResponse:
    return ok(who.memory.pause_conversation(conversation_id, user=who.user))


@router.post(
    "/conversations/{conversation_id}/unpause", tags=["conversations"], summary="Unpause", response_model=S.Conversation
)
def unpause(who: Who, conversation_id: int) -> JSONResponse:
    return ok(who.memory.unpause_conversation(conversation_id, user=who.user))


@router.get(
    "/conversations/{conversation_id}/archive",
    tags=["conversations"],
    summary="The archived transcript: conversation, messages and the memories made from it",
    response_model=S.Archive,
)
def archive(who: Who, conversation_id: int) -> JSONResponse:
    return ok(who.memory.get_conversation_archive(conversation_id, user=who.user))


@router.get(
    "/conversations/{conversation_id}/messages",
    tags=["messages"],
    summary="Messages of a conversation",
    response_model=S.Page[S.Message],
)
def conversation_messages(who: Who, conversation_id: int, at: Paging) -> JSONResponse:
    return sliced(who.memory.messages(conversation_id, user=who.user), at)


# --- messages ---------------------------------------------------------------------------------


@router.post(
    "/messages",
    tags=["messages"],
    status_code=201,
    summary="Remember a turn: route it, extract memories, update the running narrative",
    response_model=S.TurnResult,
)
def post_message(who: Who, body: TurnIn) -> JSONResponse:
    result = who.memory.remember(
        body.content, body.role, speaker=body.speaker, at=body.at, meta=body.meta, user=who.user
    )
    return ok(result, 201)


@router.post(
    "/messages/batch",
    tags=["messages"],
    status_code=201,
    response_model=S.TurnBatch,
    summary="Remember several turns in order, in one call (embedded in batches)",
)
def post_messages(who: Who, body: TurnBatchIn) -> JSONResponse:
    turns = [Turn(t.content, t.role, t.speaker, t.at, t.meta) for t in body.messages]
    return ok({"items": who.memory.remember_many(turns, user=who.user)}, 201)


@router.get(
    "/messages",
    tags=["messages"],
    summary="The latest messages across conversations, newest first",
    response_model=S.Page[S.Message],
)
def list_messages(who: Who, at: Paging) -> JSONResponse:
    latest = who.memory.messages(limit=at.offset + at.limit + 1, user=who.user)
    newest_first = list(reversed(latest))
    return sliced(newest_first, at)
