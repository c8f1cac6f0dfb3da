"""Filters as a tree: conditions on a memory's fields and metadata, joined by AND, OR and NOT.

The grammar follows mem0's filters (its v2 search and its metadata filtering), so a filter written for mem0
reads the same here:

    {"stream": "decision"}                                   a field equals a value
    {"importance": {"gte": 4}}                               an operator
    {"metadata": {"project": "garden", "priority": {"gt": 2}}}   the memory's own keys
    {"metadata.tags": {"contains": "urgent"}}                the same, one key at a time
    {"AND": [ ... ]}  {"OR": [ ... ]}  {"NOT": { ... }}      combined
    {"stream": "fact", "source": "agent"}                    several keys in one object: all of them

Fields: ``id``, ``stream``, ``source``, ``storyline_id``, ``conversation_id``, ``entity_type`` (the memory
carries an entity of that type), ``importance``, ``time`` (when it happened: its event time, else when it was
stored), ``created_at`` (when it was stored), ``content`` (text contains) and ``metadata``.  Operators:
``eq``, ``ne``, ``gt``, ``gte``, ``lt``, ``lte``, ``in``, ``nin``, ``contains``, ``icontains``, ``exists``;
the value ``"*"`` means "the key exists" (mem0's wildcard).  An unknown field, operator or value is refused
with a :class:`~narrative.errors.ValidationError` that says what is allowed: a misspelt filter never
quietly matches everything or nothing.

:func:`parse_filters` turns the JSON-like value into the tree (:data:`Node`); the stores translate the
tree into SQL (``store/sqlite/filter_sql.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from narrative.checks import METADATA_KEY
from narrative.errors import ValidationError
from narrative.model import EntityType, Source, Stream

__all__ = ["FIELDS", "OPERATORS", "AllOf", "AnyOf", "Condition", "Node", "Not", "describe", "parse_filters"]

#: Limits that keep a filter cheap to check and to run.
MAX_CONDITIONS = 100
MAX_DEPTH = 8
MAX_VALUES = 1000


@dataclass(frozen=True)
class Condition:
    """One test: ``field`` (``metadata`` with ``key``) compared by ``op`` with ``value`` (a list for in/nin)."""

    field: str
    op: str
    value: Any
    key: str | None = None  # the metadata key


@dataclass(frozen=True)
class AllOf:
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class AnyOf:
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    part: Node


Node = Condition | AllOf | AnyOf | Not

EQUALITY = ("eq", "ne", "in", "nin")
ORDER = ("gt", "gte", "lt", "lte")
OPERATORS = (*EQUALITY, *ORDER, "contains", "icontains", "exists")
#: Each field and the operators it takes.
FIELDS: dict[str, tuple[str, ...]] = {
    "id": EQUALITY,
    "stream": EQUALITY,
    "source": EQUALITY,
    "storyline_id": EQUALITY,
    "conversation_id": EQUALITY,
    "entity_type": EQUALITY,
    "importance": (*EQUALITY, *ORDER),
    "time": ("eq", *ORDER),
    "created_at": ("eq", *ORDER),
    "content": ("contains", "icontains"),
    "metadata": OPERATORS,
}
_CHOICES: dict[str, type[StrEnum]] = {"stream": Stream, "source": Source, "entity_type": EntityType}
_LOGICAL = ("AND", "OR")


def parse_filters(value: object, field: str = "filters") -> Node | None:
    """The tree of a filter (``None`` or ``{}``: no filter); ValidationError says what is wrong and where."""
    if value is None or value == {}:
        return None
    tree = _node(value, field, 0)
    if _count(tree) > MAX_CONDITIONS:
        raise ValidationError(f"{field} has more than {MAX_CONDITIONS} conditions", field="filters")
    return tree


def _count(node: Node) -> int:
    if isinstance(node, Condition):
        return 1
    if isinstance(node, Not):
        return _count(node.part)
    return sum(_count(p) for p in node.parts)


def _node(value: object, where: str, depth: int) -> Node:
    if depth > MAX_DEPTH:
        raise ValidationError(f"{where} is nested more than {MAX_DEPTH} levels deep", field="filters")
    if not isinstance(value, Mapping) or not value:
        raise ValidationError(
            f'{where} must be an object such as {{"stream": "decision"}} or {{"AND": [...]}}', field="filters"
        )
    parts: list[Node] = []
    for name, item in value.items():
        if not isinstance(name, str):
            raise ValidationError(f"{where} has a key that is not text", field="filters")
        here = f"{where}.{name}"
        if name in _LOGICAL:
            items = item if isinstance(item, list) else None
            if not items:
                raise ValidationError(f"{here} must be a non-empty list of filters", field="filters")
            nodes = tuple(_node(x, f"{here}[{i}]", depth + 1) for i, x in enumerate(items))
            parts.append(nodes[0] if len(nodes) == 1 else AllOf(nodes) if name == "AND" else AnyOf(nodes))
        elif name == "NOT":
            listed = item if isinstance(item, list) else [item]
            inner = [
                _node(x, f"{here}[{i}]" if isinstance(item, list) else here, depth + 1) for i, x in enumerate(listed)
            ]
            if not inner:
                raise ValidationError(f"{here} must be a filter or a non-empty list of filters", field="filters")
            parts.append(Not(inner[0] if len(inner) == 1 else AllOf(tuple(inner))))
        elif name.upper() in (*_LOGICAL, "NOT"):
            raise ValidationError(f"{here}: write {name.upper()} in capitals", field="filters")
        else:
            parts += _field(name, item, here)
    return parts[0] if len(parts) == 1 else AllOf(tuple(parts))


def _field(name: str, item: object, where: str) -> list[Node]:
    if name == "metadata":
        if not isinstance(item, Mapping) or not item:
            raise ValidationError(
                f'{where} must be an object of metadata keys, e.g. {{"project": "garden"}}', field="filters"
            )
        return [c for key, value in item.items() for c in _conditions("metadata", _key(key, where), value, where)]
    if name.startswith("metadata."):
        return _conditions("metadata", _key(name.removeprefix("metadata."), where), item, where)
    if name not in FIELDS:
        known = ", ".join(FIELDS)
        raise ValidationError(
            f"{where}: no field {name!r}; filters know {known}, AND, OR, NOT (your own keys go under metadata:"
            f' {{"metadata": {{"{name}": ...}}}} or "metadata.{name}")',
            field="filters",
        )
    return _conditions(name, None, item, where)


def _key(key: object, where: str) -> str:
    if not isinstance(key, str) or not METADATA_KEY.fullmatch(key):
        raise ValidationError(
            f"{where}: metadata key {key!r} must be 1-64 letters, digits, '_' or '-'", field="filters"
        )
    return key


def _conditions(name: str, key: str | None, item: object, where: str) -> list[Node]:
    """``{field: value}`` or ``{field: {op: value, ...}}`` → its conditions (several operators: all of them)."""
    if isinstance(item, Mapping):
        if not item:
            raise ValidationError(f'{where} must name an operator, e.g. {{"eq": ...}}', field="filters")
        return [_condition(name, key, str(op), value, f"{where}.{op}") for op, value in item.items()]
    if item == "*":
        return [_condition(name, key, "exists", True, where)]
    return [_condition(name, key, "eq", item, where)]


def _condition(name: str, key: str | None, op: str, value: object, where: str) -> Condition:
    allowed = FIELDS[name]
    if op not in allowed:
        raise ValidationError(f"{where}: {name} takes the operators {', '.join(allowed)}", field="filters")
    if op in ("in", "nin"):
        if not isinstance(value, list) or not value or len(value) > MAX_VALUES:
            raise ValidationError(f"{where} must be a list of 1 to {MAX_VALUES} values", field="filters")
        return Condition(name, op, tuple(_value(name, op, v, where) for v in value), key)
    if op == "exists":
        if not isinstance(value, bool):
            raise ValidationError(f"{where} must be true or false", field="filters")
        return Condition(name, op, value, key)
    return Condition(name, op, _value(name, op, value, where), key)


def _value(name: str, op: str, value: object, where: str) -> Any:
    """The value checked for its field: choices, ids, whole numbers, times, text, JSON scalars."""
    if name in _CHOICES:
        kind = _CHOICES[name]
        if not isinstance(value, str) or value not in {m.value for m in kind}:
            choices = ", ".join(m.value for m in kind)
            raise ValidationError(f"{where} must be one of {choices}; got {value!r}", field="filters")
        return value
    if name in ("id", "storyline_id", "conversation_id"):
        if value is None and name != "id" and op in ("eq", "ne"):
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**63:
            raise ValidationError(f"{where} must be an id (an integer from 1)", field="filters")
        return value
    if name == "importance":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValidationError(f"{where} must be a number (importance is 1 to 5)", field="filters")
        return value
    if name in ("time", "created_at"):
        return _time(value, where)
    if name == "content":
        if not isinstance(value, str) or not value or len(value) > 1000:
            raise ValidationError(f"{where} must be text of 1 to 1000 characters", field="filters")
        return value
    return _scalar(op, value, where)


def _time(value: object, where: str) -> str:
    """A time as the stores keep it (ISO 8601 in UTC); a date alone is its midnight."""
    moment = value
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            moment = None
    if not isinstance(moment, datetime) or not 1000 <= moment.year < 9000:
        raise ValidationError(
            f"{where} must be a time in ISO 8601, e.g. 2026-03-02 or 2026-03-02T09:15:00Z", field="filters"
        )
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return moment.isoformat()


def _scalar(op: str, value: object, where: str) -> Any:
    """A metadata value to compare with: text, a finite number, true/false or null (text for contains)."""
    if op in ("contains", "icontains"):
        if isinstance(value, str) and 0 < len(value) <= 1000:
            return value
        if op == "contains" and (value is None or isinstance(value, bool | int | float)):
            return value  # a list holding this value
        raise ValidationError(f"{where} must be text of 1 to 1000 characters", field="filters")
    if op in ORDER and (value is None or isinstance(value, bool) or not isinstance(value, int | float | str)):
        raise ValidationError(f"{where} must be a number or text to compare with", field="filters")
    if isinstance(value, float) and value != value:  # NaN
        raise ValidationError(f"{where} must be a finite number", field="filters")
    if value is None or isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= 1000):
        return value
    raise ValidationError(
        f"{where} must be text (at most 1000 characters), a number, true/false or null", field="filters"
    )


def describe(node: Node | None) -> str:
    """The tree in words, for messages: ``stream = decision AND metadata.project = garden``."""
    if node is None:
        return "(no filter)"
    if isinstance(node, Condition):
        name = f"metadata.{node.key}" if node.key else node.field
        return f"{name} {node.op} {node.value!r}"
    if isinstance(node, Not):
        return f"NOT ({describe(node.part)})"
    joiner = " AND " if isinstance(node, AllOf) else " OR "
    return "(" + joiner.join(describe(p) for p in node.parts) + ")"
