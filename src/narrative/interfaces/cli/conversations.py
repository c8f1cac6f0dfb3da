"""``narrative init`` and ``narrative conversation …``: the lifecycle from the shell."""

from __future__ import annotations

import click

from narrative.interfaces.cli.common import Context, cli, json_option, pass_ctx
from narrative.interfaces.cli.text import counted, indented
from narrative.model import Conversation, Message


def message_line(m: Message) -> str:
    """One message of a transcript; its further lines stay indented under it."""
    head = f"  [{m.position}] {m.speaker or m.role.value}: "
    return head + indented(m.content, " " * len(head))


def conversation_line(c: Conversation) -> str:
    paused = " (paused)" if c.is_paused else ""
    title = f" {c.title!r}" if c.title else ""
    started = f"{c.started_at:%Y-%m-%d %H:%M}"
    return f"#{c.id}{title} {c.status.value}{paused} · {counted(c.message_count, 'message')} · started {started}"


@cli.command(help="Create the database (and the user with Your Story) if missing.")
@json_option
@pass_ctx
def init(ctx: Context) -> None:
    info = ctx.memory.describe()
    ctx.emit(info, f"ready: {info['db']} (user {info['user']}, migrations {', '.join(info['migrations'])})")


@cli.group(help="Start, pause, close and resume conversations (one active at a time).")
def conversation() -> None:
    pass


@conversation.command("start", help="Start a conversation (refused while one is active).")
@click.option("--title", default="", help="Optional title.")
@json_option
@pass_ctx
def conversation_start(ctx: Context, title: str) -> None:
    c = ctx.memory.start_conversation(title)
    ctx.emit(c, lambda: f"started {conversation_line(c)}")


@conversation.command("status", help="Show the active conversation and the other recent ones.")
@click.option("--limit", default=10, show_default=True, type=click.IntRange(min=1), help="How many recent ones.")
@json_option
@pass_ctx
def conversation_status(ctx: Context, limit: int) -> None:
    mem = ctx.reading
    active = mem.active_conversation()
    recent = mem.list_conversations(limit=limit)
    others = [c for c in recent if active is None or c.id != active.id]  # the active one is shown once, first

    def text() -> str:
        head = f"active: {conversation_line(active)}" if active else "no active conversation"
        return "\n".join([head, *(["recent:"] if others else []), *("  " + conversation_line(c) for c in others)])

    ctx.emit({"active": active, "recent": others}, text)


@conversation.command(
    "close", help="Close the active conversation: active → ready_to_close, with a preview (same as `narrative close`)."
)
@click.option("--id", "conversation_id", type=int, default=None, help="Conversation id (default: active).")
@json_option
@pass_ctx
def conversation_close(ctx: Context, conversation_id: int | None) -> None:
    from narrative.interfaces.cli.closing import ACTIONS

    result = ctx.memory.close_conversation(conversation_id)
    ctx.emit(result, lambda: result.text(ACTIONS))


@conversation.command(
    "resume", help="Cancel a closure: ready_to_close → active (asks first when you edited the preview)."
)
@click.option(
    "--id",
    "conversation_id",
    type=int,
    default=None,
    help="Conversation id (default: the newest one waiting for review).",
)
@click.option("--yes", is_flag=True, help="Discard your edits of the preview without asking.")
@json_option
@pass_ctx
def conversation_resume(ctx: Context, conversation_id: int | None, yes: bool) -> None:
    from narrative.interfaces.cli.closing import confirm_discard

    confirm_discard(ctx, conversation_id, yes)
    c = ctx.memory.resume_conversation(conversation_id)
    ctx.emit(c, lambda: f"resumed {conversation_line(c)}")


@conversation.command("pause", help="Pause the active conversation (silences idle invitations).")
@json_option
@pass_ctx
def conversation_pause(ctx: Context) -> None:
    c = ctx.memory.pause_conversation()
    ctx.emit(c, lambda: f"paused {conversation_line(c)}")


@conversation.command("unpause", help="Unpause the active conversation.")
@json_option
@pass_ctx
def conversation_unpause(ctx: Context) -> None:
    c = ctx.memory.unpause_conversation()
    ctx.emit(c, lambda: f"unpaused {conversation_line(c)}")


@conversation.command("show", help="Print a conversation's transcript.")
@click.argument("conversation_id", type=int)
@json_option
@pass_ctx
def conversation_show(ctx: Context, conversation_id: int) -> None:
    mem = ctx.reading
    c = mem.get_conversation(conversation_id)
    messages = mem.messages(conversation_id)

    def text() -> str:
        lines = [conversation_line(c)]
        lines += [message_line(m) for m in messages]
        return "\n".join(lines)

    ctx.emit({"conversation": c, "messages": messages}, text)
