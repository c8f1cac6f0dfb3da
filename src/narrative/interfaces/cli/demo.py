"""``narrative demo``: load the bundled sample into a fresh database and show what the engine knows."""

from __future__ import annotations

import os
import shlex
from typing import TYPE_CHECKING, Any

import click

from narrative import demo as sample_data
from narrative.engine.demo_target import DEFAULT_DEMO_DB, open_demo, shown
from narrative.interfaces.cli.common import Context, cli, json_option, pass_ctx
from narrative.interfaces.cli.text import clip, counted

if TYPE_CHECKING:
    from narrative.engine import Memory


@cli.command(
    help=f"Load a bundled sample conversation into a demo database (default {DEFAULT_DEMO_DB}) and print what the"
    " engine knows.  It only ever writes to a new file or one an earlier demo made: any other database is refused."
)
@click.option(
    "--fresh/--keep",
    default=True,
    show_default=True,
    help="Replace a database an earlier demo made (--keep loads the sample into it again); never any other file.",
)
@click.option("--query", default="why SQLite instead of Firebase", show_default=True, help="A search to show.")
@json_option
@pass_ctx
def demo(ctx: Context, fresh: bool, query: str) -> None:
    db = ctx.db or DEFAULT_DEMO_DB
    named_by = "NARRATIVE_DB" if ctx.db is not None and os.environ.get("NARRATIVE_DB") == ctx.db else "--db"
    data = sample_data.sample()
    user = ctx.user or data["user"]
    overrides: dict[str, Any] = {"embedder": ctx.embedder} if ctx.embedder else {}
    with open_demo(db, user=user, fresh=fresh, named_by=named_by, **overrides) as mem:
        made = sample_data.load(mem, data, recent=True)
        report: dict[str, Any] = {
            "db": shown(db),
            "user": user,
            "sample": {"title": data["title"], "speaker": data["user"], "assistant": data["assistant"]},
            "loaded": made,
            "next": _next_commands(db, user, query),
            "conversations": mem.list_conversations(),
            "storylines": mem.list_storylines() if hasattr(mem, "list_storylines") else [],
            "memories": mem.list_memories(limit=12),
            "narratives": mem.list_narratives(limit=50),
            "search": {"query": query, "items": mem.search(query, 3, record=False)},
            **_agenda(mem),
            "greeting": mem.greet().text,
        }
        ctx.emit(report, lambda: _text(report))


def _text(report: dict[str, Any]) -> str:
    from narrative.interfaces.serialize import hit_dict

    sample = report["sample"]
    lines = [
        f"Loaded the bundled sample ({sample['title']}: {len(report['loaded']['conversations'])} conversations between"
        f" {sample['speaker'].title()} and the assistant {sample['assistant']}) as user {report['user']!r} into"
        f" {report['db']}, a demo database (`narrative demo` may replace it; it never touches any other file).",
        "",
        "Conversations:",
    ]
    for c in report["conversations"]:
        lines.append(f"  #{c.id} {c.title!r}: {c.status.value}, {counted(c.message_count, 'message')}")
    if report["storylines"]:
        lines += ["", "Storylines:"]
        for s in report["storylines"]:
            keywords = ", ".join(s.keywords[:5])
            about = f" — {keywords}" if keywords else ""
            lines.append(f"  #{s.id} {s.name} ({s.kind.value}; {counted(s.interaction_count, 'turn')}){about}")
    lines += ["", "Latest memories:"]
    for m in report["memories"]:
        lines.append(f"  #{m.id} [{m.stream.value}] [{'★' * m.importance}] {clip(m.content, 110)}")
    lines += ["", "The narrative chain (newest first):"]
    for n in report["narratives"]:
        back = f" ← #{n.previous_narrative_id}" if n.previous_narrative_id else ""
        lines.append(f"  #{n.id} [{n.topic}] {n.summary}{back}")
    search = report["search"]
    lines += ["", f"Search: {search['query']!r}"]
    for hit in search["items"]:
        h = hit_dict(hit)
        lines.append(f"  #{h['id']} {clip(h['text'], 110)}\n      why: {h['why']['summary']}")
    lines += _agenda_text(report)
    lines += ["", "The greeting a new session would start with:", report["greeting"]]
    lines += ["", "Next, try (this demo's file and user):", *(f"  {command}" for command in report["next"])]
    return "\n".join(lines)


def _next_commands(db: str, user: str, query: str) -> list[str]:
    """Commands that read the demo's data, with its --db and --user spelled out (an env var may name others)."""
    base = f"narrative --db {shlex.quote(shown(db))} --user {shlex.quote(user)}"
    return [
        f"{base} search {shlex.quote(query)}",
        f"{base} context 'where was I with the garden app?'",
        f"{base} narratives --all",
        f"{base} serve    # the review page and the HTTP API",
    ]


def _agenda(mem: Memory) -> dict[str, Any]:
    """What is bound to the storylines (live and history), the goals gone quiet, the newest decision chain."""
    chains = [mem.decision_chain(m.id) for m in mem.list_memories(stream="decision", limit=20)]
    return {
        "bindings": mem.list_bindings() + mem.list_bindings(history=True),
        "stale_goals": mem.stale_goals(),
        "decision_chain": next((c for c in chains if c.earlier), None),
    }


def _agenda_text(report: dict[str, Any]) -> list[str]:
    lines = ["", "Bound to storylines (NarraNexus):"]
    for b in report["bindings"]:
        state = "history" if b.completed_at else f"touched {b.touched_at:%Y-%m-%d}: {b.touched_by}"
        lines.append(f"  #{b.id} {b.kind.value} {b.name!r} on storyline #{b.storyline_id}: {b.status} ({state})")
    lines += ["", "Goals gone quiet:", *([f"  {g.line()}" for g in report["stale_goals"]] or ["  none"])]
    if report["decision_chain"] is not None:
        lines += ["", "A decision chain:", *(f"  {line}" for line in report["decision_chain"].text().splitlines())]
    return lines
