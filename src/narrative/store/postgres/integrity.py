"""``narrative check`` on PostgreSQL: the checks that are not SQLite's (see :mod:`narrative.store.sqlite.integrity`).

* schema: the recorded migrations are the ones this code knows, and every table, index, trigger and function
  their SQL creates is in the schema (constraints not yet validated are named too);
* pages: PostgreSQL checks its own pages; with the ``amcheck`` extension installed, every b-tree index of the
  schema is checked against its table (``bt_index_check``), else the check says it was skipped;
* full-text: nothing is stored (each process builds its keyword index from the rows): skipped;
* vectors: lengths by ``vector_dims``; pgvector refuses NaN and infinities itself.
"""

from __future__ import annotations

import re
from importlib import resources

from narrative.store.postgres.base import MIGRATIONS_PACKAGE, PostgresBase, migration_names
from narrative.store.sqlite.integrity import Finding, finding

_CREATED = re.compile(
    r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:UNIQUE\s+)?(TABLE|INDEX|TRIGGER|FUNCTION)\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)",
    re.IGNORECASE,
)
_DROPPED = re.compile(r"DROP\s+(TABLE|INDEX|TRIGGER|FUNCTION)\s+(?:IF\s+EXISTS\s+)?(\w+)", re.IGNORECASE)
_CATALOG = {
    "table": "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()",
    "index": "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()",
    "trigger": "SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
    " WHERE NOT t.tgisinternal AND c.relnamespace = current_schema()::regnamespace",
    "function": "SELECT proname FROM pg_proc WHERE pronamespace = current_schema()::regnamespace",
}


def expected_objects() -> set[tuple[str, str]]:
    """(kind, name) of everything the migrations create and do not drop again."""
    made: set[tuple[str, str]] = set()
    for name in migration_names():
        sql = resources.files(MIGRATIONS_PACKAGE).joinpath(name).read_text("utf-8")
        sql = re.sub(r"--[^\n]*", "", sql)
        for match in re.finditer(f"{_CREATED.pattern}|{_DROPPED.pattern}", sql, re.IGNORECASE):
            if match.group(1):
                made.add((match.group(1).lower(), match.group(2).lower()))
            else:
                made.discard((match.group(3).lower(), match.group(4).lower()))
    return made


class PostgresIntegrity(PostgresBase):
    """PostgreSQL's answers to the checks SQLite answers with its own pragmas."""

    def _check_schema(self) -> Finding:
        unknown = sorted(set(self.applied_migrations()) - set(migration_names()))
        if unknown:
            return finding(
                "schema", "problem", f"migrations made by a newer narrative: {', '.join(unknown)} (upgrade narrative)"
            )
        present = {(kind, str(r[0]).lower()) for kind, sql in _CATALOG.items() for r in self._run(sql, ()).rows}
        missing = sorted(f"{kind} {name}" for kind, name in expected_objects() - present)
        invalid = [
            str(r[0])
            for r in self._run(
                "SELECT conname FROM pg_constraint WHERE NOT convalidated"
                " AND connamespace = current_schema()::regnamespace",
                (),
            ).rows
        ]
        if missing or invalid:
            parts = ([f"missing: {', '.join(missing)}"] if missing else []) + (
                [f"constraints not validated: {', '.join(invalid)}"] if invalid else []
            )
            return finding("schema", "problem", "; ".join(parts))
        return finding(
            "schema", "ok", f"{len(migration_names())} migrations applied; {len(expected_objects())} objects present"
        )

    def _check_pages(self) -> Finding:
        if not self._run("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'", ()).rows:
            return finding(
                "pages", "skipped", "PostgreSQL keeps its own pages; install the amcheck extension to check the indexes"
            )
        rows = self._run(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam"
            " WHERE a.amname = 'btree' AND c.relnamespace = current_schema()::regnamespace",
            (),
        ).rows
        broken = []
        for (index,) in rows:
            try:
                self._run("SELECT bt_index_check(%s::regclass, true)", (index,))
            except Exception as error:  # amcheck reports corruption as an error
                broken.append(f"{index}: {error}")
        if broken:
            return finding("pages", "problem", "; ".join(broken) + " (REINDEX the index)")
        return finding("pages", "ok", f"{len(rows)} b-tree indexes agree with their tables (amcheck)")

    def _check_full_text(self) -> Finding:
        return finding(
            "full-text", "skipped", "no full-text index is stored on PostgreSQL (each process builds it from the rows)"
        )

    def _vector_shapes(self, table: str) -> list[tuple[str, int, int]]:
        rows = self._all(f"SELECT model, vector_dims(vector), COUNT(*) FROM {table} GROUP BY 1, 2")
        return [(str(r[0]), int(r[1]), int(r[2])) for r in rows]

    def _non_finite_vectors(self) -> int:
        return 0  # pgvector refuses NaN and infinite numbers on insert

    def _constraint_problems(self) -> list[str]:
        return []  # PostgreSQL enforces its foreign keys; one left unvalidated is named by the schema check
