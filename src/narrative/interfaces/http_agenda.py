"""/api/v1 storyline bindings and stale goals (NarraNexus); decision chains, the decision audit, consolidation,
linked items and source popularity (ITSERR).  Bodies and response shapes of these routes live here too."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Query
from fastapi.responses import JSONResponse
from pydantic import Field

from narrative.interfaces import http_schemas as S
from narrative.interfaces.http_common import Paging, Who, ok, sliced
from narrative.interfaces.http_models import Body as BodyModel
from narrative.interfaces.numbers import Int
from narrative.model import Binding, DecisionReview, MemoryLink

router = APIRouter(prefix="/api/v1", responses=S.ERRORS)

BindingKindName = Literal["toolset", "job", "goal", "module"]
LinkKindName = Literal["same_work", "same_author", "same_idea", "builds_on", "reverses"]
Status = Annotated[
    str, Field(min_length=1, max_length=40, description="One of the kind's statuses (docs/bindings.md).")
]


# --- bodies ---------------------------------------------------------------------------------------


class BindIn(BodyModel):
    """Bind a named instance to the storyline; binding the same kind and name there again updates it."""

    kind: BindingKindName
    name: Annotated[str, Field(min_length=1, max_length=200)]
    status: Status | None = None
    payload: dict[str, Any] | None = None
    at: datetime | None = None


class BindingChange(BodyModel):
    status: Status | None = None
    payload: dict[str, Any] | None = None
    name: Annotated[str | None, Field(min_length=1, max_length=200)] = None


class CompleteIn(BodyModel):
    status: Status | None = Field(default=None, description="A final status; default the kind's (done, achieved…).")


class DecisionLinkIn(BodyModel):
    earlier_id: Annotated[Int, Field(ge=1, description="The earlier decision this one builds on or reverses.")]
    kind: Literal["builds_on", "reverses"] = "builds_on"
    reason: Annotated[str, Field(max_length=1000)] = ""


class ReviewIn(BodyModel):
    outcome: Literal["kept", "reversed"] = "kept"
    note: Annotated[str, Field(max_length=4000)] = ""


class ConsolidateIn(BodyModel):
    since: datetime | None = Field(default=None, description="Only the research items made since then (default all).")


# --- response shapes -------------------------------------------------------------------------------


class Consolidated(S.Open):
    items: int
    links: int


# --- bindings -----------------------------------------------------------------------------------------


@router.post(
    "/storylines/{storyline_id}/bindings",
    tags=["bindings"],
    status_code=201,
    summary="Bind a tool set, job, goal or module to a storyline (again: update it)",
    response_model=Binding,
)
def bind(who: Who, storyline_id: int, body: BindIn) -> JSONResponse:
    made = who.memory.bind(
        storyline_id, body.kind, body.name, status=body.status, payload=body.payload, at=body.at, user=who.user
    )
    return ok(made, 201)


@router.get(
    "/storylines/{storyline_id}/bindings",
    tags=["bindings"],
    summary="What is bound to a storyline (history=true: what moved to history)",
    response_model=S.Page[Binding],
)
def storyline_bindings(
    who: Who, storyline_id: int, at: Paging, history: bool = False, kind: BindingKindName | None = None
) -> JSONResponse:
    return sliced(who.memory.list_bindings(storyline_id, kind=kind, history=history, user=who.user), at)


@router.get(
    "/bindings",
    tags=["bindings"],
    summary="Every storyline's bindings, most recently touched first",
    response_model=S.Page[Binding],
)
def all_bindings(who: Who, at: Paging, history: bool = False, kind: BindingKindName | None = None) -> JSONResponse:
    return sliced(who.memory.list_bindings(kind=kind, history=history, user=who.user), at)


@router.patch("/bindings/{binding_id}", tags=["bindings"], summary="Change a binding", response_model=Binding)
def change_binding(who: Who, binding_id: int, body: BindingChange) -> JSONResponse:
    changed = who.memory.update_binding(
        binding_id, status=body.status, payload=body.payload, name=body.name, user=who.user
    )
    return ok(changed)


@router.post(
    "/bindings/{binding_id}/complete",
    tags=["bindings"],
    summary="Move a binding to history (a job done, a goal achieved)",
    response_model=Binding,
)
def complete_binding(who: Who, binding_id: int, body: Annotated[CompleteIn | None, Body()] = None) -> JSONResponse:
    return ok(who.memory.complete_binding(binding_id, status=None if body is None else body.status, user=who.user))


@router.delete("/bindings/{binding_id}", tags=["bindings"], summary="Delete a binding", response_model=S.Deleted)
def delete_binding(who: Who, binding_id: int) -> JSONResponse:
    return ok({"deleted": binding_id, "result": who.memory.delete_binding(binding_id, user=who.user)})


@router.get(
    "/goals/stale",
    tags=["bindings"],
    summary="Ongoing goals nothing touched for `days` days (default the setting), with why",
    response_model=S.Items[S.GoalReminder],
)
def stale_goals(who: Who, days: Annotated[int | None, Query(ge=0, le=36500)] = None) -> JSONResponse:
    return ok({"items": who.memory.stale_goals(days, user=who.user)})


# --- decisions ---------------------------------------------------------------------------------------


@router.post(
    "/decisions/{memory_id}/links",
    tags=["decisions"],
    status_code=201,
    summary="Record that a decision builds on or reverses an earlier one",
    response_model=MemoryLink,
)
def link_decision(who: Who, memory_id: int, body: DecisionLinkIn) -> JSONResponse:
    made = who.memory.link_decision(memory_id, body.earlier_id, body.kind, reason=body.reason, user=who.user)
    return ok(made, 201)


@router.get(
    "/decisions/{memory_id}/chain",
    tags=["decisions"],
    summary="The decision chain through a decision, both ways",
    response_model=S.DecisionChain,
)
def decision_chain(who: Who, memory_id: int) -> JSONResponse:
    return ok(who.memory.decision_chain(memory_id, user=who.user))


@router.get(
    "/decisions/review",
    tags=["decisions"],
    summary="Decisions due for review (old, or reversible and never revisited)",
    response_model=S.Items[S.DueDecision],
)
def decisions_to_review(who: Who, limit: Annotated[int, Query(ge=1, le=200)] = 10) -> JSONResponse:
    return ok({"items": who.memory.decisions_to_review(limit=limit, user=who.user)})


@router.post(
    "/decisions/{memory_id}/reviews",
    tags=["decisions"],
    status_code=201,
    summary="Answer an audit prompt: kept or reversed",
    response_model=DecisionReview,
)
def review_decision(who: Who, memory_id: int, body: ReviewIn) -> JSONResponse:
    return ok(who.memory.review_decision(memory_id, body.outcome, note=body.note, user=who.user), 201)


# --- research -----------------------------------------------------------------------------------------


@router.post(
    "/research/consolidate",
    tags=["research"],
    summary="Link research items about the same work, author or idea",
    response_model=Consolidated,
)
def consolidate(who: Who, body: Annotated[ConsolidateIn | None, Body()] = None) -> JSONResponse:
    found = who.memory.consolidate(since=None if body is None else body.since, user=who.user)
    return ok({k: v for k, v in found.items() if k != "made"} | {"made": [_link(k) for k in found["made"]]})


def _link(link: MemoryLink) -> dict[str, Any]:
    return {
        "memory_id": link.memory_id,
        "linked_id": link.linked_id,
        "kind": link.kind.value,
        "origin": link.origin.value,
        "reason": link.reason,
    }


@router.get(
    "/memories/{memory_id}/linked",
    tags=["research"],
    summary="Open a memory's links (related research items, decision chain neighbours)",
    response_model=S.Items[S.LinkedMemory],
)
def linked(who: Who, memory_id: int, kind: LinkKindName | None = None) -> JSONResponse:
    kinds = None if kind is None else [kind]
    return ok({"items": who.memory.linked_memories(memory_id, kinds=kinds, user=who.user)})


@router.get(
    "/sources/popular",
    tags=["research"],
    summary="The sources most used over a period (cited, annotated, quoted, noted, recalled)",
    response_model=S.Items[S.SourceUse],
)
def popular_sources(
    who: Who,
    since: datetime | None = None,
    until: datetime | None = None,
    days: Annotated[int | None, Query(ge=0, le=36500, description="The period: the last N days (0 = all).")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 10,
) -> JSONResponse:
    found = who.memory.source_popularity(since=since, until=until, days=days, limit=limit, user=who.user)
    return ok({"items": found})
