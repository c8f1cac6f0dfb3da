"""Input checks shared by every layer; each raises :class:`ValidationError` naming the field."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar

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


#: Metadata on a memory: at most this many keys, this many bytes as JSON, this deep.
MAX_METADATA_KEYS = 64
MAX_METADATA_BYTES = 16_384
MAX_METADATA_DEPTH = 4
#: A metadata key: letters, digits, ``_`` and ``-`` (filters name it as ``metadata.KEY``).
METADATA_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}")


def require_metadata(value: object, field: str = "metadata") -> dict[str, Any]:
    """A memory's metadata: a JSON object of at most :data:`MAX_METADATA_KEYS` keys (letters, digits, ``_``,
    ``-``; 64 characters at most), values JSON (text, numbers, true/false, null, lists and objects of them),
    :data:`MAX_METADATA_BYTES` bytes as JSON at most.  Returns a copy."""
    if not isinstance(value, Mapping):
        raise ValidationError(f"{field} must be an object of keys and values, got {type(value).__name__}", field=field)
    if len(value) > MAX_METADATA_KEYS:
        raise ValidationError(f"{field} has {len(value)} keys; at most {MAX_METADATA_KEYS} are kept", field=field)
    for key in value:
        if not isinstance(key, str) or not METADATA_KEY.fullmatch(key):
            shown = repr(key)[:70] if isinstance(key, str) else type(key).__name__
            raise ValidationError(
                f"{field} key {shown} must be 1-64 letters, digits, '_' or '-' (starting with a letter, digit or '_')",
                field=field,
            )
        _require_json(value[key], f"{field}.{key}", 1)
    try:
        size = len(json.dumps(dict(value), ensure_ascii=False, allow_nan=False).encode("utf-8"))
    except ValueError as error:
        raise ValidationError(f"{field} is not JSON: {error}", field=field) from None
    if size > MAX_METADATA_BYTES:
        raise ValidationError(
            f"{field} is {size:,} bytes as JSON; at most {MAX_METADATA_BYTES:,} are kept (store large values in the"
            " memory's text or a message)",
            field=field,
        )
    copied: dict[str, Any] = json.loads(json.dumps(dict(value), ensure_ascii=False))
    return copied


def _require_json(value: object, field: str, depth: int) -> None:
    if depth > MAX_METADATA_DEPTH:
        raise ValidationError(f"{field} is nested more than {MAX_METADATA_DEPTH} levels deep", field=field)
    if value is None or isinstance(value, bool | str):
        if isinstance(value, str):
            require_unicode(value, field)
        return
    if isinstance(value, int):
        if not -(2**53) <= value <= 2**53:
            raise ValidationError(f"{field} must be an integer within ±2**53 (JSON's exact range)", field=field)
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(f"{field} must be a finite number", field=field)
        return
    if isinstance(value, list | tuple):
        for item in value:
            _require_json(item, field, depth + 1)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(f"{field} has a key that is not text", field=field)
            require_unicode(key, field)
            _require_json(item, f"{field}.{key}", depth + 1)
        return
    raise ValidationError(f"{field} must be JSON (text, a number, true/false, null, a list or an object)", field=field)


def carried_metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    """What of a message's ``meta`` the memories made from it carry as metadata: the entries that are valid
    metadata (see :func:`require_metadata`), in order, while they fit in its bounds; the rest stays on the
    message only."""
    kept: dict[str, Any] = {}
    for key, value in meta.items():
        if len(kept) >= MAX_METADATA_KEYS or not isinstance(key, str) or not METADATA_KEY.fullmatch(key):
            continue
        try:
            _require_json(value, key, 1)
            require_metadata({**kept, key: value})
        except ValidationError:
            continue
        kept[key] = value
    copied: dict[str, Any] = json.loads(json.dumps(kept, ensure_ascii=False))
    return copied
