"""The local embedding model from the shell: ``narrative model prepare`` builds its cached ONNX file ahead of time."""

from __future__ import annotations

import click

from narrative.config import Settings
from narrative.interfaces.cli.common import Context, cli, json_option, pass_ctx
from narrative.providers.embed import RUNTIMES, MiniLMEmbedder


@cli.group(help="The local embedding model (all-MiniLM-L6-v2 from the installed package).")
def model() -> None:
    pass


@model.command(help="Build and cache the ONNX file of the embedding model now, instead of on first use.")
@click.option(
    "--runtime",
    type=click.Choice(["auto", *RUNTIMES]),
    default=None,
    help="How the model runs (default: NARRATIVE_EMBED_RUNTIME, else auto: both ONNX files).",
)
@click.option(
    "--cache-dir", default=None, help="Where built files go (default: NARRATIVE_CACHE_DIR, else ~/.cache/narrative)."
)
@json_option
@pass_ctx
def prepare(ctx: Context, runtime: str | None, cache_dir: str | None) -> None:
    settings = Settings.resolve(embed_runtime=runtime, cache_dir=cache_dir)
    chosen = ["onnx-int8", "onnx"] if settings.embed_runtime == "auto" else [settings.embed_runtime]
    records, lines = [], []
    for name in chosen:  # auto may pick either for a given file: build both
        embedder = MiniLMEmbedder(runtime=name, cache_dir=settings.cache_dir or None)
        built = embedder.prepare()
        path = str(built) if built is not None else None
        records.append({"identity": embedder.identity, "runtime": embedder.runtime, "path": path})
        lines.append(f"{embedder.identity} ({name}): {path or 'torch loads the installed weights; nothing to build'}")
    ctx.emit(records if len(records) > 1 else records[0], "\n".join(lines))
