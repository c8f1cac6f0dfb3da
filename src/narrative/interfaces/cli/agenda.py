"""``narrative bindings`` (what is bound to storylines) and ``narrative goals`` (stale goals) — NarraNexus;
``narrative decisions`` (chains, the audit) and ``narrative research`` (consolidation, linked items, sources) —
ITSERR."""

from __future__ import annotations

import json
from typing import Any

import click

from narrative.errors import ValidationError
from narrative.interfaces.cli.common import Context, cli, json_option, pass_ctx
from narrative.interfaces.cli.text import clip
from narrative.model import Binding

KINDS = click.Choice(["toolset", "job", "goal", "module"])


def binding_line(b: Binding) -> str:
    done = f", completed {b.completed_at:%Y-%m-%d}" if b.completed_at else ""
    payload = f" {json.dumps(b.payload, ensure_ascii=False)}" if b.payload else ""
    return (
        f"#{b.id} {b.kind.value} {b.name!r} on storyline #{b.storyline_id}: {b.status}{done}"
        f" (touched {b.touched_at:%Y-%m-%d}: {b.touched_by}){payload}"
    )


def _payload(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValidationError(f"--payload is not JSON ({error.msg})", field="payload") from None
    if not isinstance(value, dict):
        raise ValidationError("--payload must be a JSON object", field="payload")
    return value


# --- bindings ----------------------------------------------------------------------------------------


@cli.group(
    invoke_without_command=True,
    help="What is bound to storylines (tool sets, jobs, goals, modules): list (the default), add, update, "
    "complete, delete.",
)
@json_option
@click.pass_context
def bindings(click_ctx: click.Context) -> None:
    if click_ctx.invoked_subcommand is None:
        click_ctx.invoke(bindings_list)


@bindings.command("list", help="Live bindings, most recently touched first (--history: the completed ones).")
@click.option("--storyline", "storyline_id", type=int, default=None, help="Only this storyline's.")
@click.option("--kind", type=KINDS, default=None, help="Only this kind.")
@click.option("--history", is_flag=True, help="Completed bindings instead of live ones.")
@json_option
@pass_ctx
def bindings_list(
    ctx: Context, storyline_id: int | None = None, kind: str | None = None, history: bool = False
) -> None:
    found = ctx.reading.list_bindings(storyline_id, kind=kind, history=history)
    ctx.emit(found, lambda: "\n".join(binding_line(b) for b in found) or "nothing bound")


@bindings.command("add", help="Bind KIND NAME to a storyline (again: update it).  Statuses: docs/bindings.md.")
@click.argument("storyline_id", type=int)
@click.argument("kind", type=KINDS)
@click.argument("name")
@click.option("--status", default=None, help="The kind's status (default: running, ongoing, active).")
@click.option("--payload", default=None, help="A JSON object to keep with it.")
@json_option
@pass_ctx
def bindings_add(
    ctx: Context, storyline_id: int, kind: str, name: str, status: str | None, payload: str | None
) -> None:
    made = ctx.memory.bind(storyline_id, kind, name, status=status, payload=_payload(payload))
    ctx.emit(made, lambda: f"bound {binding_line(made)}")


@bindings.command("update", help="Change a binding's status, payload or name (it counts as touched).")
@click.argument("binding_id", type=int)
@click.option("--status", default=None, help="Its new status (a final one moves it to history).")
@click.option("--payload", default=None, help="Its new payload (a JSON object, replaced whole).")
@click.option("--name", default=None, help="Its new name.")
@json_option
@pass_ctx
def bindings_update(ctx: Context, binding_id: int, status: str | None, payload: str | None, name: str | None) -> None:
    changed = ctx.reading.update_binding(binding_id, status=status, payload=_payload(payload), name=name)
    ctx.emit(changed, lambda: f"updated {binding_line(changed)}")


@bindings.command("complete", help="Move a binding to history (a job done, a goal achieved).")
@click.argument("binding_id", type=int)
@click.option("--status", default=None, help="A final status other than the kind's default.")
@json_option
@pass_ctx
def bindings_complete(ctx: Context, binding_id: int, status: str | None) -> None:
    done = ctx.reading.complete_binding(binding_id, status=status)
    ctx.emit(done, lambda: f"completed {binding_line(done)}")


@bindings.command("delete", help="Delete a binding for good (complete keeps it as history instead).")
@click.argument("binding_id", type=int)
@json_option
@pass_ctx
def bindings_delete(ctx: Context, binding_id: int) -> None:
    result = ctx.reading.delete_binding(binding_id)
    ctx.emit({"deleted": binding_id, "result": result}, lambda: f"deleted binding #{binding_id}")


@cli.group(help="Long-running goals bound to storylines: stale (the ones gone quiet).")
def goals() -> None:
    pass


@goals.command("stale", help="Ongoing goals nothing touched for --days days (default: the setting), with why.")
@click.option("--days", type=int, default=None, help="Untouched this many days.")
@json_option
@pass_ctx
def goals_stale(ctx: Context, days: int | None) -> None:
    found = ctx.reading.stale_goals(days)
    ctx.emit([g.to_dict() for g in found], lambda: "\n".join(g.line() for g in found) or "no stale goals")


# --- decisions ----------------------------------------------------------------------------------------


@cli.group(help="Decision chains and the decision audit: chain, link, review, answer.")
def decisions() -> None:
    pass


@decisions.command("chain", help="What a decision built on or reversed, and what built on or reversed it.")
@click.argument("memory_id", type=int)
@json_option
@pass_ctx
def decisions_chain(ctx: Context, memory_id: int) -> None:
    chain = ctx.reading.decision_chain(memory_id)
    ctx.emit(chain, chain.text)


@decisions.command("link", help="Record that decision MEMORY_ID builds on (or --reverses) EARLIER_ID.")
@click.argument("memory_id", type=int)
@click.argument("earlier_id", type=int)
@click.option("--reverses", is_flag=True, help="It reverses the earlier decision instead of building on it.")
@click.option("--reason", default="", help="Why, in a few words.")
@json_option
@pass_ctx
def decisions_link(ctx: Context, memory_id: int, earlier_id: int, reverses: bool, reason: str) -> None:
    kind = "reverses" if reverses else "builds_on"
    made = ctx.reading.link_decision(memory_id, earlier_id, kind, reason=reason)
    ctx.emit(made, lambda: f"#{made.memory_id} {made.kind.value} #{made.linked_id}")


@decisions.command("review", help="Decisions due for review, with rationale, alternatives and the question.")
@click.option("--limit", default=10, show_default=True, help="How many at most.")
@json_option
@pass_ctx
def decisions_review(ctx: Context, limit: int) -> None:
    due = ctx.reading.decisions_to_review(limit=limit)

    def text() -> str:
        lines = [f"#{d.memory.id} {d.question}\n    ({d.reason})" for d in due]
        return "\n".join(lines) or "no decision is due for review"

    ctx.emit([d.to_dict() for d in due], text)


@decisions.command("answer", help="Answer an audit prompt: OUTCOME is kept or reversed.")
@click.argument("memory_id", type=int)
@click.argument("outcome", type=click.Choice(["kept", "reversed"]))
@click.option("--note", default="", help="What was said, briefly.")
@json_option
@pass_ctx
def decisions_answer(ctx: Context, memory_id: int, outcome: str, note: str) -> None:
    review = ctx.reading.review_decision(memory_id, outcome, note=note)
    ctx.emit(review, lambda: f"decision #{memory_id}: {review.outcome.value}")


# --- research -----------------------------------------------------------------------------------------


@cli.group(help="The research stream: consolidate (link related items), linked, sources (the most used).")
def research() -> None:
    pass


@research.command("consolidate", help="Link research items about the same work, author or idea (never merged).")
@json_option
@pass_ctx
def research_consolidate(ctx: Context) -> None:
    found = ctx.reading.consolidate()
    made = found.pop("made")
    found["made"] = [
        {"memory_id": k.memory_id, "linked_id": k.linked_id, "kind": k.kind.value, "reason": k.reason} for k in made
    ]

    def text() -> str:
        lines = [f"{found['items']} research items, {found['links']} new links"]
        lines += [f"  #{k.memory_id} {k.kind.value} #{k.linked_id}: {k.reason}" for k in made]
        return "\n".join(lines)

    ctx.emit(found, text)


@research.command("linked", help="The memories linked to one (same work, author or idea; decision chain).")
@click.argument("memory_id", type=int)
@json_option
@pass_ctx
def research_linked(ctx: Context, memory_id: int) -> None:
    found = ctx.reading.linked_memories(memory_id)
    lines = [f"#{o.memory.id} [{o.link.kind.value}, {o.direction}] {clip(o.memory.content, 90)}" for o in found]
    ctx.emit([o.to_dict() for o in found], lambda: "\n".join(lines) or "nothing linked")


@research.command("sources", help="The sources most used over the last --days days (0: all time).")
@click.option("--days", type=int, default=None, help="The period (default: the setting, 30).")
@click.option("--limit", default=10, show_default=True, help="How many sources.")
@json_option
@pass_ctx
def research_sources(ctx: Context, days: int | None, limit: int) -> None:
    found = ctx.reading.source_popularity(days=days, limit=limit)
    ctx.emit([s.to_dict() for s in found], lambda: "\n".join(s.summary() for s in found) or "no sources used")
