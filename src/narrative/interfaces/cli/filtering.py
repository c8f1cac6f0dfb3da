"""Options that choose memories and give them metadata: ``--filter JSON``, ``--metadata KEY=VALUE``, times.

``--filter`` takes the filter grammar every interface shares (mem0's: ``{"AND": [{"stream": "decision"},
{"metadata.project": "garden"}]}``, docs/http.md); ``--metadata KEY=VALUE`` (repeatable) adds one equality
each, or, on ``add memory`` and ``memory edit``, one key of the memory's metadata.  A value is read as JSON
when it is JSON (``priority=3``, ``done=true``, ``tags=["a","b"]``) and as text otherwise (``project=garden``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

from narrative.errors import ValidationError

F = TypeVar("F", bound=Callable[..., Any])


class Moment(click.ParamType):  # type: ignore[type-arg]  # generic only from click 8.2 (pyproject: >=8.1)
    """A time as ISO 8601 (``2026-03-01``, ``2026-03-01T09:30:00``, with seconds' fractions, ``Z`` or an offset
    such as ``+02:00``); without an offset it is UTC.  Given to the engine in UTC."""

    name = "time"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        text = str(value).strip()
        try:
            moment = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in "zZ" and text else text)
        except ValueError:
            self.fail(
                f"{value!r} is not a time: write it as 2026-03-01, 2026-03-01T09:30:00 or with an offset"
                " (2026-03-01T09:30:00+02:00)",
                param,
                ctx,
            )
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


MOMENT = Moment()


def metadata_option(help_text: str) -> Callable[[F], F]:
    return click.option("--metadata", "metadata", multiple=True, metavar="KEY=VALUE", help=help_text)


def filter_options(f: F) -> F:
    """``--filter``, ``--metadata``, ``--source``, ``--entity-type``, ``--since``, ``--until`` (all must hold)."""
    for option in reversed(
        [
            click.option(
                "--filter",
                "filter_json",
                default=None,
                metavar="JSON",
                help="A filter in JSON (AND/OR/NOT"
                " over stream, source, storyline_id, importance, time, metadata…; docs/http.md).",
            ),
            metadata_option("Only memories whose metadata KEY equals VALUE (repeatable)."),
            click.option(
                "--source",
                "sources",
                multiple=True,
                help="Only these sources (repeatable).",
                type=click.Choice(["conversation", "agent", "extraction", "narrative", "reflection"]),
            ),
            click.option(
                "--entity-type",
                "entity_types",
                multiple=True,
                metavar="TYPE",
                help="Only memories carrying an entity of this type, e.g. task (repeatable).",
            ),
            click.option(
                "--since",
                type=MOMENT,
                default=None,
                help="Only memories of this time or later, e.g. 2026-03-01 (UTC unless it has an offset).",
            ),
            click.option(
                "--until",
                type=MOMENT,
                default=None,
                help="Only memories of this time or earlier (UTC unless it has an offset).",
            ),
        ]
    ):
        f = option(f)
    return f


def utc(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def metadata_pairs(pairs: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs (or one JSON object) as a dict; a value is JSON when it parses, else text."""
    found: dict[str, Any] = {}
    for pair in pairs:
        if pair.lstrip().startswith("{"):
            found.update(_json_object(pair, "--metadata"))
            continue
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValidationError(f"--metadata takes KEY=VALUE (or a JSON object), got {pair!r}", field="metadata")
        try:
            found[key.strip()] = json.loads(value)
        except ValueError:
            found[key.strip()] = value
    return found


def chosen(filter_json: str | None, metadata: Sequence[str]) -> dict[str, Any] | None:
    """The filter the options name together: ``--filter`` and each ``--metadata`` equality, all of them."""
    parts: list[dict[str, Any]] = []
    if filter_json is not None:
        parts.append(_json_object(filter_json, "--filter"))
    if metadata:
        parts.append({"metadata": metadata_pairs(metadata)})
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"AND": parts}


def _json_object(text: str, option: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ValidationError(f"{option} is not JSON: {error}", field=option.lstrip("-")) from None
    if not isinstance(value, dict):
        raise ValidationError(f"{option} must be a JSON object, got {type(value).__name__}", field=option.lstrip("-"))
    return value
