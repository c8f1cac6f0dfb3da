"""The ``narrative`` command line: every command takes ``--db``, ``--user`` and ``--json``.

Commands live in small modules by concept; each registers itself on :data:`cli`.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from narrative.errors import NarrativeError
from narrative.interfaces.cli.common import CURRENT, cli, error_kind
from narrative.interfaces.serialize import to_json


def _register() -> None:
    from narrative.interfaces.cli import conversations, demo, memories  # noqa: F401

    for optional in ("closing", "storylines", "context", "bench", "serving", "admin", "maintenance", "model", "agenda"):
        try:
            __import__(f"narrative.interfaces.cli.{optional}")
        except ModuleNotFoundError as error:
            if error.name != f"narrative.interfaces.cli.{optional}":
                raise


def main(argv: list[str] | None = None) -> Any:
    """Entry point: run the CLI, turning NarrativeError into a clean message and exit code 1."""
    _register()
    CURRENT.clear()
    try:
        return cli.main(args=argv, standalone_mode=False)
    except click.exceptions.Abort:
        if not _json_error("aborted", "aborted"):
            click.echo("aborted", err=True)
        sys.exit(1)
    except click.ClickException as error:
        if not _json_error("usage_error", error.format_message()):
            error.show()
        sys.exit(error.exit_code)
    except NarrativeError as error:
        if not _json_error(error_kind(error), str(error), field=getattr(error, "field", None)):
            click.echo(f"error: {error}", err=True)
        sys.exit(1)
    except BrokenPipeError:
        raise  # a reader that stopped reading (`| head`): not a failure to report
    except OSError as error:  # a full disk, a file that cannot be written: said plainly, not as a traceback
        where = f" ({error.filename})" if error.filename else ""
        message = f"{error.strerror or error}{where}"
        if not _json_error("io_error", message):
            click.echo(f"error: {message}", err=True)
        sys.exit(1)


def _json_error(kind: str, message: str, **extra: Any) -> bool:
    """With --json, print the error as the HTTP API's error body ({"error", "message"}) on stdout."""
    if not (CURRENT and CURRENT[0].as_json):
        return False
    click.echo(to_json({"error": kind, "message": message, **{k: v for k, v in extra.items() if v is not None}}))
    return True


def command_names() -> list[str]:
    """Every command path (``conversation start`` …), for help-text tests."""
    _register()
    names: list[str] = []

    def walk(group: click.Group, prefix: str) -> None:
        for name, command in sorted(group.commands.items()):
            names.append(f"{prefix}{name}")
            if isinstance(command, click.Group):
                walk(command, f"{prefix}{name} ")

    walk(cli, "")
    return names


__all__ = ["cli", "command_names", "main"]
