"""``narrative context``, ``reason``, ``explain``, ``influence``, ``outcome``, ``uses``: context and its audit trail."""

from __future__ import annotations

import click

from narrative.interfaces.cli.common import Context, cli, json_option, pass_ctx
from narrative.interfaces.cli.text import clip
from narrative.model import Use


def _use_line(use: Use) -> str:
    ids = ", ".join(f"#{r.memory_id}" for r in use.references) or "no memories"
    verdict = f" → {use.outcome}" if use.outcome else ""
    judged = f" (judges use #{use.meta['use_id']})" if use.meta.get("use_id") else ""
    return f"use #{use.id} [{use.kind.value}] {use.query!r}{verdict}{judged}: {ids}  ({use.created_at:%Y-%m-%d %H:%M})"


@cli.command(help="Print the context block an agent should see for QUESTION, within a token budget.")
@click.argument("question")
@click.option("--budget", default=2000, show_default=True, help="Token budget of the whole block.")
@click.option("--no-record", is_flag=True, help="Do not record this as a use.")
@json_option
@pass_ctx
def context(ctx: Context, question: str, budget: int, no_record: bool) -> None:
    block = ctx.reading.context(question, budget, record=not no_record)

    def text() -> str:
        used = f"{block.tokens}/{block.budget} tokens ({block.counter})"
        footer = f"-- {used}; use #{block.use_id}" if block.use_id is not None else f"-- {used}; not recorded"
        return f"{block.text}\n{footer}"

    ctx.emit(block, text)


@cli.command(help="Memory-augmented reasoning context for REQUEST: memories, open threads, a prompt section.")
@click.argument("request")
@click.option(
    "--kind",
    default="classification",
    show_default=True,
    type=click.Choice(["classification", "decomposition", "verification"]),
)
@click.option("--top-k", "top_k", default=5, show_default=True, help="How many search hits (and entity memories).")
@click.option("--no-entities", is_flag=True, help="Leave out the active entities (open threads).")
@json_option
@pass_ctx
def reason(ctx: Context, request: str, kind: str, top_k: int, no_entities: bool) -> None:
    found = ctx.reading.reasoning_context(request, kind, top_k, include_active_entities=not no_entities)

    def text() -> str:
        lines = [f"{found.kind.value} context for {found.request!r} (use #{found.use_id})", ""]
        for m in found.memories:
            lines.append(f"#{m.memory.id} [{m.influence.value}, {m.score:.3f}] {clip(m.memory.content, 100)}")
            lines.append(f"    {m.reasoning}")
        return "\n".join([*lines, "", found.prompt])

    ctx.emit(found, text)


@cli.command(help="Why: which memories a use drew on, why, and from which messages.")
@click.argument("use_id", type=int)
@json_option
@pass_ctx
def explain(ctx: Context, use_id: int) -> None:
    from narrative.read.explain import format_explanation

    found = ctx.reading.explain(use_id)
    ctx.emit(found, lambda: format_explanation(found))


@cli.command(help="Every use of a memory, newest first: how it has influenced later reasoning.")
@click.argument("memory_id", type=int)
@click.option("--limit", default=20, show_default=True, help="How many uses.")
@json_option
@pass_ctx
def influence(ctx: Context, memory_id: int, limit: int) -> None:
    found = ctx.reading.influence_chain(memory_id, limit)

    def text() -> str:
        lines = []
        for use in found:
            ref = next((r for r in use.references if r.memory_id == memory_id), None)
            part = f"    as {ref.influence_type.value} ({ref.score:.3f}): {ref.reasoning}" if ref else ""
            lines += [_use_line(use), part] if part else [_use_line(use)]
        return "\n".join(lines) or f"memory #{memory_id} has not been used yet"

    ctx.emit(found, text)


@cli.command(help="Record how a use turned out: approved, corrected (with --correction) or rejected.")
@click.argument("use_id", type=int)
@click.argument("verdict", type=click.Choice(["approved", "corrected", "rejected"]))
@click.option("--correction", default=None, help="What the user meant instead.")
@json_option
@pass_ctx
def outcome(ctx: Context, use_id: int, verdict: str, correction: str | None) -> None:
    use = ctx.memory.learn_from_outcome(use_id, verdict, correction)
    note = f"; system message #{use.meta['message_id']} added" if use.meta.get("message_id") else ""
    ctx.emit(use, lambda: f"recorded {_use_line(use)}{note}")


@cli.command(help="Recent uses (recalls, contexts, classifications, outcomes), newest first.")
@click.option("--limit", default=20, show_default=True, help="How many uses.")
@json_option
@pass_ctx
def uses(ctx: Context, limit: int) -> None:
    found = ctx.reading.list_uses(limit)
    ctx.emit(found, lambda: "\n".join(_use_line(u) for u in found) or "no uses yet")
