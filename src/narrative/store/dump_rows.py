"""Checking and renumbering the rows of an export before a store inserts them (any backend).

An import must not reach other users: every row is checked like the write path checks its input,
and every id is replaced by a fresh one.  A reference (a foreign key column, or an id inside a
JSON value) must point at a row *of the same export*; a column reference to anything else is
refused, naming only the export's own row, so the error says nothing about what else the file
holds.  Ids inside JSON values that point outside the export are dropped (they are hints such as
"which message this came from", never keys).

The functions are pure: the store supplies where fresh ids start (:func:`renumber`) and inserts.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import numpy as np

from narrative.checks import require_metadata
from narrative.errors import ValidationError
from narrative.validate import MAX_YEAR, MIN_YEAR, require_unicode

#: Every user table in insertion order (the export's tables).
TABLES: tuple[str, ...] = (
    "users",
    "storylines",
    "storyline_vectors",
    "conversations",
    "messages",
    "narratives",
    "memories",
    "memory_sources",
    "memory_vectors",
    "memory_events",
    "passages",
    "passage_vectors",
    "conflicts",
    "entities",
    "state_deltas",
    "uses",
    "use_references",
    "routing_decisions",
    "storyline_bindings",
    "memory_links",
    "decision_reviews",
)
#: Tables whose rows have an integer ``id`` of their own (renumbered on import).
ID_TABLES: tuple[str, ...] = (
    "storylines",
    "conversations",
    "messages",
    "narratives",
    "memories",
    "memory_events",
    "passages",
    "conflicts",
    "entities",
    "state_deltas",
    "uses",
    "routing_decisions",
    "storyline_bindings",
    "decision_reviews",
)
#: table → {column → the table it references}.
REFERENCES: dict[str, dict[str, str]] = {
    "storyline_vectors": {"storyline_id": "storylines"},
    "messages": {"conversation_id": "conversations", "storyline_id": "storylines"},
    "narratives": {
        "previous_narrative_id": "narratives",
        "storyline_id": "storylines",
        "conversation_id": "conversations",
    },
    "memories": {
        "conversation_id": "conversations",
        "storyline_id": "storylines",
        "narrative_id": "narratives",
        "superseded_by": "memories",
    },
    "passages": {"message_id": "messages", "memory_id": "memories", "superseded_by": "passages"},
    "passage_vectors": {"passage_id": "passages"},
    "conflicts": {
        "memory_id": "memories",
        "other_memory_id": "memories",
        "passage_id": "passages",
        "other_passage_id": "passages",
    },
    "memory_sources": {"memory_id": "memories", "message_id": "messages"},
    "memory_vectors": {"memory_id": "memories"},
    "entities": {
        "memory_id": "memories",
        "conversation_id": "conversations",
        "storyline_id": "storylines",
        "resolved_by_memory_id": "memories",
        "resolved_by_entity_id": "entities",
    },
    "state_deltas": {"memory_id": "memories", "conversation_id": "conversations"},
    "uses": {"conversation_id": "conversations"},
    "use_references": {"use_id": "uses", "memory_id": "memories"},
    "routing_decisions": {"message_id": "messages", "storyline_id": "storylines"},
    "storyline_bindings": {"storyline_id": "storylines"},
    "memory_links": {"memory_id": "memories", "linked_id": "memories"},
    "decision_reviews": {"memory_id": "memories"},
}
#: table → {column → the table whose ids it names without being a foreign key}: a deleted memory's events
#: keep its id (a tombstone).  Such an id is renumbered with the table's own (in order among them) and may
#: name no row of the export; it never names a row outside it.
SOFT_REFERENCES: dict[str, dict[str, str]] = {"memory_events": {"memory_id": "memories"}}
#: Keys inside JSON values that hold ids, and the table each points at.
JSON_ID_KEYS: dict[str, str] = {
    "message_id": "messages",
    "message_ids": "messages",
    "entity_id": "entities",
    "entity_ids": "entities",
    "resolved_by_entity_id": "entities",
    "storyline_id": "storylines",
    "current_storyline_id": "storylines",
    "conversation_id": "conversations",
    "from_conversation": "conversations",
    "memory_id": "memories",
    "memory_ids": "memories",
    "superseded_by": "memories",
    "supersedes": "memories",
    "narrative_id": "narratives",
    "use_id": "uses",
}
#: JSON-valued columns and the container each must hold.
JSON_SHAPES: dict[str, dict[str, type]] = {
    "storylines": {"keywords": list, "participants": list},
    "conversations": {"preview": dict},
    "messages": {"meta": dict},
    "narratives": {"memory_ids": list},
    "memories": {"emotions": list, "details": dict, "metadata": dict},
    "memory_events": {"detail": dict},
    "entities": {"data": dict},
    "state_deltas": {"data": dict},
    "uses": {"meta": dict},
    "routing_decisions": {"scores": dict},
    "storyline_bindings": {"payload": dict},
}
#: JSON columns that belong to the caller (an agent's binding payload): carried verbatim, ids inside untouched.
OPAQUE_JSON = frozenset({("storyline_bindings", "payload"), ("memories", "metadata")})
BOOL_COLUMNS: dict[str, frozenset[str]] = {
    "conversations": frozenset({"is_paused"}),
    "narratives": frozenset({"sealed"}),
    "memories": frozenset({"user_reviewed", "user_edited"}),
    "entities": frozenset({"is_active"}),
    "state_deltas": frozenset({"applied"}),
}
VECTOR_TABLES = ("memory_vectors", "storyline_vectors", "passage_vectors")
MAX_CELL_TEXT = 5_000_000  # a message holds up to checks.MAX_MESSAGE characters
MAX_INT = 2**63 - 1

IdMap = dict[str, dict[int, int]]


def check_tables(tables: Mapping[str, Any], columns: Callable[[str], dict[str, str]]) -> None:
    """Every table known, every row an object of known columns with values of the column's type.

    ``columns(table)`` gives {column: declared type} ("INTEGER", "TEXT", "REAL", "BLOB").
    """
    unknown = set(tables) - set(TABLES)
    if unknown:
        raise ValidationError(f"unknown tables in the export: {sorted(unknown)}", field="tables")
    for table, rows in tables.items():
        if not isinstance(rows, list):
            raise ValidationError(f"{table} must be a list of rows", field=table)
        types = columns(table)
        for number, row in enumerate(rows, 1):
            where = f"{table} row {number}"
            if not isinstance(row, Mapping):
                raise ValidationError(f"{where} is not an object", field=table)
            extra = set(row) - set(types)
            if extra:
                raise ValidationError(
                    f"{where} has unknown columns {sorted(extra)}: made by a newer schema?", field=table
                )
            for column, value in row.items():
                _check_cell(table, column, types[column], value, f"{where}, {column}")


def _check_cell(table: str, column: str, kind: str, value: Any, where: str) -> None:
    if value is None:
        return
    if column in JSON_SHAPES.get(table, {}):
        shape = JSON_SHAPES[table][column]
        if not isinstance(value, shape):
            raise ValidationError(f"{where} must be a JSON {shape.__name__}", field=table)
        _check_json(value, where, 0)
        if (table, column) == ("memories", "metadata"):  # as the write path checks it
            try:
                require_metadata(value)
            except ValidationError as error:
                raise ValidationError(f"{where}: {error}", field=table) from None
    elif column in BOOL_COLUMNS.get(table, ()):
        if not isinstance(value, bool | int):
            raise ValidationError(f"{where} must be true or false", field=table)
    elif table in VECTOR_TABLES and column == "vector":
        if not isinstance(value, str) or len(value) > MAX_CELL_TEXT:
            raise ValidationError(f"{where} must be base64 text", field=table)
    elif kind == "INTEGER":
        if isinstance(value, bool) or not isinstance(value, int) or not -MAX_INT - 1 <= value <= MAX_INT:
            raise ValidationError(f"{where} must be a 64-bit integer", field=table)
    elif kind == "REAL":
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValidationError(f"{where} must be a finite number", field=table)
    elif kind == "TEXT":
        if not isinstance(value, str) or len(value) > MAX_CELL_TEXT:
            raise ValidationError(f"{where} must be text of at most {MAX_CELL_TEXT} characters", field=table)
        require_unicode(value, table)
        if column.endswith("_at"):
            _check_time(value, where, table)


def _check_time(value: str, where: str, table: str) -> None:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValidationError(f"{where} is not an ISO-8601 time", field=table) from None
    if not MIN_YEAR <= moment.year < MAX_YEAR:
        raise ValidationError(f"{where} must fall in the years {MIN_YEAR}–{MAX_YEAR - 1}", field=table)


def _check_json(value: Any, where: str, depth: int) -> None:
    if depth > 16:
        raise ValidationError(f"{where} is nested too deeply", field="tables")
    if isinstance(value, str):
        require_unicode(value, "tables")
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        if not -MAX_INT - 1 <= value <= MAX_INT:
            raise ValidationError(f"{where} holds a number beyond 64 bits", field="tables")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(f"{where} holds a number that is not finite", field="tables")
    elif isinstance(value, list):
        for item in value:
            _check_json(item, where, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            require_unicode(str(key), "tables")
            _check_json(item, where, depth + 1)


def check_vectors(tables: Mapping[str, list[dict[str, Any]]], lengths: Mapping[str, int]) -> None:
    """Each vector is base64 of float32s, as long as its model's identity (``model:dims``) says and as
    long as the vectors of that model already stored (``lengths``: model → bytes)."""
    for table in VECTOR_TABLES:
        seen: dict[str, int] = {}
        for number, row in enumerate(tables.get(table, []), 1):
            where = f"{table} row {number}"
            model = row.get("model")
            if not isinstance(model, str) or not model:
                raise ValidationError(f"{where} names no embedding model", field=table)
            try:
                raw = base64.b64decode(str(row.get("vector", "")), validate=True)
            except ValueError:
                raise ValidationError(f"{where}: the vector is not base64", field=table) from None
            size = len(raw)
            expected = lengths.get(model) or seen.get(model) or _identity_bytes(model)
            if size == 0 or size % 4 or (expected is not None and size != expected):
                raise ValidationError(
                    f"{where}: a vector of {size // 4} numbers does not fit the embedder {model}", field=table
                )
            if not np.isfinite(np.frombuffer(raw, dtype="<f4")).all():
                raise ValidationError(f"{where}: the vector holds a NaN or an infinite number", field=table)
            seen[model] = size


def _identity_bytes(model: str) -> int | None:
    _, _, dims = model.rpartition(":")
    return int(dims) * 4 if dims.isdigit() and 0 < int(dims) < 100_000 else None


def renumber(tables: Mapping[str, list[dict[str, Any]]], first_free: Callable[[str], int]) -> IdMap:
    """Fresh ids for every row with an id, in the export's order: old id → new id, per table."""
    ids: IdMap = {}
    for table in ID_TABLES:
        rows = tables.get(table, [])
        old = [row.get("id") for row in rows]
        if any(isinstance(i, bool) or not isinstance(i, int) for i in old):
            raise ValidationError(f"every {table} row needs an integer id", field=table)
        if len(set(old)) != len(old):
            raise ValidationError(f"{table} has the same id on two rows", field=table)
        named = set(old) | _soft_ids(tables, table)
        start = first_free(table)
        ids[table] = {int(i): start + n for n, i in enumerate(sorted(int(i) for i in named))}  # type: ignore[arg-type]
    return ids


def _soft_ids(tables: Mapping[str, list[dict[str, Any]]], target: str) -> set[int]:
    """The ids of ``target`` that soft references name (each an integer)."""
    named: set[int] = set()
    for table, columns in SOFT_REFERENCES.items():
        for column, points_at in columns.items():
            if points_at != target:
                continue
            for number, row in enumerate(tables.get(table, []), 1):
                value = row.get(column)
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ValidationError(f"{table} row {number}: {column} must be an integer id", field=table)
                named.add(value)
    return named


def remap_row(table: str, row: Mapping[str, Any], ids: IdMap, number: int) -> dict[str, Any]:
    """The row with its id, references and JSON-held ids renumbered; a reference outside the export is refused."""
    out = dict(row)
    if table in ID_TABLES:
        out["id"] = ids[table][int(row["id"])]
    for column, target in SOFT_REFERENCES.get(table, {}).items():
        out[column] = ids[target][int(row[column])]  # renumbered with the target's own (see renumber)
    for column, target in REFERENCES.get(table, {}).items():
        value = row.get(column)
        if value is None:
            continue
        new = ids.get(target, {}).get(value) if isinstance(value, int) and not isinstance(value, bool) else None
        if new is None:
            raise ValidationError(f"{table} row {number}: {column} {value!r} is not a row of this export", field=table)
        out[column] = new
    for column in JSON_SHAPES.get(table, {}):
        if out.get(column) is not None and (table, column) not in OPAQUE_JSON:
            out[column] = (
                _remap_ids(out[column], "memories", ids)
                if (table, column) == ("narratives", "memory_ids")
                else _remap_json(out[column], ids)
            )
    return out


def _remap_json(value: Any, ids: IdMap) -> Any:
    if isinstance(value, dict):
        return {
            k: _remap_ids(v, JSON_ID_KEYS[k], ids) if k in JSON_ID_KEYS else _remap_json(v, ids)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_remap_json(v, ids) for v in value]
    return value


def _remap_ids(value: Any, table: str, ids: IdMap) -> Any:
    known = ids.get(table, {})
    if isinstance(value, list):
        return [known[v] for v in value if _is_int(v) and v in known]
    if _is_int(value):
        return known.get(value)
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
