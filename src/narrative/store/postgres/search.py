"""Memory search on PostgreSQL: vectors in pgvector (HNSW), keywords in an in-process BM25 index.

The keyword index is the SQLite store's :class:`KeywordIndex`, fed from the
database and kept current from the ``memory_changes`` log before every search,
so a process answers with every write any process has committed.  Sequence
numbers are handed out when a row is written but become visible when its
transaction commits, possibly after a higher one; so each catch-up also re-reads
the entries of transactions that were still running at the previous catch-up
(``xid >= `` that snapshot's xmin).  Reading an entry twice is harmless.  The log prunes
itself; a prune that took an entry the index may still need (``memory_changes_pruned``
records how far prunes went) makes the index start afresh.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from narrative.errors import EmbeddingMismatch
from narrative.store.filters import MemoryFilter
from narrative.store.keyword_index import KeywordIndex, query_terms
from narrative.store.passage_index import PassageKeywords
from narrative.store.postgres.base import PostgresBase
from narrative.store.postgres.rows import vector_value
from narrative.store.sqlite.base import placeholders

#: Dimensions covered by the HNSW index (the default embedder's); other sizes are searched exactly.
HNSW_DIMS = 384
#: Candidates the HNSW scan keeps (pgvector's ef_search); iterative scans go on until ``k`` rows pass the filter.
EF_SEARCH = 400
#: pgvector's largest ef_search: a larger ``k`` still gets ``k`` rows (the iterative scan goes on past ef_search).
EF_SEARCH_MAX = 1000
#: Up to this many candidate vectors (a user's, or those a filter allows) the search is exact, as in the SQLite
#: store's index: a scan of the user's rows by key is fast there, and an HNSW graph shared by many users
#: loses recall on a small user's share of it.
EXACT_LIMIT = 5000


#: The log's bounds and the snapshot's xmin (first row), then the entries to (re)read, in one statement.
#: The head row also says how far pruning went (highest seq and xid ever pruned: see migration 0002).
_CATCH_UP = (
    "SELECT * FROM (SELECT 0 AS part, COALESCE((SELECT seq FROM memory_changes_pruned), 0) AS a,"
    " COALESCE((SELECT MAX(seq) FROM memory_changes), 0) AS b,"
    " pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS c,"
    " COALESCE((SELECT xid FROM memory_changes_pruned), 0) AS d, (SELECT MIN(seq) FROM memory_changes) AS e"
    " UNION ALL SELECT 1, seq, memory_id, NULL, NULL, NULL FROM memory_changes WHERE seq > ? OR xid >= ?::text::xid8)"
    " AS log ORDER BY part, a"
)


class PostgresSearch(PostgresBase):
    def _init_search(self) -> None:
        self._keywords: KeywordIndex | None = None
        self._keywords_seq = 0
        self._keywords_xmin = 0
        self._keywords_pruned = (0, 0)  # the log's pruned marks (seq, xid) at the last catch-up
        self._keywords_dirty = False  # the index holds rows read inside a transaction not yet committed
        self._keyword_users: set[str] = set()  # users whose memories the index holds (loaded on their first search)
        self._passage_keywords = PassageKeywords()  # their passages, kept with the memories

    # --- keyword index -------------------------------------------------------------

    def keyword_search_memories(
        self, user_id: str, query: str, where: MemoryFilter | None = None, limit: int = 50
    ) -> list[tuple[int, float]]:
        """(memory id, BM25 score; higher is better) best first, only this user's, only within ``where``."""
        terms = query_terms(query)
        if not terms or limit <= 0:
            return []
        allowed = None if where is None or where.is_open else self._ids_matching(user_id, where)
        if allowed is not None and not allowed:
            return []
        return self._keyword_index(user_id).search(user_id, terms, limit, allowed=allowed)

    def keyword_search_passages(
        self, user_id: str, query: str, where: MemoryFilter | None = None, limit: int = 50
    ) -> list[tuple[int, float]]:
        """(passage id, BM25 score) best first, only this user's, only passages whose memory is within ``where``."""
        terms = query_terms(query)
        if not terms or limit <= 0:
            return []
        allowed = None if where is None or where.is_open else self._ids_matching(user_id, where)
        if allowed is not None and not allowed:
            return []
        outermost = not self.in_transaction
        with self.pinned(), self._lock:
            self._with_user(self._caught_up(outermost), user_id, outermost)
            return self._passage_keywords.search(user_id, terms, limit, allowed)

    def _ids_matching(self, user_id: str, where: MemoryFilter) -> set[int]:
        found: set[int] = self.memory_ids_matching(user_id, where)  # type: ignore[attr-defined]
        return found

    def _keyword_index(self, user_id: str) -> KeywordIndex:
        """The keyword index holding ``user_id``'s memories, caught up with the change log.

        A user's memories are read on their first search in this process (a worker
        holds the users it serves, not the whole database).  One statement reads the
        log's bounds, the snapshot's xmin and the new entries; statements after it may
        see later commits, whose entries the next catch-up reads again (never misses).
        The thread holds its connection before taking the lock, so no thread waits
        for a pooled connection while holding the lock.
        """
        outermost = not self.in_transaction
        with self.pinned(), self._lock:
            return self._with_user(self._caught_up(outermost), user_id, outermost)

    def _caught_up(self, outermost: bool) -> KeywordIndex:
        """The index with every logged change applied, or a fresh one when a prune took an entry it needed.

        After a catch-up at sequence S with snapshot xmin X, the index still needs only the
        entries with seq > S or xid >= X; if a prune since the last catch-up took any such entry
        (the log's pruned marks moved past S or to X), it starts afresh.
        """
        if outermost:
            self._keywords_dirty = False  # whatever was taken inside earlier transactions is settled
        rows = self._all(_CATCH_UP, (self._keywords_seq, str(self._keywords_xmin)))
        head, changes = rows[0], rows[1:]
        pruned_seq, highest, xmin, pruned_xid = int(head[1]), int(head[2]), int(head[3]), int(head[4])
        index = self._keywords
        seen_seq, seen_xid = self._keywords_pruned  # a prune seen before is already accounted for
        lowest = head[5]  # entries deleted by hand (not through prune_memory_changes) leave a gap at least
        gap = int(lowest) > self._keywords_seq + 1 if lowest is not None else self._keywords_seq > 0
        pruned = (
            gap
            or pruned_seq > max(self._keywords_seq, seen_seq)
            or (pruned_xid > seen_xid and pruned_xid >= self._keywords_xmin)
        )
        self._keywords_pruned = (pruned_seq, pruned_xid)
        if index is None or pruned:
            index = KeywordIndex()  # first use, or the log was pruned past what this index has read
            self._keywords, self._keywords_seq, self._keywords_xmin = index, highest, xmin
            self._keyword_users = set()
            self._passage_keywords = PassageKeywords()
            self._keywords_dirty = not outermost
            return index
        if changes:
            self._keywords_seq = max(self._keywords_seq, max(int(r[1]) for r in changes))
            self._refresh_keywords(index, {int(r[2]) for r in changes})
            self._keywords_dirty = self._keywords_dirty or not outermost
        self._keywords_xmin = xmin
        return index

    def catch_up_keywords(self) -> None:
        """Apply the change log now (a delete's scrub): deleted memories leave this process's index at once."""
        if self._keywords is None:
            return
        outermost = not self.in_transaction
        with self.pinned(), self._lock:
            self._caught_up(outermost)

    def _with_user(self, index: KeywordIndex, user_id: str, outermost: bool) -> KeywordIndex:
        if user_id not in self._keyword_users:
            index.upsert(self._memory_rows("user_id = ?", [user_id]))
            self._passage_keywords.add(self._passage_rows("p.user_id = ?", [user_id]))
            self._keyword_users.add(user_id)
            self._keywords_dirty = self._keywords_dirty or not outermost
        return index

    def _memory_rows(self, where: str, params: list[Any]) -> list[tuple[int, str, str]]:
        rows = self._all(f"SELECT id, user_id, content, key_points FROM memories WHERE {where}", params)
        return [(int(r[0]), str(r[1]), f"{r[2]} {r[3]}" if r[3] else str(r[2])) for r in rows]

    def _passage_rows(self, where: str, params: list[Any]) -> list[tuple[int, int, str, str]]:
        rows = self._all(
            "SELECT p.id, p.memory_id, p.user_id, m.speaker, substr(m.content, p.char_start + 1,"
            " p.char_end - p.char_start) FROM passages p JOIN messages m ON m.id = p.message_id"
            f" WHERE p.parts > 1 AND {where}",
            params,
        )
        return [(int(r[0]), int(r[1]), str(r[2]), f"{r[3]} {r[4]}".strip()) for r in rows]

    def _refresh_keywords(self, index: KeywordIndex, memory_ids: set[int]) -> None:
        """Re-read changed memories: those of loaded users go in, the rest (deleted, other users) go out."""
        ids = sorted(memory_ids)
        rows: list[tuple[int, str, str]] = []
        passages: list[tuple[int, int, str, str]] = []
        for start in range(0, len(ids), 500):
            rows += self._memory_rows("id = ANY(?)", [ids[start : start + 500]])
            passages += self._passage_rows("p.memory_id = ANY(?)", [ids[start : start + 500]])
        kept = [row for row in rows if row[1] in self._keyword_users]
        index.remove(memory_ids - {row[0] for row in kept})
        index.upsert(kept)
        self._passage_keywords.replace(memory_ids, [row for row in passages if row[2] in self._keyword_users])

    def _rolled_back(self) -> None:
        """Work was undone: if the index took rows from inside the transaction, rebuild it on the next search."""
        with self._lock:
            if self._keywords_dirty:
                self._keywords, self._keywords_dirty, self._keyword_users = None, False, set()
                self._passage_keywords = PassageKeywords()

    # --- vectors in pgvector ---------------------------------------------------------

    def put_memory_vectors(self, user_id: str, model: str, vectors: dict[int, np.ndarray]) -> None:
        with self.transaction():
            for memory_id, vector in vectors.items():
                self._exec(
                    "INSERT INTO memory_vectors(memory_id, user_id, model, vector)"
                    " SELECT id, user_id, ?, ? FROM memories WHERE id = ? AND user_id = ?"
                    " ON CONFLICT (user_id, memory_id) DO UPDATE SET model = EXCLUDED.model, vector = EXCLUDED.vector",
                    (model, vector_value(vector), memory_id, user_id),
                )

    def put_passage_vectors(self, user_id: str, model: str, vectors: dict[int, np.ndarray]) -> None:
        with self.transaction():
            for passage_id, vector in vectors.items():
                self._exec(
                    "INSERT INTO passage_vectors(passage_id, user_id, model, vector)"
                    " SELECT id, user_id, ?, ? FROM passages WHERE id = ? AND user_id = ?"
                    " ON CONFLICT (user_id, passage_id) DO UPDATE SET model = EXCLUDED.model, vector = EXCLUDED.vector",
                    (model, vector_value(vector), passage_id, user_id),
                )

    def passage_vectors_by_id(self, user_id: str, model: str, passage_ids: Iterable[int]) -> dict[int, np.ndarray]:
        ids = list(dict.fromkeys(passage_ids))
        found: dict[int, np.ndarray] = {}
        for start in range(0, len(ids), 500):
            rows = self._all(
                "SELECT passage_id, vector FROM passage_vectors WHERE user_id = ? AND model = ?"
                " AND passage_id = ANY(?)",
                [user_id, model, ids[start : start + 500]],
            )
            found.update((int(r[0]), np.asarray(vector_value(r[1]), dtype=np.float32)) for r in rows)
        return found

    def passage_vector_search(
        self, user_id: str, query: np.ndarray, model: str, k: int = 50, where: MemoryFilter | None = None
    ) -> list[tuple[int, float]]:
        """(passage id, cosine similarity) best first, only this user's, only passages whose memory is within
        ``where`` (exact over few candidates, else HNSW with an iterative scan, as for memories)."""
        allowed = None if where is None or where.is_open else self._ids_matching(user_id, where)
        if (allowed is not None and not allowed) or k <= 0:
            return []
        vector = vector_value(query)
        if float(np.linalg.norm(vector)) == 0.0:
            return []
        among = None
        if allowed is not None:
            among = [
                int(r[0])
                for r in self._all(
                    "SELECT id FROM passages WHERE user_id = ? AND memory_id = ANY(?)", [user_id, sorted(allowed)]
                )
            ]
            if not among:
                return []
        return self._nearest(user_id, vector, model, k, among, table="passage_vectors", key="passage_id")

    def vectors_by_id(self, user_id: str, model: str, memory_ids: Iterable[int]) -> dict[int, np.ndarray]:
        """The stored vectors of these memories of ``user_id`` made by ``model``, by memory id."""
        ids = list(memory_ids)
        found: dict[int, np.ndarray] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = self._all(
                "SELECT memory_id, vector FROM memory_vectors WHERE user_id = ? AND model = ?"
                f" AND memory_id IN ({placeholders(chunk)})",
                [user_id, model, *chunk],
            )
            found.update((int(r[0]), np.asarray(vector_value(r[1]), dtype=np.float32)) for r in rows)
        return found

    def memory_vectors(self, user_id: str | None = None) -> tuple[list[int], list[str], list[str], np.ndarray]:
        """(memory ids, user ids, models, matrix) of stored vectors."""
        sql = "SELECT memory_id, user_id, model, vector FROM memory_vectors"
        params: list[Any] = []
        if user_id is not None:
            sql += " WHERE user_id = ?"
            params.append(user_id)
        rows = self._all(sql + " ORDER BY memory_id", params)
        if not rows:
            return [], [], [], np.zeros((0, 0), dtype=np.float32)
        vectors = [vector_value(r[3]) for r in rows]
        if len({len(v) for v in vectors}) > 1:
            models = ", ".join(sorted({r[2] for r in rows}))
            raise EmbeddingMismatch(
                f"stored vectors were made by several embedders ({models}): run `narrative reindex`"
            )
        return [int(r[0]) for r in rows], [str(r[1]) for r in rows], [str(r[2]) for r in rows], np.vstack(vectors)

    def vector_search(
        self,
        user_id: str,
        query: np.ndarray,
        model: str,
        k: int = 50,
        where: MemoryFilter | None = None,
    ) -> list[tuple[int, float]]:
        """(memory id, cosine similarity) best first, only this user's, only within ``where``.

        Exact over at most EXACT_LIMIT candidates; beyond, HNSW with pgvector's iterative
        scan (strict order): the scan goes on past ``ef_search`` until ``k`` rows of this
        user (and filter) are found.
        """
        foreign = self._one(  # two index ranges: cheap at any size
            "SELECT model FROM memory_vectors WHERE model < ? OR model > ? LIMIT 1", (model, model)
        )
        if foreign is not None:
            raise EmbeddingMismatch(
                f"stored vectors were made by {foreign[0]} but the embedder is {model}: run `narrative reindex`"
            )
        allowed = None if where is None or where.is_open else self._ids_matching(user_id, where)
        if (allowed is not None and not allowed) or k <= 0:
            return []
        vector = vector_value(query)
        norm = float(np.linalg.norm(vector))
        if norm == 0.0:
            return []
        return self._nearest(user_id, vector, model, k, allowed)

    def _nearest(
        self,
        user_id: str,
        vector: np.ndarray,
        model: str,
        k: int,
        allowed: Iterable[int] | None,
        table: str = "memory_vectors",
        key: str = "memory_id",
    ) -> list[tuple[int, float]]:
        ids = sorted(allowed) if allowed is not None else None
        count = len(ids) if ids is not None else self._vector_count(user_id, table)
        hnsw = len(vector) == HNSW_DIMS and count > EXACT_LIMIT
        # the HNSW index is on the cast expression: ordering by the plain column is an exact scan
        column = f"vector::vector({HNSW_DIMS})" if hnsw else "vector"
        dims = f" AND vector_dims(vector) = {HNSW_DIMS}" if hnsw else ""
        among = f" AND {key} = ANY(?)" if ids is not None else ""  # one array parameter, however many ids
        sql = (
            f"SELECT {key}, 1 - ({column} <=> ?) AS score FROM {table}"
            f" WHERE user_id = ? AND model = ?{dims}{among} ORDER BY {column} <=> ? LIMIT ?"
        )
        params = [vector, user_id, model, *([ids] if ids is not None else []), vector, k]
        with self.transaction():
            self._exec(f"SET LOCAL hnsw.ef_search = {min(max(EF_SEARCH, k), EF_SEARCH_MAX)}")
            self._exec("SET LOCAL hnsw.iterative_scan = strict_order")
            rows = self._all(sql, params)
        return [(int(r[0]), float(r[1])) for r in rows]

    def _vector_count(self, user_id: str, table: str = "memory_vectors") -> int:
        """The user's vectors, counted up to just past EXACT_LIMIT (a bounded index-only scan)."""
        row = self._one(
            f"SELECT COUNT(*) FROM (SELECT 1 FROM {table} WHERE user_id = ? LIMIT ?) AS mine",
            (user_id, EXACT_LIMIT + 1),
        )
        return int(row[0]) if row else 0

    def clear_vectors(self, user_id: str | None = None) -> None:
        with self.transaction():
            if user_id is None:
                self._exec("DELETE FROM memory_vectors")
                self._exec("DELETE FROM storyline_vectors")
                self._exec("DELETE FROM passage_vectors")
            else:
                self._exec("DELETE FROM memory_vectors WHERE user_id = ?", (user_id,))
                self._exec("DELETE FROM storyline_vectors WHERE user_id = ?", (user_id,))
                self._exec("DELETE FROM passage_vectors WHERE user_id = ?", (user_id,))

    def drop_index(self) -> None:
        """Forget the in-process keyword index; the next search rebuilds it (vectors live in the database)."""
        with self._lock:
            self._keywords, self._keyword_users = None, set()
            self._passage_keywords = PassageKeywords()
