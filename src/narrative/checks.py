"""Input checks shared by every layer; each raises :class:`ValidationError` naming the field."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import TypeVar

from narrative.errors import ValidationError
from narrative.model import IMPORTANCE_MAX, IMPORTANCE_MIN
from narrative.validate import MAX_MESSAGE as MAX_MESSAGE_CHARS
from narrative.validate import require_unicode

E = TypeVar("E", bound=StrEnum)

MAX_TEXT = 100_000
#: A message (a turn, a pasted document or log) holds at most this many characters; a longer one is refused
#: with an error saying so.  It is stored once and searched in passages (docs/ingest.md).
MAX_MESSAGE = MAX_MESSAGE_CHARS


def require_text(value: object, field: str, max_length: int = MAX_TEXT) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{field} must be non-empty text", field=field)
    if len(value) > max_length:
        raise ValidationError(f"{field} is longer than {max_length} characters", field=field)
    return require_unicode(value, field)


def require_message(value: object, field: str = "content") -> str:
    """A message's text: non-empty, at most :data:`MAX_MESSAGE` characters (a document fits; beyond, say how)."""
    if isinstance(value, str) and len(value) > MAX_MESSAGE:
        raise ValidationError(
            f"{field} has {len(value):,} characters; a message holds at most {MAX_MESSAGE:,} (about 5 MB):"
            " split the document into several messages",
            field=field,
        )
    return require_text(value, field, max_length=MAX_MESSAGE)


def require_importance(value: object, field: str = "importance") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not IMPORTANCE_MIN <= value <= IMPORTANCE_MAX:
        raise ValidationError(
            f"{field} must be an integer from {IMPORTANCE_MIN} to {IMPORTANCE_MAX}, got {value!r}", field=field
        )
    return value


def require_user(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise ValidationError("user must be a non-empty name of at most 200 characters", field="user")
    return require_unicode(value, "user")


def require_choice(kind: type[E], value: object, field: str) -> E:
    if not isinstance(value, str):
        raise ValidationError(f"{field} must be text, got {value!r}", field=field)
    try:
        return kind(value)
    except ValueError as error:
        choices = ", ".join(m.value for m in kind)
        raise ValidationError(f"{field} must be one of {choices}; got {value!r}", field=field) from error


def require_positive(value: object, field: str, allow_zero: bool = False) -> int:
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValidationError(f"{field} must be an integer ≥ {low}, got {value!r}", field=field)
    return value


def require_score(value: object, field: str = "min_score") -> float:
    """A score threshold: a number from 0 to 1 (search scores live in that range)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
        raise ValidationError(f"{field} must be a number from 0 to 1, got {value!r}", field=field)
    return float(value)


def require_flag(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(f"{field} must be true or false, got {value!r}", field=field)
    return value


def require_time(value: object, field: str) -> datetime:
    """A point in time (a ``datetime``; without a time zone it is read as UTC), returned in UTC."""
    if not isinstance(value, datetime):
        raise ValidationError(f"{field} must be a date and time, got {value!r}", field=field)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
