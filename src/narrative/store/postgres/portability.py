"""Export, import and the after-delete scrub on PostgreSQL.

An import runs the same checks as on SQLite (:mod:`narrative.store.dump_rows`: known columns of
the right type, vectors as long as their embedder's, references inside the export only) with the
column types read from ``information_schema``.  Fresh ids come from each table's identity sequence
(``nextval``), so they can never meet ids another process takes at the same moment, and every
sequence is past the ids used when the import commits.  Foreign keys are checked at commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from narrative.errors import StoreError, ValidationError
from narrative.store.dump_rows import ID_TABLES, VECTOR_TABLES, IdMap, remap_row, renumber
from narrative.store.postgres.base import PostgresBase
from narrative.store.sqlite.base import placeholders
from narrative.store.sqlite.portability import KEEP_CHANGES, USER_TABLES, _decode

#: Columns PostgreSQL keeps that the portable dump does not carry (the owner of rows that hang off a parent).
OWNER_ONLY = {"memory_sources": "user_id", "use_references": "user_id"}
#: information_schema's data types → the declared types the dump checks speak (as SQLite declares them).
_TYPES = {"bigint": "INTEGER", "integer": "INTEGER", "double precision": "REAL", "text": "TEXT", "USER-DEFINED": "BLOB"}


class PostgresPortability(PostgresBase):
    """Overrides of :class:`~narrative.store.sqlite.portability.PortabilityRows` (listed before it)."""

    def table_columns(self, table: str) -> list[str]:
        return list(self._column_types(table))

    def _column_types(self, table: str) -> dict[str, str]:
        if table not in USER_TABLES:
            raise StoreError(f"not a user table: {table!r}")
        rows = self._all(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND table_name = ? ORDER BY ordinal_position",
            (table,),
        )
        return {str(r[0]): _TYPES.get(str(r[1]), str(r[1]).upper()) for r in rows if r[0] != OWNER_ONLY.get(table)}

    def _vector_lengths(self) -> dict[str, int]:
        """Bytes per stored vector, per embedder identity: one vector of each model is enough (all match)."""
        lengths: dict[str, int] = {}
        for table in VECTOR_TABLES:
            for (model,) in self._all(f"SELECT DISTINCT model FROM {table}"):
                row = self._one(f"SELECT vector_dims(vector) FROM {table} WHERE model = ? LIMIT 1", (model,))
                if row is not None:
                    lengths.setdefault(str(model), int(row[0]) * 4)
        return lengths

    def _fresh_ids(self, tables: dict[str, list[dict[str, Any]]]) -> IdMap:
        """Old id → an id drawn from the table's identity sequence (checked and ordered as :func:`renumber`)."""
        order = renumber(tables, lambda _table: 0)  # old id → its rank in the export
        ids: IdMap = {}
        for table in ID_TABLES:
            ranks = order.get(table, {})
            fresh: list[int] = []
            if ranks:
                rows = self._all(
                    f"SELECT nextval(pg_get_serial_sequence('{table}', 'id')) FROM generate_series(1, ?)",
                    (len(ranks),),
                )
                fresh = sorted(int(r[0]) for r in rows)
            ids[table] = {old: fresh[rank] for old, rank in ranks.items()}
        return ids

    def export_user_rows(self, user_id: str) -> dict[str, list[dict[str, Any]]]:
        tables: dict[str, list[dict[str, Any]]] = super().export_user_rows(user_id)  # type: ignore[misc]
        for table, column in OWNER_ONLY.items():
            for row in tables.get(table, []):
                row.pop(column, None)
        return tables

    def _insert_rows(self, table: str, user_id: str, rows: Iterable[Mapping[str, Any]], ids: IdMap) -> int:
        """Vectors become pgvector values; every other table inserts as on SQLite (owners filled by triggers)."""
        if table not in VECTOR_TABLES:
            count: int = super()._insert_rows(table, user_id, rows, ids)  # type: ignore[misc]
            return count
        count = 0
        for number, raw in enumerate(rows, 1):
            row = _decode(table, remap_row(table, raw, ids, number))
            row["user_id"] = user_id
            row["vector"] = np.frombuffer(bytes(row["vector"]), dtype=np.float32)
            names = list(row)
            self._exec(
                f"INSERT INTO {table} ({', '.join(names)}) VALUES ({placeholders(names)})", [row[n] for n in names]
            )
            count += 1
        return count

    # --- after a delete -----------------------------------------------------------------

    def scrub_deleted(self, keep_changes: int = KEEP_CHANGES) -> dict[str, int]:
        """After a delete: this process's keyword index drops what was deleted, and the change log is pruned.

        The deleted rows, vectors and (through the change log) every process's keyword entries are
        gone when the delete commits.  The table files are not vacuumed here: see docs/decisions.md.
        """
        if self.in_transaction:
            raise StoreError("scrub_deleted runs after the delete has committed")
        self.catch_up_keywords()
        return {"pruned_changes": self.prune_memory_changes(keep_changes), "vacuumed": 0, "checkpoint_busy": 0}

    def catch_up_keywords(self) -> None:
        """Apply the change log to this process's keyword index (see PostgresSearch)."""

    def prune_memory_changes(self, keep: int = KEEP_CHANGES) -> int:
        """Drop all but the newest ``keep`` log entries (recording how far, so readers can tell)."""
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
            raise ValidationError("keep must be 0 or more", field="keep")
        row = self._one("SELECT prune_memory_changes(?)", (keep,))
        return int(row[0]) if row else 0
