"""Storyline bindings (NarraNexus): named instances bound to a storyline, active or moved to history."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from narrative.errors import NotFound, StoreError
from narrative.model import Binding, BindingKind
from narrative.store.sqlite.base import SqliteBase, dumps, loads, placeholders, to_text, to_time, to_time_required

_UPDATABLE = frozenset({"status", "payload", "touched_at", "touched_by", "completed_at", "updated_at", "name"})


def _binding(row: sqlite3.Row) -> Binding:
    return Binding(
        id=row["id"],
        user_id=row["user_id"],
        storyline_id=row["storyline_id"],
        kind=BindingKind(row["kind"]),
        name=row["name"],
        status=row["status"],
        payload=loads(row["payload"], {}),
        touched_at=to_time_required(row["touched_at"]),
        touched_by=row["touched_by"],
        completed_at=to_time(row["completed_at"]),
        created_at=to_time_required(row["created_at"]),
        updated_at=to_time_required(row["updated_at"]),
    )


class BindingRows(SqliteBase):
    def insert_binding(self, binding: Binding) -> Binding:
        """Insert ``binding`` (its ``id`` is ignored); the storyline must be the same user's."""
        owner = self._one(
            "SELECT 1 FROM storylines WHERE id = ? AND user_id = ?", (binding.storyline_id, binding.user_id)
        )
        if owner is None:
            raise NotFound(f"storyline {binding.storyline_id} not found")
        bid = self._insert(
            "INSERT INTO storyline_bindings(id, user_id, storyline_id, kind, name, status, payload, touched_at,"
            f" touched_by, completed_at, created_at, updated_at) VALUES ({self._new_id('storyline_bindings')},"
            " ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                binding.user_id,
                binding.storyline_id,
                binding.kind.value,
                binding.name,
                binding.status,
                dumps(binding.payload),
                to_text(binding.touched_at),
                binding.touched_by,
                to_text(binding.completed_at),
                to_text(binding.created_at),
                to_text(binding.updated_at),
            ),
        )
        return self.get_binding(binding.user_id, bid)

    def get_binding(self, user_id: str, binding_id: int) -> Binding:
        row = self._one("SELECT * FROM storyline_bindings WHERE id = ? AND user_id = ?", (binding_id, user_id))
        if row is None:
            raise NotFound(f"binding {binding_id} not found")
        return _binding(row)

    def list_bindings(
        self,
        user_id: str,
        storyline_ids: Sequence[int] | None = None,
        kinds: Sequence[BindingKind] | None = None,
        active: bool | None = True,
        limit: int = 500,
    ) -> list[Binding]:
        """Bindings, the most recently touched first (``active``: True the live ones, False history, None all)."""
        where: list[str] = ["user_id = ?"]
        params: list[Any] = [user_id]
        if storyline_ids is not None:
            ids = list(storyline_ids)
            if not ids:
                return []
            where.append(f"storyline_id IN ({placeholders(ids)})")
            params += ids
        if kinds is not None:
            where.append(f"kind IN ({placeholders(list(kinds))})")
            params += [k.value for k in kinds]
        if active is not None:
            where.append("completed_at IS NULL" if active else "completed_at IS NOT NULL")
        rows = self._all(
            f"SELECT * FROM storyline_bindings WHERE {' AND '.join(where)} ORDER BY touched_at DESC, id DESC LIMIT ?",
            [*params, limit],
        )
        return [_binding(r) for r in rows]

    def update_binding(self, user_id: str, binding_id: int, **changes: Any) -> Binding:
        unknown = set(changes) - _UPDATABLE
        if unknown:
            raise StoreError(f"unknown binding columns: {sorted(unknown)}")
        if not changes:
            return self.get_binding(user_id, binding_id)
        values = [
            dumps(v) if k == "payload" else to_text(v) if isinstance(v, datetime) else v for k, v in changes.items()
        ]
        assignments = ", ".join(f"{k} = ?" for k in changes)
        with self._atomic():
            done = self._exec(
                f"UPDATE storyline_bindings SET {assignments} WHERE id = ? AND user_id = ?",
                [*values, binding_id, user_id],
            ).rowcount
        if not done:
            raise NotFound(f"binding {binding_id} not found")
        return self.get_binding(user_id, binding_id)

    def delete_binding(self, user_id: str, binding_id: int) -> None:
        with self._atomic():
            done = self._exec(
                "DELETE FROM storyline_bindings WHERE id = ? AND user_id = ?", (binding_id, user_id)
            ).rowcount
        if not done:
            raise NotFound(f"binding {binding_id} not found")
