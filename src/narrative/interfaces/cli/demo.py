"""``narrative demo``: load the bundled sample into a fresh database and show what the engine knows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from narrative import demo as sample_data
from narrative.engine import Memory
from narrative.interfaces.cli.common import Context, cli, json_option, pass_ctx
from narrative.interfaces.cli.text import clip


@cli.command(help="Load a bundled sample conversation into a fresh database and print what the engine knows.")
@click.option("--fresh/--keep", default=True, show_default=True, help="Delete the demo database first.")
@click.option("--query", default="why SQLite instead of Firebase", show_default=True, help="A search to show.")
@json_option
@pass_ctx
def demo(ctx: Context, fresh: bool, query: str) -> None:
    db = Path(ctx.db or "narrative-demo.db")
    if fresh:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
    data = sample_data.sample()
    overrides: dict[str, Any] = {"embedder": ctx.embedder} if ctx.embedder else {}
    with Memory(db, user=ctx.user or data["user"], **overrides) as mem:
        made = sample_data.load(mem, data, recent=True)
        report: dict[str, Any] = {
            "db": str(db),
            "loaded": made,
            "conversations": mem.list_conversations(),
            "storylines": mem.list_storylines() if hasattr(mem, "list_storylines") else [],
            "memories": mem.list_memories(limit=12),
            "narratives": mem.list_narratives(limit=50),
            "search": {"query": query, "hits": mem.search(query, 3, record=False)},
            **_agenda(mem),
            "greeting": mem.greet().text,
        }
        ctx.emit(report, lambda: _text(report))


def _text(report: dict[str, Any]) -> str:
    from narrative.interfaces.serialize import hit_dict

    lines = [f"Loaded the sample into {report['db']}.", "", "Conversations:"]
    for c in report["conversations"]:
        lines.append(f"  #{c.id} {c.title!r}: {c.status.value}, {c.message_count} messages")
    if report["storylines"]:
        lines += ["", "Storylines:"]
        for s in report["storylines"]:
            keywords = ", ".join(s.keywords[:5])
            about = f" — {keywords}" if keywords else ""
            lines.append(f"  #{s.id} {s.name} ({s.kind.value}; {s.interaction_count} turns){about}")
    lines += ["", "Latest memories:"]
    for m in report["memories"]:
        lines.append(f"  #{m.id} [{m.stream.value}] [{'★' * m.importance}] {clip(m.content, 110)}")
    lines += ["", "The narrative chain (newest first):"]
    for n in report["narratives"]:
        back = f" ← #{n.previous_narrative_id}" if n.previous_narrative_id else ""
        lines.append(f"  #{n.id} [{n.topic}] {n.summary}{back}")
    search = report["search"]
    lines += ["", f"Search: {search['query']!r}"]
    for hit in search["hits"]:
        h = hit_dict(hit)
        lines.append(f"  #{h['memory_id']} {clip(h['text'], 110)}\n      why: {h['why']['summary']}")
    lines += _agenda_text(report)
    lines += ["", "The greeting a new session would start with:", report["greeting"]]
    return "\n".join(lines)


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
