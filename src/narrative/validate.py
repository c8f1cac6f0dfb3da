"""One validation layer in front of every public call of :class:`narrative.Memory`.

The CLI, the HTTP API, the MCP server and Python callers all reach the engine through the facade,
so checking the facade's arguments here checks every entry point.  Before a public method runs,
each argument (and everything inside it: lists, dicts, dataclasses such as ``Turn``) must be:

* an id (a parameter named ``id``, ``…_id`` or ``…_ids``): an ``int`` from 1 to 2**63 − 1, never a ``bool``;
* any other integer: within SQLite's signed 64-bit range;
* text: valid Unicode (no lone surrogates, no NUL) and at most :data:`MAX_TEXT` characters, names and
  labels (``user``, ``speaker``, ``label``, …) at most :data:`MAX_NAME`;
* a float: finite;
* a datetime: from year :data:`MIN_YEAR` up to (not including) :data:`MAX_YEAR`;
* a number of days (``days``, ``…_days``): from 0 to :data:`MAX_DAYS`;
* of the type its annotation names (:func:`require_type`): ``search(since=date(2020, 1, 1))``,
  ``create_api_key(label=None)`` or ``remember_many(["hello"])`` are refused by name, never answered with
  a ``TypeError`` or ``AttributeError`` from deep inside.

A refusal is a :class:`~narrative.errors.ValidationError` naming the argument; its message never
repeats the offending text (it may not even be encodable).  The method-specific checks
(``narrative.checks``) still run inside the methods.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import inspect
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any, TypeVar

from narrative.errors import ValidationError

MAX_ID = 2**63 - 1
MIN_INT = -(2**63)
MAX_TEXT = 100_000
MAX_NAME = 1_000
MAX_DOCUMENT = 1_000_000_000  # an export given to import_data
MAX_DEPTH = 16
MIN_YEAR = 1000
MAX_YEAR = 9000
#: Parameters holding a name or a label rather than free text.
NAME_FIELDS = frozenset({"user", "speaker", "label", "role", "format", "mode", "name", "stream", "source", "kind"})
#: Parameters holding a whole document (an export).
DOCUMENT_FIELDS = frozenset({"text"})
#: Parameters holding a message's text, which may be a pasted document (checks.MAX_MESSAGE; a memory's own
#: text is held to MAX_TEXT by the method).
MAX_MESSAGE = 5_000_000
MESSAGE_FIELDS = frozenset({"content"})
#: Parameters counting days: a span of time must stay within the calendar (time ± days).
MAX_DAYS = 365_000

C = TypeVar("C", bound=type)


def is_id_field(field: str) -> bool:
    return field == "id" or field.endswith("_id")


def require_id(value: object, field: str) -> int:
    """An id: an int from 1 to 2**63 − 1 (booleans are not ids)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ID:
        shown = repr(value) if isinstance(value, int | bool) and len(repr(value)) < 40 else type(value).__name__
        raise ValidationError(f"{field} must be an integer id from 1 to 2**63-1, got {shown}", field=field)
    return value


def require_unicode(value: str, field: str) -> str:
    """Text that can be stored and sent: no lone surrogates, no NUL (U+0000: PostgreSQL cannot store it, and one
    rule holds for both stores), no U+FFFE/U+FFFF (noncharacters; the MCP stdio transport marks lone surrogates
    it received with U+FFFF)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValidationError(
            f"{field} is not valid Unicode (a lone surrogate at position {error.start})", field=field
        ) from None
    if "\x00" in value:  # PostgreSQL cannot store it, so neither store takes it (an export moves between them)
        raise ValidationError(
            f"{field} holds a NUL character (U+0000) at position {value.index(chr(0))}: no store keeps it", field=field
        )
    for mark in ("\uffff", "\ufffe"):
        if mark in value:
            raise ValidationError(
                f"{field} is not valid Unicode (a lone surrogate or noncharacter at position {value.index(mark)})",
                field=field,
            )
    return value


def check_value(value: Any, field: str, *, max_text: int = MAX_TEXT, depth: int = 0) -> None:
    """Check one argument (recursively); raises ValidationError naming ``field``."""
    if depth > MAX_DEPTH:
        raise ValidationError(f"{field} is nested more than {MAX_DEPTH} levels deep", field=field)
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        require_unicode(value, field)
        if len(value) > max_text:
            hint = (
                f": a message holds at most {MAX_MESSAGE:,} characters (about 5 MB); split the document into"
                " several messages"
                if max_text == MAX_MESSAGE
                else ""
            )
            raise ValidationError(f"{field} is longer than {max_text} characters{hint}", field=field)
    elif isinstance(value, int):
        if not MIN_INT <= value <= MAX_ID:
            raise ValidationError(f"{field} is outside the 64-bit integer range", field=field)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(f"{field} must be a finite number", field=field)
    elif isinstance(value, datetime | date):
        _check_time(value, field)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_value(key, f"{field} key", max_text=MAX_NAME, depth=depth + 1)
            check_value(item, f"{field}.{key}" if isinstance(key, str) else field, depth=depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            check_value(item, field, max_text=max_text, depth=depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            check_argument(f.name, getattr(value, f.name), depth=depth + 1)


def _check_time(value: date, field: str) -> None:
    if not MIN_YEAR <= value.year < MAX_YEAR:
        raise ValidationError(f"{field} must fall in the years {MIN_YEAR}–{MAX_YEAR - 1}", field=field)
    if isinstance(value, datetime) and value.tzinfo is not None:
        try:
            value.astimezone(UTC)
        except OverflowError:
            raise ValidationError(f"{field} is out of range", field=field) from None


def check_argument(name: str, value: Any, depth: int = 0) -> None:
    """Check one named argument of a public call."""
    if value is None:
        return
    if is_id_field(name):
        require_id(value, name)
    elif name == "days" or name.endswith("_days"):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DAYS:
            raise ValidationError(f"{name} must be a whole number of days from 0 to {MAX_DAYS}", field=name)
    elif name.endswith("_ids") and not isinstance(value, str | bytes | Mapping):
        try:
            items = list(value)
        except TypeError:
            raise ValidationError(f"{name} must be a list of ids", field=name) from None
        for item in items:
            require_id(item, name)
    else:
        limit = (
            MAX_NAME
            if name in NAME_FIELDS
            else MAX_DOCUMENT
            if name in DOCUMENT_FIELDS
            else MAX_MESSAGE
            if name in MESSAGE_FIELDS
            else MAX_TEXT
        )
        check_value(value, name, max_text=limit, depth=depth)


def require_type(value: Any, hint: Any, field: str) -> None:
    """ValidationError unless ``value`` fits the type ``hint`` (a resolved annotation).

    Builtins, ``X | None``, classes, ``Sequence[...]``, ``Iterable[...]``, ``Mapping[...]``, ``dict[...]``,
    ``tuple[X, ...]`` and ``Callable`` are checked (the items of a list, tuple or set, never of a
    generator: it would be used up); ``Any`` and ``object`` take anything.  A float parameter takes an int;
    an int parameter never takes a bool.
    """
    if not _fits(value, hint):
        raise ValidationError(f"{field} must be {describe(hint)}, got {type(value).__name__}", field=field)


def _fits(value: Any, hint: Any) -> bool:
    if hint is Any or hint is object:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        return any(_fits(value, arm) for arm in args)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if origin is None:
        return not isinstance(hint, type) or isinstance(value, hint)
    if origin is collections.abc.Callable:
        return callable(value)
    if origin in (dict, collections.abc.Mapping):
        return (
            isinstance(value, Mapping) and all(_fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items())
            if len(args) == 2
            else isinstance(value, Mapping)
        )
    if origin is tuple:
        item = args[0] if len(args) == 2 and args[1] is Ellipsis else Any
        return isinstance(value, list | tuple) and all(_fits(v, item) for v in value)
    if origin in (list, collections.abc.Sequence, collections.abc.Iterable, set, frozenset):
        kind = Sequence if origin in (list, collections.abc.Sequence) else Iterable
        if not isinstance(value, kind) or isinstance(value, bytes | Mapping):
            return False
        if isinstance(value, str):
            return bool(args) and args[0] is str  # a bare string is a sequence of strings only
        concrete = isinstance(value, list | tuple | set | frozenset)
        return not (args and concrete) or all(_fits(v, args[0]) for v in value)
    return isinstance(value, origin) if isinstance(origin, type) else True


def describe(hint: Any) -> str:
    """A type for messages: ``an integer``, ``a list of text``, ``a datetime or null``."""
    if hint is type(None) or hint is None:
        return "null"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        return " or ".join(describe(arm) for arm in args)
    names = {str: "text", int: "an integer", float: "a number", bool: "true or false", datetime: "a datetime"}
    if hint in names:
        return names[hint]
    if origin in (dict, collections.abc.Mapping):
        return "a mapping"
    if origin is collections.abc.Callable:
        return "a function"
    if origin in (list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.Iterable):
        return f"a list of {_plural(args[0])}" if args else "a list"
    return f"a {getattr(hint, '__name__', str(hint))}"


def _plural(hint: Any) -> str:
    named = {str: "text", int: "integers", float: "numbers", bool: "booleans"}
    if hint in named:
        return named[hint]
    return f"{hint.__name__} objects" if isinstance(hint, type) else describe(hint)


def _resolved(method: Callable[..., Any], signature: inspect.Signature) -> dict[str, Any]:
    """Each parameter's annotation as a type (names only imported for type checkers are left unchecked)."""
    hints: dict[str, Any] = {}
    for name, parameter in signature.parameters.items():
        annotation = parameter.annotation
        if annotation is inspect.Parameter.empty or parameter.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, method.__globals__)  # the method's own annotation, in its module
            except (NameError, AttributeError, SyntaxError, TypeError):
                continue
        hints[name] = annotation
    return hints


def checked(method: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap one public method: its arguments are checked (type, then value) before it runs."""
    signature = inspect.signature(method)
    hints: dict[str, Any] | None = None

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal hints
        if hints is None:
            hints = _resolved(method, signature)
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError as error:
            raise ValidationError(f"{method.__name__}: {error}") from None
        for name, value in list(bound.arguments.items())[1:]:
            if signature.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
                for key, item in value.items():
                    check_argument(key, item)
            else:
                if name in hints:
                    require_type(value, hints[name], name)
                check_argument(name, value)
        return method(self, *args, **kwargs)

    def check_keywords(values: Mapping[str, Any], taken: Iterable[str] = ()) -> None:
        """Check keyword arguments meant for this method (another method's ``**filters``) by name and type."""
        nonlocal hints
        if hints is None:
            hints = _resolved(method, signature)
        for name, value in values.items():
            parameter = signature.parameters.get(name)
            keyword = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            if name == "self" or name in taken or parameter is None or parameter.kind not in keyword:
                raise ValidationError(f"{method.__name__} takes no argument named {name[:60]!r}", field=name[:60])
            if name in hints:
                require_type(value, hints[name], name)
            check_argument(name, value)

    call.__validated__ = True  # type: ignore[attr-defined]
    call.check_keywords = check_keywords  # type: ignore[attr-defined]
    return call


def validated(cls: C) -> C:
    """Class decorator: every public method (inherited ones too) checks its arguments first."""
    for name in dir(cls):
        if name.startswith("_"):
            continue
        attr = inspect.getattr_static(cls, name)
        if inspect.isfunction(attr) and not getattr(attr, "__validated__", False):
            setattr(cls, name, checked(attr))
    return cls


__all__ = [
    "MAX_ID",
    "MAX_TEXT",
    "check_argument",
    "check_value",
    "checked",
    "require_id",
    "require_type",
    "validated",
]
