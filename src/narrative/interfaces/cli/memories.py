"""``narrative add``, ``search``, ``memories``, ``memory history``, ``narratives``: memories and the chain."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import click

from narrative.interfaces.cli.common import Context, cli, json_option, pass_ctx
from narrative.interfaces.cli.text import clip, indented
from narrative.interfaces.serialize import hit_dict
from narrative.model import EventKind, MemoryEvent, MemoryItem, Narrative

if TYPE_CHECKING:
    from narrative.read.listing import Listed
    from narrative.read.search import SearchHit
    from narrative.write.turn import TurnResult


def _memory_line(m: MemoryItem, indent: str = "") -> str:
    """A memory in full; the lines of a multi-line exchange stay indented under its header."""
    head = f"{indent}#{m.id} [{m.stream.value}] [{'★' * m.importance}] "
    return head + indented(m.content, " " * len(head))


def listed_line(item: Listed) -> str:
    """A memory of a list as it shows there: only the turns no memory above showed, and what it folds in."""
    m = item.memory
    head = f"#{m.id} [{m.stream.value}] [{'★' * m.importance}] "
    also = f"\n{' ' * len(head)}(also #{', #'.join(map(str, item.also))})" if item.also else ""
    return head + indented(item.text, " " * len(head)) + also


def _hit_line(hit: SearchHit) -> str:
    """A search hit as it shows: its memory's header, then only what no better hit showed."""
    m = hit.memory
    head = f"#{m.id} [{m.stream.value}] [{'★' * m.importance}] "
    return head + indented(hit.text or m.content, " " * len(head))


def _turn_text(result: TurnResult) -> str:
    m = result.message
    lines = [
        f"message #{m.id} (position {m.position}, conversation #{m.conversation_id}) → storyline"
        f" #{result.storyline.id} {result.storyline.name} [{result.decision}]"
    ]
    lines += [f"  memory #{x.id} [{x.stream.value}] {clip(x.content, 100)}" for x in result.memories]
    lines += [f"  entity {e.entity_type.value}: {clip(e.name, 100)}" for e in result.entities]
    if result.narrative is not None:
        lines.append(f"  narrative #{result.narrative.id}: {clip(result.narrative.summary, 100)}")
    lines += [f"  sealed narrative #{n.id}: {clip(n.summary, 100)}" for n in result.sealed]
    lines += [f"  reflection #{x.id}: {clip(x.content, 100)}" for x in result.reflections]
    for item in result.settled.superseded:
        memories = ", ".join(f"#{i}" for i in item.memories)
        also = f" (memory {memories})" if memories else ""
        lines.append(f"  supersedes message #{item.passage.message_id}{also}: {item.reason}")
    lines += [f"  conflicts with memory #{c.other_memory_id}: {c.reason}" for c in result.settled.conflicts]
    return "\n".join(lines)


def _tree(start: int, links: list[Narrative]) -> str:
    """Links after ``start`` as a tree: each one indented under the link it continues."""
    level = {start: 0}
    lines = []
    for n in links:
        level[n.id] = level.get(n.previous_narrative_id or start, 0) + 1
        lines.append("  " * (level[n.id] - 1) + _narrative_line(n))
    return "\n".join(lines)


def _narrative_line(n: Narrative) -> str:
    back = f" ← #{n.previous_narrative_id}" if n.previous_narrative_id else " (start of thread)"
    seal = "sealed" if n.sealed else "running"
    ids = ", ".join(str(i) for i in n.memory_ids)
    return f"#{n.id} [{n.topic or '-'}] {n.summary}  (memories {ids or '-'}; {seal}){back}"


@cli.group(help="Add a message or a memory.")
def add() -> None:
    pass


@add.command("message", help="Add one message to the active conversation (runs the write path).")
@click.argument("text")
@click.option("--role", default="user", type=click.Choice(["user", "assistant", "system", "tool"]), show_default=True)
@click.option("--speaker", default="", help="Who said it (a name).")
@click.option("--raw", is_flag=True, help="Store the message only, without routing or extraction.")
@json_option
@pass_ctx
def add_message(ctx: Context, text: str, role: str, speaker: str, raw: bool) -> None:
    mem = ctx.memory
    remember = getattr(mem, "remember", None)
    if raw or remember is None:
        message = mem.add_message(text, role, speaker=speaker)
        ctx.emit(message, lambda: f"message #{message.id} at position {message.position}")
        return
    result = remember(text, role, speaker=speaker)
    ctx.emit(result, lambda: _turn_text(result))


@add.command("memory", help="Add one memory directly (an agent's note).")
@click.argument("text")
@click.option(
    "--stream",
    default="fact",
    show_default=True,
    type=click.Choice(["conversation", "research", "decision", "reflection", "narrative", "fact"]),
)
@click.option(
    "--source",
    default="agent",
    show_default=True,
    type=click.Choice(["conversation", "agent", "extraction", "narrative", "reflection"]),
)
@click.option("--importance", default=2, type=int, show_default=True, help="1 (trivial) to 5 (life-changing).")
@click.option("--emotion", "emotions", multiple=True, help="An emotion (repeatable).")
@click.option("--message", "message_ids", multiple=True, type=int, help="Source message id (repeatable).")
@click.option("--storyline", "storyline_id", type=int, default=None, help="Storyline id.")
@json_option
@pass_ctx
def add_memory(
    ctx: Context,
    text: str,
    stream: str,
    source: str,
    importance: int,
    emotions: tuple[str, ...],
    message_ids: tuple[int, ...],
    storyline_id: int | None,
) -> None:
    m = ctx.memory.add_memory(
        text,
        stream=stream,
        source=source,
        importance=importance,
        emotions=emotions,
        message_ids=message_ids,
        storyline_id=storyline_id,
    )
    ctx.emit(m, lambda: f"stored {_memory_line(m)}")


@cli.command(help="Search memories (hybrid BM25 + vectors); every hit says why it was returned.")
@click.argument("query")
@click.option("-k", "k", default=10, show_default=True, help="How many results.")
@click.option("--mode", default="hybrid", type=click.Choice(["hybrid", "keyword", "vector"]), show_default=True)
@click.option("--stream", "streams", multiple=True, help="Only these streams (repeatable).")
@click.option("--storyline", "storyline_id", type=int, default=None, help="Only this storyline.")
@click.option("--conversation", "conversation_id", type=int, default=None, help="Only this conversation.")
@click.option(
    "--min-score",
    "min_score",
    type=click.FloatRange(0, 1),
    default=0.0,
    show_default=True,
    help="Drop hits scoring below this.",
)
@click.option(
    "--include-superseded", is_flag=True, help="Also what a later statement superseded (left out by default)."
)
@click.option(
    "--as-of",
    "as_of",
    type=click.DateTime(formats=["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"]),
    default=None,
    help="What was current at this time (UTC), e.g. 2026-03-02.",
)
@json_option
@pass_ctx
def search(
    ctx: Context,
    query: str,
    k: int,
    mode: str,
    streams: tuple[str, ...],
    storyline_id: int | None,
    conversation_id: int | None,
    min_score: float,
    include_superseded: bool,
    as_of: datetime | None,
) -> None:
    hits = ctx.reading.search(
        query,
        k,
        mode=mode,
        streams=streams or None,
        storyline_id=storyline_id,
        conversation_id=conversation_id,
        min_score=min_score,
        include_superseded=include_superseded,
        as_of=as_of,
    )
    rows = [{"id": row.pop("memory_id"), **row} for row in map(hit_dict, hits)]  # one id key: "id"

    def text() -> str:
        if not hits:
            return "no memories match"
        return "\n".join(f"{_hit_line(h)}\n    why: {h.why()['summary']} → {h.score:.3f}" for h in hits)

    ctx.emit(rows, text)


@cli.command(help="List memories, newest first; each fact once (a memory an earlier one shows is folded in).")
@click.option("--stream", default=None, help="Only this stream.")
@click.option("--storyline", "storyline_id", type=int, default=None, help="Only this storyline.")
@click.option("--limit", default=20, show_default=True, help="How many.")
@json_option
@pass_ctx
def memories(ctx: Context, stream: str | None, storyline_id: int | None, limit: int) -> None:
    listed = ctx.reading.list_memories(stream=stream, storyline_id=storyline_id, limit=limit)
    found = ctx.reading.one_fact_once([m.id for m in listed])
    shown = [item for item in found if item.folded_into is None]
    ctx.emit(found, lambda: "\n".join(listed_line(item) for item in shown) or "no memories yet")


@cli.group(help="One memory by its id.")
def memory() -> None:
    pass


def _event_line(e: MemoryEvent) -> str:
    """One event: when, what, and the text before → after (a tombstone says its text is gone)."""
    head = f"{e.created_at:%Y-%m-%d %H:%M}  {e.kind.value:<10} "
    if e.kind is EventKind.DELETED:
        with_ = e.detail.get("with", "memory")
        return head + ("" if with_ == "memory" else f"with its {with_}; ") + "nothing of its text is kept"
    if not (e.old_text or e.new_text):
        text = "(its text went with the delete)"
    elif e.old_text and e.old_text != e.new_text:
        text = f'"{clip(e.old_text, 100)}" → "{clip(e.new_text, 100)}"'
    else:
        text = f'"{clip(e.new_text, 100)}"'
    extra = ", ".join(f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in e.detail.items())
    return head + text + (f"  ({extra})" if extra else "")


@memory.command("history", help="Every change to a memory, oldest first; a deleted one shows its tombstone.")
@click.argument("memory_id", type=int)
@json_option
@pass_ctx
def memory_history(ctx: Context, memory_id: int) -> None:
    events = ctx.reading.history(memory_id)
    deleted = bool(events) and events[-1].kind is EventKind.DELETED

    def text() -> str:
        state = "deleted" if deleted else f"{len(events)} event{'s' if len(events) != 1 else ''}"
        return "\n".join([f"memory #{memory_id} ({state})", *(f"  {_event_line(e)}" for e in events)])

    ctx.emit({"memory_id": memory_id, "deleted": deleted, "events": events}, text)


@memory.command("restore", help="Make a memory a later statement superseded current again (undo a correction).")
@click.argument("memory_id", type=int)
@json_option
@pass_ctx
def memory_restore(ctx: Context, memory_id: int) -> None:
    restored = ctx.existing(user=True).restore_memory(memory_id)
    ctx.emit(restored, lambda: f"restored {_memory_line(restored)}")


@cli.command(help="The narrative chain: latest link (default), --id N, --search WORDS, --walk N, --forward N.")
@click.option("--id", "narrative_id", type=int, default=None, help="One link by id.")
@click.option("--search", "query", default=None, help="Keyword search over summaries and topics.")
@click.option("--walk", "walk_id", type=int, default=None, help="Walk backward from this link.")
@click.option(
    "--forward",
    "forward_id",
    type=int,
    default=None,
    help="Every link that continues this one, on every branch (a tree).",
)
@click.option(
    "--depth",
    type=int,
    default=None,
    help="How far to walk: links back, steps forward, or links listed with --all (default: all).",
)
@click.option("--all", "show_all", is_flag=True, help="List every link, newest first.")
@json_option
@pass_ctx
def narratives(
    ctx: Context,
    narrative_id: int | None,
    query: str | None,
    walk_id: int | None,
    forward_id: int | None,
    depth: int | None,
    show_all: bool,
) -> None:
    mem = ctx.reading
    if forward_id is not None:
        after = mem.walk_forward(forward_id, depth)
        ctx.emit(after, lambda: _tree(forward_id, after) or f"nothing continues #{forward_id} yet")
        return
    if walk_id is not None:
        found = mem.walk_back(walk_id, depth)
    elif show_all:
        found = mem.list_narratives(limit=depth or 100)
    else:
        found = mem.narrative_search(narrative_id, query)
    ctx.emit(found, lambda: "\n".join(_narrative_line(n) for n in found) or "no narratives yet")


@cli.command(help="Show a memory's recall chain: its narrative, sibling memories and earlier links.")
@click.argument("memory_id", type=int)
@click.option("--depth", default=3, show_default=True, help="How many earlier links.")
@json_option
@pass_ctx
def chain(ctx: Context, memory_id: int, depth: int) -> None:
    found = ctx.reading.recall_chain(memory_id, depth)

    def text() -> str:
        lines = [_memory_line(found.memory)]
        if found.narrative is None:
            return lines[0] + "\n  (stored before any narrative)"
        lines.append(f"  narrative {_narrative_line(found.narrative)}")
        lines += [_memory_line(m, "    sibling ") for m in found.siblings]
        lines += [f"  earlier {_narrative_line(n)}" for n in found.earlier]
        return "\n".join(lines)

    ctx.emit(found, text)
