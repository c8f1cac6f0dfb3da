"""User sovereignty from the shell: ``export``, ``import`` and ``delete``."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import BinaryIO

import click

from narrative.errors import NotFound, ValidationError
from narrative.interfaces.cli.common import Context, cli, json_option, pass_ctx
from narrative.interfaces.cli.progress import progress
from narrative.validate import MAX_DOCUMENT


@cli.command(help="Export everything of the user: json (lossless, re-importable) or markdown (readable).")
@click.option(
    "--format", "fmt", type=click.Choice(["json", "markdown"]), default="json", show_default=True, help="Output format."
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write to this file instead of standard output.",
)
@json_option
@pass_ctx
def export(ctx: Context, fmt: str, output: Path | None) -> None:
    text = ctx.reading.export(fmt)
    if output is None:
        click.echo(text, nl=False)
        return
    with os.fdopen(os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as file:
        file.write(text)  # a new export file is readable by its owner only, as the database is
    ctx.emit({"file": str(output), "format": fmt, "bytes": len(text.encode("utf-8"))}, f"exported {fmt} to {output}")


@cli.command(
    "import", help="Restore a JSON export into an empty user (fresh ids, every row checked); '-' reads standard input."
)
@click.argument("source", type=click.Path(dir_okay=False, allow_dash=True))
@json_option
@pass_ctx
def import_(ctx: Context, source: str) -> None:
    text = read_export(source)
    with progress("import", enabled=not ctx.as_json) as report_progress:  # drawn only when vectors are re-made
        result = ctx.memory.import_data(text, progress=report_progress)
    rows = sum(result["rows"].values())
    ctx.emit(result, f"imported {rows} rows for {result['user']} (exported as {result['exported_user']})")


#: What ``import`` reads at most (the validation layer's limit for an export, in bytes); read in chunks.
MAX_EXPORT_BYTES = MAX_DOCUMENT
CHUNK = 1 << 20


def read_export(source: str) -> str:
    """The text of an export file (or standard input for ``-``), refused early and by name when it cannot be one:
    missing, a folder, unreadable, binary (a NUL byte, or not starting with ``{``), not UTF-8, or larger than
    :data:`MAX_EXPORT_BYTES` (it is read in chunks and never past that, so ``/dev/zero`` is refused at once)."""
    if source == "-":
        return _read_bounded(sys.stdin.buffer, "standard input")
    path = Path(source)
    if not path.exists():
        raise NotFound(f"no file at {source} (give the path of a JSON export made by `narrative export`)")
    if path.is_dir():
        raise ValidationError(f"{source} is a folder, not an export file", field="source")
    try:
        with path.open("rb") as file:
            return _read_bounded(file, source)
    except OSError as error:
        raise ValidationError(f"cannot read {source}: {error.strerror or error}", field="source") from None


def _read_bounded(stream: BinaryIO, name: str) -> str:
    chunks: list[bytes] = []
    size = 0
    while chunk := stream.read(CHUNK):
        if not chunks and not chunk.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
            raise ValidationError(f"{name} is not a JSON export (an export starts with '{{')", field="source")
        if b"\0" in chunk:
            raise ValidationError(f"{name} is binary, not a JSON export (it holds NUL bytes)", field="source")
        size += len(chunk)
        if size > MAX_EXPORT_BYTES:
            raise ValidationError(f"{name} is larger than {MAX_EXPORT_BYTES:,} bytes: not an export", field="source")
        chunks.append(chunk)
    if not chunks:
        raise ValidationError(f"{name} is empty, not a JSON export", field="source")
    try:
        return b"".join(chunks).decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValidationError(f"{name} is not UTF-8 text (byte {error.start})", field="source") from None


@cli.group(help="Delete a memory, a conversation, a storyline or a whole user; nothing is left behind.")
def delete() -> None:
    pass


def _confirmed(yes: bool, what: str) -> None:
    if not yes:
        click.confirm(f"Delete {what}? This cannot be undone", abort=True)


_YES = click.option("--yes", is_flag=True, help="Do not ask for confirmation.")


@delete.command("memory", help="Delete one memory (its entities, changes, vector and index entries).")
@click.argument("memory_id", type=int)
@_YES
@json_option
@pass_ctx
def delete_memory(ctx: Context, memory_id: int, yes: bool) -> None:
    _confirmed(yes, f"memory #{memory_id}")
    result = ctx.reading.delete_memory(memory_id)
    ctx.emit(result, f"deleted memory #{memory_id}: {result}")


@delete.command("conversation", help="Delete a conversation and everything that came only from it.")
@click.argument("conversation_id", type=int)
@_YES
@json_option
@pass_ctx
def delete_conversation(ctx: Context, conversation_id: int, yes: bool) -> None:
    _confirmed(yes, f"conversation #{conversation_id} and what came only from it")
    result = ctx.reading.delete_conversation(conversation_id)
    ctx.emit(result, f"deleted conversation #{conversation_id}: {result}")


@delete.command("storyline", help="Delete a storyline; its memories move to Your Story unless --with-memories.")
@click.argument("storyline_id", type=int)
@click.option("--with-memories", is_flag=True, help="Delete its memories, links, entities and messages too.")
@_YES
@json_option
@pass_ctx
def delete_storyline(ctx: Context, storyline_id: int, with_memories: bool, yes: bool) -> None:
    _confirmed(yes, f"storyline #{storyline_id}" + (" with its memories" if with_memories else ""))
    result = ctx.reading.delete_storyline(storyline_id, move_to_your_story=not with_memories)
    ctx.emit(result, f"deleted storyline #{storyline_id}: {result}")


@delete.command("user", help="Delete a user and every row they own.")
@click.argument("user_id")
@_YES
@json_option
@pass_ctx
def delete_user(ctx: Context, user_id: str, yes: bool) -> None:
    _confirmed(yes, f"user {user_id!r} and all their memory")
    result = ctx.existing(user=False).delete_user(user_id)
    ctx.emit(result, f"deleted user {user_id}: {result['deleted']}")
