"""Passages (a message's searchable units), their validity, and conflicts between statements.

The row SQL here is shared with the PostgreSQL store; where vectors live (BLOBs here, pgvector there) and how
they are searched is each store's own.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from narrative.errors import NotFound
from narrative.model import Conflict, MemoryBrief, MemoryItem, Passage
from narrative.store.sqlite.base import SqliteBase, placeholders, to_text, to_time, to_time_required, vector_blob
from narrative.store.sqlite.memories import briefs_from, briefs_statement

_CHUNK = 500


def _passage(row: sqlite3.Row | Sequence[Any]) -> Passage:
    return Passage(
        id=int(row[0]),
        user_id=str(row[1]),
        message_id=int(row[2]),
        memory_id=int(row[3]),
        seq=int(row[4]),
        start=int(row[5]),
        end=int(row[6]),
        valid_to=to_time(row[7]),
        superseded_by=None if row[8] is None else int(row[8]),
        parts=int(row[9]),
    )


_COLUMNS = "id, user_id, message_id, memory_id, seq, char_start, char_end, valid_to, superseded_by, parts"


def conflict_from(row: sqlite3.Row | Sequence[Any]) -> Conflict:
    return Conflict(
        id=int(row[0]),
        user_id=str(row[1]),
        memory_id=int(row[2]),
        other_memory_id=int(row[3]),
        passage_id=None if row[4] is None else int(row[4]),
        other_passage_id=None if row[5] is None else int(row[5]),
        reason=str(row[6]),
        created_at=to_time_required(row[7]),
    )


class PassageRows(SqliteBase):
    # --- passages -----------------------------------------------------------------------------

    def insert_passages(
        self, user_id: str, message_id: int, memory_id: int, spans: Sequence[tuple[int, int]]
    ) -> list[Passage]:
        """Store a message's passages (in order) as belonging to ``memory_id``; replaces any it had."""
        made: list[Passage] = []
        with self._atomic():
            owner = self._one("SELECT 1 FROM memories WHERE id = ? AND user_id = ?", (memory_id, user_id))
            if owner is None:
                raise NotFound(f"memory {memory_id} not found")
            self._exec("DELETE FROM passages WHERE message_id = ? AND user_id = ?", (message_id, user_id))
            for seq, (start, end) in enumerate(spans):
                passage_id = self._insert(
                    "INSERT INTO passages(user_id, message_id, memory_id, seq, parts, char_start, char_end)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (user_id, message_id, memory_id, seq, len(spans), start, end),
                )
                made.append(Passage(passage_id, user_id, message_id, memory_id, seq, start, end, parts=len(spans)))
        return made

    def get_passages(self, user_id: str, passage_ids: Iterable[int]) -> list[Passage]:
        """Passages in the order of ``passage_ids``; unknown or foreign ids are skipped."""
        ids = list(dict.fromkeys(passage_ids))
        found: dict[int, Passage] = {}
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            for row in self._all(
                f"SELECT {_COLUMNS} FROM passages WHERE +user_id = ? AND id IN ({placeholders(chunk)})",
                [user_id, *chunk],
            ):
                found[int(row[0])] = _passage(row)
        return [found[i] for i in ids if i in found]

    def passages_of_messages(self, user_id: str, message_ids: Iterable[int]) -> dict[int, list[Passage]]:
        """Each message's passages in order (messages without passages are left out)."""
        ids = list(dict.fromkeys(message_ids))
        found: dict[int, list[Passage]] = {}
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            for row in self._all(
                f"SELECT {_COLUMNS} FROM passages WHERE +user_id = ? AND message_id IN ({placeholders(chunk)})"
                " ORDER BY message_id, seq",
                [user_id, *chunk],
            ):
                found.setdefault(int(row[2]), []).append(_passage(row))
        return found

    def passages_of_memories(self, user_id: str, memory_ids: Iterable[int]) -> list[Passage]:
        ids = list(dict.fromkeys(memory_ids))
        found: list[Passage] = []
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            found += [
                _passage(row)
                for row in self._all(
                    f"SELECT {_COLUMNS} FROM passages WHERE +user_id = ? AND memory_id IN ({placeholders(chunk)})"
                    " ORDER BY message_id, seq",
                    [user_id, *chunk],
                )
            ]
        return found

    def messages_without_passages(self, user_id: str | None = None) -> list[tuple[str, int]]:
        """(user id, message id) of processed messages (routed to a storyline) that have no passages yet and
        can have them: their own conversation memory is there (a message whose own memory a person deleted has
        none, and is not shown: :mod:`narrative.read.current`)."""
        sql = (
            "SELECT m.user_id, m.id FROM messages m WHERE m.storyline_id IS NOT NULL"
            " AND NOT EXISTS (SELECT 1 FROM passages p WHERE p.message_id = m.id)"
            " AND EXISTS (SELECT 1 FROM memory_sources s JOIN memories o ON o.id = s.memory_id"
            " WHERE s.message_id = m.id AND o.stream = 'conversation'"
            " AND s.message_id = (SELECT MAX(t.message_id) FROM memory_sources t WHERE t.memory_id = s.memory_id))"
        )
        params: list[Any] = []
        if user_id is not None:
            sql += " AND m.user_id = ?"
            params.append(user_id)
        return [(str(r[0]), int(r[1])) for r in self._all(sql + " ORDER BY m.user_id, m.id", params)]

    def own_memories(self, user_id: str, message_ids: Iterable[int]) -> dict[int, int]:
        """message id → its own conversation memory: the one whose newest source is that message (the memory
        made when the message was processed)."""
        ids = list(dict.fromkeys(message_ids))
        found: dict[int, int] = {}
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            rows = self._all(
                "SELECT s.message_id, s.memory_id FROM memory_sources s JOIN memories m ON m.id = s.memory_id"
                f" WHERE +m.user_id = ? AND m.stream = 'conversation' AND s.message_id IN ({placeholders(chunk)})"
                " AND s.message_id = (SELECT MAX(t.message_id) FROM memory_sources t WHERE t.memory_id = s.memory_id)"
                " ORDER BY s.memory_id",
                [user_id, *chunk],
            )
            for message_id, memory_id in rows:
                found.setdefault(int(message_id), int(memory_id))
        return found

    def passage_texts_of(self, memory_ids: Iterable[int] | None = None) -> list[tuple[int, int, str, str]]:
        """(passage id, memory id, user id, searchable text: speaker and the passage) for the in-process keyword
        index: the passages of messages cut into several (a whole message's words are in its memory's entry)."""
        sql = (
            "SELECT p.id, p.memory_id, p.user_id, m.speaker, m.content, p.char_start, p.char_end"
            " FROM passages p JOIN messages m ON m.id = p.message_id WHERE p.parts > 1"
        )
        rows: list[Any] = []
        if memory_ids is None:
            rows = self._all(sql)
        else:
            ids = list(memory_ids)
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start : start + _CHUNK]
                rows += self._all(f"{sql} AND p.memory_id IN ({placeholders(chunk)})", chunk)
        return [(int(r[0]), int(r[1]), str(r[2]), f"{r[3]} {str(r[4])[int(r[5]) : int(r[6])]}".strip()) for r in rows]

    # --- vectors (BLOBs here; pgvector on PostgreSQL) -------------------------------------------

    def put_passage_vectors(self, user_id: str, model: str, vectors: dict[int, np.ndarray]) -> None:
        with self._atomic():
            for passage_id, vector in vectors.items():
                self._exec(
                    "INSERT OR REPLACE INTO passage_vectors(passage_id, user_id, model, vector)"
                    " SELECT id, user_id, ?, ? FROM passages WHERE id = ? AND user_id = ?",
                    (model, vector_blob(vector), passage_id, user_id),
                )

    def passage_vectors_by_id(self, user_id: str, model: str, passage_ids: Iterable[int]) -> dict[int, np.ndarray]:
        ids = list(dict.fromkeys(passage_ids))
        found: dict[int, np.ndarray] = {}
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            for row in self._all(
                "SELECT passage_id, vector FROM passage_vectors WHERE user_id = ? AND model = ?"
                f" AND passage_id IN ({placeholders(chunk)})",
                [user_id, model, *chunk],
            ):
                found[int(row[0])] = np.frombuffer(row[1], dtype=np.float32)
        return found

    def passage_vector_rows(
        self, memory_ids: Iterable[int] | None = None
    ) -> list[tuple[int, int, str, str, np.ndarray]]:
        """(passage id, memory id, user id, model, vector) of stored passage vectors (all, or these memories')."""
        sql = (
            "SELECT v.passage_id, p.memory_id, v.user_id, v.model, v.vector FROM passage_vectors v"
            " JOIN passages p ON p.id = v.passage_id"
        )
        rows: list[Any] = []
        if memory_ids is None:
            rows = self._all(sql + " ORDER BY v.passage_id")
        else:
            ids = list(memory_ids)
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start : start + _CHUNK]
                rows += self._all(f"{sql} WHERE p.memory_id IN ({placeholders(chunk)})", chunk)
        return [(int(r[0]), int(r[1]), str(r[2]), str(r[3]), np.frombuffer(r[4], dtype=np.float32)) for r in rows]

    def passages_without_vectors(self, user_id: str, model: str) -> list[Passage]:
        """This user's passages with no vector, or one made by another embedder than ``model``."""
        rows = self._all(
            f"SELECT {', '.join('p.' + c for c in _COLUMNS.split(', '))} FROM passages p"
            " LEFT JOIN passage_vectors v ON v.passage_id = p.id"
            " WHERE p.user_id = ? AND (v.passage_id IS NULL OR v.model != ?) ORDER BY p.id",
            (user_id, model),
        )
        return [_passage(r) for r in rows]

    # --- validity ---------------------------------------------------------------------------

    def supersede_passages(self, user_id: str, passage_ids: Iterable[int], by: int, now: datetime) -> int:
        ids = list(dict.fromkeys(passage_ids))
        if not ids:
            return 0
        cursor = self._exec(
            f"UPDATE passages SET valid_to = ?, superseded_by = ? WHERE user_id = ? AND id IN ({placeholders(ids)})"
            " AND valid_to IS NULL",
            [to_text(now), by, user_id, *ids],
        )
        return int(cursor.rowcount)

    def restore_passages(self, user_id: str, passage_ids: Iterable[int]) -> int:
        ids = list(dict.fromkeys(passage_ids))
        if not ids:
            return 0
        cursor = self._exec(
            "UPDATE passages SET valid_to = NULL, superseded_by = NULL"
            f" WHERE user_id = ? AND id IN ({placeholders(ids)})",
            [user_id, *ids],
        )
        return int(cursor.rowcount)

    def supersede_memories(self, user_id: str, memory_ids: Iterable[int], by: int, now: datetime) -> list[int]:
        """Mark current memories superseded by ``by``; returns the ones that changed."""
        ids = list(dict.fromkeys(memory_ids))
        if not ids:
            return []
        rows = self._all(
            f"SELECT id FROM memories WHERE user_id = ? AND id IN ({placeholders(ids)}) AND valid_to IS NULL",
            [user_id, *ids],
        )
        changed = [int(r[0]) for r in rows]
        if changed:
            self._exec(
                "UPDATE memories SET valid_to = ?, superseded_by = ?"
                f" WHERE user_id = ? AND id IN ({placeholders(changed)})",
                [to_text(now), by, user_id, *changed],
            )
        return changed

    def restore_memories(self, user_id: str, memory_ids: Iterable[int]) -> list[int]:
        ids = list(dict.fromkeys(memory_ids))
        if not ids:
            return []
        rows = self._all(
            f"SELECT id FROM memories WHERE user_id = ? AND id IN ({placeholders(ids)}) AND valid_to IS NOT NULL",
            [user_id, *ids],
        )
        changed = [int(r[0]) for r in rows]
        if changed:
            self._exec(
                "UPDATE memories SET valid_to = NULL, superseded_by = NULL"
                f" WHERE user_id = ? AND id IN ({placeholders(changed)})",
                [user_id, *changed],
            )
        return changed

    def superseded_by_memories(self, user_id: str, memory_ids: Iterable[int]) -> dict[int, list[MemoryItem]]:
        """For each of these memories, the memories it superseded (newest first)."""
        ids = list(dict.fromkeys(memory_ids))
        if not ids:
            return {}
        rows = self._all(
            # ``+user_id``: through the superseded_by index (a few rows), not the user's (all their memories)
            f"SELECT * FROM memories WHERE +user_id = ? AND superseded_by IN ({placeholders(ids)})"
            " ORDER BY COALESCE(event_at, created_at) DESC, id DESC",
            [user_id, *ids],
        )
        found: dict[int, list[MemoryItem]] = {}
        for memory in self._hydrate(rows):  # type: ignore[attr-defined]
            found.setdefault(int(memory.superseded_by), []).append(memory)
        return found

    def memories_and_superseded(
        self, user_id: str, memory_ids: Iterable[int]
    ) -> tuple[list[MemoryItem], dict[int, list[MemoryItem]]]:
        """These memories (in the order given; unknown ids skipped) and, for each, the memories it superseded
        (newest first): :meth:`get_memories` and :meth:`superseded_by_memories` in one read."""
        ids = list(dict.fromkeys(memory_ids))
        if not ids:
            return [], {}
        marks = placeholders(ids)
        sources = self.sources_column()  # type: ignore[attr-defined]  # the memory rows' (MemoryRows)
        rows = self._all(  # two halves, each through its own index (an OR of the two reads all the user's rows)
            f"SELECT * FROM (SELECT *, {sources} FROM memories WHERE +user_id = ? AND id IN ({marks})"
            f" UNION ALL SELECT *, {sources} FROM memories WHERE +user_id = ?"
            f" AND superseded_by IN ({marks}) AND id NOT IN ({marks}))"
            " AS found ORDER BY COALESCE(event_at, created_at) DESC, id DESC",
            [user_id, *ids, user_id, *ids, *ids],
        )
        wanted = set(ids)
        memories: dict[int, MemoryItem] = {}
        superseded: dict[int, list[MemoryItem]] = {}
        for memory in self._hydrate(rows):  # type: ignore[attr-defined]
            if memory.id in wanted:
                memories[memory.id] = memory
            if memory.superseded_by is not None and int(memory.superseded_by) in wanted:
                superseded.setdefault(int(memory.superseded_by), []).append(memory)
        return [memories[i] for i in ids if i in memories], superseded

    def passages_superseded_by(self, user_id: str, passage_ids: Iterable[int]) -> list[Passage]:
        ids = list(dict.fromkeys(passage_ids))
        if not ids:
            return []
        return [
            _passage(row)
            for row in self._all(
                f"SELECT {_COLUMNS} FROM passages WHERE user_id = ? AND superseded_by IN ({placeholders(ids)})"
                " ORDER BY id",
                [user_id, *ids],
            )
        ]

    # --- conflicts ----------------------------------------------------------------------------

    def insert_conflict(
        self,
        user_id: str,
        memory_id: int,
        other_memory_id: int,
        now: datetime,
        passage_id: int | None = None,
        other_passage_id: int | None = None,
        reason: str = "",
    ) -> Conflict | None:
        """Link two memories (or passages of them) as disagreeing; None when they are linked already."""
        with self._atomic():
            known = self._one(
                "SELECT 1 FROM conflicts WHERE user_id = ? AND ((memory_id = ? AND other_memory_id = ?)"
                " OR (memory_id = ? AND other_memory_id = ?))",
                (user_id, memory_id, other_memory_id, other_memory_id, memory_id),
            )
            if known is not None:
                return None
            conflict_id = self._insert(
                "INSERT INTO conflicts(user_id, memory_id, other_memory_id, passage_id, other_passage_id, reason,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (user_id, memory_id, other_memory_id, passage_id, other_passage_id, reason, to_text(now)),
            )
        return Conflict(conflict_id, user_id, memory_id, other_memory_id, now, passage_id, other_passage_id, reason)

    def conflicts_of(self, user_id: str, memory_ids: Iterable[int]) -> list[Conflict]:
        """Every conflict naming one of these memories (either side)."""
        ids = list(dict.fromkeys(memory_ids))
        return [conflict_from(r) for r in self._all(*conflicts_statement(user_id, ids))] if ids else []

    def memory_briefs_and_conflicts(
        self, user_id: str, memory_ids: Iterable[int]
    ) -> tuple[dict[int, MemoryBrief], list[Conflict]]:
        """:meth:`memory_briefs` and :meth:`conflicts_of` of the same memories, read together (on PostgreSQL one
        wait for both: a search ranks its candidates by the one and shows the other)."""
        ids = list(dict.fromkeys(memory_ids))
        if not ids:
            return {}, []
        briefs, conflicts = self._all_of([briefs_statement(user_id, ids), conflicts_statement(user_id, ids)])
        return briefs_from(briefs), [conflict_from(r) for r in conflicts]


def conflicts_statement(user_id: str, ids: Sequence[int]) -> tuple[str, list[Any]]:
    marks = placeholders(ids)
    return (
        "SELECT id, user_id, memory_id, other_memory_id, passage_id, other_passage_id, reason, created_at"
        f" FROM conflicts WHERE user_id = ? AND (memory_id IN ({marks}) OR other_memory_id IN ({marks}))"
        " ORDER BY id",
        [user_id, *ids, *ids],
    )
