"""``narrative bench``: the benchmarks, printing their figures (and JSON with --json)."""

from __future__ import annotations

import click

from narrative.interfaces.cli.common import Context, cli, json_option, pass_ctx


@cli.group(help="Run the benchmarks (LoCoMo retrieval, latency).")
def bench() -> None:
    pass


@bench.command("locomo", help="Retrieval recall@k on a LoCoMo-format file, with BM25-only and vector-only baselines.")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--limit", type=int, default=None, help="Only the first N conversations.")
@click.option("--keep", default=None, help="Keep the per-conversation databases in this folder.")
@json_option
@pass_ctx
def bench_locomo(ctx: Context, path: str, limit: int | None, keep: str | None) -> None:
    from narrative.bench import locomo

    report = locomo.run(path, embedder=ctx.embedder or "minilm", limit=limit, keep=keep)
    ctx.emit(report, lambda: locomo.format_report(report))


@bench.command("routing", help="How storylines match source conversations: purity, storylines per session, NMI.")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--keep", default=None, help="Keep the databases in this folder.")
@json_option
@pass_ctx
def bench_routing(ctx: Context, path: str, keep: str | None) -> None:
    from narrative.bench import routing

    report = routing.run_routing(path, embedder=ctx.embedder or "minilm", keep=keep)
    ctx.emit(report, lambda: routing.format_routing(report))


@bench.command("latency", help="Ingest speed and recall latency at the given sizes, against ChromaDB.")
@click.option("--memories", default="10000,100000", show_default=True, help="Comma-separated store sizes.")
@click.option("--queries", default=200, show_default=True, help="Queries per size.")
@click.option("--no-chroma", is_flag=True, help="Skip the ChromaDB comparison.")
@json_option
@pass_ctx
def bench_latency(ctx: Context, memories: str, queries: int, no_chroma: bool) -> None:
    from narrative.bench import latency

    sizes = [int(x) for x in memories.split(",") if x.strip()]
    report = latency.run(sizes, queries=queries, chroma=not no_chroma)
    ctx.emit(report, lambda: latency.format_report(report))
