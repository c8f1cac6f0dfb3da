"""Input checks shared by every layer; each raises :class:`ValidationError` naming the field."""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

from narrative.errors import ValidationError
from narrative.model import IMPORTANCE_MAX, IMPORTANCE_MIN
from narrative.validate import require_unicode

E = TypeVar("E", bound=StrEnum)

MAX_TEXT = 100_000


def require_text(value: object, field: str, max_length: int = MAX_TEXT) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{field} must be non-empty text", field=field)
    if len(value) > max_length:
        raise ValidationError(f"{field} is longer than {max_length} characters", field=field)
    return require_unicode(value, field)


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
