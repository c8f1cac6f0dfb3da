"""Entities (open threads), state deltas, uses (the audit trail) and API keys."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from narrative.errors import NotFound, StoreError
from narrative.model import (
    DeltaType,
    Entity,
    EntityType,
    InfluenceType,
    StateDelta,
    Use,
    UseKind,
    UseReference,
)
from narrative.store.sqlite.base import (
    SqliteBase,
    dumps,
    loads,
    placeholders,
    to_text,
    to_time,
    to_time_required,
)


def _entity(row: sqlite3.Row) -> Entity:
    return Entity(
        id=row["id"],
        user_id=row["user_id"],
        entity_type=EntityType(row["entity_type"]),
        name=row["name"],
        data=loads(row["data"], {}),
        memory_id=row["memory_id"],
        conversation_id=row["conversation_id"],
        storyline_id=row["storyline_id"],
        is_active=bool(row["is_active"]),
        resolved_by_memory_id=row["resolved_by_memory_id"],
        resolved_by_entity_id=row["resolved_by_entity_id"],
        resolved_at=to_time(row["resolved_at"]),
        created_at=to_time_required(row["created_at"]),
    )


def _delta(row: sqlite3.Row) -> StateDelta:
    return StateDelta(
        id=row["id"],
        user_id=row["user_id"],
        delta_type=DeltaType(row["delta_type"]),
        data=loads(row["data"], {}),
        memory_id=row["memory_id"],
        conversation_id=row["conversation_id"],
        applied=bool(row["applied"]),
        applied_at=to_time(row["applied_at"]),
        created_at=to_time_required(row["created_at"]),
    )


class EntityRows(SqliteBase):
    # --- entities ----------------------------------------------------------------

    def insert_entity(
        self,
        user_id: str,
        entity_type: EntityType,
        name: str,
        now: datetime,
        data: dict[str, Any] | None = None,
        memory_id: int | None = None,
        conversation_id: int | None = None,
        storyline_id: int | None = None,
        is_active: bool = True,
    ) -> Entity:
        encoded, created = dumps(data or {}), to_text(now)
        eid = self._exec(  # one statement: atomic without a savepoint of its own
            "INSERT INTO entities(id, user_id, entity_type, name, data, memory_id, conversation_id, storyline_id,"
            f" is_active, created_at) VALUES ({self._new_id('entities')}, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                user_id,
                entity_type.value,
                name,
                encoded,
                memory_id,
                conversation_id,
                storyline_id,
                int(is_active),
                created,
            ),
        ).lastrowid
        if eid is None or created is None:
            raise StoreError("insert returned no id")
        return Entity(  # what reading the row back gives, without reading it
            id=eid,
            user_id=user_id,
            entity_type=entity_type,
            name=name,
            data=loads(encoded, {}),
            memory_id=memory_id,
            conversation_id=conversation_id,
            storyline_id=storyline_id,
            is_active=bool(is_active),
            created_at=to_time_required(created),
        )

    def get_entity(self, user_id: str, entity_id: int) -> Entity:
        row = self._one("SELECT * FROM entities WHERE id = ? AND user_id = ?", (entity_id, user_id))
        if row is None:
            raise NotFound(f"entity {entity_id} not found")
        return _entity(row)

    def list_entities(
        self,
        user_id: str,
        entity_types: Sequence[EntityType] | None = None,
        active: bool | None = None,
        memory_id: int | None = None,
        conversation_id: int | None = None,
        storyline_id: int | None = None,
        since: datetime | None = None,
        limit: int = 500,
    ) -> list[Entity]:
        sql = "SELECT * FROM entities WHERE user_id = ?"
        params: list[Any] = [user_id]
        if entity_types is not None:
            types = [t.value for t in entity_types]
            sql += f" AND entity_type IN ({placeholders(types)})" if types else " AND 0"
            params += types
        for column, value in (
            ("memory_id", memory_id),
            ("conversation_id", conversation_id),
            ("storyline_id", storyline_id),
        ):
            if value is not None:
                sql += f" AND {column} = ?"
                params.append(value)
        if active is not None:
            sql += " AND is_active = ?"
            params.append(int(active))
        if since is not None:
            sql += " AND created_at >= ?"
            params.append(to_text(since))
        rows = self._all(sql + " ORDER BY created_at DESC, id DESC LIMIT ?", [*params, limit])
        return [_entity(r) for r in rows]

    def resolve_entity(
        self,
        user_id: str,
        entity_id: int,
        now: datetime,
        resolved_by_memory_id: int | None = None,
        resolved_by_entity_id: int | None = None,
    ) -> Entity:
        with self._atomic():
            cursor = self._exec(
                "UPDATE entities SET is_active = 0, resolved_at = ?, resolved_by_memory_id = ?,"
                " resolved_by_entity_id = ? WHERE id = ? AND user_id = ?",
                (to_text(now), resolved_by_memory_id, resolved_by_entity_id, entity_id, user_id),
            )
            if cursor.rowcount == 0:
                raise NotFound(f"entity {entity_id} not found")
        return self.get_entity(user_id, entity_id)

    def update_entity(
        self, user_id: str, entity_id: int, memory_id: int | None = None, storyline_id: int | None = None
    ) -> Entity:
        with self._atomic():
            self._exec(
                "UPDATE entities SET memory_id = COALESCE(?, memory_id), storyline_id = COALESCE(?, storyline_id)"
                " WHERE id = ? AND user_id = ?",
                (memory_id, storyline_id, entity_id, user_id),
            )
        return self.get_entity(user_id, entity_id)

    def delete_entities(self, user_id: str, entity_ids: Iterable[int]) -> None:
        ids = list(entity_ids)
        if ids:
            with self._atomic():
                self._exec(f"DELETE FROM entities WHERE user_id = ? AND id IN ({placeholders(ids)})", [user_id, *ids])

    # --- state deltas --------------------------------------------------------------

    def insert_state_delta(
        self,
        user_id: str,
        delta_type: DeltaType,
        data: dict[str, Any],
        now: datetime,
        memory_id: int | None = None,
        conversation_id: int | None = None,
        applied: bool = False,
    ) -> StateDelta:
        did = self._insert(
            "INSERT INTO state_deltas(user_id, delta_type, data, memory_id, conversation_id, applied, applied_at,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                user_id,
                delta_type.value,
                dumps(data),
                memory_id,
                conversation_id,
                int(applied),
                to_text(now) if applied else None,
                to_text(now),
            ),
        )
        row = self._one("SELECT * FROM state_deltas WHERE id = ?", (did,))
        assert row is not None
        return _delta(row)

    def list_state_deltas(
        self, user_id: str, memory_id: int | None = None, conversation_id: int | None = None
    ) -> list[StateDelta]:
        sql = "SELECT * FROM state_deltas WHERE user_id = ?"
        params: list[Any] = [user_id]
        if memory_id is not None:
            sql += " AND memory_id = ?"
            params.append(memory_id)
        if conversation_id is not None:
            sql += " AND conversation_id = ?"
            params.append(conversation_id)
        return [_delta(r) for r in self._all(sql + " ORDER BY id", params)]

    # --- uses ----------------------------------------------------------------------

    def insert_use(
        self,
        user_id: str,
        kind: UseKind,
        query: str,
        references: Sequence[UseReference],
        now: datetime,
        conversation_id: int | None = None,
        outcome: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Use:
        with self._atomic():
            uid = self._insert(
                "INSERT INTO uses(id, user_id, kind, query, conversation_id, outcome, meta, created_at)"
                f" VALUES ({self._new_id('uses')}, ?, ?, ?, ?, ?, ?, ?)",
                (user_id, kind.value, query, conversation_id, outcome, dumps(meta or {}), to_text(now)),
            )
            for ref in references:
                self._exec(
                    "INSERT OR IGNORE INTO use_references(use_id, memory_id, influence_type, score, reasoning, rank)"
                    " SELECT ?, id, ?, ?, ?, ? FROM memories WHERE id = ? AND user_id = ?",
                    (uid, ref.influence_type.value, ref.score, ref.reasoning, ref.rank, ref.memory_id, user_id),
                )
        return self.get_use(user_id, uid)

    def get_use(self, user_id: str, use_id: int) -> Use:
        row = self._one("SELECT * FROM uses WHERE id = ? AND user_id = ?", (use_id, user_id))
        if row is None:
            raise NotFound(f"use {use_id} not found")
        refs = self._all("SELECT * FROM use_references WHERE use_id = ? ORDER BY rank, memory_id", (use_id,))
        return Use(
            id=row["id"],
            user_id=row["user_id"],
            kind=UseKind(row["kind"]),
            query=row["query"],
            conversation_id=row["conversation_id"],
            outcome=row["outcome"],
            meta=loads(row["meta"], {}),
            created_at=to_time_required(row["created_at"]),
            references=tuple(
                UseReference(
                    memory_id=r["memory_id"],
                    influence_type=InfluenceType(r["influence_type"]),
                    score=r["score"],
                    reasoning=r["reasoning"],
                    rank=r["rank"],
                )
                for r in refs
            ),
        )

    def uses_of_memory(self, user_id: str, memory_id: int, limit: int = 50) -> list[Use]:
        rows = self._all(
            "SELECT u.id FROM uses u JOIN use_references r ON r.use_id = u.id"
            " WHERE u.user_id = ? AND r.memory_id = ? ORDER BY u.created_at DESC, u.id DESC LIMIT ?",
            (user_id, memory_id, limit),
        )
        return [self.get_use(user_id, r[0]) for r in rows]

    def list_uses(self, user_id: str, limit: int = 50, offset: int = 0) -> list[Use]:
        rows = self._all(
            "SELECT id FROM uses WHERE user_id = ? ORDER BY id DESC LIMIT ? OFFSET ?", (user_id, limit, offset)
        )
        return [self.get_use(user_id, r[0]) for r in rows]

    # --- api keys --------------------------------------------------------------------

    def insert_api_key(self, user_id: str, key_hash: str, label: str, now: datetime) -> int:
        return self._insert(
            "INSERT INTO api_keys(id, user_id, key_hash, label, created_at)"
            f" VALUES ({self._new_id('api_keys')}, ?, ?, ?, ?)",
            (user_id, key_hash, label, to_text(now)),
        )

    def user_for_key_hash(self, key_hash: str) -> str | None:
        row = self._one("SELECT user_id FROM api_keys WHERE key_hash = ?", (key_hash,))
        return None if row is None else str(row[0])

    def list_keys(self, user_id: str) -> list[dict[str, Any]]:
        """This user's keys, oldest first: id, label, creation time and a short fingerprint of the stored hash."""
        rows = self._all(
            "SELECT id, label, created_at, key_hash FROM api_keys WHERE user_id = ? ORDER BY id", (user_id,)
        )
        return [
            {"id": r[0], "label": r[1], "created_at": to_time_required(r[2]), "fingerprint": str(r[3])[:12]}
            for r in rows
        ]

    def revoke_key(self, user_id: str, key_id: int) -> bool:
        """Delete one of this user's keys; False when the user has no key with this id."""
        with self._atomic():
            return self._exec("DELETE FROM api_keys WHERE id = ? AND user_id = ?", (key_id, user_id)).rowcount > 0

    def delete_api_keys(self, user_id: str) -> int:
        with self._atomic():
            return self._exec("DELETE FROM api_keys WHERE user_id = ?", (user_id,)).rowcount
