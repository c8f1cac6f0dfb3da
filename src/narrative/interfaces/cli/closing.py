"""The close path from the shell: close → preview → confirm | edit | redirect | split | resume,
and what is open: ``greet``, ``threads``, ``resolve``, ``idle``, ``archive``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from narrative.errors import ValidationError
from narrative.interfaces.cli.common import Context, cli, json_option, pass_ctx
from narrative.interfaces.cli.conversations import message_line
from narrative.interfaces.cli.text import indented
from narrative.model import Entity
from narrative.write.preview import Preview

_ID = click.option(
    "--id",
    "conversation_id",
    type=int,
    default=None,
    help="Conversation id (default: the newest one waiting for review).",
)
_ACTIVE_ID = click.option(
    "--id", "conversation_id", type=int, default=None, help="Conversation id (default: the active one)."
)
_YES = click.option("--yes", is_flag=True, help="Discard your edits of the preview without asking.")

#: what to run next, in place of the seed's "[confirm] [edit] [redirect] [split] [resume]"
ACTIONS = [
    "Next (add --id N for another conversation waiting for review):",
    "  narrative confirm                                store it as shown",
    "  narrative edit --narrative TEXT --remove KEY     reword it, or drop an extracted item by its key (e1 …)",
    "  narrative redirect STORYLINE_ID                  file it under another storyline (`narrative storylines`)",
    '  narrative split --part "ID:text" --part "ID:text"   several memories, one per storyline',
    "  narrative resume                                 back to the conversation; nothing is stored",
]


def _shown(preview: Preview) -> Callable[[], str]:
    return lambda: preview.text(ACTIONS)


def confirm_discard(ctx: Context, conversation_id: int | None, yes: bool) -> None:
    """Before a resume: list the preview edits it would discard, and ask (``--yes`` skips the question)."""
    edits = ctx.memory.preview_edits(conversation_id)
    if not edits or yes:
        return
    click.echo("Resuming discards your edits of the preview: " + "; ".join(edits) + ".", err=True)
    click.confirm("Discard them and resume?", abort=True, err=True)


def _entity_line(e: Entity) -> str:
    state = "open" if e.is_active else f"resolved {e.resolved_at:%Y-%m-%d}" if e.resolved_at else "resolved"
    source = f", conversation #{e.conversation_id}" if e.conversation_id is not None else ""
    return f"#{e.id} [{e.entity_type.value}] {e.name} ({state}, since {e.created_at:%Y-%m-%d}{source})"


@cli.command("close", help="Close the active conversation and show what would be remembered (nothing final yet).")
@_ACTIVE_ID
@json_option
@pass_ctx
def close_(ctx: Context, conversation_id: int | None) -> None:
    preview = ctx.memory.close_conversation(conversation_id)
    ctx.emit(preview, _shown(preview))


@cli.command(help="Show the preview of the conversation waiting for review.")
@_ID
@json_option
@pass_ctx
def preview(ctx: Context, conversation_id: int | None) -> None:
    shown = ctx.reading.get_memory_preview(conversation_id)
    ctx.emit(shown, _shown(shown))


@cli.command(help="Confirm the preview: store the memory, apply the changes, archive the conversation.")
@_ID
@click.option("--to", "storyline_id", type=int, default=None, help="Storyline to file it under (default: as shown).")
@click.option("--narrative", default=None, help="Your own wording of the memory (the proposal is kept).")
@json_option
@pass_ctx
def confirm(ctx: Context, conversation_id: int | None, storyline_id: int | None, narrative: str | None) -> None:
    result = ctx.memory.confirm_memory(
        conversation_id, destination_storyline_id=storyline_id, edited_narrative=narrative
    )
    ctx.emit(result, result.text)


@cli.command(
    help="Edit the preview: reword the memory and/or remove over-extracted items by key (e3); removing "
    "an item rewrites the proposed memory and its changes (your own wording is kept)."
)
@_ID
@click.option("--narrative", default=None, help="The new wording.")
@click.option("--remove", "remove", multiple=True, help="Key of an entity to drop (repeatable).")
@json_option
@pass_ctx
def edit(ctx: Context, conversation_id: int | None, narrative: str | None, remove: tuple[str, ...]) -> None:
    shown = ctx.memory.edit_preview(conversation_id, narrative, remove_entities=remove)
    ctx.emit(shown, _shown(shown))


@cli.command(help="File the memory under another storyline, by id (the preview shows the suggested one's).")
@click.argument("storyline_id", type=int)
@_ID
@json_option
@pass_ctx
def redirect(ctx: Context, storyline_id: int, conversation_id: int | None) -> None:
    shown = ctx.memory.redirect_preview(conversation_id, storyline_id)
    ctx.emit(shown, _shown(shown))


def _parse_part(raw: str) -> dict[str, Any]:
    head, sep, text = raw.partition(":")
    if not sep or not text.strip():
        raise ValidationError(f"--part must be STORYLINE_ID:text (empty id = Your Story), got {raw!r}", field="part")
    head = head.strip()
    if head and not head.isdigit():
        raise ValidationError(f"--part storyline id must be a number, got {head!r}", field="part")
    return {"narrative": text.strip(), "storyline_id": int(head) if head else None}


@cli.command(help='Confirm as several memories: --part "STORYLINE_ID:text" (repeat; empty id = Your Story).')
@_ID
@click.option("--part", "parts", multiple=True, required=True, help='"STORYLINE_ID:text" (at least two).')
@json_option
@pass_ctx
def split(ctx: Context, conversation_id: int | None, parts: tuple[str, ...]) -> None:
    if len(parts) < 2:
        raise ValidationError("a split needs at least two --part (use `narrative confirm` for one)", field="part")
    result = ctx.memory.split_memory(conversation_id, [_parse_part(p) for p in parts])
    ctx.emit(result, result.text)


@cli.command(
    help="Cancel the closure: back to the conversation, nothing stored (asks first when you edited the preview)."
)
@_ID
@_YES
@json_option
@pass_ctx
def resume(ctx: Context, conversation_id: int | None, yes: bool) -> None:
    confirm_discard(ctx, conversation_id, yes)
    c = ctx.memory.resume_conversation(conversation_id)
    ctx.emit(c, lambda: f"resumed conversation #{c.id}: {c.status.value}")


@cli.command(help="The startup greeting: the active conversation to resume, or what is open, waiting and stale.")
@json_option
@pass_ctx
def greet(ctx: Context) -> None:
    hello = ctx.reading.greet()
    ctx.emit(hello, hello.text)


@cli.command(help="Open threads (questions, tasks, waiting-ons), or only the stale ones.")
@click.option("--type", "entity_type", default=None, help="Only this entity type (task, waiting_on, …).")
@click.option("--storyline", "storyline_id", type=int, default=None, help="Only this storyline.")
@click.option("--stale", is_flag=True, help="Only items open longer than the stale threshold.")
@click.option("--days", type=int, default=None, help="Stale threshold in days (default: settings).")
@json_option
@pass_ctx
def threads(ctx: Context, entity_type: str | None, storyline_id: int | None, stale: bool, days: int | None) -> None:
    mem = ctx.reading
    items = mem.stale_threads(days) if stale else mem.open_threads(entity_type, storyline_id)
    ctx.emit(items, lambda: "\n".join(_entity_line(e) for e in items) or "nothing open")


@cli.command("resolve", help="Mark an open thread resolved by hand.")
@click.argument("entity_id", type=int)
@click.option("--by", "memory_id", type=int, default=None, help="The memory that settled it.")
@json_option
@pass_ctx
def resolve_(ctx: Context, entity_id: int, memory_id: int | None) -> None:
    entity = ctx.memory.resolve_thread(entity_id, by_memory_id=memory_id)
    ctx.emit(entity, lambda: _entity_line(entity))


@cli.command(help="Gentle idle awareness: an invitation if the active conversation has been quiet a while.")
@json_option
@pass_ctx
def idle(ctx: Context) -> None:
    said = ctx.reading.idle_check()
    ctx.emit({"invitation": said}, said or "nothing to say")


@cli.command(help="An archived conversation: transcript, the memories made from it, entities and changes.")
@click.argument("conversation_id", type=int)
@json_option
@pass_ctx
def archive(ctx: Context, conversation_id: int) -> None:
    found = ctx.reading.get_conversation_archive(conversation_id)

    def text() -> str:
        c = found["conversation"]
        lines = [f"conversation #{c.id} {c.title!r}: {c.status.value}, {c.message_count} messages"]
        lines += [message_line(m) for m in found["messages"]]
        lines += [
            f"memory #{m.id} (storyline {m.storyline_id}): {indented(m.content, '  ')}" for m in found["memories"]
        ]
        lines += [f"  {_entity_line(e)}" for e in found["entities"]]
        return "\n".join(lines)

    ctx.emit(found, text)
