"""Maintenance from the shell: ``narrative status`` and ``narrative reindex``."""

from __future__ import annotations

from typing import Any

import click

from narrative.interfaces.cli.common import Context, cli, json_option, pass_ctx


def _counts(models: dict[str, int]) -> str:
    return ", ".join(f"{n} by {model}" for model, n in models.items()) or "none"


def _status_text(status: dict[str, Any]) -> str:
    lines = [
        f"embedder: {status['embedder'] or 'none (keyword search only)'}",
        f"scope: {status['scope']} ({status['users']} user(s)), {status['memories']} memories",
        f"memory vectors: {_counts(status['memory_vectors'])}",
        f"storyline routing embeddings: {_counts(status['storyline_vectors'])}",
    ]
    if status["reindex_needed"]:
        lines.append("reindex needed: " + "; ".join(status["reasons"]) + " — run `narrative reindex`")
    else:
        lines.append("reindex needed: no")
    if status["search_blocked"]:
        lines.append("vector search is refused until every user is reindexed (`narrative reindex` without --user)")
    return "\n".join(lines)


def _reindex_text(report: dict[str, Any]) -> str:
    text = (
        f"re-embedded {report['memories']} memories and {report['storylines']} storyline routing embeddings"
        f" with {report['embedder']} ({report['scope']}) in {report['seconds']} s"
    )
    if report["search_blocked"]:
        text += "\nother users still hold vectors of another embedder: run `narrative reindex` without --user"
    return text


@cli.command(help="Show the embedder, the embedder identities of the stored vectors with counts, and whether "
                  "`narrative reindex` is needed.  Without --user: the whole database.")
@json_option
@pass_ctx
def status(ctx: Context) -> None:
    report = ctx.memory.embedding_status(user=ctx.user)
    ctx.emit(report, lambda: _status_text(report))


@cli.command(help="Re-embed every memory and storyline routing embedding with the current embedder.  Needed after "
                  "changing the embedder (--embedder / NARRATIVE_EMBEDDER): search refuses vectors another model "
                  "made.  Only stale vectors are redone, so it is safe to run again; without --user it covers "
                  "every user of the database.")
@click.option("--batch-size", type=click.IntRange(min=1), default=None,
              help="Memories per transaction (default 256).")
@click.option("--force", is_flag=True, help="Re-embed everything, even vectors the current embedder made.")
@json_option
@pass_ctx
def reindex(ctx: Context, batch_size: int | None, force: bool) -> None:
    report = ctx.memory.reindex(user=ctx.user, batch_size=batch_size, force=force)
    ctx.emit(report, lambda: _reindex_text(report))


@cli.command(help="Apply the store's schema migrations (SQLite file or postgresql:// URL) and list what the "
                  "database records.  Opening a database migrates it too; this does only that, e.g. before "
                  "starting several `narrative serve` workers.")
@json_option
@pass_ctx
def migrate(ctx: Context) -> None:
    store = ctx.memory.store
    newly = store.migrate()
    report = {"db": ctx.memory.settings.db, "backend": store.backend, "applied": store.applied_migrations(),
              "new": newly}
    ctx.emit(report, lambda: f"{report['backend']} schema up to date: {', '.join(report['applied'])}")
