"""``narrative mcp`` (and the other long-running servers): serve one memory to clients.

Like every command, they accept ``--db`` and ``--user`` after the command name, so an MCP
client's config can say ``narrative mcp --db PATH --user NAME``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any, TypeVar

import click

from narrative.interfaces.cli.common import Context, cli, json_option, pass_ctx

F = TypeVar("F", bound=Callable[..., Any])


def target_options(f: F) -> F:
    """Kept for the commands that use it: every command now takes ``--db``/``--user`` after its name
    (``json_option`` adds them), so this adds nothing."""
    return f


# --- MCP ---------------------------------------------------------------------------------------


@cli.command("mcp", help="Serve this memory to MCP clients (Claude Desktop, agents) over stdio or streamable HTTP.")
@target_options
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio for a client that starts the server; http for a long-running server.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP: interface to listen on.")
@click.option("--port", default=8766, show_default=True, type=int, help="HTTP: port to listen on.")
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="HTTP: stateless worker processes over one database (above 1 needs --db postgresql://...).",
)
@json_option
@pass_ctx
def mcp_command(ctx: Context, transport: str, host: str, port: int, workers: int) -> None:
    try:
        from narrative.interfaces.mcp import HTTP_PATH, serve
    except ModuleNotFoundError as error:
        if error.name is None or not error.name.startswith(("mcp", "pydantic")):
            raise
        raise click.ClickException("the MCP server needs the 'mcp' package: pip install 'narrative[server]'") from error
    if workers > 1 and transport != "http":
        raise click.ClickException("--workers needs --transport http")
    memory = ctx.memory
    where = f"{memory.settings.db} (user {memory.user})"
    if transport == "http":
        if not _loopback(host):
            click.echo(
                f"warning: listening on {host}, not loopback, and MCP over HTTP has no authentication: anyone who"
                f" can reach port {port} can read and change this memory. Keep --host 127.0.0.1, or put an"
                " authenticating proxy with TLS in front of it.",
                err=True,
            )
        click.echo(f"narrative MCP server for {where} on http://{host}:{port}{HTTP_PATH}", err=True)
    if workers > 1:
        if not memory.settings.db.startswith(("postgresql://", "postgres://")):
            raise click.ClickException("--workers above 1 needs a shared database: --db postgresql://...")
        from narrative.interfaces.mcp import run_workers

        db, user = memory.settings.db, memory.user
        memory.close()
        run_workers(db, user, workers, host=host, port=port, embedder=ctx.embedder)
        return
    serve(memory, transport="http" if transport == "http" else "stdio", host=host, port=port)


def _loopback(host: str) -> bool:
    """Whether ``host`` is a loopback interface (``localhost``, 127.0.0.0/8, ``::1``)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# --- HTTP API and review page (narrative serve, narrative keys) -------------------------------------


@cli.command("serve", help="Serve the HTTP API (/api/v1, /openapi.json) and the memory review page (/).")
@target_options
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Interface to listen on (loopback by default; anything else is reachable by others).",
)
@click.option("--port", default=8765, show_default=True, type=int, help="Port to listen on.")
@click.option(
    "--open-user",
    default=None,
    metavar="USER",
    help="Mint an API key for USER and print a page URL that carries it (in the #fragment).",
)
@click.option(
    "--max-body",
    default=8 * 1024 * 1024,
    show_default=True,
    type=int,
    help="Largest request body in bytes (413 beyond).",
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Worker processes (stateless; more than one needs a postgresql:// --db).",
)
@click.option(
    "--cors-origin",
    "cors_origins",
    multiple=True,
    metavar="ORIGIN",
    help="A web origin whose pages may call the API from a browser, e.g. https://app.example (repeatable; '*' for"
    " any) [env NARRATIVE_CORS_ORIGINS, comma-separated]. None by default: CORS is off.",
)
@json_option
@pass_ctx
def serve_command(
    ctx: Context,
    host: str,
    port: int,
    open_user: str | None,
    max_body: int,
    workers: int,
    cors_origins: tuple[str, ...],
) -> None:
    try:
        from narrative.interfaces.http import create_app, is_loopback, run
    except ModuleNotFoundError as error:
        if error.name is None or not error.name.startswith(("fastapi", "starlette", "pydantic", "anyio")):
            raise
        message = "the HTTP server needs fastapi and uvicorn: pip install 'narrative[server]'"
        raise click.ClickException(message) from error
    origins = list(cors_origins) or [o for o in os.environ.get("NARRATIVE_CORS_ORIGINS", "").split(",") if o.strip()]
    memory = ctx.serving  # every user's: no note about the default user
    listening = _listen(host, port) if workers == 1 else None  # a taken port fails before anything is printed
    if workers > 1:
        _listen(host, port).close()
    if not is_loopback(host):
        click.echo(
            f"warning: listening on {host}, not loopback: anyone who can reach this port can try keys. "
            "Put TLS in front of it.",
            err=True,
        )
    shown = f"[{host}]" if ":" in host else host
    base = f"http://{shown}:{port}/"
    info: dict[str, Any] = {"url": base, "db": memory.settings.db, "cors_origins": origins}
    if open_user is not None:
        key = memory.create_api_key(label="serve --open-user", user=open_user)
        info["page"] = f"{base}#key={key}"
    ctx.emit(
        info,
        lambda: "\n".join(
            [f"narrative HTTP API for {memory.settings.db} on {base} (OpenAPI: {base}openapi.json)"]
            + ([f"review page for {open_user}: {info['page']}"] if open_user else [])
            + ([f"CORS: pages of {', '.join(origins)} may call the API"] if origins else [])
        ),
    )
    if listening is not None:
        run(create_app(memory, max_body=max_body, cors_origins=origins), sock=listening)
        return
    if memory.store.backend != "postgres":
        raise click.ClickException("--workers above 1 needs a shared database: --db postgresql://...")
    from narrative.interfaces.http import run_workers

    memory.close()  # each worker opens its own pool
    run_workers(
        memory.settings.db,
        workers,
        host=host,
        port=port,
        max_body=max_body,
        embedder=ctx.embedder,
        cors_origins=origins,
    )


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (the server takes it over); a clear error when the port is taken."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((host.strip("[]"), port))
    except OSError as error:
        listening.close()
        raise click.ClickException(
            f"cannot listen on {host}:{port}: {error.strerror or error} (another server there? choose --port)"
        ) from None
    return listening


@cli.group("keys", help="API keys for the HTTP API (one user per key; stored hashed).")
def keys() -> None:
    pass


@keys.command("create", help="Create an API key for --user and print it (it is shown only this once).")
@target_options
@click.option("--label", default="", help="A note to tell keys apart.")
@json_option
@pass_ctx
def keys_create(ctx: Context, label: str) -> None:
    memory = ctx.memory
    key = memory.create_api_key(label=label)
    if not ctx.as_json:  # the key alone on standard output (KEY=$(narrative keys create)); what it is on stderr
        click.echo(
            f"API key for user {memory.user!r}{f' ({label})' if label else ''}: shown only this once (only its"
            " SHA-256 is stored); send it as 'Authorization: Bearer <key>'",
            err=True,
        )
    ctx.emit({"user": memory.user, "key": key, "label": label}, key)


@keys.command("list", help="List --user's API keys: id, label, creation time, fingerprint (never the key).")
@target_options
@json_option
@pass_ctx
def keys_list(ctx: Context) -> None:
    memory = ctx.reading  # listing creates nothing
    found = memory.list_api_keys()
    ctx.emit(
        {"user": memory.user, "keys": found},
        lambda: (
            "\n".join(f"{k['id']}  {k['created_at']:%Y-%m-%d %H:%M}  {k['fingerprint']}  {k['label']}" for k in found)
            or "no keys"
        ),
    )


@keys.command("revoke", help="Revoke one of --user's API keys by its id (see `keys list`); the memory stays.")
@target_options
@click.argument("key_id", type=int)
@json_option
@pass_ctx
def keys_revoke(ctx: Context, key_id: int) -> None:
    result = ctx.reading.revoke_api_key(key_id)
    ctx.emit(result, f"revoked key {key_id} of {result['user']}")
