"""The Koshi narrative chain: links, search modes, forward and backward walks."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from datetime import datetime

from narrative.errors import NotFound, SealedNarrative
from narrative.model import Narrative
from narrative.store.sqlite.base import (
    SqliteBase,
    dumps,
    fts_query,
    loads,
    to_text,
    to_time,
    to_time_required,
)


def _narrative(row: sqlite3.Row) -> Narrative:
    return Narrative(
        id=row["id"],
        user_id=row["user_id"],
        summary=row["summary"],
        memory_ids=tuple(loads(row["memory_ids"], [])),
        previous_narrative_id=row["previous_narrative_id"],
        topic=row["topic"],
        storyline_id=row["storyline_id"],
        conversation_id=row["conversation_id"],
        sealed=bool(row["sealed"]),
        sealed_at=to_time(row["sealed_at"]),
        created_at=to_time_required(row["created_at"]),
    )


class NarrativeRows(SqliteBase):
    def insert_narrative(
        self,
        user_id: str,
        summary: str,
        memory_ids: Iterable[int],
        previous_narrative_id: int | None,
        topic: str,
        now: datetime,
        storyline_id: int | None = None,
        conversation_id: int | None = None,
        sealed: bool = False,
    ) -> Narrative:
        nid = self._insert(
            "INSERT INTO narratives(id, user_id, summary, memory_ids, previous_narrative_id, topic, storyline_id,"
            f" conversation_id, sealed, sealed_at, created_at) VALUES ({self._new_id('narratives')},"
            " ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                user_id,
                summary,
                dumps(list(memory_ids)),
                previous_narrative_id,
                topic,
                storyline_id,
                conversation_id,
                int(sealed),
                to_text(now) if sealed else None,
                to_text(now),
            ),
        )
        return self.get_narrative(user_id, nid)

    def get_narrative(self, user_id: str, narrative_id: int) -> Narrative:
        row = self._one("SELECT * FROM narratives WHERE id = ? AND user_id = ?", (narrative_id, user_id))
        if row is None:
            raise NotFound(f"narrative {narrative_id} not found")
        return _narrative(row)

    def update_narrative(
        self,
        user_id: str,
        narrative_id: int,
        summary: str | None = None,
        memory_ids: Iterable[int] | None = None,
        topic: str | None = None,
    ) -> Narrative:
        """Change an unsealed link.  The database itself refuses changes to a sealed one."""
        cursor = self._exec(
            "UPDATE narratives SET summary = COALESCE(?, summary), memory_ids = COALESCE(?, memory_ids),"
            " topic = COALESCE(?, topic) WHERE id = ? AND user_id = ? AND sealed = 0",
            (summary, None if memory_ids is None else dumps(list(memory_ids)), topic, narrative_id, user_id),
        )
        current = self.get_narrative(user_id, narrative_id)  # NotFound for a missing or foreign link
        if cursor.rowcount == 0 and current.sealed:
            raise SealedNarrative(f"narrative {narrative_id} is sealed and cannot change")
        return current

    def seal_narrative(self, user_id: str, narrative_id: int, now: datetime) -> Narrative:
        self._exec(
            "UPDATE narratives SET sealed = 1, sealed_at = ? WHERE id = ? AND user_id = ? AND sealed = 0",
            (to_text(now), narrative_id, user_id),
        )
        return self.get_narrative(user_id, narrative_id)  # one sealed before keeps its seal time

    def latest_narrative(self, user_id: str, storyline_id: int | None = None) -> Narrative | None:
        sql = "SELECT * FROM narratives WHERE user_id = ?"
        params: list[object] = [user_id]
        if storyline_id is not None:
            sql += " AND storyline_id = ?"
            params.append(storyline_id)
        row = self._one(sql + " ORDER BY created_at DESC, id DESC LIMIT 1", params)
        return None if row is None else _narrative(row)

    def open_narrative(self, user_id: str, storyline_id: int | None) -> Narrative | None:
        """The running (unsealed) link of a storyline, if any."""
        sql = "SELECT * FROM narratives WHERE user_id = ? AND sealed = 0"
        params: list[object] = [user_id]
        if storyline_id is None:
            sql += " AND storyline_id IS NULL"
        else:
            sql += " AND storyline_id = ?"
            params.append(storyline_id)
        row = self._one(sql + " ORDER BY id DESC LIMIT 1", params)
        return None if row is None else _narrative(row)

    def search_narratives(self, user_id: str, query: str, limit: int = 10) -> list[Narrative]:
        """Keyword search (FTS5) over summaries and topics, newest first."""
        rows = self._all(
            "SELECT n.* FROM narratives_fts JOIN narratives n ON n.id = narratives_fts.rowid"
            " WHERE narratives_fts MATCH ? AND n.user_id = ? ORDER BY bm25(narratives_fts) LIMIT ?",
            (fts_query(query), user_id, limit),
        )
        found = [_narrative(r) for r in rows]
        return sorted(found, key=lambda n: (n.created_at, n.id), reverse=True)

    def narratives_after(self, user_id: str, narrative_id: int) -> list[Narrative]:
        """Forward traversal: links whose previous link is this one."""
        rows = self._all(
            "SELECT * FROM narratives WHERE user_id = ? AND previous_narrative_id = ?"
            " ORDER BY created_at DESC, id DESC",
            (user_id, narrative_id),
        )
        return [_narrative(r) for r in rows]

    def list_narratives(
        self, user_id: str, storyline_id: int | None = None, limit: int = 100, offset: int = 0
    ) -> list[Narrative]:
        sql = "SELECT * FROM narratives WHERE user_id = ?"
        params: list[object] = [user_id]
        if storyline_id is not None:
            sql += " AND storyline_id = ?"
            params.append(storyline_id)
        sql += " ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?"
        return [_narrative(r) for r in self._all(sql, [*params, limit, offset])]

    def delete_narratives(self, user_id: str, narrative_ids: Iterable[int]) -> None:
        with self._atomic():
            for nid in narrative_ids:
                self._exec("DELETE FROM narratives WHERE id = ? AND user_id = ?", (nid, user_id))
