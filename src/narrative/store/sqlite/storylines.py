"""Storylines (NarraNexus narratives / Talking Rock Acts) and routing decisions."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

import numpy as np

from narrative.errors import NotFound, StoreError
from narrative.model import (
    Participant,
    RoutingDecision,
    Storyline,
    StorylineKind,
    StorylineStatus,
)
from narrative.store.sqlite.base import (
    SqliteBase,
    dumps,
    fts_query,
    loads,
    to_text,
    to_time,
    to_time_required,
    vector_blob,
)


def _storyline(row: sqlite3.Row) -> Storyline:
    return Storyline(
        id=row["id"],
        user_id=row["user_id"],
        name=row["name"],
        kind=StorylineKind(row["kind"]),
        status=StorylineStatus(row["status"]),
        description=row["description"],
        keywords=tuple(loads(row["keywords"], [])),
        summary=row["summary"],
        interaction_count=row["interaction_count"],
        participants=tuple(Participant(**p) for p in loads(row["participants"], [])),
        created_at=to_time_required(row["created_at"]),
        updated_at=to_time_required(row["updated_at"]),
        last_message_at=to_time(row["last_message_at"]),
    )


_UPDATABLE = {
    "name",
    "kind",
    "status",
    "description",
    "keywords",
    "summary",
    "interaction_count",
    "participants",
    "updated_at",
    "last_message_at",
}


class StorylineRows(SqliteBase):
    def insert_storyline(
        self,
        user_id: str,
        name: str,
        kind: StorylineKind,
        now: datetime,
        description: str = "",
        keywords: tuple[str, ...] = (),
        status: StorylineStatus = StorylineStatus.ACTIVE,
    ) -> Storyline:
        try:
            sid = self._insert(
                "INSERT INTO storylines(id, user_id, name, kind, status, description, keywords, created_at,"
                f" updated_at) VALUES ({self._new_id('storylines')}, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    user_id,
                    name,
                    kind.value,
                    status.value,
                    description,
                    dumps(list(keywords)),
                    to_text(now),
                    to_text(now),
                ),
            )
        except StoreError as error:
            if "UNIQUE" in str(error):
                raise StoreError(f"a storyline named {name!r} already exists") from error
            raise
        return self.get_storyline(user_id, sid)

    def get_storyline(self, user_id: str, storyline_id: int) -> Storyline:
        row = self._one("SELECT * FROM storylines WHERE id = ? AND user_id = ?", (storyline_id, user_id))
        if row is None:
            raise NotFound(f"storyline {storyline_id} not found")
        return _storyline(row)

    def find_storyline(self, user_id: str, name: str) -> Storyline | None:
        # unicode_lower, not NOCASE (A-Z only): "über" finds "Über" as PostgreSQL's lower() does
        row = self._one(
            "SELECT * FROM storylines WHERE user_id = ? AND unicode_lower(name) = unicode_lower(?)", (user_id, name)
        )
        return None if row is None else _storyline(row)

    def your_story(self, user_id: str) -> Storyline | None:
        row = self._one("SELECT * FROM storylines WHERE user_id = ? AND kind = 'your_story'", (user_id,))
        return None if row is None else _storyline(row)

    def list_storylines(self, user_id: str, include_archived: bool = False) -> list[Storyline]:
        sql = "SELECT * FROM storylines WHERE user_id = ?"
        if not include_archived:
            sql += " AND status != 'archived'"
        rows = self._all(sql + " ORDER BY COALESCE(last_message_at, created_at) DESC, id", (user_id,))
        return [_storyline(r) for r in rows]

    def participant_names(self, user_id: str) -> set[str]:
        """The names of every storyline's participants (archived storylines too), read alone: a search asks."""
        rows = self._all("SELECT participants FROM storylines WHERE user_id = ?", (user_id,))
        return {p["name"] for r in rows for p in loads(r[0], [])}

    def update_storyline(self, user_id: str, storyline_id: int, **changes: Any) -> Storyline:
        unknown = set(changes) - _UPDATABLE
        if unknown:
            raise StoreError(f"unknown storyline columns: {sorted(unknown)}")
        encoded: dict[str, Any] = {}
        for key, value in changes.items():
            if key == "keywords":
                value = dumps(list(value))
            elif key == "participants":
                value = dumps([{"name": p.name, "role": p.role} for p in value])
            elif isinstance(value, datetime):
                value = to_text(value)
            elif isinstance(value, StorylineStatus | StorylineKind):
                value = value.value
            encoded[key] = value
        sets = ", ".join(f"{k} = ?" for k in encoded)
        cursor = self._exec(  # one statement: atomic without a savepoint of its own
            f"UPDATE storylines SET {sets} WHERE id = ? AND user_id = ?", [*encoded.values(), storyline_id, user_id]
        )
        if cursor.rowcount == 0:
            raise NotFound(f"storyline {storyline_id} not found")
        return self.get_storyline(user_id, storyline_id)

    def delete_storyline(self, user_id: str, storyline_id: int) -> None:
        with self._atomic():
            cursor = self._exec("DELETE FROM storylines WHERE id = ? AND user_id = ?", (storyline_id, user_id))
            if cursor.rowcount == 0:
                raise NotFound(f"storyline {storyline_id} not found")

    def move_storyline_rows(self, user_id: str, from_id: int, to_id: int) -> None:
        """Re-home memories, narratives and messages of one storyline into another."""
        with self._atomic():
            for table in ("memories", "narratives", "messages", "entities"):
                self._exec(
                    f"UPDATE {table} SET storyline_id = ? WHERE storyline_id = ? AND user_id = ?",
                    (to_id, from_id, user_id),
                )

    def keyword_search_storylines(self, user_id: str, query: str, limit: int = 10) -> list[tuple[int, float]]:
        rows = self._all(
            "SELECT s.id, bm25(storylines_fts) AS score FROM storylines_fts"
            " JOIN storylines s ON s.id = storylines_fts.rowid"
            " WHERE storylines_fts MATCH ? AND s.user_id = ? AND s.status != 'archived' ORDER BY score LIMIT ?",
            (fts_query(query), user_id, limit),
        )
        return [(r[0], -float(r[1])) for r in rows]

    # --- routing embeddings ----------------------------------------------------

    def put_storyline_vector(self, user_id: str, storyline_id: int, model: str, vector: np.ndarray) -> None:
        self._exec(
            "INSERT OR REPLACE INTO storyline_vectors(storyline_id, user_id, model, vector)"
            " SELECT id, user_id, ?, ? FROM storylines WHERE id = ? AND user_id = ?",
            (model, vector_blob(vector), storyline_id, user_id),
        )

    def storyline_vector(self, user_id: str, storyline_id: int, model: str) -> np.ndarray | None:
        row = self._one(
            "SELECT vector FROM storyline_vectors WHERE user_id = ? AND storyline_id = ? AND model = ?",
            (user_id, storyline_id, model),
        )
        return None if row is None else np.frombuffer(row[0], dtype=np.float32)

    def storyline_vectors(self, user_id: str, model: str) -> dict[int, np.ndarray]:
        rows = self._all(
            "SELECT v.storyline_id, v.vector FROM storyline_vectors v JOIN storylines s ON s.id = v.storyline_id"
            " WHERE v.user_id = ? AND v.model = ? AND s.status != 'archived'",
            (user_id, model),
        )
        return {r[0]: np.frombuffer(r[1], dtype=np.float32) for r in rows}

    def storyline_vector_models(self, user_id: str | None = None) -> dict[str, int]:
        """How many routing embeddings each embedder identity made: one user's, or the whole file's."""
        sql = "SELECT model, COUNT(*) FROM storyline_vectors"
        params: list[Any] = []
        if user_id is not None:
            sql += " WHERE user_id = ?"
            params.append(user_id)
        return {r[0]: int(r[1]) for r in self._all(sql + " GROUP BY model ORDER BY model", params)}

    def storyline_vector_identities(self, user_id: str) -> dict[int, str]:
        """Storyline id -> the embedder identity of its routing embedding (archived storylines too)."""
        rows = self._all("SELECT storyline_id, model FROM storyline_vectors WHERE user_id = ?", (user_id,))
        return {int(r[0]): str(r[1]) for r in rows}

    # --- routing decisions -----------------------------------------------------

    def insert_routing_decision(
        self, user_id: str, message_id: int, storyline_id: int, decision: str, scores: dict[str, Any], now: datetime
    ) -> RoutingDecision:
        rid = self._exec(  # one statement: atomic without a savepoint of its own
            "INSERT INTO routing_decisions(user_id, message_id, storyline_id, decision, scores, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (user_id, message_id, storyline_id, decision, dumps(scores), to_text(now)),
        ).lastrowid
        if rid is None:
            raise StoreError("insert returned no id")
        return RoutingDecision(
            id=rid,
            user_id=user_id,
            message_id=message_id,
            storyline_id=storyline_id,
            decision=decision,
            scores=scores,
            created_at=now,
        )

    def routing_decisions(self, user_id: str, message_id: int | None = None, limit: int = 100) -> list[RoutingDecision]:
        sql = "SELECT * FROM routing_decisions WHERE user_id = ?"
        params: list[Any] = [user_id]
        if message_id is not None:
            sql += " AND message_id = ?"
            params.append(message_id)
        rows = self._all(sql + " ORDER BY id DESC LIMIT ?", [*params, limit])
        return [
            RoutingDecision(
                id=r["id"],
                user_id=r["user_id"],
                message_id=r["message_id"],
                storyline_id=r["storyline_id"],
                decision=r["decision"],
                scores=loads(r["scores"], {}),
                created_at=to_time_required(r["created_at"]),
            )
            for r in rows
        ]
