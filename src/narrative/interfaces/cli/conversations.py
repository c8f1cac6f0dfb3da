"""``narrative init`` and ``narrative conversation …``: the lifecycle from the shell."""

from __future__ import annotations

import click

from narrative.interfaces.cli.common import Context, cli, json_option, pass_ctx
from narrative.model import Conversation


def _line(c: Conversation) -> str:
    paused = " (paused)" if c.is_paused else ""
    title = f" {c.title!r}" if c.title else ""
    started = f"{c.started_at:%Y-%m-%d %H:%M}"
    return f"#{c.id}{title} {c.status.value}{paused} · {c.message_count} messages · started {started}"


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
    ctx.emit(c, lambda: f"started {_line(c)}")


@conversation.command("status", help="Show the active conversation and recent ones.")
@click.option("--limit", default=10, show_default=True, help="How many recent conversations.")
@json_option
@pass_ctx
def conversation_status(ctx: Context, limit: int) -> None:
    mem = ctx.memory
    active = mem.active_conversation()
    recent = mem.list_conversations(limit=limit)

    def text() -> str:
        head = f"active: {_line(active)}" if active else "no active conversation"
        return "\n".join([head, *("  " + _line(c) for c in recent)])

    ctx.emit({"active": active, "recent": recent}, text)


@conversation.command("close", help="Close the active conversation: active → ready_to_close.")
@click.option("--id", "conversation_id", type=int, default=None, help="Conversation id (default: active).")
@json_option
@pass_ctx
def conversation_close(ctx: Context, conversation_id: int | None) -> None:
    result = ctx.memory.close_conversation(conversation_id)
    ctx.emit(result, lambda: f"ready to close: {result}")


@conversation.command("resume", help="Cancel a closure: ready_to_close → active.")
@click.option("--id", "conversation_id", type=int, default=None, help="Conversation id (default: latest).")
@json_option
@pass_ctx
def conversation_resume(ctx: Context, conversation_id: int | None) -> None:
    c = ctx.memory.resume_conversation(conversation_id)
    ctx.emit(c, lambda: f"resumed {_line(c)}")


@conversation.command("pause", help="Pause the active conversation (silences idle invitations).")
@json_option
@pass_ctx
def conversation_pause(ctx: Context) -> None:
    c = ctx.memory.pause_conversation()
    ctx.emit(c, lambda: f"paused {_line(c)}")


@conversation.command("unpause", help="Unpause the active conversation.")
@json_option
@pass_ctx
def conversation_unpause(ctx: Context) -> None:
    c = ctx.memory.unpause_conversation()
    ctx.emit(c, lambda: f"unpaused {_line(c)}")


@conversation.command("show", help="Print a conversation's transcript.")
@click.argument("conversation_id", type=int)
@json_option
@pass_ctx
def conversation_show(ctx: Context, conversation_id: int) -> None:
    mem = ctx.memory
    c = mem.get_conversation(conversation_id)
    messages = mem.messages(conversation_id)

    def text() -> str:
        lines = [_line(c)]
        lines += [f"  [{m.position}] {m.speaker or m.role.value}: {m.content}" for m in messages]
        return "\n".join(lines)

    ctx.emit({"conversation": c, "messages": messages}, text)
