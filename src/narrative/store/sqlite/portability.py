"""Whole-user dumps and restores (export/import) and the row-level helpers deletes need.

A dump is every row of every table that belongs to one user, table by table in
dependency order, each row a JSON object keyed by column name (``sorted`` keys):

* JSON-text columns (keywords, data, details, preview, …) are decoded into JSON values;
* boolean columns (is_paused, sealed, is_active, …) become ``true``/``false``;
* vector BLOBs become base64 of their little-endian float32 bytes, next to their ``model``.

Full-text tables are not dumped: their triggers rebuild them as rows are inserted.  A restore
inserts the rows with their ids (foreign keys checked at commit, so self-references in any order
are fine) and therefore needs those ids free; the engine checks that first.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

from narrative.errors import StoreError, ValidationError
from narrative.store.sqlite.base import SqliteBase, dumps, loads, placeholders

#: Tables in insertion (dependency) order, and how each is selected for one user.
USER_TABLES: tuple[str, ...] = (
    "users",
    "storylines",
    "storyline_vectors",
    "conversations",
    "messages",
    "narratives",
    "memories",
    "memory_sources",
    "memory_vectors",
    "entities",
    "state_deltas",
    "uses",
    "use_references",
    "routing_decisions",
)  # API keys are credentials, not memory: never exported, kept across an import
_SELECT: dict[str, tuple[str, str]] = {  # table → (WHERE clause on alias t, ORDER BY)
    "users": ("t.id = ?", "t.id"),
    "memory_sources": ("t.memory_id IN (SELECT id FROM memories WHERE user_id = ?)", "t.memory_id, t.message_id"),
    "use_references": ("t.use_id IN (SELECT id FROM uses WHERE user_id = ?)", "t.use_id, t.memory_id"),
    "memory_vectors": ("t.user_id = ?", "t.memory_id"),
    "storyline_vectors": ("t.user_id = ?", "t.storyline_id"),
}
JSON_COLUMNS: dict[str, frozenset[str]] = {
    "storylines": frozenset({"keywords", "participants"}),
    "conversations": frozenset({"preview"}),
    "messages": frozenset({"meta"}),
    "narratives": frozenset({"memory_ids"}),
    "memories": frozenset({"emotions", "details"}),
    "entities": frozenset({"data"}),
    "state_deltas": frozenset({"data"}),
    "uses": frozenset({"meta"}),
    "routing_decisions": frozenset({"scores"}),
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
}
#: Tables whose rows carry ``user_id`` (renamed on restore); users' own key is ``id``.
_ID_TABLES = (
    "storylines",
    "conversations",
    "messages",
    "narratives",
    "memories",
    "entities",
    "state_deltas",
    "uses",
    "routing_decisions",
)
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
)


def _encode(table: str, row: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for column, value in row.items():
        if column in JSON_COLUMNS.get(table, ()) and value is not None:
            value = loads(value)
        elif column in BOOL_COLUMNS.get(table, ()):
            value = bool(value)
        elif column in BLOB_COLUMNS.get(table, ()):
            value = base64.b64encode(bytes(value)).decode("ascii")
        out[column] = value
    return out


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


class PortabilityRows(SqliteBase):
    # --- export / import -------------------------------------------------------------

    def table_columns(self, table: str) -> list[str]:
        if table not in USER_TABLES:
            raise StoreError(f"not a user table: {table!r}")
        return [r[1] for r in self._all(f"PRAGMA table_info({table})")]

    def export_user_rows(self, user_id: str) -> dict[str, list[dict[str, Any]]]:
        """Every row of ``user_id`` in every table (see the module docstring for the encoding)."""
        tables: dict[str, list[dict[str, Any]]] = {}
        with self.transaction():  # one consistent snapshot
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

    def id_conflicts(self, user_id: str, tables: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
        """How many ids of a dump are already taken by other users' rows, per table."""
        conflicts: dict[str, int] = {}
        for table in _ID_TABLES:
            ids = [row["id"] for row in tables.get(table, ()) if "id" in row]
            taken = 0
            for start in range(0, len(ids), 900):
                chunk = ids[start : start + 900]
                row = self._one(
                    f"SELECT COUNT(*) FROM {table} WHERE id IN ({placeholders(chunk)}) AND user_id != ?",
                    [*chunk, user_id],
                )
                taken += int(row[0]) if row else 0
            if taken:
                conflicts[table] = taken
        return conflicts

    def import_user_rows(self, user_id: str, tables: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
        """Replace the (bootstrap-only) user with the dumped rows, ids kept, owned by ``user_id``."""
        unknown = set(tables) - set(USER_TABLES)
        if unknown:
            raise ValidationError(f"unknown tables in the dump: {sorted(unknown)}", field="tables")
        counts: dict[str, int] = {}
        with self.transaction():
            self._exec("PRAGMA defer_foreign_keys = ON")
            keys = [
                tuple(r)
                for r in self._all("SELECT id, key_hash, label, created_at FROM api_keys WHERE user_id = ?", (user_id,))
            ]
            self._exec("DELETE FROM storyline_vectors WHERE user_id = ?", (user_id,))
            self._exec("DELETE FROM storylines WHERE user_id = ?", (user_id,))
            self._exec("DELETE FROM users WHERE id = ?", (user_id,))
            for table in USER_TABLES:
                counts[table] = self._insert_rows(table, user_id, tables.get(table, ()))
            for key in keys:  # the caller's credentials survive the restore
                self._exec(
                    "INSERT INTO api_keys(id, user_id, key_hash, label, created_at) VALUES (?, ?, ?, ?, ?)",
                    (key[0], user_id, key[1], key[2], key[3]),
                )
        return counts

    def _insert_rows(self, table: str, user_id: str, rows: Iterable[Mapping[str, Any]]) -> int:
        columns = set(self.table_columns(table))
        count = 0
        for raw in rows:
            if not isinstance(raw, Mapping):
                raise ValidationError(f"a row of {table} is not an object", field=table)
            extra = set(raw) - columns
            if extra:
                raise ValidationError(
                    f"{table} has unknown columns {sorted(extra)}: made by a newer schema?", field=table
                )
            row = _decode(table, raw)
            if table == "users":
                row["id"] = user_id
            elif "user_id" in row:
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
        with self.transaction():
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
        with self.transaction():
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
        with self.transaction():
            return self._exec(
                "UPDATE entities SET is_active = 1, resolved_at = NULL, resolved_by_memory_id = NULL,"
                f" resolved_by_entity_id = NULL WHERE user_id = ? AND resolved_by_memory_id IN ({placeholders(ids)})",
                [user_id, *ids],
            ).rowcount

    def delete_conversation_uses(self, user_id: str, conversation_id: int) -> int:
        """The audit trail recorded while one conversation was active."""
        with self.transaction():
            return self._exec(
                "DELETE FROM uses WHERE user_id = ? AND conversation_id = ?", (user_id, conversation_id)
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
