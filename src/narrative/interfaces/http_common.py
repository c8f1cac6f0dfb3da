"""What every HTTP route shares: the caller (memory + user from the API key), pages, JSON output, errors.

Every request is scoped to the user its key belongs to: routes only ever call the
engine with ``user=caller.user``, so another user's ids are simply not found (404).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from narrative.engine import Memory
from narrative.errors import ConversationAlreadyActive, InvalidTransition, NarrativeError, NotFound, ValidationError
from narrative.interfaces.serialize import plain

T = TypeVar("T")

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
MAX_OFFSET = 10_000_000

bearer = HTTPBearer(auto_error=False, description="`Authorization: Bearer <key>` (from `narrative keys create`).")
api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="The same key in `X-API-Key`.")


class Unauthorized(Exception):
    """No key, or a key nobody owns: answered with 401."""


@dataclass(frozen=True)
class Caller:
    """The engine and the user the request's key belongs to."""

    memory: Memory
    user: str


def the_memory(request: Request) -> Memory:
    memory: Memory = request.app.state.memory
    return memory


def caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    x_api_key: Annotated[str | None, Depends(api_key_header)],
) -> Caller:
    """Authenticate the request: a Bearer token or an X-API-Key header naming a stored key."""
    key = credentials.credentials if credentials is not None else x_api_key
    header = request.headers.get("authorization")
    if not key and header:
        scheme = header.split()[0] if header.split() else ""
        said = f"it starts with {scheme!r}" if len(header.split()) > 1 else "it has no scheme"
        raise Unauthorized(f"the Authorization header must read 'Bearer <key>'; {said}")
    if not key:
        raise Unauthorized("missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'")
    memory = the_memory(request)
    user = memory.user_for_api_key(key.strip())
    if user is None:
        raise Unauthorized("unknown API key")
    return Caller(memory, user)


Who = Annotated[Caller, Depends(caller)]


@dataclass(frozen=True)
class Page:
    limit: int
    offset: int


def page(
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"At most {MAX_LIMIT}.")] = DEFAULT_LIMIT,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> Page:
    return Page(limit, offset)


Paging = Annotated[Page, Depends(page)]


def paged(fetch: Callable[[int, int], Sequence[Any]], at: Page) -> JSONResponse:
    """Call ``fetch(limit + 1, offset)`` and answer one page with ``next_offset`` when more exist."""
    found = list(fetch(at.limit + 1, at.offset))
    return page_of(found[: at.limit], at, more=len(found) > at.limit)


def sliced(items: Sequence[Any], at: Page) -> JSONResponse:
    """A page cut from a full list (for engine calls without limit/offset)."""
    chunk = list(items[at.offset : at.offset + at.limit])
    return page_of(chunk, at, more=len(items) > at.offset + at.limit)


def page_of(items: Sequence[Any], at: Page, *, more: bool) -> JSONResponse:
    return ok(
        {
            "items": [out(item) for item in items],
            "limit": at.limit,
            "offset": at.offset,
            "next_offset": at.offset + at.limit if more else None,
        }
    )


def out(value: Any) -> Any:
    """JSON-able form of engine results: objects with ``to_dict`` first, then the model's dataclasses."""
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict) and not isinstance(value, type):
        return out(to_dict())
    if isinstance(value, dict):
        return {str(k): out(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [out(v) for v in value]
    return plain(value)


def ok(value: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(out(value), status_code=status)


# --- query parameters ------------------------------------------------------------------------

_KNOWN: dict[int, frozenset[str]] = {}


def known_query(request: Request) -> None:
    """Refuse query parameters the route does not take (422 naming them and what it takes): a misspelt
    ``?storyline=`` must not answer as if no filter had been given."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    allowed = _KNOWN.get(id(route))
    if allowed is None:
        allowed = _KNOWN[id(route)] = frozenset(_query_names(dependant))
    unknown = [name for name in dict.fromkeys(request.query_params) if name not in allowed]
    if unknown:
        takes = ", ".join(sorted(allowed)) or "none"
        raise RequestValidationError(
            [
                {
                    "loc": ("query", name),
                    "msg": f"unknown query parameter (this endpoint takes: {takes})",
                    "type": "extra_forbidden",
                }
                for name in unknown
            ]
        )


def _query_names(dependant: Any) -> Iterator[str]:
    """The query parameters a route takes, its dependencies' (``limit``, ``offset`` of a page) included."""
    for param in getattr(dependant, "query_params", ()):
        yield str(getattr(param, "alias", None) or param.name)
    for inner in getattr(dependant, "dependencies", ()):
        yield from _query_names(inner)


def json_query(value: str | None, name: str) -> Any:
    """A query parameter holding JSON (``filters``): the decoded value, or a 422 naming the parameter."""
    import json

    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError as error:
        raise ValidationError(f"{name} is not JSON: {error}", field=name) from None


def id_list(values: Sequence[str] | None, name: str = "ids") -> list[int] | None:
    """Ids given as ``?ids=1,2`` or ``?ids=1&ids=2`` (or both): integers from 1, at most 1000."""
    if values is None:
        return None
    found: list[int] = []
    for value in values:
        for part in value.split(","):
            text = part.strip()
            if not text.isdigit() or not 1 <= int(text) < 2**63:
                raise ValidationError(
                    f"{name} must be ids (integers from 1) separated by commas, got {part!r}", field=name
                )
            found.append(int(text))
    if not found or len(found) > 1000:
        raise ValidationError(f"{name} must name 1 to 1000 ids", field=name)
    return found


# --- errors -------------------------------------------------------------------------------


def error_body(status: int, kind: str, message: str, **extra: Any) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": kind, "message": message, **extra}, status_code=status, headers=headers)


def narrative_error(request: Request, error: Exception) -> JSONResponse:
    """NotFound → 404, ValidationError → 422 (with the field, and a ``detail`` entry as request checking gives
    one per problem), InvalidTransition → 409, the rest → 400."""
    if isinstance(error, NotFound):
        return error_body(404, "not_found", str(error))
    if isinstance(error, ValidationError):
        fields = [error.field] if error.field else []
        name = error.field or ""
        where = (
            "path"
            if name in request.path_params
            else "query"
            if name in request.query_params or request.method in ("GET", "DELETE", "HEAD")
            else "body"
        )
        detail = [{"field": name, "in": where, "message": str(error)}]
        return error_body(422, "validation_error", str(error), field=error.field, fields=fields, detail=detail)
    if isinstance(error, ConversationAlreadyActive):
        return error_body(409, "conversation_already_active", str(error))
    if isinstance(error, InvalidTransition):
        return error_body(409, "invalid_transition", str(error))
    return error_body(400, "bad_request", str(error))


def request_error(request: Request, error: Exception) -> JSONResponse:
    """Pydantic/FastAPI input errors as 422 naming each offending field (malformed JSON and the wrong
    content type said as such)."""
    assert isinstance(error, RequestValidationError)
    said = body_problem(request, error.errors())
    if said is not None:
        return said
    details = []
    for item in error.errors():
        location = [str(part) for part in item.get("loc", ())]
        where = location[0] if location else ""
        name = ".".join(location[1:]) or where
        details.append({"field": name, "in": where, "message": str(item.get("msg", ""))})
    fields = list(dict.fromkeys(d["field"] for d in details))
    message = "; ".join(f"{d['field']}: {d['message']}" for d in details) or "invalid request"
    return error_body(
        422, "validation_error", message, field=fields[0] if fields else None, fields=fields, detail=details
    )


JSON_TYPES = ("application/json", "+json")


def body_problem(request: Request, errors: Sequence[Any]) -> JSONResponse | None:
    """A body that is not JSON at all: 'not valid JSON (where)', or 'send Content-Type: application/json'."""
    for item in errors:
        if item.get("type") == "json_invalid":
            reason = str((item.get("ctx") or {}).get("error", "")).strip()
            where = [part for part in item.get("loc", ())[1:] if isinstance(part, int)]
            said = ": " + reason if reason else ""
            said += f" at character {where[0]}" if where else ""
            return error_body(422, "invalid_json", "the request body is not valid JSON" + said, field="body")
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body_errors = [item for item in errors if tuple(item.get("loc", ()))[:1] == ("body",)]
    if body_errors and not content_type.endswith(JSON_TYPES):
        got = f"got {content_type!r}" if content_type else "it was missing"
        return error_body(
            415,
            "unsupported_media_type",
            f"send the body as JSON with 'Content-Type: application/json' ({got})",
            field="body",
        )
    return None


def http_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, StarletteHTTPException)
    kinds = {401: "unauthorized", 404: "not_found", 405: "method_not_allowed", 413: "too_large", 501: "not_implemented"}
    if error.status_code == 405 and (allow := _allowed(request)):  # which methods the path takes, said and in Allow
        said = f"{request.method} is not allowed on {request.url.path}; it takes {allow}"
        reply = error_body(405, "method_not_allowed", said)
        reply.headers["Allow"] = allow
        return reply
    return error_body(error.status_code, kinds.get(error.status_code, "http_error"), str(error.detail))


def _allowed(request: Request) -> str:
    """The methods the request's path takes (``GET, POST, PATCH, DELETE``), from the OpenAPI paths it matches."""
    path = request.url.path
    methods: list[str] = []
    for template, operations in request.app.openapi().get("paths", {}).items():
        if re.fullmatch(re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)), path):
            methods += [m.upper() for m in operations if m.upper() not in methods]
    return ", ".join(methods)


def unauthorized(_request: Request, error: Exception) -> JSONResponse:
    return error_body(401, "unauthorized", str(error))


HANDLERS: dict[type[Exception], Callable[[Request, Exception], JSONResponse]] = {
    NarrativeError: narrative_error,
    RequestValidationError: request_error,
    StarletteHTTPException: http_error,
    Unauthorized: unauthorized,
}
