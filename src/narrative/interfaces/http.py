"""The HTTP API (FastAPI) and the memory review page, served by ``narrative serve``.

* ``/api/v1/...`` — REST resources; every request carries an API key
  (``Authorization: Bearer <key>`` or ``X-API-Key``) and is scoped to its user.
  Another user's ids answer 404, exactly like ids that do not exist.
* ``/`` and ``/static/...`` — the review page (no key needed to load the page
  itself; its script sends the key on every API call).
* ``/openapi.json`` and ``/docs`` — the generated description; ``/docs`` is Swagger UI served from the
  installed ``swagger-ui-bundle-v2`` package (nothing loads from the network), and is off without it.
* ``/health`` — liveness and the database, no key needed.

One :class:`narrative.Memory` serves every user.  Endpoints are plain ``def``
functions, so FastAPI runs them in its thread pool; requests that change
something are serialised by one lock (SQLite has one writer anyway), reads run
side by side.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from importlib import resources
from string import Template
from typing import Any

import anyio
from fastapi import Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from narrative import __version__
from narrative.engine import Memory
from narrative.engine.keys import KEY_PREFIX
from narrative.interfaces import http_agenda, http_conversations, http_memories, http_read
from narrative.interfaces.http_common import HANDLERS, error_body, known_query
from narrative.interfaces.http_schemas import ERRORS, Health

MAX_BODY = 8 * 1024 * 1024  # bytes (a message holds up to 5,000,000 characters); larger bodies are answered 413
DRAIN_LIMIT = 8 * MAX_BODY  # an oversize body is read (and dropped) up to this, so the client sees the 413
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
WEB_PACKAGE = "narrative.interfaces.web"
STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class BodyLimit:
    """ASGI middleware: 413 for request bodies over ``max_bytes``; one writer at a time.

    The body is read up front (it is small by construction) and replayed to the
    application, so chunked uploads are measured as well as declared ones.
    """

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.write_lock = anyio.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        body, too_large = await self._read(receive, declared)
        if body is None:  # the client went away before sending its whole request
            return
        if too_large:
            await _too_large(send, self.max_bytes)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        if scope["method"] in SAFE_METHODS:
            await self.app(scope, replay, send)
            return
        async with self.write_lock:
            await self.app(scope, replay, send)

    async def _read(self, receive: Receive, declared: int | None) -> tuple[bytes | None, bool]:
        """(the body, whether it is over the limit); body None when the client disconnected."""
        if declared is not None and declared > DRAIN_LIMIT:
            return b"", True
        chunks: list[bytes] = []
        size = 0
        too_large = declared is not None and declared > self.max_bytes
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None, too_large
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                too_large = True
            if not too_large:
                chunks.append(chunk)
            if not message.get("more_body", False) or size > DRAIN_LIMIT:
                break
        return b"".join(chunks), too_large


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _too_large(send: Send, max_bytes: int) -> None:
    body = b'{"error":"too_large","message":"request body is larger than ' + str(max_bytes).encode() + b' bytes"}'
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


# --- the page -------------------------------------------------------------------------------------


def _web_file(*parts: str) -> str:
    return resources.files(WEB_PACKAGE).joinpath(*parts).read_text("utf-8")


def _add_page(app: FastAPI) -> None:
    page = Template(_web_file("templates", "index.html")).safe_substitute(version=__version__)
    static = {name: _web_file("static", name) for name in ("app.js", "memory.js", "review.js", "views.js", "style.css")}

    @app.get("/", include_in_schema=False)
    def index() -> HTMLResponse:
        return HTMLResponse(page, headers=PAGE_HEADERS)

    @app.get("/static/{name}", include_in_schema=False)
    def static_file(name: str) -> Response:
        text = static.get(name)
        if text is None:
            return Response(status_code=404)
        suffix = name[name.rfind(".") :]
        return Response(
            text,
            media_type=STATIC_TYPES.get(suffix, "text/plain"),
            headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"},
        )


# --- /docs from the package, /health -------------------------------------------------------------

DOCS_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".png": "image/png"}
DOCS_FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png")


def swagger_ui_dir() -> Any:
    """The folder of Swagger UI's files in the installed bundle, or None when it is not installed."""
    try:
        import swagger_ui_bundle
    except ImportError:
        return None
    from pathlib import Path

    folder = Path(swagger_ui_bundle.swagger_ui_path)
    return folder if all((folder / name).is_file() for name in DOCS_FILES) else None


def _add_docs(app: FastAPI, folder: Any) -> None:
    assets = {name: (folder / name).read_bytes() for name in DOCS_FILES}

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="narrative API",
            swagger_js_url="/docs/assets/swagger-ui-bundle.js",
            swagger_css_url="/docs/assets/swagger-ui.css",
            swagger_favicon_url="/docs/assets/favicon-32x32.png",
        )

    @app.get("/docs/assets/{name}", include_in_schema=False)
    def docs_asset(name: str) -> Response:
        data = assets.get(name)
        if data is None:
            return error_body(404, "not_found", f"no docs asset {name!r}")
        return Response(
            data, media_type=DOCS_TYPES[name[name.rfind(".") :]], headers={"Cache-Control": "public, max-age=86400"}
        )


def _add_health(app: FastAPI, memory: Memory) -> None:
    @app.get(
        "/health",
        tags=["health"],
        response_model=Health,
        responses={503: ERRORS[400] | {"description": "The database does not answer."}},
        summary="Liveness: the server and its database answer",
    )
    def health() -> JSONResponse:
        try:
            memory.user_for_api_key(KEY_PREFIX + "health-check")  # one indexed read
        except Exception as error:
            return error_body(503, "unavailable", f"the database does not answer: {type(error).__name__}")
        return JSONResponse({"status": "ok", "version": __version__})


# --- the application ------------------------------------------------------------------------------


def operation_id(route: APIRoute) -> str:
    """A route's operationId: its function's name (``list_memories``, ``search``), what a generated client's
    methods are called; ``tests/test_http_contract.py`` checks they are unique."""
    return route.name


def create_app(
    memory: Memory, *, max_body: int = MAX_BODY, web: bool = True, cors_origins: Sequence[str] = ()
) -> FastAPI:
    """The FastAPI application over one engine (shared by every request and every user).

    ``cors_origins``: the web origins whose pages may call the API from a browser (CORS); none by default, so a
    page of another site cannot read the answers.  ``*`` allows every origin (keys still decide who is served).
    """
    app = FastAPI(
        title="narrative",
        version=__version__,
        description=(
            "Narrative memory for LLM agents: conversations, memories, storylines, the narrative chain, "
            "and the why behind every recall. Authenticate with `Authorization: Bearer <key>` "
            "(keys from `narrative keys create --user U`)."
        ),
        openapi_url="/openapi.json",
        docs_url=None,
        redoc_url=None,
        generate_unique_id_function=operation_id,
    )
    app.state.memory = memory
    folder = swagger_ui_dir()
    if folder is not None:
        _add_docs(app, folder)
    _add_health(app, memory)
    for kind, handler in HANDLERS.items():
        app.add_exception_handler(kind, handler)
    for module in (http_conversations, http_memories, http_read, http_agenda):
        app.include_router(module.router, dependencies=[Depends(known_query)])
    if web:
        _add_page(app)
    app.add_middleware(BodyLimit, max_bytes=max_body)
    origins = [o.strip().rstrip("/") for o in cors_origins if o.strip()]
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "POST", "PATCH", "DELETE"],
            allow_headers=["Authorization", "X-API-Key", "Content-Type"],
            max_age=600,
        )
    return app


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def worker_app() -> FastAPI:
    """One worker of ``narrative serve --workers N``: its own engine over the shared database (from the env)."""
    import os

    embedder = os.environ.get("NARRATIVE_SERVE_EMBEDDER")
    overrides: dict[str, Any] = {"embedder": embedder} if embedder else {}
    memory = Memory(os.environ["NARRATIVE_DB"], **overrides)
    origins = os.environ.get("NARRATIVE_CORS_ORIGINS", "").split(",")
    return create_app(memory, max_body=int(os.environ.get("NARRATIVE_SERVE_MAX_BODY", MAX_BODY)), cors_origins=origins)


def run_workers(
    db: str,
    workers: int,
    host: str,
    port: int,
    max_body: int,
    embedder: str | None = None,
    cors_origins: Sequence[str] = (),
) -> None:
    """Serve with ``workers`` uvicorn processes; each builds its app with :func:`worker_app`."""
    import os

    import uvicorn

    os.environ["NARRATIVE_CORS_ORIGINS"] = ",".join(cors_origins)
    os.environ["NARRATIVE_DB"] = db
    os.environ["NARRATIVE_SERVE_MAX_BODY"] = str(max_body)
    if embedder:
        os.environ["NARRATIVE_SERVE_EMBEDDER"] = embedder
    uvicorn.run(
        "narrative.interfaces.http:worker_app",
        factory=True,
        workers=workers,
        host=host,
        port=port,
        log_level="warning",
        server_header=False,
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD,
    )


#: The largest request line and headers the server reads (uvicorn's default, 16 KiB, cut a GET or DELETE whose
#: ``filters`` query names many values: the connection was reset instead of answered).
MAX_REQUEST_HEAD = 1 << 20


def run(app: Any, host: str = "127.0.0.1", port: int = 8765, log_level: str = "info", sock: Any = None) -> None:
    """Serve ``app`` with uvicorn until interrupted (on ``sock``, a socket already bound, when given)."""
    import uvicorn

    if sock is None:
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level=log_level,
            server_header=False,
            h11_max_incomplete_event_size=MAX_REQUEST_HEAD,
        )
        return
    config = uvicorn.Config(
        app, log_level=log_level, server_header=False, h11_max_incomplete_event_size=MAX_REQUEST_HEAD
    )
    uvicorn.Server(config).run(sockets=[sock])
