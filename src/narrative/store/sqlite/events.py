"""Memory events: the append-only history of every memory, kept (without text) after a delete."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from narrative.errors import StoreError
from narrative.model import EventKind, MemoryEvent
from narrative.store.sqlite.base import SqliteBase, dumps, loads, placeholders, to_text, to_time_required


def _event(row: sqlite3.Row | Mapping[str, Any]) -> MemoryEvent:
    return MemoryEvent(
        id=int(row["id"]),
        user_id=row["user_id"],
        memory_id=int(row["memory_id"]),
        kind=EventKind(row["kind"]),
        created_at=to_time_required(row["created_at"]),
        old_text=row["old_text"],
        new_text=row["new_text"],
        detail=dict(loads(row["detail"], {}) or {}),
    )


class MemoryEventRows(SqliteBase):
    def insert_memory_event(
        self,
        user_id: str,
        memory_id: int,
        kind: EventKind,
        now: datetime,
        old_text: str = "",
        new_text: str = "",
        detail: Mapping[str, Any] | None = None,
    ) -> MemoryEvent:
        """Append one event to a memory's history (the memory may be gone: a ``deleted`` event)."""
        row = {
            "user_id": user_id,
            "memory_id": memory_id,
            "kind": EventKind(kind).value,
            "old_text": old_text,
            "new_text": new_text,
            "detail": dumps(dict(detail or {})),
            "created_at": to_text(now),
        }
        with self._atomic():
            row["id"] = self._exec(
                f"INSERT INTO memory_events({', '.join(row)}) VALUES ({placeholders(list(row))})", list(row.values())
            ).lastrowid
        if row["id"] is None:
            raise StoreError("insert returned no id")
        return _event(row)

    def memory_events(self, user_id: str, memory_id: int) -> list[MemoryEvent]:
        """A memory's history, oldest first (in the order the events were appended); [] for an unknown id."""
        rows = self._all(
            "SELECT * FROM memory_events WHERE memory_id = ? AND user_id = ? ORDER BY id", (memory_id, user_id)
        )
        return [_event(r) for r in rows]

    def tombstone_memory_events(self, user_id: str, memory_ids: Iterable[int]) -> int:
        """Blank the texts and details of these memories' events (a delete keeps only kinds and times)."""
        ids = list(memory_ids)
        count = 0
        with self._atomic():
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                count += self._exec(
                    "UPDATE memory_events SET old_text = '', new_text = '', detail = '{}'"
                    f" WHERE user_id = ? AND memory_id IN ({placeholders(chunk)})",
                    [user_id, *chunk],
                ).rowcount
        return count
