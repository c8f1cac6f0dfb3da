"""The MCP server: one user's narrative memory as tools for any MCP client, over stdio or streamable HTTP.

Built on the official ``mcp`` SDK (2.x, ``MCPServer``).  The tools themselves live in
:mod:`narrative.interfaces.mcp_tools`; this module wraps each one so that

* each tool's input schema is closed (``additionalProperties: false``), accepts the seeds' names as
  aliases, and a bad call is answered with one plain sentence (:mod:`narrative.interfaces.mcp_args`),
* each tool's output schema is typed (:mod:`narrative.interfaces.mcp_outputs`) and its results are checked
  against it; results go out as structure plus compact JSON text,
* resources (Your Story, the storylines, one storyline, one conversation) and prompts (the greeting, the
  close review) live in :mod:`narrative.interfaces.mcp_context`,
* calls are serialised (one :class:`narrative.Memory`, one database connection, many worker threads),
* over stdio every line gets an answer: lone surrogates are marked, and a line that is not a JSON-RPC message
  is answered with a JSON-RPC error (:mod:`narrative.interfaces.mcp_stdio`),
* a :class:`~narrative.errors.NarrativeError` comes back as a tool error result (``isError``) carrying the
  engine's message as it is (``NotFound: memory 999 not found``, without the SDK's "Error executing tool"),
  and any other exception as a tool error too, logged with its traceback here — the server never goes
  down because of one bad call.

>>> from narrative import Memory                                   # doctest: +SKIP
>>> serve(Memory("narrative.db", user="alice"), transport="stdio")  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from narrative.errors import NarrativeError, ValidationError
from narrative.interfaces.mcp_agenda import AgendaTools
from narrative.interfaces.mcp_args import Arguments, compact
from narrative.interfaces.mcp_context import add_prompts, add_resources
from narrative.interfaces.mcp_core import CoreTools
from narrative.interfaces.mcp_outputs import OUTPUTS
from narrative.interfaces.mcp_review import ReviewTools
from narrative.interfaces.mcp_stdio import mark_surrogates, serve_stdio
from narrative.interfaces.mcp_tools import NarrativeTools, ToolSpec, tool_specs

if TYPE_CHECKING:
    from narrative.engine import Memory

log = logging.getLogger("narrative.mcp")

Transport = Literal["stdio", "http"]
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8766
HTTP_PATH = "/mcp"

INSTRUCTIONS = """\
narrative is this user's long-term memory: conversations, the memories made from them, storylines (topics) and
a narrative chain of one-sentence links that says where each line of reasoning stands.
- Session start: call greet() or narrative_search() with no arguments to see where you left off.
- Every turn: remember(text, role) stores it and builds memory from it; add_memory(content) notes a plain fact.
- Before answering: recall(query) or get_context(query) for relevant memories; every hit says why.
- Reasoning milestones: narrative_update(summary, memory_ids, previous_narrative_id, topic).
- When the user is done: close_conversation() → show the preview → edit_memory_preview() / redirect_memory() /
  split_memory() as the user asks → confirm_memory() (or resume_conversation()).
- Open threads: get_open_threads(); resolve_thread(entity_id) when one is done. forget_memory(memory_id) on request.
- One memory: get_memory, list_memories(filters), update_memory, delete_memories, get_memory_history.
- "Why did you think that?": explain_classification(use_id); get_memory_influence_chain(memory_id).
- What a topic carries: bind_to_storyline(storyline_id, kind, name) for the tool sets, jobs and goals you use there;
  get_stale_goals() to remind the user of goals gone quiet; get_decisions_to_review() → review_decision().
- How decisions and sources connect: get_decision_chain(memory_id); open_linked(memory_id); get_popular_sources().
Errors come back as tool errors with the reason; fix the arguments and call again."""


TOOLSETS = (NarrativeTools, CoreTools, ReviewTools, AgendaTools)


def build_tools(memory: Memory, lock: threading.Lock | None = None) -> tuple[list[Tool], dict[str, Arguments]]:
    """Every tool over ``memory`` (serialised by one lock), with its strict argument check and typed output."""
    lock = lock or threading.Lock()
    tools: list[Tool] = []
    checks: dict[str, Arguments] = {}
    for toolset in TOOLSETS:
        instance = toolset(memory)
        for spec in tool_specs(toolset):
            made = Tool.from_function(
                _typed(_guarded(getattr(instance, spec.name), spec.name, lock), spec.name),
                name=spec.name,
                description=spec.description,
                annotations=_annotations(spec),
                structured_output=True,
            )
            checks[spec.name] = Arguments(made, spec.aliases)
            tools.append(made.model_copy(update={"parameters": checks[spec.name].schema()}))
    return tools, checks


def build_server(memory: Memory, *, name: str = "narrative") -> MCPServer:
    """An ``MCPServer`` exposing every tool of :data:`TOOLSETS` over ``memory``, its resources and its prompts."""
    lock = threading.Lock()
    tools, checks = build_tools(memory, lock)
    server: MCPServer = MCPServer(
        name,
        title="narrative memory",
        description="Offline-first narrative memory: storylines, the narrative chain, and why every recall.",
        instructions=INSTRUCTIONS,
        version=_version(),
        log_level="WARNING",
        tools=tools,
    )
    add_resources(server, memory, lock)
    add_prompts(server, memory, lock)
    call_tool = server.call_tool

    async def checked_call(name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """The SDK's call_tool after our own argument check (unknown tools are the SDK's to refuse); a bad call is
        a tool error in one sentence."""
        check = checks.get(name)
        if check is None:
            return await call_tool(name, arguments, context)
        try:
            checked = check.check(arguments)
        except ToolError as error:
            return failed(str(error))
        return await call_tool(name, checked, context)

    setattr(server, "call_tool", checked_call)  # noqa: B010 - the instance's entry point, wrapped
    return server


def serve(
    memory: Memory, *, transport: Transport = "stdio", host: str = DEFAULT_HOST, port: int = DEFAULT_PORT
) -> None:
    """Run the server until the client disconnects (stdio) or the process is stopped (http)."""
    server = build_server(memory)
    if transport == "stdio":
        import anyio

        anyio.run(serve_stdio, server)  # every line gets an answer (lone surrogates, malformed requests)
    elif transport == "http":
        server.run("streamable-http", host=host, port=port, streamable_http_path=HTTP_PATH)
    else:
        raise ValidationError(f"transport must be stdio or http, got {transport!r}", field="transport")


def worker_app() -> Any:
    """One worker of ``narrative mcp --transport http --workers N``: its own engine over the shared database
    (``NARRATIVE_DB``, a ``postgresql://`` URL), serving streamable HTTP statelessly, so that any worker can
    answer any request of any client session."""
    import os

    from narrative.engine import Memory as Engine

    overrides: dict[str, Any] = {}
    if os.environ.get("NARRATIVE_MCP_EMBEDDER"):
        overrides["embedder"] = os.environ["NARRATIVE_MCP_EMBEDDER"]
    memory = Engine(os.environ["NARRATIVE_DB"], **overrides)
    return build_server(memory).streamable_http_app(streamable_http_path=HTTP_PATH, stateless_http=True)


def run_workers(db: str, user: str, workers: int, host: str, port: int, embedder: str | None = None) -> None:
    """Serve MCP over streamable HTTP with ``workers`` uvicorn processes (each builds :func:`worker_app`)."""
    import os

    import uvicorn

    os.environ["NARRATIVE_DB"] = db
    os.environ["NARRATIVE_USER"] = user
    if embedder:
        os.environ["NARRATIVE_MCP_EMBEDDER"] = embedder
    uvicorn.run(
        "narrative.interfaces.mcp:worker_app",
        factory=True,
        workers=workers,
        host=host,
        port=port,
        log_level="warning",
        server_header=False,
    )


def failed(message: str) -> CallToolResult:
    """A tool error result carrying ``message`` as it is (the SDK would prefix "Error executing tool …")."""
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def _guarded(method: Callable[..., dict[str, Any]], name: str, lock: threading.Lock) -> Callable[..., Any]:
    """One call at a time; a compact result; engine errors become tool errors with the engine's message."""

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> CallToolResult:
        with lock:
            try:
                return compact(method(*args, **kwargs))
            except NarrativeError as error:
                return failed(f"{type(error).__name__}: {error}")
            except ToolError as error:
                return failed(str(error))
            except Exception as error:
                log.exception("tool %s failed unexpectedly", name)
                return failed(
                    f"internal error ({type(error).__name__}); the server logged the details and keeps serving"
                )

    return call


def _typed(call: Callable[..., Any], name: str) -> Callable[..., Any]:
    """The tool's function with its output model as the return type: the SDK publishes the model's schema as
    the tool's ``outputSchema`` and checks each structured result against it."""
    signature = inspect.signature(call, eval_str=True)
    call.__signature__ = signature.replace(return_annotation=OUTPUTS[name])  # type: ignore[attr-defined]
    return call


def _annotations(spec: ToolSpec) -> ToolAnnotations:
    title = spec.name.replace("_", " ")
    if spec.read_only:
        return ToolAnnotations(title=title, read_only_hint=True, open_world_hint=False)
    return ToolAnnotations(title=title, read_only_hint=False, destructive_hint=spec.destructive, open_world_hint=False)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("narrative")
    except PackageNotFoundError:
        return "0"


__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "HTTP_PATH", "INSTRUCTIONS", "build_server", "mark_surrogates", "serve"]
