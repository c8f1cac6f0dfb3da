"""``narrative check``: is the database whole?  Read-only checks a user runs after a crash.

Each check gives one finding ``{"check", "status", "detail"}``; ``status`` is ``ok``, ``problem`` (the database is
not as the code left it: ``narrative check`` exits non-zero), ``note`` (nothing is broken, but something waits:
a turn whose derived work did not finish) or ``skipped`` (not applicable to this store).

    schema      the migrations recorded are the ones this code knows, and every table, index and trigger is as
                they make it (SQLite: the schema compared with a freshly migrated one)
    pages       SQLite's own integrity check: every page, and every index against its table's rows
    full-text   each FTS5 index against the text it indexes (``integrity-check`` with the content table)
    vectors     every vector belongs to a memory (storyline) of the same user, is as long as its embedder's
                identity says, and holds finite numbers
    references  no row points at a missing row or at another user's row, and no row belongs to a missing user
    metadata    every memory's metadata is a JSON object within its bounds (``checks.require_metadata``): what
                filters read
    pending     messages stored but never processed (``process_pending`` finishes them)

The row SQL is shared with PostgreSQL; :mod:`narrative.store.postgres.integrity` replaces the checks that are
SQLite's own.
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any

import numpy as np

from narrative.checks import require_metadata
from narrative.errors import ValidationError
from narrative.store.dump_rows import REFERENCES, TABLES
from narrative.store.sqlite.base import SqliteBase

Finding = dict[str, str]

#: Each FTS5 index and the table whose text it indexes.
FTS_CONTENT = {
    "memories_fts": "memories",
    "messages_fts": "messages",
    "narratives_fts": "narratives",
    "storylines_fts": "storylines",
}
#: Link tables without a user column: (table, column, its table, column, its table); both ends share a user.
LINKS: tuple[tuple[str, str, str, str, str], ...] = (
    ("memory_sources", "memory_id", "memories", "message_id", "messages"),
    ("use_references", "use_id", "uses", "memory_id", "memories"),
)
_OBJECT = re.compile(r"CREATE\s+(?:UNIQUE\s+|VIRTUAL\s+)?(TABLE|INDEX|TRIGGER|VIEW)\s+'?\"?(\w+)", re.IGNORECASE)
_VECTOR_OWNERS = {
    "memory_vectors": ("memory_id", "memories"),
    "storyline_vectors": ("storyline_id", "storylines"),
    "passage_vectors": ("passage_id", "passages"),
}
VECTOR_TABLES = tuple(_VECTOR_OWNERS)
#: Every table whose rows belong to a user (the export's tables).
OWNED_TABLES = TABLES[1:]


def finding(check: str, status: str, detail: str) -> Finding:
    return {"check": check, "status": status, "detail": detail}


def _named(statements: set[str]) -> list[str]:
    names = []
    for sql in sorted(statements):
        match = _OBJECT.search(sql)
        names.append(f"{match.group(1).lower()} {match.group(2)}" if match else sql[:60])
    return sorted(set(names))


class IntegrityRows(SqliteBase):
    """The checks of ``narrative check`` (see the module docstring)."""

    def check_integrity(self) -> list[Finding]:
        """Every check's finding, in the order of the module docstring."""
        return [
            self._check_schema(),
            self._check_pages(),
            self._check_full_text(),
            self._check_vectors(),
            self._check_references(),
            self._check_metadata(),
            self._check_pending(),
        ]

    # --- what is SQLite's own ------------------------------------------------------------------

    def _check_schema(self) -> Finding:
        from narrative.store.sqlite.base import migration_names

        unknown = sorted(set(self.applied_migrations()) - set(migration_names()))
        if unknown:
            return finding(
                "schema", "problem", f"migrations made by a newer narrative: {', '.join(unknown)} (upgrade narrative)"
            )
        fresh = SqliteBase(":memory:")
        try:
            expected = set(fresh.schema_sql())
        finally:
            fresh.close()
        actual = set(self.schema_sql())
        missing, extra = _named(expected - actual), _named(actual - expected)
        if missing or extra:
            parts = ([f"missing or changed: {', '.join(missing)}"] if missing else []) + (
                [f"not made by the migrations: {', '.join(extra)}"] if extra else []
            )
            return finding("schema", "problem", "; ".join(parts))
        return finding(
            "schema", "ok", f"{len(migration_names())} migrations applied; {len(actual)} tables, indexes and triggers"
        )

    def _check_pages(self) -> Finding:
        with self._lock:
            rows = [r[0] for r in self.conn.execute("PRAGMA integrity_check(20)")]
        if rows == ["ok"]:
            return finding("pages", "ok", "every page and every index agrees with its table (PRAGMA integrity_check)")
        return finding("pages", "problem", "; ".join(rows) + " (restore a backup, or export and import what is left)")

    def _check_full_text(self) -> Finding:
        broken = []
        with self._lock:
            for table, content in FTS_CONTENT.items():
                try:
                    self.conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
                except sqlite3.Error as error:
                    broken.append(f"{table} does not match {content} ({error})")
        if broken:
            detail = "; ".join(broken) + " (rebuild: INSERT INTO <table>(<table>) VALUES ('rebuild'))"
            return finding("full-text", "problem", detail)
        return finding("full-text", "ok", f"{len(FTS_CONTENT)} full-text indexes match their text")

    # --- rows (shared with PostgreSQL) -----------------------------------------------------------

    def _check_vectors(self) -> Finding:
        problems: list[str] = []
        for table, (column, owner) in _VECTOR_OWNERS.items():
            orphans = self._count(
                f"SELECT COUNT(*) FROM {table} v WHERE NOT EXISTS (SELECT 1 FROM {owner} o WHERE o.id = v.{column})"
            )
            foreign = self._count(
                f"SELECT COUNT(*) FROM {table} v JOIN {owner} o ON o.id = v.{column} WHERE o.user_id != v.user_id"
            )
            if orphans:
                problems.append(f"{orphans} {table} rows belong to no row of {owner}")
            if foreign:
                problems.append(f"{foreign} {table} rows carry another user than their {owner[:-1]}")
            for model, dims, count in self._vector_shapes(table):
                _, _, named = model.rpartition(":")
                if named.isdigit() and int(named) != dims:
                    problems.append(f"{count} {table} rows of {model} hold {dims} numbers (run `narrative reindex`)")
        bad = self._non_finite_vectors()
        if bad:
            problems.append(f"{bad} vectors hold a NaN or an infinity (run `narrative reindex --force`)")
        if problems:
            return finding("vectors", "problem", "; ".join(problems))
        counts = {table: self._count(f"SELECT COUNT(*) FROM {table}") for table in VECTOR_TABLES}
        return finding(
            "vectors",
            "ok",
            f"{counts['memory_vectors']} memory, {counts['storyline_vectors']} storyline and"
            f" {counts['passage_vectors']} passage vectors, each its owner's, of the right length, finite",
        )

    def _vector_shapes(self, table: str) -> list[tuple[str, int, int]]:
        """(model, numbers per vector, rows) for each shape of ``table``'s vectors."""
        rows = self._all(f"SELECT model, length(vector) / 4, COUNT(*) FROM {table} GROUP BY model, length(vector)")
        return [(str(r[0]), int(r[1]), int(r[2])) for r in rows]

    def _non_finite_vectors(self) -> int:
        bad = 0
        for table in VECTOR_TABLES:
            with self._lock:
                cursor = self.conn.execute(f"SELECT vector FROM {table}")
                while batch := cursor.fetchmany(1024):
                    bad += sum(not np.isfinite(np.frombuffer(r[0], dtype=np.float32)).all() for r in batch)
        return bad

    def _check_references(self) -> Finding:
        problems: list[str] = []
        for table in TABLES[1:]:
            gone = self._count(
                f"SELECT COUNT(*) FROM {table} x WHERE NOT EXISTS (SELECT 1 FROM users u{_owner(table)})"
            )
            if gone:
                problems.append(f"{gone} {table} rows belong to no user")
        for table, columns in REFERENCES.items():
            for column, target in columns.items():
                orphans = self._count(
                    f"SELECT COUNT(*) FROM {table} x WHERE x.{column} IS NOT NULL"
                    f" AND NOT EXISTS (SELECT 1 FROM {target} r WHERE r.id = x.{column})"
                )
                if orphans:
                    problems.append(f"{orphans} {table}.{column} point at no row of {target}")
                if _has_user(table):
                    foreign = self._count(
                        f"SELECT COUNT(*) FROM {table} x JOIN {target} r ON r.id = x.{column}"
                        " WHERE r.user_id != x.user_id"
                    )
                    if foreign:
                        problems.append(f"{foreign} {table}.{column} point at another user's {target}")
        for table, left, left_table, right, right_table in LINKS:
            foreign = self._count(
                f"SELECT COUNT(*) FROM {table} x JOIN {left_table} a ON a.id = x.{left}"
                f" JOIN {right_table} b ON b.id = x.{right} WHERE a.user_id != b.user_id"
            )
            if foreign:
                problems.append(f"{foreign} {table} rows join two users' rows")
        problems += self._constraint_problems()
        if problems:
            return finding("references", "problem", "; ".join(problems))
        return finding("references", "ok", "no row points at a missing row or at another user's")

    def _constraint_problems(self) -> list[str]:
        """Foreign keys the database itself reports broken (SQLite: PRAGMA foreign_key_check)."""
        with self._lock:
            rows = self.conn.execute("PRAGMA foreign_key_check").fetchall()
        by_table: dict[str, int] = {}
        for row in rows:
            by_table[str(row[0])] = by_table.get(str(row[0]), 0) + 1
        return [f"{count} {table} rows break a foreign key" for table, count in sorted(by_table.items())]

    def _check_metadata(self) -> Finding:
        bad: list[str] = []
        rows = self._all("SELECT id, metadata FROM memories WHERE metadata != '{}' ORDER BY id")
        for memory_id, text in rows:
            try:
                require_metadata(json.loads(text))
            except (ValueError, ValidationError) as error:
                bad.append(f"memory {memory_id}: {error}")
        if bad:
            more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
            return finding("metadata", "problem", "; ".join(bad[:5]) + more)
        return finding("metadata", "ok", f"every memory's metadata is a JSON object within bounds ({len(rows)} set)")

    def _check_pending(self) -> Finding:
        rows = self._all(
            "SELECT user_id, COUNT(*) FROM messages WHERE storyline_id IS NULL AND role != 'system'"
            " GROUP BY user_id ORDER BY user_id"
        )
        if not rows:
            return finding("pending", "ok", "every stored message has been processed")
        users = ", ".join(f"{r[0]} ({r[1]})" for r in rows)
        return finding(
            "pending",
            "note",
            f"messages stored but not yet processed, by user: {users}; an interrupted turn: run"
            " `narrative --user NAME process-pending` (Memory.process_pending) to finish them",
        )

    def _count(self, sql: str, params: Any = ()) -> int:
        row = self._one(sql, params)
        return int(row[0]) if row else 0


def _has_user(table: str) -> bool:
    return table not in ("memory_sources", "use_references")


def _owner(table: str) -> str:
    """The WHERE that ties a row of ``table`` to its user (link tables through their first reference)."""
    if table == "memory_sources":
        return " JOIN memories m ON m.user_id = u.id WHERE m.id = x.memory_id"
    if table == "use_references":
        return " JOIN uses s ON s.user_id = u.id WHERE s.id = x.use_id"
    return " WHERE u.id = x.user_id"
