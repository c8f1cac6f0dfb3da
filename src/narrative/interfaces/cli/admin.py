"""User sovereignty from the shell: ``export``, ``import`` and ``delete``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from narrative.interfaces.cli.common import Context, cli, json_option, pass_ctx
from narrative.interfaces.cli.progress import progress
from narrative.interfaces.cli.text import counted


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
    output.write_text(text, encoding="utf-8")
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
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    if fmt == "narrative" or (fmt == "auto" and _is_export(text)):
        with progress("import", enabled=not ctx.as_json) as report_progress:  # drawn only when vectors are re-made
            result = ctx.memory.import_data(text, progress=report_progress)
        rows = sum(result["rows"].values())
        ctx.emit(result, f"imported {rows} rows for {result['user']} (exported as {result['exported_user']})")
        return
    with progress("import", enabled=not ctx.as_json) as report_progress:
        summary = ctx.memory.import_chat(text, fmt, progress=report_progress)
    skipped = f", {summary['skipped']} skipped" if summary["skipped"] else ""
    what = "a JSONL log" if summary["format"] == "jsonl" else f"a {summary['format']} export"
    ctx.emit(
        summary,
        f"imported {counted(summary['conversations'], 'conversation')} ({counted(summary['messages'], 'message')}"
        f"{skipped}) from {what}: {counted(summary['memories'], 'memory', 'memories')} for {ctx.memory.user}",
    )


def _is_export(text: str) -> bool:
    """A narrative export names its format in its first lines."""
    return text.lstrip().startswith("{") and '"format": "narrative-export"' in text[:4000]


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
