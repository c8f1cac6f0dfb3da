"""Whole-user dumps and restores (export/import) and the row-level helpers deletes need.

A dump is every row of every table that belongs to one user, table by table in
dependency order, each row a JSON object keyed by column name (``sorted`` keys):

* JSON-text columns (keywords, data, details, preview, …) are decoded into JSON values;
* boolean columns (is_paused, sealed, is_active, …) become ``true``/``false``;
* vector BLOBs become base64 of their little-endian float32 bytes, next to their ``model``.

Full-text tables are not dumped: their triggers rebuild them as rows are inserted.  A restore
checks every row and gives every row a fresh id (:mod:`narrative.store.dump_rows`), so it never
collides with, points at or reveals another user's rows; foreign keys are checked at commit.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from narrative.errors import StoreError, ValidationError
from narrative.store.dump_rows import (
    ID_TABLES,
    TABLES,
    VECTOR_TABLES,
    IdMap,
    check_tables,
    check_vectors,
    remap_row,
    renumber,
)
from narrative.store.sqlite.base import FLOORED, SqliteBase, dumps, loads, next_id, placeholders
from narrative.store.sqlite.memories import NEXT_MEMORY_ID, details_from_json

USER_TABLES = TABLES  # API keys are credentials, not memory: never exported, kept across an import
#: Tables whose rows carry ``user_id`` (set to the importing user); users' own key is ``id``.
_OWNED = frozenset(TABLES) - {"users", "memory_sources", "use_references"}
_SELECT: dict[str, tuple[str, str]] = {  # table → (WHERE clause on alias t, ORDER BY)
    "users": ("t.id = ?", "t.id"),
    "memory_sources": ("t.memory_id IN (SELECT id FROM memories WHERE user_id = ?)", "t.memory_id, t.message_id"),
    "use_references": ("t.use_id IN (SELECT id FROM uses WHERE user_id = ?)", "t.use_id, t.memory_id"),
    "memory_vectors": ("t.user_id = ?", "t.memory_id"),
    "storyline_vectors": ("t.user_id = ?", "t.storyline_id"),
    "passage_vectors": ("t.user_id = ?", "t.passage_id"),
    "memory_links": ("t.user_id = ?", "t.memory_id, t.linked_id, t.kind"),
}
JSON_COLUMNS: dict[str, frozenset[str]] = {
    "storylines": frozenset({"keywords", "participants"}),
    "conversations": frozenset({"preview"}),
    "messages": frozenset({"meta"}),
    "narratives": frozenset({"memory_ids"}),
    "memories": frozenset({"emotions", "details", "metadata"}),
    "memory_events": frozenset({"detail"}),
    "entities": frozenset({"data"}),
    "state_deltas": frozenset({"data"}),
    "uses": frozenset({"meta"}),
    "routing_decisions": frozenset({"scores"}),
    "storyline_bindings": frozenset({"payload"}),
}
BOOL_COLUMNS: dict[str, frozenset[str]] = {
    "conversations": frozenset({"is_paused"}),
    "narratives": frozenset({"sealed"}),
    "memories": frozenset({"user_reviewed", "user_edited"}),
    "entities": frozenset({"is_active"}),
    "state_deltas": frozenset({"applied"}),
}
BLOB_COLUMNS: dict[str, frozenset[str]] = {
    "memory_vectors": frozenset({"vector"}),
    "storyline_vectors": frozenset({"vector"}),
    "passage_vectors": frozenset({"vector"}),
}
FTS_TABLES = ("memories_fts", "messages_fts", "narratives_fts", "storylines_fts")
KEEP_CHANGES = 1_000  # change-log entries kept by a prune: enough for indexes a few writes behind
_CONTENT_TABLES = (
    "conversations",
    "messages",
    "narratives",
    "memories",
    "entities",
    "state_deltas",
    "uses",
    "routing_decisions",
    "memory_vectors",
    "storyline_bindings",
)


def _encode(table: str, row: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for column, value in row.items():
        if column in JSON_COLUMNS.get(table, ()) and value is not None:
            value = loads(value)
        elif column in BOOL_COLUMNS.get(table, ()):
            value = bool(value)
        elif column in BLOB_COLUMNS.get(table, ()):
            value = base64.b64encode(_vector_bytes(value)).decode("ascii")
        out[column] = value
    return out


def _vector_bytes(value: Any) -> bytes:
    """A stored vector as little-endian float32 bytes: a BLOB already is; a pgvector value is converted."""
    if hasattr(value, "to_numpy"):
        return bytes(np.asarray(value.to_numpy(), dtype="<f4").tobytes())
    return bytes(value)


def _decode(table: str, row: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for column, value in row.items():
        if column in JSON_COLUMNS.get(table, ()) and value is not None:
            value = dumps(value)
        elif column in BOOL_COLUMNS.get(table, ()):
            value = int(bool(value))
        elif column in BLOB_COLUMNS.get(table, ()):
            try:
                value = base64.b64decode(str(value), validate=True)
            except ValueError as error:
                raise ValidationError(f"{table}.{column} is not base64", field=table) from error
        out[column] = value
    return out


def _check_details(memories: Iterable[Mapping[str, Any]]) -> None:
    for number, row in enumerate(memories, 1):
        if row.get("details") is None:
            continue
        try:
            details_from_json(dumps(row["details"]))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ValidationError(f"memories row {number}: details are not a known kind", field="memories") from None


class PortabilityRows(SqliteBase):
    # --- export / import -------------------------------------------------------------

    def table_columns(self, table: str) -> list[str]:
        if table not in USER_TABLES:
            raise StoreError(f"not a user table: {table!r}")
        return [r[1] for r in self._all(f"PRAGMA table_info({table})")]

    def export_user_rows(self, user_id: str) -> dict[str, list[dict[str, Any]]]:
        """Every row of ``user_id`` in every table (see the module docstring for the encoding)."""
        tables: dict[str, list[dict[str, Any]]] = {}
        with self._atomic():  # one consistent snapshot
            for table in USER_TABLES:
                where, order = _SELECT.get(table, ("t.user_id = ?", "t.id"))
                rows = self._all(f"SELECT t.* FROM {table} t WHERE {where} ORDER BY {order}", (user_id,))
                tables[table] = [_encode(table, dict(r)) for r in rows]
        return tables

    def user_content(self, user_id: str) -> dict[str, int]:
        """Rows the user has beyond a fresh bootstrap (Your Story and the empty default storylines)."""
        counts = {t: self.count_rows(t, user_id) for t in _CONTENT_TABLES}
        row = self._one(
            "SELECT COUNT(*) FROM storylines WHERE user_id = ? AND (kind NOT IN ('your_story', 'default')"
            " OR interaction_count > 0 OR summary != '')",
            (user_id,),
        )
        counts["storylines"] = int(row[0]) if row else 0
        return {t: n for t, n in counts.items() if n}

    def import_user_rows(self, user_id: str, tables: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
        """Replace the (bootstrap-only) user with the dumped rows under fresh ids, owned by ``user_id``.

        Every row is checked first (:mod:`narrative.store.dump_rows`): known columns, the column's
        type, valid text and times, vectors as long as their embedder's, every reference pointing
        into the export itself.  All or nothing: one transaction.
        """
        check_tables(tables, self._column_types)
        check_vectors(tables, self._vector_lengths())
        _check_details(tables.get("memories", []))
        counts: dict[str, int] = {}
        with self._atomic():
            self._exec("PRAGMA defer_foreign_keys = ON")
            keys = [
                tuple(r)
                for r in self._all("SELECT id, key_hash, label, created_at FROM api_keys WHERE user_id = ?", (user_id,))
            ]
            with self._id_floors_kept():  # the starter storylines the export's own replace may give their ids
                self._exec("DELETE FROM storyline_vectors WHERE user_id = ?", (user_id,))
                self._exec("DELETE FROM storylines WHERE user_id = ?", (user_id,))
                self._exec("DELETE FROM users WHERE id = ?", (user_id,))
            ids = self._fresh_ids(tables)
            for table in USER_TABLES:
                counts[table] = self._insert_rows(table, user_id, tables.get(table, ()), ids)
            for key in keys:  # the caller's credentials survive the restore
                self._exec(
                    "INSERT INTO api_keys(id, user_id, key_hash, label, created_at) VALUES (?, ?, ?, ?, ?)",
                    (key[0], user_id, key[1], key[2], key[3]),
                )
        return counts

    def _column_types(self, table: str) -> dict[str, str]:
        if table not in USER_TABLES:
            raise StoreError(f"not a user table: {table!r}")
        return {r[1]: str(r[2]).upper() for r in self._all(f"PRAGMA table_info({table})")}

    def _vector_lengths(self) -> dict[str, int]:
        """Bytes per stored vector, per embedder identity (what an import's vectors must match)."""
        lengths: dict[str, int] = {}
        for table in VECTOR_TABLES:
            for model, size in self._all(f"SELECT model, MIN(length(vector)) FROM {table} GROUP BY model"):
                lengths.setdefault(str(model), int(size))
        return lengths

    def _fresh_ids(self, tables: dict[str, list[dict[str, Any]]]) -> IdMap:
        """Old id → fresh id per table: ids follow the largest in the file (one writer holds the file)."""
        return renumber(tables, self._first_free_id)

    def _first_free_id(self, table: str) -> int:
        if table not in ID_TABLES:
            raise StoreError(f"not a table with ids: {table!r}")
        if table == "memories":  # above the ids of deleted memories too (their events keep them)
            row = self._one(f"SELECT {NEXT_MEMORY_ID}")
            return int(row[0]) if row else 1
        if table in FLOORED:  # above the ids it deleted too (migrations 0013, 0014)
            row = self._one(f"SELECT {next_id(table)}")
            return int(row[0]) if row else 1
        row = self._one(f"SELECT MAX(id) FROM {table}")
        return int(row[0] or 0) + 1 if row else 1

    def _insert_rows(self, table: str, user_id: str, rows: Iterable[Mapping[str, Any]], ids: IdMap) -> int:
        count = 0
        for number, raw in enumerate(rows, 1):
            row = _decode(table, remap_row(table, raw, ids, number))
            if table == "users":
                row["id"] = user_id
            elif table in _OWNED:
                row["user_id"] = user_id
            names = list(row)
            self._exec(
                f"INSERT INTO {table} ({', '.join(names)}) VALUES ({placeholders(names)})",
                [row[n] for n in names],
            )
            count += 1
        return count

    # --- helpers for deletes -----------------------------------------------------------

    def conversation_memory_ids(self, user_id: str, conversation_id: int) -> list[int]:
        """Memories that came only from one conversation: made in it, or sourced only from its messages."""
        rows = self._all(
            "SELECT id FROM memories WHERE user_id = ? AND conversation_id = ?"
            " UNION SELECT s.memory_id FROM memory_sources s JOIN messages g ON g.id = s.message_id"
            " WHERE s.memory_id IN (SELECT s2.memory_id FROM memory_sources s2 JOIN messages g2"
            " ON g2.id = s2.message_id WHERE g2.user_id = ? AND g2.conversation_id = ?)"
            " GROUP BY s.memory_id HAVING SUM(g.conversation_id != ?) = 0 ORDER BY 1",
            (user_id, conversation_id, user_id, conversation_id, conversation_id),
        )
        return [r[0] for r in rows]

    def narratives_with_memories(self, user_id: str, memory_ids: Iterable[int]) -> list[int]:
        """Ids of the narrative links whose ``memory_ids`` mention any of these memories."""
        ids = list(memory_ids)
        if not ids:
            return []
        rows = self._all(
            "SELECT DISTINCT n.id FROM narratives n, json_each(n.memory_ids) j"
            f" WHERE n.user_id = ? AND j.value IN ({placeholders(ids)}) ORDER BY n.id",
            [user_id, *ids],
        )
        return [r[0] for r in rows]

    def splice_out_narratives(self, user_id: str, narrative_ids: Iterable[int]) -> int:
        """Delete links, re-pointing each follower at the deleted link's predecessor (the chain stays whole)."""
        count = 0
        with self._atomic():
            for nid in narrative_ids:
                row = self._one(
                    "SELECT previous_narrative_id FROM narratives WHERE id = ? AND user_id = ?", (nid, user_id)
                )
                if row is None:
                    continue
                self._exec(
                    "UPDATE narratives SET previous_narrative_id = ? WHERE previous_narrative_id = ? AND user_id = ?",
                    (row[0], nid, user_id),
                )
                count += self._exec("DELETE FROM narratives WHERE id = ? AND user_id = ?", (nid, user_id)).rowcount
        return count

    def delete_messages(self, user_id: str, message_ids: Iterable[int]) -> int:
        """Delete messages and recount their conversations (count and last message time)."""
        ids = list(message_ids)
        if not ids:
            return 0
        with self._atomic():
            touched = [
                r[0]
                for r in self._all(
                    f"SELECT DISTINCT conversation_id FROM messages WHERE user_id = ? AND id IN ({placeholders(ids)})",
                    [user_id, *ids],
                )
            ]
            count = self._exec(
                f"DELETE FROM messages WHERE user_id = ? AND id IN ({placeholders(ids)})", [user_id, *ids]
            ).rowcount
            for cid in touched:
                self._exec(
                    "UPDATE conversations SET"
                    " message_count = (SELECT COUNT(*) FROM messages WHERE conversation_id = ?),"
                    " last_message_at = (SELECT MAX(created_at) FROM messages WHERE conversation_id = ?)"
                    " WHERE id = ? AND user_id = ?",
                    (cid, cid, cid, user_id),
                )
        return count

    def reopen_resolved_by(self, user_id: str, memory_ids: Iterable[int]) -> int:
        """Reactivate entities whose resolution came from these memories (before the memories go)."""
        ids = list(memory_ids)
        if not ids:
            return 0
        with self._atomic():
            return self._exec(
                "UPDATE entities SET is_active = 1, resolved_at = NULL, resolved_by_memory_id = NULL,"
                f" resolved_by_entity_id = NULL WHERE user_id = ? AND resolved_by_memory_id IN ({placeholders(ids)})",
                [user_id, *ids],
            ).rowcount

    def delete_conversation_uses(self, user_id: str, conversation_id: int) -> int:
        """The audit trail recorded while one conversation was active."""
        with self._atomic():
            return self._exec(
                "DELETE FROM uses WHERE user_id = ? AND conversation_id = ?", (user_id, conversation_id)
            ).rowcount

    def delete_uses_of_memories(self, user_id: str, memory_ids: Iterable[int]) -> int:
        """Delete the uses (recorded queries, outcomes) that drew on any of these memories."""
        ids = list(memory_ids)
        count = 0
        with self._atomic():
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                count += self._exec(
                    "DELETE FROM uses WHERE user_id = ? AND id IN (SELECT use_id FROM use_references"
                    f" WHERE memory_id IN ({placeholders(chunk)}))",
                    [user_id, *chunk],
                ).rowcount
        return count

    def scrub_deleted(self, keep_changes: int = KEEP_CHANGES) -> dict[str, int]:
        """After a delete: leave no trace of deleted text in the file's bytes.

        Merges every full-text index into one segment (``optimize``), prunes the change log, rebuilds
        the file (``VACUUM``) and checkpoints the WAL into the main file, truncating it.  Outside any
        transaction.  ``secure_delete`` alone is not enough: it zeroes deleted cells and freed pages,
        but when SQLite rebalances a b-tree page it rewrites the page without clearing its unused
        middle, so a copy of a cell that moved to a sibling page (an FTS5 segment, a row) stays there
        after the cell itself is deleted.  Only rebuilding the file removes those copies.
        """
        if self.conn.in_transaction:
            raise StoreError("scrub_deleted runs after the delete has committed")
        with self._lock:
            for table in FTS_TABLES:
                self._exec(f"INSERT INTO {table}({table}) VALUES ('optimize')")
            pruned = self.prune_memory_changes(keep_changes)
            vacuumed = self._vacuum()
            row = self._one("PRAGMA wal_checkpoint(TRUNCATE)")
        return {"pruned_changes": pruned, "vacuumed": vacuumed, "checkpoint_busy": int(row[0]) if row else 0}

    def _vacuum(self) -> int:
        """1 when the file was rebuilt; 0 when another connection's write kept it busy past the timeout."""
        try:
            self._exec("VACUUM")
        except StoreError as error:
            if "locked" in str(error) or "busy" in str(error):
                return 0
            raise
        return 1

    def prune_memory_changes(self, keep: int = KEEP_CHANGES) -> int:
        """Drop all but the newest ``keep`` entries of the change log; returns how many went.

        An in-process index that had not caught up past the pruned entries rebuilds from the file
        on its next search (it sees a gap), so pruning never loses a change.
        """
        if keep < 0:
            raise ValidationError("keep must be 0 or more", field="keep")
        with self._atomic():
            return self._exec(
                "DELETE FROM memory_changes WHERE seq <= (SELECT MAX(seq) FROM memory_changes) - ?", (keep,)
            ).rowcount

    def unused_storylines(self, user_id: str) -> list[int]:
        """Detected storylines nothing points at any more (no message, memory, narrative or entity)."""
        rows = self._all(
            "SELECT s.id FROM storylines s WHERE s.user_id = ? AND s.kind = 'detected'"
            " AND NOT EXISTS (SELECT 1 FROM messages WHERE storyline_id = s.id)"
            " AND NOT EXISTS (SELECT 1 FROM memories WHERE storyline_id = s.id)"
            " AND NOT EXISTS (SELECT 1 FROM narratives WHERE storyline_id = s.id)"
            " AND NOT EXISTS (SELECT 1 FROM entities WHERE storyline_id = s.id) ORDER BY s.id",
            (user_id,),
        )
        return [r[0] for r in rows]
