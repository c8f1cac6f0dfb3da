"""``narrative storylines`` (list, show, create, rename, archive) and ``narrative conversations`` (list):
the ids other commands take (``--storyline``, ``redirect``, ``split --part``, ``--id``)."""

from __future__ import annotations

import click

from narrative.interfaces.cli.common import Context, cli, json_option, pass_ctx
from narrative.interfaces.cli.conversations import conversation_line
from narrative.interfaces.cli.text import clip, counted
from narrative.model import ConversationStatus, Storyline


def storyline_line(s: Storyline) -> str:
    archived = ", archived" if s.status.value == "archived" else ""
    about = f" — {', '.join(s.keywords[:5])}" if s.keywords else ""
    return f"#{s.id} {s.name} ({s.kind.value}{archived}; {counted(s.interaction_count, 'message')}){about}"


# --- storylines ----------------------------------------------------------------------------------


@cli.group(
    invoke_without_command=True,
    help="Storylines and their ids (the topic containers): list (the default), show, create, rename, archive.",
)
@json_option
@click.pass_context
def storylines(click_ctx: click.Context) -> None:
    if click_ctx.invoked_subcommand is None:
        click_ctx.invoke(storylines_list)


@storylines.command("list", help="Every storyline, most recently active first (--all adds archived ones).")
@click.option("--all", "include_archived", is_flag=True, help="Include archived storylines.")
@json_option
@pass_ctx
def storylines_list(ctx: Context, include_archived: bool = False) -> None:
    found = ctx.reading.list_storylines(include_archived=include_archived)
    ctx.emit(found, lambda: "\n".join(storyline_line(s) for s in found) or "no storylines yet")


@storylines.command("show", help="One storyline: what it is about, its summary and its latest memories.")
@click.argument("storyline_id", type=int)
@click.option("--limit", default=5, show_default=True, help="How many of its latest memories.")
@json_option
@pass_ctx
def storylines_show(ctx: Context, storyline_id: int, limit: int) -> None:
    mem = ctx.reading
    storyline = mem.get_storyline(storyline_id)
    latest = mem.list_memories(storyline_id=storyline_id, limit=limit)
    shown = [item for item in mem.one_fact_once([m.id for m in latest]) if item.folded_into is None]  # each fact once

    def text() -> str:
        lines = [storyline_line(storyline)]
        if storyline.description:
            lines.append(f"  {storyline.description}")
        if storyline.summary:
            lines += ["  summary:", *(f"    {line}" for line in storyline.summary.splitlines() if line.strip())]
        lines += [f"  memory #{i.memory.id} [{i.memory.stream.value}] {clip(i.text, 100)}" for i in shown]
        return "\n".join(lines)

    ctx.emit({"storyline": storyline, "memories": latest}, text)


@storylines.command("create", help="Make a storyline of your own (messages and memories can then go there).")
@click.argument("name")
@click.option("--description", default="", help="What it is about.")
@click.option("--keyword", "keywords", multiple=True, help="A keyword that routes messages here (repeatable).")
@json_option
@pass_ctx
def storylines_create(ctx: Context, name: str, description: str, keywords: tuple[str, ...]) -> None:
    made = ctx.memory.create_storyline(name, description=description, keywords=keywords)
    ctx.emit(made, lambda: f"created {storyline_line(made)}")


@storylines.command("rename", help="Rename a storyline (Your Story keeps its name).")
@click.argument("storyline_id", type=int)
@click.argument("name")
@json_option
@pass_ctx
def storylines_rename(ctx: Context, storyline_id: int, name: str) -> None:
    renamed = ctx.reading.rename_storyline(storyline_id, name)
    ctx.emit(renamed, lambda: f"renamed {storyline_line(renamed)}")


@storylines.command("archive", help="Archive a storyline: it keeps its memories but takes no new messages.")
@click.argument("storyline_id", type=int)
@json_option
@pass_ctx
def storylines_archive(ctx: Context, storyline_id: int) -> None:
    archived = ctx.reading.archive_storyline(storyline_id)
    ctx.emit(archived, lambda: f"archived {storyline_line(archived)}")


# --- conversations -------------------------------------------------------------------------------


@cli.group(invoke_without_command=True, help="Conversations and their ids: list (the default).")
@json_option
@click.pass_context
def conversations(click_ctx: click.Context) -> None:
    if click_ctx.invoked_subcommand is None:
        click_ctx.invoke(conversations_list)


@conversations.command("list", help="Conversations, newest first (`conversation show ID` prints one).")
@click.option(
    "--status",
    type=click.Choice([s.value for s in ConversationStatus]),
    default=None,
    help="Only conversations in this state.",
)
@click.option("--limit", default=20, show_default=True, help="How many.")
@json_option
@pass_ctx
def conversations_list(ctx: Context, status: str | None = None, limit: int = 20) -> None:
    found = ctx.reading.list_conversations(status, limit=limit)
    ctx.emit(found, lambda: "\n".join(conversation_line(c) for c in found) or "no conversations yet")
