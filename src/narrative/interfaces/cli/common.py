"""The root group, shared options, and output helpers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from narrative.engine import Memory
from narrative.interfaces.serialize import to_json

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class Context:
    db: str | None
    user: str | None
    as_json: bool
    embedder: str | None
    _memory: Memory | None = None

    @property
    def memory(self) -> Memory:
        if self._memory is None:
            overrides: dict[str, Any] = {}
            if self.embedder:
                overrides["embedder"] = self.embedder
            self._memory = Memory(self.db, user=self.user, **overrides)
        return self._memory

    def emit(self, value: Any, text: Callable[[], str] | str | None = None) -> None:
        """Print ``value`` as JSON with --json, else the human ``text`` (or JSON when none)."""
        if self.as_json or text is None:
            click.echo(to_json(value))
        else:
            click.echo(text() if callable(text) else text)


@click.group(help="narrative: offline-first narrative memory for LLM agents.")
@click.option("--db", envvar="NARRATIVE_DB", default=None,
              help="SQLite file or postgresql:// URL (default: narrative.db).")
@click.option("--user", envvar="NARRATIVE_USER", default=None, help="Whose memory (default: 'default').")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
@click.option(
    "--embedder",
    type=click.Choice(["minilm", "hashing", "none"]),
    default=None,
    help="Embedding model (default minilm; 'none' = keyword search only).",
)
@click.version_option(package_name="narrative")
@click.pass_context
def cli(ctx: click.Context, db: str | None, user: str | None, as_json: bool, embedder: str | None) -> None:
    ctx.obj = Context(db=db, user=user, as_json=as_json, embedder=embedder)
    ctx.call_on_close(lambda: ctx.obj._memory.close() if ctx.obj._memory is not None else None)


pass_ctx = click.make_pass_decorator(Context)


def json_option(f: F) -> F:
    """``--json`` also accepted after the command name."""

    def set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            ctx.find_object(Context).as_json = True  # type: ignore[union-attr]

    return click.option("--json", "as_json_local", is_flag=True, expose_value=False, callback=set_json,
                        help="Machine-readable JSON output.")(f)
