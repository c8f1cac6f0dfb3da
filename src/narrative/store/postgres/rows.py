"""Where PostgreSQL needs its own SQL: message positions, text search, vectors as pgvector, delete helpers."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from narrative.errors import StoreError
from narrative.model import Narrative
from narrative.store.keyword_index import KeywordIndex, query_terms
from narrative.store.postgres.base import PostgresBase
from narrative.store.sqlite.base import finite_vector, placeholders
from narrative.store.sqlite.narratives import _narrative


def vector_value(vector: Any) -> np.ndarray:
    """A flat float32 array of finite numbers from a numpy array or a pgvector ``Vector`` (else ValidationError)."""
    if hasattr(vector, "to_numpy"):
        vector = vector.to_numpy()
    return finite_vector(vector)


def rank_texts(user_id: str, rows: Iterable[tuple[int, str]], query: str, limit: int) -> list[tuple[int, float]]:
    """BM25 over a handful of rows (a user's storylines, narratives or messages), scored as FTS5 would."""
    terms = query_terms(query)
    if not terms or limit <= 0:
        return []
    index = KeywordIndex()
    index.upsert((row_id, user_id, text) for row_id, text in rows)
    return index.search(user_id, terms, limit)


class PostgresRows(PostgresBase):
    """Overrides of the shared row classes; listed first in :class:`PostgresStore`'s bases."""

    _next_memory_id = "DEFAULT"  # the identity sequence: never gives an id twice

    def _new_id(self, table: str) -> str:
        return "DEFAULT"  # every floored table (sqlite/base.py FLOORED): identity sequences never give an id twice

    @contextmanager
    def _id_floors_kept(self) -> Iterator[None]:
        yield  # no floors to keep: the sequences never go back

    # --- messages: positions allocated under the user's row lock ---------------------

    def _claim_positions(self, user_id: str) -> None:
        """Lock the user's row (``FOR UPDATE``), so concurrent writers for one user take positions one after
        another: no gap, no duplicate, no retry."""
        if self._one("SELECT id FROM users WHERE id = ? FOR UPDATE", (user_id,)) is None:
            raise StoreError(f"user {user_id!r} does not exist")

    # --- keyword search over the small tables: BM25 in process -----------------------

    def search_narratives(self, user_id: str, query: str, limit: int = 10) -> list[Narrative]:
        """Keyword search (BM25) over summaries and topics, newest first."""
        rows = self._all("SELECT id, summary || ' ' || topic FROM narratives WHERE user_id = ?", (user_id,))
        hits = rank_texts(user_id, ((int(r[0]), str(r[1])) for r in rows), query, limit)
        if not hits:
            return []
        ids = [h[0] for h in hits]
        found = [
            _narrative(r)  # type: ignore[arg-type]  # read by name like sqlite3.Row
            for r in self._all(
                f"SELECT * FROM narratives WHERE user_id = ? AND id IN ({placeholders(ids)})", [user_id, *ids]
            )
        ]
        return sorted(found, key=lambda n: (n.created_at, n.id), reverse=True)

    def keyword_search_storylines(self, user_id: str, query: str, limit: int = 10) -> list[tuple[int, float]]:
        rows = self._all(
            "SELECT id, name || ' ' || description || ' ' || keywords || ' ' || summary FROM storylines"
            " WHERE user_id = ? AND status != 'archived'",
            (user_id,),
        )
        return rank_texts(user_id, ((int(r[0]), str(r[1])) for r in rows), query, limit)

    # --- storyline vectors in pgvector ----------------------------------------------

    def put_storyline_vector(self, user_id: str, storyline_id: int, model: str, vector: np.ndarray) -> None:
        self._exec(
            "INSERT INTO storyline_vectors(storyline_id, user_id, model, vector)"
            " SELECT id, user_id, ?, ? FROM storylines WHERE id = ? AND user_id = ?"
            " ON CONFLICT (user_id, storyline_id) DO UPDATE SET model = EXCLUDED.model, vector = EXCLUDED.vector",
            (model, vector_value(vector), storyline_id, user_id),
        )

    def storyline_vector(self, user_id: str, storyline_id: int, model: str) -> np.ndarray | None:
        row = self._one(
            "SELECT vector FROM storyline_vectors WHERE user_id = ? AND storyline_id = ? AND model = ?",
            (user_id, storyline_id, model),
        )
        return None if row is None else vector_value(row[0])

    def storyline_vectors(self, user_id: str, model: str) -> dict[int, np.ndarray]:
        rows = self._all(
            "SELECT v.storyline_id, v.vector FROM storyline_vectors v"
            " JOIN storylines s ON s.user_id = v.user_id AND s.id = v.storyline_id"
            " WHERE v.user_id = ? AND v.model = ? AND s.status != 'archived'",
            (user_id, model),
        )
        return {int(r[0]): vector_value(r[1]) for r in rows}

    # --- helpers for deletes ---------------------------------------------------------

    def narratives_with_memories(self, user_id: str, memory_ids: Iterable[int]) -> list[int]:
        wanted = set(memory_ids)
        if not wanted:
            return []
        rows = self._all("SELECT id, memory_ids FROM narratives WHERE user_id = ? ORDER BY id", (user_id,))
        return [int(r[0]) for r in rows if wanted & set(json.loads(r[1]) or [])]

    def conversation_memory_ids(self, user_id: str, conversation_id: int) -> list[int]:
        rows = self._all(
            "SELECT id FROM memories WHERE user_id = ? AND conversation_id = ?"
            " UNION SELECT s.memory_id FROM memory_sources s JOIN messages g ON g.id = s.message_id"
            " WHERE s.memory_id IN (SELECT s2.memory_id FROM memory_sources s2 JOIN messages g2"
            " ON g2.id = s2.message_id WHERE g2.user_id = ? AND g2.conversation_id = ?)"
            " GROUP BY s.memory_id HAVING bool_and(g.conversation_id = ?) ORDER BY 1",
            (user_id, conversation_id, user_id, conversation_id, conversation_id),
        )
        return [int(r[0]) for r in rows]
