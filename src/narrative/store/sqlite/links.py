"""Links between memories (consolidation, decision chains), decision reviews, and counts of uses per memory."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime

from narrative.errors import NotFound, StoreError
from narrative.model import DecisionReview, LinkKind, LinkOrigin, MemoryLink, ReviewOutcome
from narrative.store.sqlite.base import SqliteBase, placeholders, to_text, to_time_required

_CHUNK = 500  # ids per IN (...) list


def _link(row: sqlite3.Row) -> MemoryLink:
    return MemoryLink(
        user_id=row["user_id"],
        memory_id=row["memory_id"],
        linked_id=row["linked_id"],
        kind=LinkKind(row["kind"]),
        origin=LinkOrigin(row["origin"]),
        reason=row["reason"],
        score=float(row["score"]),
        created_at=to_time_required(row["created_at"]),
    )


def _review(row: sqlite3.Row) -> DecisionReview:
    return DecisionReview(
        id=row["id"],
        user_id=row["user_id"],
        memory_id=row["memory_id"],
        outcome=ReviewOutcome(row["outcome"]),
        note=row["note"],
        created_at=to_time_required(row["created_at"]),
    )


def _chunks(ids: Iterable[int]) -> list[list[int]]:
    unique = sorted(set(ids))
    return [unique[i : i + _CHUNK] for i in range(0, len(unique), _CHUNK)]


class LinkRows(SqliteBase):
    # --- links ------------------------------------------------------------------------------

    def insert_memory_links(self, links: Sequence[MemoryLink]) -> int:
        """Insert the links not stored yet (same two memories, same kind); both ends must be the user's."""
        if not links:
            return 0
        added = 0
        with self._atomic():
            owned: set[tuple[str, int]] = set()  # (user, memory id) of every end that is the user's
            for user_id in dict.fromkeys(link.user_id for link in links):
                mine = [e for link in links if link.user_id == user_id for e in (link.memory_id, link.linked_id)]
                for chunk in _chunks(mine):
                    rows = self._all(
                        f"SELECT id FROM memories WHERE user_id = ? AND id IN ({placeholders(chunk)})",
                        [user_id, *chunk],
                    )
                    owned.update((user_id, int(r[0])) for r in rows)
            for link in links:
                ends = {(link.user_id, link.memory_id), (link.user_id, link.linked_id)}
                if link.memory_id == link.linked_id or not ends <= owned:
                    raise StoreError(f"cannot link memory {link.memory_id} to {link.linked_id}")
            for start in range(0, len(links), _CHUNK // 8):  # one statement per chunk (8 values a link)
                chunk_links = links[start : start + _CHUNK // 8]
                added += self._exec(
                    "INSERT OR IGNORE INTO memory_links(memory_id, linked_id, kind, user_id, origin, score, reason,"
                    " created_at) VALUES " + ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?)"] * len(chunk_links)),
                    [
                        value
                        for link in chunk_links
                        for value in (
                            link.memory_id,
                            link.linked_id,
                            link.kind.value,
                            link.user_id,
                            link.origin.value,
                            link.score,
                            link.reason,
                            to_text(link.created_at),
                        )
                    ],
                ).rowcount
        return added

    def memory_links(
        self, user_id: str, memory_ids: Iterable[int] | None = None, kinds: Sequence[LinkKind] | None = None
    ) -> list[MemoryLink]:
        """Links with any of ``memory_ids`` at either end (every link of the user when None), oldest first."""
        kind_sql, kind_params = "", []
        if kinds is not None:
            kind_sql = f" AND kind IN ({placeholders(list(kinds))})"
            kind_params = [k.value for k in kinds]
        order = " ORDER BY created_at, memory_id, linked_id, kind"
        if memory_ids is None:
            rows = self._all(f"SELECT * FROM memory_links WHERE user_id = ?{kind_sql}{order}", [user_id, *kind_params])
            return [_link(r) for r in rows]
        found: dict[tuple[int, int, str], MemoryLink] = {}
        for chunk in _chunks(memory_ids):
            marks = placeholders(chunk)
            rows = self._all(
                f"SELECT * FROM memory_links WHERE user_id = ? AND (memory_id IN ({marks}) OR linked_id IN ({marks}))"
                f"{kind_sql}{order}",
                [user_id, *chunk, *chunk, *kind_params],
            )
            for row in rows:
                link = _link(row)
                found[(link.memory_id, link.linked_id, link.kind.value)] = link
        return sorted(found.values(), key=lambda k: (k.created_at, k.memory_id, k.linked_id, k.kind.value))

    def delete_memory_link(self, user_id: str, memory_id: int, linked_id: int, kind: LinkKind) -> int:
        with self._atomic():
            return self._exec(
                "DELETE FROM memory_links WHERE user_id = ? AND memory_id = ? AND linked_id = ? AND kind = ?",
                (user_id, memory_id, linked_id, kind.value),
            ).rowcount

    # --- decision reviews --------------------------------------------------------------------

    def insert_decision_review(
        self, user_id: str, memory_id: int, outcome: ReviewOutcome, note: str, now: datetime
    ) -> DecisionReview:
        if self._one("SELECT 1 FROM memories WHERE id = ? AND user_id = ?", (memory_id, user_id)) is None:
            raise NotFound(f"memory {memory_id} not found")
        rid = self._insert(
            "INSERT INTO decision_reviews(user_id, memory_id, outcome, note, created_at) VALUES (?, ?, ?, ?, ?)",
            (user_id, memory_id, outcome.value, note, to_text(now)),
        )
        row = self._one("SELECT * FROM decision_reviews WHERE id = ? AND user_id = ?", (rid, user_id))
        if row is None:
            raise StoreError("the review was not stored")
        return _review(row)

    def decision_reviews(self, user_id: str, memory_ids: Iterable[int] | None = None) -> list[DecisionReview]:
        """Reviews oldest first, of these memories (every review of the user when None)."""
        if memory_ids is None:
            rows = self._all("SELECT * FROM decision_reviews WHERE user_id = ? ORDER BY created_at, id", (user_id,))
            return [_review(r) for r in rows]
        found: list[DecisionReview] = []
        for chunk in _chunks(memory_ids):
            rows = self._all(
                f"SELECT * FROM decision_reviews WHERE user_id = ? AND memory_id IN ({placeholders(chunk)})"
                " ORDER BY created_at, id",
                [user_id, *chunk],
            )
            found += [_review(r) for r in rows]
        return sorted(found, key=lambda r: (r.created_at, r.id))

    # --- uses per memory ---------------------------------------------------------------------

    def use_counts(
        self, user_id: str, memory_ids: Iterable[int], since: datetime | None = None, until: datetime | None = None
    ) -> dict[int, int]:
        """How many recorded uses (recalls, contexts, reasoning; not outcomes) drew on each memory in the period."""
        period, bounds = "", []
        if since is not None:
            period += " AND u.created_at >= ?"
            bounds.append(to_text(since))
        if until is not None:
            period += " AND u.created_at < ?"
            bounds.append(to_text(until))
        counts: dict[int, int] = {}
        for chunk in _chunks(memory_ids):
            rows = self._all(
                "SELECT r.memory_id, COUNT(*) FROM use_references r JOIN uses u ON u.id = r.use_id"
                f" WHERE u.user_id = ? AND u.kind != 'outcome' AND r.memory_id IN ({placeholders(chunk)}){period}"
                " GROUP BY r.memory_id",
                [user_id, *chunk, *bounds],
            )
            counts.update({int(r[0]): int(r[1]) for r in rows})
        return counts
