"""Users, conversations and messages."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from narrative.errors import NotFound, StoreError
from narrative.model import Conversation, ConversationStatus, Message, Role, User
from narrative.store.sqlite.base import (
    SqliteBase,
    dumps,
    fts_query,
    loads,
    placeholders,
    to_text,
    to_time,
    to_time_required,
)


def _conversation(row: sqlite3.Row) -> Conversation:
    return Conversation(
        id=row["id"],
        user_id=row["user_id"],
        status=ConversationStatus(row["status"]),
        title=row["title"],
        started_at=to_time_required(row["started_at"]),
        last_message_at=to_time(row["last_message_at"]),
        closed_at=to_time(row["closed_at"]),
        archived_at=to_time(row["archived_at"]),
        message_count=row["message_count"],
        is_paused=bool(row["is_paused"]),
        paused_at=to_time(row["paused_at"]),
        idle_notified_at=to_time(row["idle_notified_at"]),
        compression_model=row["compression_model"],
        compression_duration_ms=row["compression_duration_ms"],
        compression_passes=row["compression_passes"],
    )


def _message(row: sqlite3.Row) -> Message:
    return Message(
        id=row["id"],
        user_id=row["user_id"],
        conversation_id=row["conversation_id"],
        position=row["position"],
        role=Role(row["role"]),
        speaker=row["speaker"],
        content=row["content"],
        created_at=to_time_required(row["created_at"]),
        storyline_id=row["storyline_id"],
        meta=loads(row["meta"], {}),
    )


_CONVERSATION_COLUMNS = {
    "status",
    "title",
    "last_message_at",
    "closed_at",
    "archived_at",
    "message_count",
    "is_paused",
    "paused_at",
    "idle_notified_at",
    "compression_model",
    "compression_duration_ms",
    "compression_passes",
}


class ConversationRows(SqliteBase):
    # --- users ---------------------------------------------------------------

    def ensure_user(self, user_id: str, now: datetime) -> bool:
        """Create the user if new; True when it was created."""
        with self._atomic():
            cursor = self._exec("INSERT OR IGNORE INTO users(id, created_at) VALUES (?, ?)", (user_id, to_text(now)))
            return cursor.rowcount == 1

    def get_user(self, user_id: str) -> User:
        row = self._one("SELECT * FROM users WHERE id = ?", (user_id,))
        if row is None:
            raise NotFound(f"user {user_id!r} not found")
        return User(id=row["id"], created_at=to_time_required(row["created_at"]))

    def list_users(self) -> list[User]:
        rows = self._all("SELECT * FROM users ORDER BY id")
        return [User(id=r["id"], created_at=to_time_required(r["created_at"])) for r in rows]

    def delete_user(self, user_id: str) -> None:
        with self._atomic(), self._id_floors_kept():  # a user deleted starts afresh: its ids are free
            self._exec("DELETE FROM memory_vectors WHERE user_id = ?", (user_id,))
            self._exec("DELETE FROM storyline_vectors WHERE user_id = ?", (user_id,))
            # narratives point at each other; clear links before cascading
            self._exec("UPDATE narratives SET previous_narrative_id = NULL WHERE user_id = ?", (user_id,))
            self._exec("DELETE FROM users WHERE id = ?", (user_id,))

    # --- conversations -------------------------------------------------------

    def insert_conversation(self, user_id: str, now: datetime, title: str = "") -> Conversation:
        cid = self._insert(
            "INSERT INTO conversations(id, user_id, status, title, started_at)"
            f" VALUES ({self._new_id('conversations')}, ?, 'active', ?, ?)",
            (user_id, title, to_text(now)),
        )
        return self.get_conversation(user_id, cid)

    def get_conversation(self, user_id: str, conversation_id: int) -> Conversation:
        row = self._one("SELECT * FROM conversations WHERE id = ? AND user_id = ?", (conversation_id, user_id))
        if row is None:
            raise NotFound(f"conversation {conversation_id} not found")
        return _conversation(row)

    def active_conversation(self, user_id: str) -> Conversation | None:
        row = self._one("SELECT * FROM conversations WHERE user_id = ? AND status = 'active'", (user_id,))
        return None if row is None else _conversation(row)

    def list_conversations(
        self,
        user_id: str,
        status: ConversationStatus | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Conversation]:
        sql = "SELECT * FROM conversations WHERE user_id = ?"
        params: list[Any] = [user_id]
        if status is not None:
            sql += " AND status = ?"
            params.append(status.value)
        sql += " ORDER BY id DESC LIMIT ? OFFSET ?"
        params += [limit, offset]
        return [_conversation(r) for r in self._all(sql, params)]

    def update_conversation(self, user_id: str, conversation_id: int, **changes: Any) -> Conversation:
        unknown = set(changes) - _CONVERSATION_COLUMNS
        if unknown:
            raise StoreError(f"unknown conversation columns: {sorted(unknown)}")
        values = [
            to_text(v) if isinstance(v, datetime) else (v.value if isinstance(v, ConversationStatus) else v)
            for v in changes.values()
        ]
        sets = ", ".join(f"{k} = ?" for k in changes)
        with self._atomic():
            cursor = self._exec(
                f"UPDATE conversations SET {sets} WHERE id = ? AND user_id = ?",
                [*values, conversation_id, user_id],
            )
            if cursor.rowcount == 0:
                raise NotFound(f"conversation {conversation_id} not found")
        return self.get_conversation(user_id, conversation_id)

    def set_preview(self, user_id: str, conversation_id: int, preview: dict[str, Any] | None) -> None:
        with self._atomic():
            self._exec(
                "UPDATE conversations SET preview = ? WHERE id = ? AND user_id = ?",
                (None if preview is None else dumps(preview), conversation_id, user_id),
            )

    def get_preview(self, user_id: str, conversation_id: int) -> dict[str, Any] | None:
        row = self._one("SELECT preview FROM conversations WHERE id = ? AND user_id = ?", (conversation_id, user_id))
        if row is None:
            raise NotFound(f"conversation {conversation_id} not found")
        result: dict[str, Any] | None = loads(row["preview"])
        return result

    def delete_conversation(self, user_id: str, conversation_id: int) -> None:
        with self._atomic():
            cursor = self._exec("DELETE FROM conversations WHERE id = ? AND user_id = ?", (conversation_id, user_id))
            if cursor.rowcount == 0:
                raise NotFound(f"conversation {conversation_id} not found")

    # --- messages ------------------------------------------------------------

    def insert_message(
        self,
        user_id: str,
        conversation_id: int,
        role: Role,
        content: str,
        now: datetime,
        speaker: str = "",
        meta: dict[str, Any] | None = None,
    ) -> Message:
        created, encoded_meta = to_text(now), dumps(meta or {})
        with self._atomic():
            self._claim_positions(user_id)
            row = self._one("SELECT COALESCE(MAX(position), 0) + 1 FROM messages WHERE user_id = ?", (user_id,))
            position = int(row[0]) if row else 1
            mid = self._exec(
                "INSERT INTO messages(id, user_id, conversation_id, position, role, speaker, content, created_at,"
                f" meta) VALUES ({self._new_id('messages')}, ?, ?, ?, ?, ?, ?, ?, ?)",
                (user_id, conversation_id, position, role.value, speaker, content, created, encoded_meta),
            ).lastrowid
            self._exec(
                "UPDATE conversations SET message_count = message_count + 1, last_message_at = ?,"
                " idle_notified_at = NULL WHERE id = ? AND user_id = ?",
                (created, conversation_id, user_id),
            )
        if mid is None or created is None:
            raise StoreError("insert returned no id")
        return Message(  # what reading the row back gives, without reading it
            id=mid,
            user_id=user_id,
            conversation_id=conversation_id,
            position=position,
            role=role,
            speaker=speaker,
            content=content,
            created_at=to_time_required(created),
            meta=loads(encoded_meta, {}),
        )

    def _claim_positions(self, user_id: str) -> None:
        """Make this transaction the only one taking positions for ``user_id`` until it ends.

        SQLite needs nothing: a write transaction holds the file's one write lock.
        """

    def get_message(self, user_id: str, message_id: int) -> Message:
        row = self._one("SELECT * FROM messages WHERE id = ? AND user_id = ?", (message_id, user_id))
        if row is None:
            raise NotFound(f"message {message_id} not found")
        return _message(row)

    def get_messages(self, user_id: str, message_ids: list[int]) -> list[Message]:
        if not message_ids:
            return []
        rows = self._all(
            f"SELECT * FROM messages WHERE user_id = ? AND id IN ({placeholders(message_ids)}) ORDER BY position",
            [user_id, *message_ids],
        )
        return [_message(r) for r in rows]

    def list_messages(
        self,
        user_id: str,
        conversation_id: int | None = None,
        storyline_id: int | None = None,
        limit: int | None = None,
        latest: bool = False,
    ) -> list[Message]:
        """Messages in position order; ``latest`` takes the last ``limit`` of them."""
        sql = "SELECT * FROM messages WHERE user_id = ?"
        params: list[Any] = [user_id]
        if conversation_id is not None:
            sql += " AND conversation_id = ?"
            params.append(conversation_id)
        if storyline_id is not None:
            sql += " AND storyline_id = ?"
            params.append(storyline_id)
        sql += " ORDER BY position DESC" if latest else " ORDER BY position"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        messages = [_message(r) for r in self._all(sql, params)]
        return list(reversed(messages)) if latest else messages

    def previous_message(self, user_id: str, conversation_id: int, position: int) -> Message | None:
        """The message just before ``position`` in the same conversation."""
        row = self._one(
            "SELECT * FROM messages WHERE user_id = ? AND conversation_id = ? AND position < ?"
            " ORDER BY position DESC LIMIT 1",
            (user_id, conversation_id, position),
        )
        return None if row is None else _message(row)

    def set_message_storyline(self, user_id: str, message_id: int, storyline_id: int) -> None:
        self._exec(  # one statement: atomic without a savepoint of its own
            "UPDATE messages SET storyline_id = ? WHERE id = ? AND user_id = ?", (storyline_id, message_id, user_id)
        )

    def last_position(self, user_id: str) -> int:
        row = self._one("SELECT COALESCE(MAX(position), 0) FROM messages WHERE user_id = ?", (user_id,))
        return int(row[0]) if row else 0

    def search_messages(self, user_id: str, query: str, limit: int = 20) -> list[tuple[Message, float]]:
        rows = self._all(
            "SELECT m.*, bm25(messages_fts) AS score FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
            " WHERE messages_fts MATCH ? AND m.user_id = ? ORDER BY score LIMIT ?",
            (fts_query(query), user_id, limit),
        )
        return [(_message(r), -float(r["score"])) for r in rows]
