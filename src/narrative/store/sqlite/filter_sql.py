"""A filter tree (``store/filter_tree.py``) as a SQL condition over ``memories m``, in either store's dialect.

The row SQL both stores share is SQLite's, rewritten for PostgreSQL statement by statement; a memory's
metadata is the one place the two databases read differently (SQLite's ``json_type``/``json_extract``/
``json_each`` against PostgreSQL's ``jsonb`` operators), so that part is written here once per dialect.

Every condition is wrapped in ``COALESCE(…, FALSE)``: a memory without the key (or without a storyline)
fails a test instead of making it unknown, so ``NOT`` and ``ne`` include it, as a reader expects.

``icontains`` lowers both sides with PostgreSQL's ``lower`` and, on SQLite, with ``unicode_lower`` (registered
on the connection, ``store/sqlite/base.py``): SQLite's own ``lower`` folds only A-Z, and the two stores would
part on "MÜNCHEN".
"""

from __future__ import annotations

import json
from typing import Any

from narrative.store.filter_tree import AllOf, AnyOf, Condition, Node, Not
from narrative.store.sqlite.base import UNICODE_LOWER, placeholders

Sql = tuple[str, list[Any]]

#: The plain columns a filter field reads.
COLUMNS = {
    "id": "m.id",
    "stream": "m.stream",
    "source": "m.source",
    "storyline_id": "m.storyline_id",
    "conversation_id": "m.conversation_id",
    "importance": "m.importance",
    "time": "COALESCE(m.event_at, m.created_at)",
    "created_at": "m.created_at",
}
_COMPARE = {"eq": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def tree_sql(node: Node, user_id: str, dialect: str) -> Sql:
    """The condition for ``node`` (``dialect``: ``sqlite`` or ``postgres``) and its parameters."""
    if isinstance(node, Condition):
        sql, params = _condition(node, user_id, _Json(dialect))
        return f"COALESCE(({sql}), FALSE)", params
    if isinstance(node, Not):
        sql, params = tree_sql(node.part, user_id, dialect)
        return f"NOT ({sql})", params
    joiner = " AND " if isinstance(node, AllOf) else " OR "
    assert isinstance(node, AllOf | AnyOf)
    parts = [tree_sql(p, user_id, dialect) for p in node.parts]
    return "(" + joiner.join(sql for sql, _ in parts) + ")", [p for _, params in parts for p in params]


def _condition(c: Condition, user_id: str, js: _Json) -> Sql:
    if c.field == "metadata":
        assert c.key is not None
        return _metadata(c, c.key, js)
    if c.field == "entity_type":
        values = list(c.value) if c.op in ("in", "nin") else [c.value]
        sql = (
            "m.id IN (SELECT memory_id FROM entities WHERE user_id = ? AND memory_id IS NOT NULL"
            f" AND entity_type IN ({placeholders(values)}))"
        )
        return (f"NOT {sql}" if c.op in ("ne", "nin") else sql), [user_id, *values]
    if c.field == "content":
        if c.op == "icontains":
            return js.holds_ignoring_case("m.content"), [c.value]
        return "instr(m.content, ?) > 0", [c.value]
    return _column(COLUMNS[c.field], c.op, c.value)


def _column(column: str, op: str, value: Any) -> Sql:
    if op in ("in", "nin"):
        values = list(value)
        sql = f"{column} IN ({placeholders(values)})"
        return (f"({column} IS NULL OR NOT {sql})" if op == "nin" else sql), values
    if value is None:
        return f"{column} IS {'NOT ' if op == 'ne' else ''}NULL", []
    if op == "ne":
        return f"({column} IS NULL OR {column} != ?)", [value]
    return f"{column} {_COMPARE[op]} ?", [value]


def _metadata(c: Condition, key: str, js: _Json) -> Sql:
    if c.op == "exists":
        sql, params = js.kind(key)
        return f"{sql} IS {'NOT ' if c.value else ''}NULL", params
    if c.op in ("in", "nin", "ne"):
        values = list(c.value) if c.op != "ne" else [c.value]
        parts = [_equal(key, v, js) for v in values]
        sql = " OR ".join(f"COALESCE(({s}), FALSE)" for s, _ in parts)
        params = [p for _, ps in parts for p in ps]
        return (f"NOT ({sql})" if c.op in ("nin", "ne") else f"({sql})"), params
    if c.op == "eq":
        return _equal(key, c.value, js)
    if c.op == "contains":
        listed = js.has_element(key, c.value)
        if not isinstance(c.value, str):
            return listed
        text, params = js.text(key)
        kind, kind_params = js.is_kind(key, str)
        return f"({kind} AND instr({text}, ?) > 0) OR ({listed[0]})", [*kind_params, *params, c.value, *listed[1]]
    if c.op == "icontains":
        text, params = js.text(key)
        kind, kind_params = js.is_kind(key, str)
        return f"{kind} AND {js.holds_ignoring_case(text)}", [*kind_params, *params, c.value]
    # gt, gte, lt, lte: numbers with numbers, text with text
    kind, kind_params = js.is_kind(key, type(c.value))
    value, params = js.number(key) if not isinstance(c.value, str) else js.text(key)
    return f"{kind} AND {value} {_COMPARE[c.op]} ?", [*kind_params, *params, c.value]


def _equal(key: str, value: Any, js: _Json) -> Sql:
    if value is None or isinstance(value, bool):
        return js.is_kind(key, value)
    kind, kind_params = js.is_kind(key, type(value))
    read, params = js.text(key) if isinstance(value, str) else js.number(key)
    return f"{kind} AND {read} = ?", [*kind_params, *params, value]


class _Json:
    """How one dialect reads a top-level metadata key: its JSON type, its text, its number, list membership
    (and how it lowers text)."""

    def __init__(self, dialect: str) -> None:
        self.pg = dialect == "postgres"

    def holds_ignoring_case(self, text: str) -> str:
        """``text`` holds the next parameter, case ignored in every alphabet (the same letters on both stores)."""
        lower = "lower" if self.pg else UNICODE_LOWER
        return f"instr({lower}({text}), {lower}(?)) > 0"

    def _at(self, key: str) -> str:
        """The parameter naming the key: a JSON path for SQLite, the key itself for PostgreSQL."""
        return key if self.pg else f'$."{key}"'

    def kind(self, key: str) -> Sql:
        """The key's JSON type (NULL when the key is missing)."""
        if self.pg:
            return "jsonb_typeof(m.metadata::jsonb -> ?)", [key]
        return "json_type(m.metadata, ?)", [self._at(key)]

    def is_kind(self, key: str, value: Any) -> Sql:
        """The key holds a value of this kind: ``str``, a number type, ``True``/``False`` or ``None``."""
        kind, params = self.kind(key)
        if value is None:
            return f"{kind} = 'null'", params
        if value is True or value is False:
            if self.pg:
                text, more = self.text(key)
                return f"{kind} = 'boolean' AND {text} = '{str(value).lower()}'", [*params, *more]
            return f"{kind} = '{str(value).lower()}'", params
        if value is str:
            return f"{kind} = '{'string' if self.pg else 'text'}'", params
        return (f"{kind} = 'number'" if self.pg else f"{kind} IN ('integer', 'real')"), params

    def text(self, key: str) -> Sql:
        if self.pg:
            return "(m.metadata::jsonb ->> ?)", [key]
        return "json_extract(m.metadata, ?)", [self._at(key)]

    def number(self, key: str) -> Sql:
        if self.pg:  # cast only what is a number (CASE keeps the cast from seeing text)
            return (
                "(CASE WHEN jsonb_typeof(m.metadata::jsonb -> ?) = 'number'"
                " THEN (m.metadata::jsonb ->> ?)::double precision END)"
            ), [key, key]
        return "json_extract(m.metadata, ?)", [self._at(key)]

    def has_element(self, key: str, value: Any) -> Sql:
        """The key holds a list with this value in it."""
        kind, params = self.kind(key)
        if self.pg:
            return (
                f"{kind} = 'array' AND (m.metadata::jsonb -> ?) @> ?::jsonb",
                [*params, key, json.dumps([value], ensure_ascii=False)],
            )
        if value is None or isinstance(value, bool):
            test, values = f"e.type = '{'null' if value is None else str(value).lower()}'", []
        elif isinstance(value, str):
            test, values = "e.type = 'text' AND e.value = ?", [value]
        else:
            test, values = "e.type IN ('integer', 'real') AND e.value = ?", [value]
        return (
            f"{kind} = 'array' AND EXISTS (SELECT 1 FROM json_each(m.metadata, ?) AS e WHERE {test})",
            [*params, self._at(key), *values],
        )
