"""``narrative add``, ``search``, ``memories``, ``memory show|edit|delete|history|restore``, ``narratives``:
memories and the chain."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import TYPE_CHECKING

import click

from narrative.errors import ValidationError
from narrative.interfaces.cli.common import Context, cli, json_option, pass_ctx
from narrative.interfaces.cli.filtering import MOMENT, chosen, filter_options, metadata_option, metadata_pairs, utc
from narrative.interfaces.cli.text import clip, counted, deleted_counts, indented, verbatim
from narrative.interfaces.serialize import hit_dict, plain
from narrative.model import EventKind, MemoryEvent, MemoryItem, Narrative
from narrative.validate import MAX_MESSAGE

if TYPE_CHECKING:
    from narrative.read.listing import Listed
    from narrative.read.search import SearchHit
    from narrative.write.turn_types import TurnResult


def _memory_line(m: MemoryItem, indent: str = "") -> str:
    """A memory in full; the lines of a multi-line exchange stay indented under its header."""
    head = f"{indent}#{m.id} [{m.stream.value}] [{'★' * m.importance}] "
    return head + indented(m.content, " " * len(head))


def listed_line(item: Listed) -> str:
    """A memory of a list as it shows there (marked when a later memory superseded it): only the turns no memory
    above showed, and what it folds in."""
    m = item.memory
    head = f"#{m.id} [{m.stream.value}] [{'★' * m.importance}] " + _superseded_mark(m)
    also = f"\n{' ' * len(head)}(also #{', #'.join(map(str, item.also))})" if item.also else ""
    return head + indented(item.text, " " * len(head)) + also


def _hit_line(hit: SearchHit) -> str:
    """A search hit as it shows: its memory's header (marked when a later memory superseded it), then only what no
    better hit showed."""
    m = hit.memory
    head = f"#{m.id} [{m.stream.value}] [{'★' * m.importance}] " + _superseded_mark(m)
    return head + indented(hit.text or m.content, " " * len(head))


def _superseded_mark(m: MemoryItem) -> str:
    """``[superseded by #N] `` for a memory a later one superseded, else nothing."""
    if m.valid_to is None:
        return ""
    return f"[superseded{'' if m.superseded_by is None else f' by #{m.superseded_by}'}] "


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


@add.command(
    "message",
    help="Add one message to the active conversation (runs the write path).  TEXT '-' reads the message from"
    " standard input (a long message or a pasted document: an argument is limited by the shell).",
)
@click.argument("text")
@click.option("--role", default="user", type=click.Choice(["user", "assistant", "system", "tool"]), show_default=True)
@click.option("--speaker", default="", help="Who said it (a name).")
@click.option("--raw", is_flag=True, help="Store the message only, without routing or extraction.")
@json_option
@pass_ctx
def add_message(ctx: Context, text: str, role: str, speaker: str, raw: bool) -> None:
    text = _text_or_stdin(text)
    mem = ctx.memory
    remember = getattr(mem, "remember", None)
    if raw or remember is None:
        message = mem.add_message(text, role, speaker=speaker)
        ctx.emit(message, lambda: f"message #{message.id} at position {message.position}")
        return
    result = remember(text, role, speaker=speaker)
    ctx.emit(result, lambda: _turn_text(result))


def _text_or_stdin(text: str) -> str:
    """The argument, or with '-' what standard input holds (as ``import -`` reads it), never past one character
    over the longest message: the write path refuses a longer one by its limit, and ``/dev/zero`` ends at once."""
    if text != "-":
        return text
    try:
        return sys.stdin.read(MAX_MESSAGE + 1)
    except UnicodeDecodeError as error:
        raise ValidationError(f"standard input is not UTF-8 text ({error.reason})", field="text") from None


@add.command("memory", help="Add one memory directly (an agent's note).  TEXT '-' reads it from standard input.")
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
@metadata_option("One key of the memory's metadata, KEY=VALUE (repeatable; VALUE is JSON or text), or a JSON object.")
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
    metadata: tuple[str, ...],
) -> None:
    m = ctx.memory.add_memory(
        _text_or_stdin(text),
        stream=stream,
        source=source,
        importance=importance,
        emotions=emotions,
        message_ids=message_ids,
        storyline_id=storyline_id,
        metadata=metadata_pairs(metadata),
    )
    ctx.emit(m, lambda: f"stored {_memory_line(m)}")


@cli.command(
    help="Search memories (hybrid BM25 + vectors); every hit says why it was returned.  A read: nothing is"
    " recorded unless --record."
)
@click.argument("query")
@click.option(
    "-k", "--limit", "k", default=10, show_default=True, type=click.IntRange(1, 100), help="How many results."
)
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
    type=MOMENT,
    default=None,
    help="What was current at this time, e.g. 2026-03-02 (UTC unless it has an offset).",
)
@filter_options
@click.option(
    "--record/--no-record",
    default=False,
    show_default=True,
    help="Record this search as a use of memory (what `narrative uses` lists); a search is a read by default.",
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
    filter_json: str | None,
    metadata: tuple[str, ...],
    sources: tuple[str, ...],
    entity_types: tuple[str, ...],
    since: datetime | None,
    until: datetime | None,
    record: bool,
) -> None:
    hits = ctx.reading.search(
        query,
        k,
        mode=mode,
        streams=streams or None,
        storyline_id=storyline_id,
        conversation_id=conversation_id,
        sources=sources or None,
        entity_types=entity_types or None,
        since=utc(since),
        until=utc(until),
        min_score=min_score,
        include_superseded=include_superseded,
        as_of=as_of,
        filters=chosen(filter_json, metadata),
        record=record,
    )
    rows = [hit_dict(h) for h in hits]

    def text() -> str:
        if not hits:
            return "no memories match"
        return "\n".join(f"{_hit_line(h)}\n    why: {h.why()['summary']} → {h.score:.3f}" for h in hits)

    ctx.emit(rows, text)


@cli.command(help="List memories, newest first (--filter / --metadata choose which); each fact once.")
@click.option("--stream", default=None, help="Only this stream.")
@click.option("--storyline", "storyline_id", type=int, default=None, help="Only this storyline.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 10_000), help="How many.")
@click.option("--offset", default=0, show_default=True, type=click.IntRange(min=0), help="Skip this many first.")
@click.option("--current", is_flag=True, help="Leave out what a later statement superseded.")
@click.option("--filter", "filter_json", default=None, metavar="JSON", help="A filter in JSON (docs/http.md).")
@metadata_option("Only memories whose metadata KEY equals VALUE (repeatable).")
@json_option
@pass_ctx
def memories(
    ctx: Context,
    stream: str | None,
    storyline_id: int | None,
    limit: int,
    offset: int,
    current: bool,
    filter_json: str | None,
    metadata: tuple[str, ...],
) -> None:
    wanted = chosen(filter_json, metadata)
    listed = ctx.reading.list_memories(
        stream=stream, storyline_id=storyline_id, limit=limit, offset=offset, filters=wanted, current_only=current
    )
    found = ctx.reading.one_fact_once([m.id for m in listed])
    shown = [item for item in found if item.folded_into is None]
    narrowed = stream or storyline_id or wanted or current or offset

    def text() -> str:
        if shown:
            return "\n".join(listed_line(item) for item in shown)
        return "no memories match" if narrowed else "no memories yet"

    ctx.emit(found, text)


@cli.group(help="One memory by its id: show, edit, delete, history, restore.")
def memory() -> None:
    pass


def _details(m: MemoryItem, storyline: str | None, text: str) -> str:
    """A memory in full: its whole text (``text``: a long message whole, not the memory's excerpt of it, and its
    blank lines and indentation kept), then each field that says something."""
    head = f"#{m.id} [{m.stream.value}] [{'★' * m.importance}] "
    lines = [head + verbatim(text, " " * len(head))]
    when = m.event_at or m.created_at
    lines.append(
        f"  time: {when:%Y-%m-%d %H:%M}"
        + (f" (stored {m.created_at:%Y-%m-%d %H:%M})" if m.event_at and m.event_at != m.created_at else "")
    )
    lines.append(f"  source: {m.source.value}")
    if storyline is not None:
        lines.append(f"  storyline: #{m.storyline_id} {storyline}")
    if m.conversation_id is not None:
        lines.append(f"  conversation: #{m.conversation_id}")
    if m.message_ids:
        lines.append(f"  messages: {', '.join(f'#{i}' for i in m.message_ids)}")
    if m.emotions:
        lines.append(f"  emotions: {', '.join(m.emotions)}")
    if m.metadata:
        lines.append(f"  metadata: {json.dumps(m.metadata, ensure_ascii=False, sort_keys=True)}")
    if m.user_edited and m.original_content:
        lines.append(f"  edited by you; first: {clip(m.original_content, 100)}")
    if m.valid_to is not None:
        by = f" by #{m.superseded_by}" if m.superseded_by else ""
        lines.append(f"  superseded{by} on {m.valid_to:%Y-%m-%d %H:%M} (`narrative memory restore {m.id}` undoes it)")
    return "\n".join(lines)


@memory.command(
    "show",
    help="One memory in full: its whole text (a long message whole), time, source, storyline, messages, metadata,"
    " state.",
)
@click.argument("memory_id", type=int)
@json_option
@pass_ctx
def memory_show(ctx: Context, memory_id: int) -> None:
    mem = ctx.reading
    m = mem.whole_memory(memory_id)  # the memory and its whole text (``text``), in one read of the memory
    storyline = mem.get_storyline(m.storyline_id).name if m.storyline_id is not None else None
    ctx.emit(plain(m), lambda: _details(m, storyline, m.text))


@memory.command("edit", help="Change a memory's text, importance, emotions or metadata (its history records it).")
@click.argument("memory_id", type=int)
@click.option("--content", "--text", "content", default=None, help="The corrected text.")
@click.option("--importance", type=click.IntRange(1, 5), default=None, help="1 (trivial) to 5 (life-changing).")
@click.option("--emotion", "emotions", multiple=True, help="An emotion (repeatable; replaces the list).")
@metadata_option("Set one metadata key, KEY=VALUE (repeatable; the other keys stay), or a JSON object.")
@click.option("--clear-metadata", is_flag=True, help="Start the metadata afresh (then --metadata sets keys).")
@json_option
@pass_ctx
def memory_edit(
    ctx: Context,
    memory_id: int,
    content: str | None,
    importance: int | None,
    emotions: tuple[str, ...],
    metadata: tuple[str, ...],
    clear_metadata: bool,
) -> None:
    mem = ctx.existing(user=True)
    new_metadata = None
    if metadata or clear_metadata:
        kept = {} if clear_metadata else dict(mem.get_memory(memory_id).metadata)
        new_metadata = {**kept, **metadata_pairs(metadata)}
    if content is None and importance is None and not emotions and new_metadata is None:
        raise click.UsageError("nothing to change: give --content, --importance, --emotion or --metadata")
    edited = mem.edit_memory(
        memory_id,
        content=content,
        importance=importance,
        emotions=emotions or None,
        metadata=new_metadata,
    )
    ctx.emit(edited, lambda: f"edited {_memory_line(edited)}")


@memory.command(
    "delete",
    help="Delete memories by id (several at once) or by --filter / --metadata: all of them or, when one id is"
    " unknown, none.  Each keeps a history without its text.",
)
@click.argument("memory_ids", type=int, nargs=-1)
@click.option("--filter", "filter_json", default=None, metavar="JSON", help="Delete what this filter matches.")
@metadata_option("Delete the memories whose metadata KEY equals VALUE (repeatable).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@pass_ctx
def memory_delete(
    ctx: Context, memory_ids: tuple[int, ...], filter_json: str | None, metadata: tuple[str, ...], yes: bool
) -> None:
    mem = ctx.existing(user=True)
    wanted = chosen(filter_json, metadata)
    if bool(memory_ids) == (wanted is not None):
        raise click.UsageError("give memory ids, or --filter / --metadata (one of the two)")
    if not yes:
        what = (
            f"{counted(len(memory_ids), 'memory', 'memories')} ({', '.join(f'#{i}' for i in memory_ids)})"
            if memory_ids
            else f"the {counted(mem.count_memories(filters=wanted), 'memory', 'memories')} the filter matches"
        )
        click.confirm(f"Delete {what}? This cannot be undone", abort=True)
    result = mem.delete_memories(list(memory_ids) if memory_ids else None, filters=wanted)
    ids = ", ".join(f"#{i}" for i in result["ids"])
    ctx.emit(result, lambda: f"deleted {deleted_counts(result)}" + (f": {ids}" if ids else ""))


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
    mem = ctx.existing(user=True)
    was = mem.get_memory(memory_id)
    restored = mem.restore_memory(memory_id)
    if was.superseded_by is None:  # nothing to undo (the call is idempotent: the memory is as it was)
        ctx.emit(restored, lambda: f"nothing to restore: #{memory_id} is current (no later statement superseded it)")
        return
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
