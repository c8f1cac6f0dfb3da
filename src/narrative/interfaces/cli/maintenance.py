"""Maintenance from the shell: ``narrative status``, ``reindex``, ``compact`` and ``path`` (where the memory lives)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from narrative.config import default_db
from narrative.interfaces.cli.common import Context, cli, json_option, pass_ctx
from narrative.interfaces.cli.progress import progress


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


@cli.command(
    help="Show the embedder, the embedder identities of the stored vectors with counts, and whether "
    "`narrative reindex` is needed.  Without --user: the whole database."
)
@json_option
@pass_ctx
def status(ctx: Context) -> None:
    report = ctx.existing(user=ctx.user is not None).embedding_status(user=ctx.user)
    ctx.emit(report, lambda: _status_text(report))


@cli.command(
    help="Re-embed every memory and storyline routing embedding with the current embedder.  Needed after "
    "changing the embedder (--embedder / NARRATIVE_EMBEDDER): search refuses vectors another model "
    "made.  Only stale vectors are redone, so it is safe to run again; without --user it covers "
    "every user of the database."
)
@click.option("--batch-size", type=click.IntRange(min=1), default=None, help="Memories per transaction (default 256).")
@click.option("--force", is_flag=True, help="Re-embed everything, even vectors the current embedder made.")
@json_option
@pass_ctx
def reindex(ctx: Context, batch_size: int | None, force: bool) -> None:
    with progress("reindex", enabled=not ctx.as_json) as report_progress:
        report = ctx.existing(user=False).reindex(
            user=ctx.user, batch_size=batch_size, force=force, progress=report_progress
        )
    ctx.emit(report, lambda: _reindex_text(report))


@cli.command(
    help="Prune the memory change log (keeping the newest --keep entries), merge the full-text indexes, "
    "rebuild the SQLite file (VACUUM: no copy of deleted text stays in it) and checkpoint the WAL.  Deletes do "
    "this by themselves; run it after heavy writing to keep the file small."
)
@click.option(
    "--keep", type=click.IntRange(min=0), default=1_000, show_default=True, help="Change-log entries to keep."
)
@json_option
@pass_ctx
def compact(ctx: Context, keep: int) -> None:
    report = ctx.memory.compact(keep_changes=keep)
    ctx.emit(
        report,
        lambda: (
            f"pruned {report['pruned_changes']} change-log entries; full-text indexes merged;"
            + (" file rebuilt (VACUUM);" if report.get("vacuumed") else "")
            + " WAL checkpointed"
            + (" (busy: other connections still read it)" if report["checkpoint_busy"] else "")
        ),
    )


@cli.command(
    help="Apply the store's schema migrations (SQLite file or postgresql:// URL) and list what the "
    "database records.  Opening a database migrates it too; this does only that, e.g. before "
    "starting several `narrative serve` workers."
)
@json_option
@pass_ctx
def migrate(ctx: Context) -> None:
    store = ctx.memory.store
    newly = store.migrate()
    report = {
        "db": ctx.memory.settings.db,
        "backend": store.backend,
        "applied": store.applied_migrations(),
        "new": newly,
    }
    ctx.emit(report, lambda: f"{report['backend']} schema up to date: {', '.join(report['applied'])}")


@cli.command(
    help="Check that the database is whole (after a crash, say): the schema against the migrations, pages and "
    "indexes against their rows, full-text indexes against the text, vectors against memories, no orphan rows, "
    "turns left unprocessed.  Reads only; exits with 1 when it finds a problem."
)
@json_option
@pass_ctx
def check(ctx: Context) -> None:
    report = ctx.existing(user=False).check()
    ctx.emit(report, lambda: _check_text(report))
    if not report["ok"]:
        raise SystemExit(1)


def _check_text(report: dict[str, Any]) -> str:
    lines = [f"narrative check: {report['db']} ({report['backend']})"]
    for item in report["checks"]:
        status = "PROBLEM" if item["status"] == "problem" else item["status"]
        lines.append(f"  {status:<8} {item['check']:<11} {item['detail']}")
    count = report["problems"]
    lines.append("no problem found" if count == 0 else f"{count} problem{'s' if count > 1 else ''} found")
    return "\n".join(lines)


@cli.command(
    "process-pending",
    help="Finish the turns of the user that were stored but never processed (a crash mid-turn, a failed LLM "
    "call): route, extract and narrate them now.  `narrative check` lists who has any.",
)
@json_option
@pass_ctx
def process_pending(ctx: Context) -> None:
    results = ctx.existing(user=True).process_pending()
    done = [r.message.id for r in results]
    ctx.emit({"processed": len(done), "message_ids": done}, f"processed {len(done)} pending messages")


@cli.command(
    "path",
    help="Print where the memory lives: the database --db or NARRATIVE_DB names, else the default one in your data"
    " directory ($XDG_DATA_HOME/narrative/narrative.db or ~/.local/share/narrative/narrative.db).  Creates nothing.",
)
@json_option
@pass_ctx
def path_command(ctx: Context) -> None:
    db = ctx.db or default_db()
    url = db.startswith(("postgresql://", "postgres://"))
    exists = None if url else Path(db).is_file()
    info = {"db": db, "default": ctx.db is None, "exists": exists}
    ctx.emit(info, db)
