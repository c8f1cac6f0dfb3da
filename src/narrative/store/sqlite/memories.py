"""Memories, their provenance, their vectors and their keyword index."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from narrative.errors import EmbeddingMismatch, NotFound, StoreError
from narrative.model import (
    ConversationDetails,
    DecisionDetails,
    Details,
    MemoryBrief,
    MemoryItem,
    ReflectionDetails,
    ResearchDetails,
    Retention,
    Source,
    Stream,
)
from narrative.store.filters import MemoryFilter
from narrative.store.sqlite.base import (
    SqliteBase,
    dumps,
    fts_query,
    fts_terms,
    loads,
    placeholders,
    to_text,
    to_time,
    to_time_required,
    vector_blob,
)
from narrative.store.sqlite.filter_sql import tree_sql

_DETAILS: dict[str, type[Any]] = {
    "conversation": ConversationDetails,
    "research": ResearchDetails,
    "decision": DecisionDetails,
    "reflection": ReflectionDetails,
}
_DETAIL_KIND = {cls: kind for kind, cls in _DETAILS.items()}
_TIME_FIELDS = {"covered_from", "covered_to"}


def details_to_json(details: Details | None) -> str | None:
    if details is None:
        return None
    values = ((f.name, getattr(details, f.name)) for f in dataclasses.fields(details))  # flat: no deep copy needed
    data = {k: (to_text(v) if isinstance(v, datetime) else v) for k, v in values}
    return dumps({"kind": _DETAIL_KIND[type(details)], **data})


def details_from_json(text: str | None) -> Details | None:
    data = loads(text)
    if not data:
        return None
    cls = _DETAILS[data.pop("kind")]
    fields = {f.name for f in dataclasses.fields(cls)}
    clean: dict[str, Any] = {}
    for key, value in data.items():
        if key not in fields:
            continue
        if key in _TIME_FIELDS:
            value = to_time(value)
        elif isinstance(value, list):
            value = tuple(value)
        clean[key] = value
    result: Details = cls(**clean)
    return result


def _column(row: sqlite3.Row | Mapping[str, Any], name: str) -> Any:
    """A column that rows made by hand (an insert's own values) may lack: None then."""
    try:
        return row[name]
    except (IndexError, KeyError):  # sqlite3.Row says IndexError, a mapping (or a PostgreSQL row) KeyError
        return None


def _memory(
    row: sqlite3.Row | Mapping[str, Any], message_ids: tuple[int, ...], positions: tuple[int, ...]
) -> MemoryItem:
    return MemoryItem(
        id=row["id"],
        user_id=row["user_id"],
        stream=Stream(row["stream"]),
        source=Source(row["source"]),
        content=row["content"],
        importance=row["importance"],
        emotions=tuple(loads(row["emotions"], [])),
        conversation_id=row["conversation_id"],
        storyline_id=row["storyline_id"],
        narrative_id=row["narrative_id"],
        message_ids=message_ids,
        positions=positions,
        details=details_from_json(row["details"]),
        retention=Retention(row["retention"]),
        key_points=row["key_points"],
        user_reviewed=bool(row["user_reviewed"]),
        user_edited=bool(row["user_edited"]),
        original_content=row["original_content"],
        extraction_model=row["extraction_model"],
        extraction_confidence=row["extraction_confidence"],
        event_at=to_time(row["event_at"]),
        created_at=to_time_required(row["created_at"]),
        valid_to=to_time(_column(row, "valid_to")),
        superseded_by=_column(row, "superseded_by"),
        metadata=loads(_column(row, "metadata"), {}),
    )


MIN_TERMS = 3
COMMON_SHARE = 0.05
COMMON_FLOOR = 2000

_UPDATABLE = {
    "content",
    "importance",
    "emotions",
    "storyline_id",
    "narrative_id",
    "details",
    "retention",
    "key_points",
    "user_reviewed",
    "user_edited",
    "original_content",
    "metadata",
}


#: A new memory's id: above every memory id the file ever gave (a deleted memory's events keep its id, so an id
#: is never given twice).  PostgreSQL's identity sequence never gives one twice by itself (``DEFAULT``).
NEXT_MEMORY_ID = (
    "(SELECT MAX(COALESCE((SELECT MAX(id) FROM memories), 0), COALESCE((SELECT MAX(memory_id) FROM memory_events), 0))"
    " + 1)"
)


SOURCES = "source_list"  # the column :meth:`sources_column` adds to a memories row


class MemoryRows(SqliteBase):
    _next_memory_id = NEXT_MEMORY_ID
    backend = "sqlite"  # the SQL dialect of metadata filters (the PostgreSQL store says "postgres")

    def insert_memory(self, memory: MemoryItem) -> MemoryItem:
        """Store a memory (its ``id`` is ignored) with its provenance rows and its ``created`` event (history)."""
        row: dict[str, Any] = {
            "user_id": memory.user_id,
            "stream": memory.stream.value,
            "source": memory.source.value,
            "content": memory.content,
            "importance": memory.importance,
            "emotions": dumps(list(memory.emotions)),
            "metadata": dumps(memory.metadata),
            "conversation_id": memory.conversation_id,
            "storyline_id": memory.storyline_id,
            "narrative_id": memory.narrative_id,
            "details": details_to_json(memory.details),
            "retention": memory.retention.value,
            "key_points": memory.key_points,
            "user_reviewed": int(memory.user_reviewed),
            "user_edited": int(memory.user_edited),
            "original_content": memory.original_content,
            "extraction_model": memory.extraction_model,
            "extraction_confidence": memory.extraction_confidence,
            "event_at": to_text(memory.event_at),
            "created_at": to_text(memory.created_at),
        }
        ids = list(dict.fromkeys(memory.message_ids))
        with self._atomic():
            row["id"] = self._exec(
                f"INSERT INTO memories(id, {', '.join(row)})"
                f" VALUES ({self._next_memory_id}, {placeholders(list(row))})",
                list(row.values()),
            ).lastrowid
            self._exec(
                "INSERT INTO memory_events(user_id, memory_id, kind, new_text, created_at)"
                " VALUES (?, ?, 'created', ?, ?)",
                (memory.user_id, row["id"], memory.content, row["created_at"]),
            )
            sources = []  # (message id, position) of this user's messages among message_ids, in position order
            if ids:
                sources = self._all(
                    f"SELECT id, position FROM messages WHERE user_id = ? AND id IN ({placeholders(ids)})"
                    " ORDER BY position",
                    [memory.user_id, *ids],
                )
                if sources:  # one statement for all of them (on PostgreSQL each statement costs a send)
                    self._exec(
                        "INSERT INTO memory_sources(memory_id, message_id) VALUES "
                        + ", ".join(["(?, ?)"] * len(sources)),
                        [value for message_id, _ in sources for value in (row["id"], message_id)],
                    )
        if row["id"] is None:
            raise StoreError("insert returned no id")
        return _memory(row, tuple(s[0] for s in sources), tuple(s[1] for s in sources))  # as reading it back would

    def get_memory(self, user_id: str, memory_id: int) -> MemoryItem:
        found = self.get_memories(user_id, [memory_id])
        if not found:
            raise NotFound(f"memory {memory_id} not found")
        return found[0]

    def get_memories(self, user_id: str, memory_ids: Iterable[int]) -> list[MemoryItem]:
        """Memories in the order of ``memory_ids``; unknown or foreign ids are skipped."""
        ids = list(dict.fromkeys(memory_ids))
        if not ids:
            return []
        rows = self._all(
            f"SELECT *, {self.sources_column()} FROM memories WHERE +user_id = ? AND id IN ({placeholders(ids)})",
            [user_id, *ids],
        )
        return self._hydrate(rows, order=ids)

    def sources_column(self) -> str:
        """A column of a ``memories`` row that lists its source messages ("id:position,…", by position), so that a
        read of memories is one statement (on PostgreSQL every statement is a round trip)."""
        if self.backend == "postgres":
            return (
                "(SELECT string_agg(g.id || ':' || g.position, ',' ORDER BY g.position, g.id)"
                " FROM memory_sources s JOIN messages g ON g.id = s.message_id WHERE s.memory_id = memories.id)"
                f" AS {SOURCES}"
            )
        return (
            "(SELECT group_concat(pair) FROM (SELECT g.id || ':' || g.position AS pair FROM memory_sources s"
            " JOIN messages g ON g.id = s.message_id WHERE s.memory_id = memories.id ORDER BY g.position, g.id))"
            f" AS {SOURCES}"
        )

    def memory_briefs(self, user_id: str, memory_ids: Iterable[int]) -> dict[int, MemoryBrief]:
        """What ranking needs, cheaply: stream, time (event or creation), source message ids and the end of its
        validity (one statement: on PostgreSQL every statement is a round trip)."""
        ids = list(dict.fromkeys(memory_ids))
        return briefs_from(self._all(*briefs_statement(user_id, ids))) if ids else {}

    def _hydrate(self, rows: list[sqlite3.Row], order: list[int] | None = None) -> list[MemoryItem]:
        if not rows:
            return []
        ids = [r["id"] for r in rows]
        sources: dict[int, list[tuple[int, int]]] = {i: [] for i in ids}
        unread = ids
        if SOURCES in rows[0].keys():  # noqa: SIM118 (a row iterates its values)
            for row in rows:
                pairs = (pair.split(":") for pair in (row[SOURCES] or "").split(",") if pair)
                sources[row["id"]] = [(int(m), int(position)) for m, position in pairs]
            unread = []
        for chunk_start in range(0, len(unread), 900):
            chunk = unread[chunk_start : chunk_start + 900]
            for src in self._all(
                "SELECT s.memory_id, m.id, m.position FROM memory_sources s JOIN messages m ON m.id = s.message_id"
                f" WHERE s.memory_id IN ({placeholders(chunk)}) ORDER BY m.position",
                chunk,
            ):
                sources[src[0]].append((src[1], src[2]))
        memories = {
            r["id"]: _memory(
                r,
                tuple(m for m, _ in sources[r["id"]]),
                tuple(p for _, p in sources[r["id"]]),
            )
            for r in rows
        }
        keys = order if order is not None else ids
        return [memories[i] for i in keys if i in memories]

    def list_memories(self, user_id: str, where: MemoryFilter | None = None) -> list[MemoryItem]:
        """Memories matching ``where``, newest first."""
        sql, params = _filter_sql(user_id, where or MemoryFilter(), dialect=self.backend)
        sql = f"SELECT * FROM memories m WHERE {sql} ORDER BY COALESCE(m.event_at, m.created_at) DESC, m.id DESC"
        if where is not None and where.limit is not None:
            sql += " LIMIT ? OFFSET ?"
            params += [where.limit, where.offset]
        return self._hydrate(self._all(sql, params))

    def count_memories(self, user_id: str, where: MemoryFilter | None = None) -> int:
        sql, params = _filter_sql(user_id, where or MemoryFilter(), dialect=self.backend)
        row = self._one(f"SELECT COUNT(*) FROM memories m WHERE {sql}", params)
        return int(row[0]) if row else 0

    def memory_tiers(self, user_id: str, where: MemoryFilter) -> list[tuple[int, Retention, str]]:
        """(id, retention tier, content) of the memories matching ``where``, newest first: what the write
        path's retention step reads every turn, without loading whole memories."""
        sql, params = _filter_sql(user_id, where, dialect=self.backend)
        sql = (
            f"SELECT m.id, m.retention, m.content FROM memories m WHERE {sql}"
            " ORDER BY COALESCE(m.event_at, m.created_at) DESC, m.id DESC"
        )
        if where.limit is not None:
            sql += " LIMIT ? OFFSET ?"
            params += [where.limit, where.offset]
        return [(int(r[0]), Retention(r[1]), str(r[2])) for r in self._all(sql, params)]

    def memory_ids_matching(self, user_id: str, where: MemoryFilter, among: Iterable[int] | None = None) -> set[int]:
        """The ids of the user's memories within ``where`` (only those of ``among``, when given: looked up by key,
        not by reading every memory the filter allows)."""
        if among is None:
            sql, params = _filter_sql(user_id, where, dialect=self.backend)
            return {r[0] for r in self._all(f"SELECT m.id FROM memories m WHERE {sql}", params)}
        ids = list(dict.fromkeys(among))
        found: set[int] = set()
        sql, params = _filter_sql(user_id, where, by_key=True, dialect=self.backend)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = self._all(
                f"SELECT m.id FROM memories m WHERE {sql} AND m.id IN ({placeholders(chunk)})", params + chunk
            )
            found.update(r[0] for r in rows)
        return found

    def update_memory(self, user_id: str, memory_id: int, **changes: Any) -> MemoryItem:
        if self.update_memories(user_id, [memory_id], **changes) == 0:
            raise NotFound(f"memory {memory_id} not found")
        return self.get_memory(user_id, memory_id)

    def update_memories(self, user_id: str, memory_ids: Iterable[int], **changes: Any) -> int:
        """Make the same changes to several memories (not read back); returns how many changed."""
        unknown = set(changes) - _UPDATABLE
        if unknown:
            raise StoreError(f"unknown memory columns: {sorted(unknown)}")
        encoded: dict[str, Any] = {}
        for key, value in changes.items():
            if key == "emotions":
                value = dumps(list(value))
            elif key == "metadata":
                value = dumps(dict(value))
            elif key == "details":
                value = details_to_json(value)
            elif isinstance(value, Retention):
                value = value.value
            elif isinstance(value, bool):
                value = int(value)
            encoded[key] = value
        ids = list(dict.fromkeys(memory_ids))
        if not encoded:
            raise StoreError("no memory columns to change")
        if not ids:
            return 0
        sets = ", ".join(f"{k} = ?" for k in encoded)
        cursor = self._exec(  # one statement: atomic without a savepoint of its own
            f"UPDATE memories SET {sets} WHERE user_id = ? AND id IN ({placeholders(ids)})",
            [*encoded.values(), user_id, *ids],
        )
        return int(cursor.rowcount)

    def delete_memories(self, user_id: str, memory_ids: Iterable[int]) -> int:
        ids = list(memory_ids)
        if not ids:
            return 0
        with self._atomic():
            cursor = self._exec(
                f"DELETE FROM memories WHERE user_id = ? AND id IN ({placeholders(ids)})", [user_id, *ids]
            )
        return cursor.rowcount

    def memories_from_messages(self, user_id: str, message_ids: Iterable[int]) -> list[int]:
        ids = list(message_ids)
        if not ids:
            return []
        rows = self._all(
            "SELECT DISTINCT s.memory_id FROM memory_sources s JOIN memories m ON m.id = s.memory_id"
            f" WHERE +m.user_id = ? AND s.message_id IN ({placeholders(ids)})",  # '+': drive by the message ids
            [user_id, *ids],
        )
        return [r[0] for r in rows]

    # --- keyword search --------------------------------------------------------

    def _fts_keyword_search(
        self, user_id: str, query: str, where: MemoryFilter | None = None, limit: int = 50
    ) -> list[tuple[int, float]]:
        """(memory id, BM25 score; higher is better) best first, straight from FTS5.

        The store answers keyword searches from its in-process index
        (:class:`~narrative.store.keyword_index.KeywordIndex`); this is the SQL
        path, kept to check the index against.  FTS5 scores every row that matches any term, so a term found in a large
        share of the index costs much and ranks little: the query keeps the
        rarest terms (see :meth:`_selective_terms`).
        """
        terms = self._selective_terms(fts_terms(query))
        sql, params = _filter_sql(user_id, where or MemoryFilter(), by_key=True, dialect=self.backend)
        rows = self._all(
            "SELECT m.id, bm25(memories_fts) AS score FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid"
            f" WHERE memories_fts MATCH ? AND {sql} ORDER BY score LIMIT ?",
            [fts_query(terms), *params, limit],
        )
        return [(r[0], -float(r[1])) for r in rows]

    def _selective_terms(self, terms: list[str]) -> list[str]:
        """Drop terms found in more than COMMON_SHARE of the index (keeping at least the 3 rarest).

        Below COMMON_FLOOR rows nothing is dropped; document counts come from FTS5 itself.
        """
        if len(terms) <= MIN_TERMS:
            return terms
        total_row = self._one("SELECT MAX(rowid) FROM memories")
        total = int(total_row[0] or 0) if total_row else 0
        if total < COMMON_FLOOR:
            return terms
        counts = {}
        for term in terms:
            row = self._one("SELECT COUNT(*) FROM memories_fts WHERE memories_fts MATCH ?", (fts_query([term]),))
            counts[term] = int(row[0]) if row else 0
        rare = [t for t in terms if counts[t] <= COMMON_SHARE * total]
        if len(rare) >= MIN_TERMS:
            return rare
        return sorted(terms, key=lambda t: counts[t])[:MIN_TERMS]

    # --- the change log (for in-process indexes) ----------------------------

    def _memory_change_bounds(self) -> tuple[int, int]:
        """(lowest, highest) sequence number in the memory change log; (0, 0) when empty."""
        low = self._one("SELECT MIN(seq) FROM memory_changes")  # one aggregate each: both read the key's ends
        high = self._one("SELECT MAX(seq) FROM memory_changes")
        return int(low[0] or 0) if low else 0, int(high[0] or 0) if high else 0

    def _memory_changes_since(self, seq: int) -> tuple[int, set[int]]:
        """The newest sequence number and the ids of memories changed after ``seq``."""
        rows = self._all("SELECT seq, memory_id FROM memory_changes WHERE seq > ? ORDER BY seq", (seq,))
        if not rows:
            return seq, set()
        return int(rows[-1][0]), {int(r[1]) for r in rows}

    def _memory_text_chunks(self, size: int = 20_000) -> Iterator[list[tuple[int, str, str]]]:
        """Every memory's (id, user id, searchable text), ``size`` rows at a time (a million never sit in a list)."""
        cursor = self._exec("SELECT id, user_id, content, key_points FROM memories ORDER BY id")
        while rows := cursor.fetchmany(size):
            yield [(int(r[0]), str(r[1]), f"{r[2]} {r[3]}" if r[3] else str(r[2])) for r in rows]

    def _memory_texts(self, memory_ids: Iterable[int] | None = None) -> list[tuple[int, str, str]]:
        """(id, user id, searchable text) of the given memories (all of them when ``None``)."""
        sql = "SELECT id, user_id, content, key_points FROM memories"
        if memory_ids is None:
            rows = self._all(sql)
        else:
            ids = list(memory_ids)
            rows = []
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                rows += self._all(f"{sql} WHERE id IN ({placeholders(chunk)})", chunk)
        return [(int(r[0]), str(r[1]), f"{r[2]} {r[3]}" if r[3] else str(r[2])) for r in rows]

    # --- vectors -------------------------------------------------------------

    def put_memory_vectors(self, user_id: str, model: str, vectors: dict[int, np.ndarray]) -> None:
        with self._atomic():
            for memory_id, vector in vectors.items():
                self._exec(
                    "INSERT OR REPLACE INTO memory_vectors(memory_id, user_id, model, vector)"
                    " SELECT id, user_id, ?, ? FROM memories WHERE id = ? AND user_id = ?",
                    (model, vector_blob(vector), memory_id, user_id),
                )

    def vectors_by_id(self, user_id: str, model: str, memory_ids: Iterable[int]) -> dict[int, np.ndarray]:
        """The stored vectors of these memories of ``user_id`` made by ``model``, by memory id."""
        return {i: v for i, owner, made_by, v in self._vectors_of(memory_ids) if owner == user_id and made_by == model}

    def _vectors_of(self, memory_ids: Iterable[int]) -> list[tuple[int, str, str, np.ndarray]]:
        """(memory id, user id, model, vector) of these memories' stored vectors."""
        ids = list(memory_ids)
        rows: list[sqlite3.Row] = []
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows += self._all(
                "SELECT memory_id, user_id, model, vector FROM memory_vectors"
                f" WHERE memory_id IN ({placeholders(chunk)})",
                chunk,
            )
        return [(int(r[0]), str(r[1]), str(r[2]), np.frombuffer(r[3], dtype=np.float32)) for r in rows]

    def memory_vector_counts(self) -> dict[str, int]:
        """How many memory vectors each user has (an index load sizes its shards with it)."""
        return {
            str(r[0]): int(r[1]) for r in self._all("SELECT user_id, COUNT(*) FROM memory_vectors GROUP BY user_id")
        }

    def memory_vector_chunks(self, size: int = 20_000) -> Iterator[tuple[list[int], list[str], list[str], np.ndarray]]:
        """Every stored vector as (memory ids, user ids, models, matrix), ``size`` rows at a time, by memory id."""
        cursor = self._exec("SELECT memory_id, user_id, model, vector FROM memory_vectors ORDER BY memory_id")
        while rows := cursor.fetchmany(size):
            if len({len(r[3]) for r in rows}) > 1:  # a half-finished reindex: vectors of several lengths
                models = ", ".join(sorted({r[2] for r in rows}))
                raise EmbeddingMismatch(
                    f"stored vectors were made by several embedders ({models}): run `narrative reindex`"
                )
            matrix = np.frombuffer(b"".join(r[3] for r in rows), dtype=np.float32).reshape(len(rows), -1)
            yield [int(r[0]) for r in rows], [str(r[1]) for r in rows], [str(r[2]) for r in rows], matrix

    def memory_vectors(self, user_id: str | None = None) -> tuple[list[int], list[str], list[str], np.ndarray]:
        """(memory ids, user ids, models, matrix) of stored vectors, for building the index."""
        sql = "SELECT memory_id, user_id, model, vector FROM memory_vectors"
        params: list[Any] = []
        if user_id is not None:
            sql += " WHERE user_id = ?"
            params.append(user_id)
        rows = self._all(sql + " ORDER BY memory_id", params)
        if not rows:
            return [], [], [], np.zeros((0, 0), dtype=np.float32)
        if len({len(r[3]) for r in rows}) > 1:  # a half-finished reindex: vectors of several lengths
            models = ", ".join(sorted({r[2] for r in rows}))
            raise EmbeddingMismatch(
                f"stored vectors were made by several embedders ({models}): run `narrative reindex`"
            )
        matrix = np.vstack([np.frombuffer(r[3], dtype=np.float32) for r in rows])
        return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], matrix

    def vector_models(self) -> dict[str, int]:
        """How many stored vectors each embedder identity made."""
        rows = self._all("SELECT model, COUNT(*) FROM memory_vectors GROUP BY model")
        rows += self._all("SELECT model, COUNT(*) FROM storyline_vectors GROUP BY model")
        counts: dict[str, int] = {}
        for model, count in rows:
            counts[model] = counts.get(model, 0) + count
        return counts

    def memory_vector_models(self, user_id: str | None = None) -> dict[str, int]:
        """How many memory vectors each embedder identity made: one user's, or the whole file's."""
        sql = "SELECT model, COUNT(*) FROM memory_vectors"
        params: list[Any] = []
        if user_id is not None:
            sql += " WHERE user_id = ?"
            params.append(user_id)
        return {r[0]: int(r[1]) for r in self._all(sql + " GROUP BY model ORDER BY model", params)}

    def memory_ids_to_embed(self, model: str | None, user_id: str | None = None) -> list[tuple[str, int]]:
        """(user id, memory id) of memories with no vector or one made by another embedder than ``model``.

        ``model=None`` lists every memory (a forced re-embedding).  Ordered by user, then id.
        """
        sql = "SELECT m.user_id, m.id FROM memories m LEFT JOIN memory_vectors v ON v.memory_id = m.id WHERE 1"
        params: list[Any] = []
        if model is not None:  # also a vector of the right name but the wrong length (a damaged import)
            sql += " AND (v.memory_id IS NULL OR v.model != ? OR (? > 0 AND length(v.vector) != ?))"
            params += [model, _vector_bytes(model), _vector_bytes(model)]
        if user_id is not None:
            sql += " AND m.user_id = ?"
            params.append(user_id)
        return [(r[0], int(r[1])) for r in self._all(sql + " ORDER BY m.user_id, m.id", params)]

    def memories_without_vectors(self, user_id: str | None = None, model: str | None = None) -> list[MemoryItem]:
        sql = "SELECT m.* FROM memories m LEFT JOIN memory_vectors v ON v.memory_id = m.id WHERE (v.memory_id IS NULL"
        params: list[Any] = []
        if model is not None:
            sql += " OR v.model != ?"
            params.append(model)
        sql += ")"
        if user_id is not None:
            sql += " AND m.user_id = ?"
            params.append(user_id)
        return self._hydrate(self._all(sql + " ORDER BY m.id", params))


def _vector_bytes(model: str) -> int:
    """Bytes of one float32 vector of an embedder identity ``name:dims`` (-1 when it names no dims)."""
    dims = model.rpartition(":")[2]
    return int(dims) * 4 if dims.isdigit() else -1


def _filter_sql(
    user_id: str, where: MemoryFilter, by_key: bool = False, dialect: str = "sqlite"
) -> tuple[str, list[Any]]:
    """The WHERE clause for a filter over ``memories m``; always scoped to one user (``dialect``: how a
    ``match`` tree reads metadata, see :mod:`~narrative.store.sqlite.filter_sql`).

    ``by_key`` keeps SQLite from driving the query by the user index when rows
    come from elsewhere (FTS matches, an id list): ``+m.user_id`` is a filter only.
    """
    clauses = ["+m.user_id = ?" if by_key else "m.user_id = ?"]
    params: list[Any] = [user_id]

    def among(column: str, values: Iterable[Any] | None) -> None:
        if values is None:
            return
        items = [v.value if hasattr(v, "value") else v for v in values]
        clauses.append(f"{column} IN ({placeholders(items)})" if items else "0")
        params.extend(items)

    among("m.conversation_id", where.conversation_ids)
    among("m.storyline_id", where.storyline_ids)
    among("m.stream", where.streams)
    among("m.source", where.sources)
    if where.since is not None:
        clauses.append("COALESCE(m.event_at, m.created_at) >= ?")
        params.append(to_text(where.since))
    if where.until is not None:
        clauses.append("COALESCE(m.event_at, m.created_at) <= ?")
        params.append(to_text(where.until))
    if where.entity_types is not None:
        types = [t.value if hasattr(t, "value") else t for t in where.entity_types]
        clauses.append(
            f"m.id IN (SELECT memory_id FROM entities WHERE user_id = ? AND entity_type IN ({placeholders(types)}))"
        )
        params += [user_id, *types]
    if where.min_importance is not None:
        clauses.append("m.importance >= ?")
        params.append(where.min_importance)
    if where.current_only:
        clauses.append("m.valid_to IS NULL")
    if where.as_of is not None:
        clauses.append("COALESCE(m.event_at, m.created_at) <= ? AND (m.valid_to IS NULL OR m.valid_to > ?)")
        params += [to_text(where.as_of), to_text(where.as_of)]
    if where.match is not None:
        sql, more = tree_sql(where.match, user_id, dialect)
        clauses.append(sql)
        params += more
    return " AND ".join(clauses), params


def briefs_statement(user_id: str, ids: Sequence[int]) -> tuple[str, list[Any]]:
    """The statement :meth:`MemoryRows.memory_briefs` runs (read with others by ``memory_briefs_and_conflicts``)."""
    return (
        "SELECT m.id, m.stream, COALESCE(m.event_at, m.created_at), m.valid_to, s.message_id FROM memories m"
        " LEFT JOIN memory_sources s ON s.memory_id = m.id"
        f" WHERE +m.user_id = ? AND m.id IN ({placeholders(ids)})"  # '+': look ids up by key, not by user
        " ORDER BY s.message_id",
        [user_id, *ids],
    )


def briefs_from(rows: Iterable[Sequence[Any]]) -> dict[int, MemoryBrief]:
    """Briefs by memory id from the rows of :func:`briefs_statement` (a memory's sources in order)."""
    found: dict[int, tuple[str, Any, list[int], Any]] = {}
    for memory_id, stream, when, valid_to, message_id in rows:
        brief = found.setdefault(memory_id, (stream, when, [], valid_to))
        if message_id is not None:
            brief[2].append(message_id)
    return {
        i: MemoryBrief(Stream(kind), to_time_required(when), tuple(sources), to_time(valid_to))
        for i, (kind, when, sources, valid_to) in found.items()
    }
