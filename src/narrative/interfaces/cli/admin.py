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
from narrative.interfaces.cli.text import counted, deleted_counts
from narrative.validate import MAX_DOCUMENT
from narrative.write.chat_log import parse_chat_log


@cli.command(
    help="Export everything of the user: json (lossless, re-importable) or markdown (readable); or the memories"
    " alone, one a line: jsonl or csv (docs/export-format.md)."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "markdown", "jsonl", "csv"]),
    default="json",
    show_default=True,
    help="Output format.",
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
    try:
        with os.fdopen(os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as file:
            file.write(text)  # a new export file is readable by its owner only, as the database is
    except OSError as error:  # the CLI says it plainly (a full disk: "No space left on device (notes.json)")
        raise OSError(error.errno, error.strerror, str(output)) from error
    ctx.emit({"file": str(output), "format": fmt, "bytes": len(text.encode("utf-8"))}, f"exported {fmt} to {output}")


IMPORT_FORMATS = ("auto", "narrative", "jsonl", "chatgpt", "claude")


@cli.command(
    "import",
    help="Import a file ('-' reads standard input): a narrative JSON export restores an empty user (fresh ids, every"
    " row checked); a chat log (JSONL of messages, ChatGPT's or Claude's conversations.json) is added to the"
    " user's memory, conversation by conversation, through the write path.  --format auto tells them apart.",
)
@click.argument("source", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(IMPORT_FORMATS),
    default="auto",
    show_default=True,
    help="What the file holds (docs/ingest.md).",
)
@json_option
@pass_ctx
def import_(ctx: Context, source: str, fmt: str) -> None:
    text = read_export(source, chat=fmt != "narrative")
    if fmt == "narrative" or (fmt == "auto" and _is_export(text)):
        with progress("import", enabled=not ctx.as_json) as report_progress:  # drawn only when vectors are re-made
            result = ctx.memory.import_data(text, progress=report_progress)
        rows = sum(result["rows"].values())
        ctx.emit(result, f"imported {rows} rows for {result['user']} (exported as {result['exported_user']})")
        return
    parse_chat_log(text, fmt)  # a log refused is refused before the database is opened: no file is made for it
    with progress("import", enabled=not ctx.as_json) as report_progress:
        summary = ctx.memory.import_chat(text, fmt, progress=report_progress)
    skipped = f", {summary['skipped']} skipped" if summary["skipped"] else ""
    already = summary.get("already_imported", 0)
    held = f"; {counted(already, 'conversation')} of it held already, left out" if already else ""
    what = "a JSONL log" if summary["format"] == "jsonl" else f"a {summary['format']} export"
    ctx.emit(
        summary,
        f"imported {counted(summary['conversations'], 'conversation')} ({counted(summary['messages'], 'message')}"
        f"{skipped}) from {what}: {counted(summary['memories'], 'memory', 'memories')} for {ctx.memory.user}{held}",
    )


def _is_export(text: str) -> bool:
    """A narrative export names its format in its first lines."""
    return text.lstrip().startswith("{") and '"format": "narrative-export"' in text[:4000]


#: What ``import`` reads at most (the validation layer's limit for an export, in bytes); read in chunks.
MAX_EXPORT_BYTES = MAX_DOCUMENT
CHUNK = 1 << 20


def read_export(source: str, *, chat: bool = False) -> str:
    """The text of an export file (or standard input for ``-``), refused early and by name when it cannot be one:
    missing, a folder, unreadable, binary (a NUL byte, or not starting with ``{``), not UTF-8, or larger than
    :data:`MAX_EXPORT_BYTES` (it is read in chunks and never past that, so ``/dev/zero`` is refused at once).
    ``chat``: a chat log may be read too (JSONL, or an export's JSON array: it may start with ``[``)."""
    if source == "-":
        return _read_bounded(sys.stdin.buffer, "standard input", chat)
    path = Path(source)
    if not path.exists():
        raise NotFound(
            f"no file at {source} (give the path of a JSON export made by `narrative export`, or a chat log)"
        )
    if path.is_dir():
        raise ValidationError(f"{source} is a folder, not an export file", field="source")
    try:
        with path.open("rb") as file:
            return _read_bounded(file, source, chat)
    except OSError as error:
        raise ValidationError(f"cannot read {source}: {error.strerror or error}", field="source") from None


def _read_bounded(stream: BinaryIO, name: str, chat: bool = False) -> str:
    chunks: list[bytes] = []
    size = 0
    starts = (b"{", b"[") if chat else (b"{",)
    while chunk := stream.read(CHUNK):
        if not chunks and not chunk.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(starts):
            said = (
                "a JSON export or a chat log (JSON or JSONL)" if chat else "a JSON export (an export starts with '{')"
            )
            raise ValidationError(f"{name} is not {said}", field="source")
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
    ctx.emit(result, f"deleted memory #{memory_id}: {deleted_counts(result)}")


@delete.command("conversation", help="Delete a conversation and everything that came only from it.")
@click.argument("conversation_id", type=int)
@_YES
@json_option
@pass_ctx
def delete_conversation(ctx: Context, conversation_id: int, yes: bool) -> None:
    _confirmed(yes, f"conversation #{conversation_id} and what came only from it")
    result = ctx.reading.delete_conversation(conversation_id)
    ctx.emit(result, f"deleted conversation #{conversation_id}: {deleted_counts(result)}")


@delete.command("storyline", help="Delete a storyline; its memories move to Your Story unless --with-memories.")
@click.argument("storyline_id", type=int)
@click.option(
    "--with-memories",
    is_flag=True,
    help="Delete its memories, links, entities and messages too, and the conversations (but the active one)"
    " left without a message.",
)
@_YES
@json_option
@pass_ctx
def delete_storyline(ctx: Context, storyline_id: int, with_memories: bool, yes: bool) -> None:
    _confirmed(yes, f"storyline #{storyline_id}" + (" with its memories" if with_memories else ""))
    result = ctx.reading.delete_storyline(storyline_id, move_to_your_story=not with_memories)
    ctx.emit(result, f"deleted storyline #{storyline_id}: {deleted_counts(result)}")


@delete.command("user", help="Delete a user and every row they own (USER_ID, else the user --user names).")
@click.argument("user_id", required=False)
@_YES
@json_option
@pass_ctx
def delete_user(ctx: Context, user_id: str | None, yes: bool) -> None:
    if user_id is None and ctx.user is None:
        raise click.UsageError("name the user to delete: `narrative delete user NAME` (or --user NAME)")
    if user_id is not None and ctx.user_given and user_id != ctx.user:
        raise click.UsageError(f"USER_ID {user_id!r} and --user {ctx.user!r} name different users: give one")
    who = user_id or str(ctx.user)
    _confirmed(yes, f"user {who!r} and all their memory")
    result = ctx.existing(user=False).delete_user(who)
    ctx.emit(result, f"deleted user {who}: {deleted_counts(result['deleted'])}")
