"""Memory vectors in pgvector: one HNSW index per large user, exact search for everyone else.

Many users share ``memory_vectors``.  An HNSW index over the whole table would make a
user's search walk everyone's vectors and throw away the ones that are not theirs (or
miss the user's own when they are rare), so there is none.  Instead:

* a user with at most :data:`EXACT_LIMIT` vectors (the many tenants of a shared
  database) is searched exactly: the primary key ``(user_id, memory_id)`` reads that
  user's rows and nobody else's, and a sort gives the true nearest;
* a user above it gets a partial HNSW index of their own
  (``... WHERE user_id = '<user>' AND vector_dims(vector) = 384``), made the first time
  such a search runs outside a transaction (``CREATE INDEX CONCURRENTLY``: writers of
  other users are not blocked), and kept current by PostgreSQL on every insert.  The
  index holds that user's rows only, so its scan never reads another user's; pgvector's
  iterative scan goes on past ``ef_search`` until ``k`` rows (and a filter's) are found.

Only users above the limit pay for an HNSW insert; a search never touches another
user's rows (``explain_vector_search`` shows the plan, and the tests and the latency
bench check it).  The index name is derived from the user id (:func:`user_index_name`);
deleting the user drops it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np
from psycopg import sql as pgsql

from narrative.errors import EmbeddingMismatch
from narrative.store.filters import MemoryFilter
from narrative.store.postgres.base import PostgresBase, array_parameter
from narrative.store.postgres.rows import vector_value
from narrative.store.sqlite.base import placeholders

#: Dimensions an HNSW index covers (the default embedder's); vectors of other sizes are searched exactly.
HNSW_DIMS = 384
#: Candidates the HNSW scan keeps (pgvector's ef_search), raised to ``k`` up to pgvector's maximum.  On real
#: MiniLM vectors recall@10 is 0.995 and recall@60 0.990 at 200 (0.999 at 400); on the latency bench's
#: near-copies 200 and 400 find the same (0.802 against an exact search, 60 queries), and a hybrid search at 200
#: is about 0.7 ms faster at the median once the index is in shared buffers (docs/decisions.md).
EF_SEARCH = 200
EF_SEARCH_MAX = 1000
#: A user with more vectors than this gets an HNSW index of their own; up to it, search is exact
#: (about as fast at this size, and always right).  A filter allowing at most this many ids is exact too.
EXACT_LIMIT = 5000
#: maintenance_work_mem while a user's index is built: the graph of 100,000 vectors fits, so it is built in memory.
BUILD_MEMORY = "512MB"
INDEX_PREFIX = "memory_vectors_user_"
#: The tables of vectors searched this way, and the key column of each.
VECTOR_TABLES = {"memory_vectors": "memory_id", "passage_vectors": "passage_id"}
_READ_NEXT = ("memories", "memory_sources", "messages", "passages", "memory_changes")  # what a search reads next
_BUILD_LOCK = 7_246_164  # advisory lock class: one builder per user's index at a time


def ef_search(k: int) -> int:
    """The ``hnsw.ef_search`` of a search for ``k`` rows (the iterative scan goes on past it until ``k`` are found)."""
    return min(max(EF_SEARCH, k), EF_SEARCH_MAX)


def user_index_name(user_id: str, table: str = "memory_vectors") -> str:
    """The name of ``user_id``'s HNSW index on ``table`` (a hash: user ids are any text)."""
    prefix = INDEX_PREFIX if table == "memory_vectors" else f"{table}_user_"
    return prefix + hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:24]


class PostgresVectors(PostgresBase):
    def _init_vectors(self) -> None:
        self._indexed_users: set[tuple[str, str]] = set()  # (table, user) whose index this process has seen valid

    # --- storing -----------------------------------------------------------------------

    def put_memory_vectors(self, user_id: str, model: str, vectors: dict[int, np.ndarray]) -> None:
        rows = [(model, vector_value(v), memory_id, user_id) for memory_id, v in vectors.items()]
        with self._atomic():
            self._run_many(
                "INSERT INTO memory_vectors(memory_id, user_id, model, vector)"
                " SELECT id, user_id, ?, ? FROM memories WHERE id = ? AND user_id = ?"
                " ON CONFLICT (user_id, memory_id) DO UPDATE SET model = EXCLUDED.model, vector = EXCLUDED.vector",
                rows,
            )

    def put_passage_vectors(self, user_id: str, model: str, vectors: dict[int, np.ndarray]) -> None:
        rows = [(model, vector_value(v), passage_id, user_id) for passage_id, v in vectors.items()]
        with self._atomic():
            self._run_many(
                "INSERT INTO passage_vectors(passage_id, user_id, model, vector)"
                " SELECT id, user_id, ?, ? FROM passages WHERE id = ? AND user_id = ?"
                " ON CONFLICT (user_id, passage_id) DO UPDATE SET model = EXCLUDED.model, vector = EXCLUDED.vector",
                rows,
            )

    def passage_vectors_by_id(self, user_id: str, model: str, passage_ids: Iterable[int]) -> dict[int, np.ndarray]:
        ids = list(dict.fromkeys(passage_ids))
        found: dict[int, np.ndarray] = {}
        for start in range(0, len(ids), 500):
            rows = self._all(
                "SELECT passage_id, vector FROM passage_vectors WHERE user_id = ? AND model = ?"
                " AND passage_id = ANY(?)",
                [user_id, model, array_parameter(ids[start : start + 500])],
            )
            found.update((int(r[0]), np.asarray(vector_value(r[1]), dtype=np.float32)) for r in rows)
        return found

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

    def clear_vectors(self, user_id: str | None = None) -> None:
        with self._atomic():
            if user_id is None:
                self._exec("DELETE FROM memory_vectors")
                self._exec("DELETE FROM storyline_vectors")
                self._exec("DELETE FROM passage_vectors")
            else:
                self._exec("DELETE FROM memory_vectors WHERE user_id = ?", (user_id,))
                self._exec("DELETE FROM storyline_vectors WHERE user_id = ?", (user_id,))
                self._exec("DELETE FROM passage_vectors WHERE user_id = ?", (user_id,))

    def delete_user(self, user_id: str) -> None:
        super().delete_user(user_id)  # type: ignore[misc]  # the row classes' delete
        for table in VECTOR_TABLES:
            self._indexed_users.discard((table, user_id))
            if not self.in_transaction:  # inside one, the empty index stays until the next delete of this user
                self._exec(f"DROP INDEX CONCURRENTLY IF EXISTS {user_index_name(user_id, table)}")

    # --- searching -----------------------------------------------------------------------

    def vector_search(
        self,
        user_id: str,
        query: np.ndarray,
        model: str,
        k: int = 50,
        where: MemoryFilter | None = None,
    ) -> list[tuple[int, float]]:
        """(memory id, cosine similarity) best first, only this user's, only within ``where``."""
        allowed: set[int] | None = None
        if where is not None and not where.is_open:
            allowed = self.memory_ids_matching(user_id, where)  # type: ignore[attr-defined]  # the row classes'
        small = self._search_if_small(user_id, query, model, k, allowed)
        if small is not None:
            return small
        prepared = self._prepared_search(user_id, query, model, k, allowed)
        if prepared is None or not prepared.indexed:
            self._refuse_foreign(model)
            return self._search(prepared)
        return self._search(prepared, model)  # the model check rides in the search's transaction

    def passage_vector_search(
        self, user_id: str, query: np.ndarray, model: str, k: int = 50, where: MemoryFilter | None = None
    ) -> list[tuple[int, float]]:
        """(passage id, cosine similarity) best first, only this user's, only passages whose memory is within
        ``where`` (searched like memories: exact for few, the user's own HNSW index for many)."""
        among: set[int] | None = None
        if where is not None and not where.is_open:
            allowed = self.memory_ids_matching(user_id, where)  # type: ignore[attr-defined]  # the row classes'
            if not allowed:
                return []
            rows = self._all(
                "SELECT id FROM passages WHERE user_id = ? AND memory_id = ANY(?)",
                [user_id, array_parameter(sorted(allowed))],
            )
            among = {int(r[0]) for r in rows}
        small = self._search_if_small(user_id, query, model, k, among, table="passage_vectors")
        if small is not None:
            return small
        return self._search(self._prepared_search(user_id, query, model, k, among, table="passage_vectors"))

    def _search_if_small(
        self,
        user_id: str,
        query: np.ndarray,
        model: str,
        k: int,
        allowed: set[int] | None,
        table: str = "memory_vectors",
    ) -> list[tuple[int, float]] | None:
        """The exact search of a user not known to have an index of their own, in the statement that counts their
        vectors (and, for memories, reads the stored models): one round trip where a small user took two or three.
        None when the search needs the general path (a large user, whose exact search the count skipped)."""
        statement = self._small_search(user_id, query, model, k, allowed, table)
        return None if statement is None else _small_found(self._all(*statement), table, model)

    def _small_search(
        self,
        user_id: str,
        query: np.ndarray,
        model: str,
        k: int,
        allowed: set[int] | None,
        table: str = "memory_vectors",
    ) -> tuple[str, list[Any]] | None:
        """The statement of :meth:`_search_if_small`, or None when the user is known to have an index (or the
        filter allows few enough ids for the general path's exact search, or the query cannot use an index)."""
        if (table, user_id) in self._indexed_users or (allowed is not None and len(allowed) <= EXACT_LIMIT):
            return None
        vector = vector_value(query)
        if len(vector) != HNSW_DIMS or k <= 0 or float(np.linalg.norm(vector)) == 0.0:
            return None
        key = VECTOR_TABLES[table]
        among = f" AND {key} = ANY(?)" if allowed is not None else ""
        count = f"(SELECT COUNT(*) FROM (SELECT 1 FROM {table} WHERE user_id = ? LIMIT ?) AS mine)"
        models = "(SELECT MIN(model) FROM memory_vectors), (SELECT MAX(model) FROM memory_vectors)"
        return (
            f"SELECT 0 AS part, NULL::bigint, NULL::float8, {count}, "
            + (models if table == "memory_vectors" else "NULL, NULL")
            + f" UNION ALL (SELECT 1, {key}, 1 - (vector <=> ?), NULL, NULL, NULL FROM {table}"
            f" WHERE user_id = ? AND model || '' = ?{among} AND {count} <= ? ORDER BY vector <=> ?, {key} LIMIT ?)"
            " ORDER BY 1, 3 DESC, 2",  # ties: the smaller id first, as the in-process index answers
            [user_id, EXACT_LIMIT + 1, vector, user_id, model]
            + ([array_parameter(sorted(allowed))] if allowed is not None else [])
            + [user_id, EXACT_LIMIT + 1, EXACT_LIMIT, vector, k],
        )

    def vector_search_memories_and_passages(
        self, user_id: str, query: np.ndarray, model: str, k: int = 50, where: MemoryFilter | None = None
    ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """:meth:`vector_search` and :meth:`passage_vector_search` sent together, so a search waits for the server
        once, not twice.  Each table goes the way its own search would: exact with the count for a user not
        known to have an index there, else through the user's index (a user found over the limit is then
        searched again the general way, as :meth:`vector_search` does: once a process)."""
        if not plain_vector_search(query, k, where):
            return self.vector_search(user_id, query, model, k, where), self.passage_vector_search(
                user_id, query, model, k, where
            )
        with self._atomic():  # one wait: every answer is read after the commit, sent with them
            finish = self._send_vector_searches(user_id, query, model, k)
        return finish()

    def _send_vector_searches(
        self, user_id: str, query: np.ndarray, model: str, k: int
    ) -> Callable[[], tuple[list[tuple[int, float]], list[tuple[int, float]]]]:
        """Queue the memory and the passage vector searches in the caller's pipelined transaction (a search that
        :func:`plain_vector_search` allows); the function returned reads their answers once the transaction is
        over.  Each table goes the way its own search would: exact with the count for a user not known to have an
        index there, else through the user's index (a user found over the limit is then searched again the
        general way, as :meth:`vector_search` does: once a process)."""
        sent: dict[str, tuple[bool, Any]] = {}
        models = None
        for table in VECTOR_TABLES:
            small = self._small_search(user_id, query, model, k, None, table)
            if small is not None:
                sent[table] = (True, self._exec(*small))
                continue
            prepared = self._prepared_search(user_id, query, model, k, None, table)
            assert prepared is not None and prepared.indexed  # a user known to have an index
            if models is None and table == "memory_vectors":
                models = self._exec(_MODELS)
            if prepared.setting is not None:
                self._exec(*prepared.setting)
            sent[table] = (False, self._run(prepared.sql, prepared.params))

        def finish() -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
            if models is not None:
                _refuse(models.fetchone(), model)
            found: list[list[tuple[int, float]]] = []
            for table, (exact, result) in sent.items():
                rows = result.fetchall()
                hits = _small_found(rows, table, model) if exact else [(int(r[0]), float(r[1])) for r in rows]
                if hits is None:  # over the limit: the general path (which makes the user's index, outside this)
                    search = self.vector_search if table == "memory_vectors" else self.passage_vector_search
                    hits = search(user_id, query, model, k)
                found.append(hits)
            return found[0], found[1]

        return finish

    def _search(self, prepared: _Prepared | None, model: str | None = None) -> list[tuple[int, float]]:
        """Run a prepared search; through an index, with ``model``, the foreign-model check is sent in the same
        pipelined transaction (its answer comes with the search's: a round trip fewer)."""
        if prepared is None:
            return []
        if not prepared.indexed:
            rows = self._all(prepared.sql, prepared.params)
        else:
            with self._atomic():  # one wait: the answers are read after the commit, sent with them
                models = self._exec(_MODELS) if model is not None else None
                if prepared.setting is not None:
                    self._exec(*prepared.setting)
                found = self._run(prepared.sql, prepared.params)
            if models is not None and model is not None:
                _refuse(models.fetchone(), model)
            rows = found.fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    def explain_vector_search(
        self, user_id: str, query: np.ndarray, model: str, k: int = 10, where: MemoryFilter | None = None
    ) -> dict[str, Any]:
        """What PostgreSQL did for this search (``EXPLAIN (ANALYZE, BUFFERS)``), summed up.

        ``rows_read`` counts every row a scan of ``memory_vectors`` produced or filtered away,
        ``indexes`` the indexes those scans used; ``plan`` is PostgreSQL's own (JSON).
        """
        allowed: set[int] | None = None
        if where is not None and not where.is_open:
            allowed = self.memory_ids_matching(user_id, where)  # type: ignore[attr-defined]  # the row classes'
        prepared = self._prepared_search(user_id, query, model, k, allowed)
        if prepared is None:
            return {"plan": None, "rows_read": 0, "indexes": [], "nodes": [], "execution_ms": 0.0}
        with self._atomic():
            if prepared.setting is not None:
                self._exec(*prepared.setting)
            explain = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + prepared.sql
            found = self._run(explain, prepared.params) if prepared.indexed else self._exec(explain, prepared.params)
            row = found.fetchone()
        assert row is not None
        plan = row[0] if not isinstance(row[0], str) else json.loads(row[0])
        top = plan[0]
        nodes = list(_scans(top["Plan"]))
        return {
            "plan": plan,
            "nodes": nodes,
            "rows_read": sum(n["rows"] for n in nodes),
            "indexes": sorted({n["index"] for n in nodes if n["index"]}),
            "execution_ms": float(top.get("Execution Time", 0.0)),
        }

    def _refuse_foreign(self, model: str) -> None:
        # the two ends of the model index (PostgreSQL answers MIN and MAX from an index's ends); the earlier
        # ``WHERE model < ? OR model > ? LIMIT 1`` could be planned, before statistics existed, as a scan of the
        # whole table: 15-200 ms a search at 100,000 vectors
        _refuse(self._one(_MODELS), model)

    def _prepared_search(
        self,
        user_id: str,
        query: np.ndarray,
        model: str,
        k: int,
        allowed: set[int] | None,
        table: str = "memory_vectors",
    ) -> _Prepared | None:
        """The statement of a search (and a setting to apply first in its transaction), or None when nothing can
        match."""
        if (allowed is not None and not allowed) or k <= 0:
            return None
        vector = vector_value(query)
        if float(np.linalg.norm(vector)) == 0.0:
            return None
        key = VECTOR_TABLES[table]
        ids = sorted(allowed) if allowed is not None else None
        indexed = (
            len(vector) == HNSW_DIMS
            and (ids is None or len(ids) > EXACT_LIMIT)
            and self._user_has_index(user_id, table)
        )
        among = f" AND {key} = ANY(?)" if ids is not None else ""  # one array parameter, however many ids
        id_list = [array_parameter(ids)] if ids is not None else []
        # ``model || ''``: the model is checked on the user's rows, never looked up in the model index (whose
        # entries are everyone's): the primary key or the user's own index is the only way in
        if not indexed:
            # an exact search breaks ties by the smaller id, as the in-process index does (the same vector twice, a
            # message said again)
            sql = (
                f"SELECT {key}, 1 - (vector <=> ?) AS score FROM {table}"
                f" WHERE user_id = ? AND model || '' = ?{among} ORDER BY vector <=> ?, {key} LIMIT ?"
            )
            return _Prepared(sql, [vector, user_id, model, *id_list, vector, k], None, False)
        # Through the user's own index (on the cast expression: ordering by the plain column is an exact scan; the
        # order is the index's, as a second key would stop PostgreSQL from using it).  The user id and k are
        # written into the statement, so its plan, generic as a prepared statement's soon is, still sees that the
        # user's partial index applies and needs no planning per search (a user id as a parameter needed a custom
        # plan, planned again for every search).
        # The statement is in the driver's own spelling (``%s``), never translated: a user id is any text, and "?"
        # or "%" in it must stay what they are.
        column = f"vector::vector({HNSW_DIMS})"
        user = pgsql.Literal(user_id).as_string().replace("%", "%%")
        sql = (
            f"SELECT {key}, 1 - ({column} <=> %s) AS score FROM {table}"
            f" WHERE user_id = {user} AND model || '' = %s AND vector_dims(vector) = {HNSW_DIMS}"
            + among.replace("?", "%s")
            + f" ORDER BY {column} <=> %s LIMIT {int(k)}"
        )
        # the settings are the transaction's own (SET LOCAL): no session state, so a pooler in transaction mode
        # in front of the database is fine
        settings = (
            "SELECT set_config('hnsw.ef_search', ?, true), set_config('hnsw.iterative_scan', 'strict_order', true)"
        )
        if ids is not None:  # a generic plan cannot see how many ids the filter's array holds
            settings += ", set_config('plan_cache_mode', 'force_custom_plan', true)"
        return _Prepared(sql, [vector, model, *id_list, vector], (settings, [str(ef_search(k))]), True)

    # --- a user's index -----------------------------------------------------------------

    def _user_has_index(self, user_id: str, table: str = "memory_vectors") -> bool:
        """True when ``user_id`` has a valid HNSW index on ``table``, made here when they outgrew exact search."""
        if (table, user_id) in self._indexed_users:
            return True
        if self._vector_count(user_id, table) <= EXACT_LIMIT:
            return False
        valid = self._index_state(user_index_name(user_id, table)) is True
        if not valid and (self.in_transaction or not self.build_user_vector_index(user_id, table)):
            return False
        self._indexed_users.add((table, user_id))
        return True

    def build_user_vector_index(self, user_id: str, table: str = "memory_vectors") -> bool:
        """Make ``user_id``'s HNSW index on ``table`` now (concurrently: other users' writes go on); True once it
        is valid.  False when another process is building it at this moment (the search stays exact meanwhile).
        """
        name = user_index_name(user_id, table)
        with self.pinned():
            got = self._one("SELECT pg_try_advisory_lock(?, hashtext(?))", (_BUILD_LOCK, name))
            if got is None or not got[0]:
                return False
            try:
                state = self._index_state(name)
                if state is False:  # a build that was interrupted leaves an invalid index behind
                    self._exec(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                if state is not True:
                    self._exec(f"SET maintenance_work_mem = '{BUILD_MEMORY}'")
                    try:
                        self._run_ddl(
                            pgsql.SQL(
                                "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON {} USING hnsw"
                                " ((vector::vector({})) vector_cosine_ops)"
                                " WHERE user_id = {} AND vector_dims(vector) = {}"
                            ).format(
                                pgsql.Identifier(name),
                                pgsql.Identifier(table),
                                pgsql.Literal(HNSW_DIMS),
                                pgsql.Literal(user_id),
                                pgsql.Literal(HNSW_DIMS),
                            )
                        )
                    finally:
                        self._exec("RESET maintenance_work_mem")
                    # the planner weighs the new index against fresh statistics, and the rows a search reads
                    # next (a user large enough for an index has just grown: statistics taken when the tables were
                    # small make PostgreSQL read every row of the user to find ten by key)
                    self._exec(f"ANALYZE {table}, {', '.join(_READ_NEXT)}")
            finally:
                self._exec("SELECT pg_advisory_unlock(?, hashtext(?))", (_BUILD_LOCK, name))
            return self._index_state(name) is True

    def _run_ddl(self, statement: pgsql.Composed) -> None:
        """A statement composed with literals (run as is: a user id may hold '?' or '%')."""
        conn = self._local.conn
        text = statement.as_string(conn).replace("%", "%%")
        self._run(text, ())

    def _index_state(self, name: str) -> bool | None:
        """None: no such index; False: it exists but is not usable (being built, or a build failed); True: valid."""
        row = self._one(
            "SELECT i.indisvalid AND i.indisready FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE c.relname = ? AND c.relnamespace = current_schema()::regnamespace",
            (name,),
        )
        return None if row is None else bool(row[0])

    def _vector_count(self, user_id: str, table: str = "memory_vectors") -> int:
        """The user's vectors, counted up to just past EXACT_LIMIT (a bounded index-only scan)."""
        row = self._one(
            f"SELECT COUNT(*) FROM (SELECT 1 FROM {table} WHERE user_id = ? LIMIT ?) AS mine",
            (user_id, EXACT_LIMIT + 1),
        )
        return int(row[0]) if row else 0


def _scans(node: dict[str, Any]) -> Iterable[dict[str, Any]]:
    """Every scan of ``memory_vectors`` in a JSON plan: its type, index, and rows produced or filtered away.

    A bitmap heap scan names the index its bitmap came from (the ``Bitmap Index Scan`` under it).
    """
    if node.get("Relation Name") == "memory_vectors":
        loops = int(node.get("Actual Loops", 1) or 1)
        produced = float(node.get("Actual Rows", 0)) * loops
        removed = float(node.get("Rows Removed by Filter", 0)) + float(node.get("Rows Removed by Index Recheck", 0))
        yield {
            "type": str(node.get("Node Type")),
            "index": node.get("Index Name") or ",".join(sorted(_index_names(node.get("Plans", ())))) or None,
            "condition": node.get("Index Cond") or node.get("Recheck Cond"),
            "rows": round(produced + removed),
        }
    for child in node.get("Plans", ()):
        yield from _scans(child)


def _index_names(nodes: Iterable[dict[str, Any]]) -> set[str]:
    """The indexes bitmap scans under a node read."""
    names: set[str] = set()
    for node in nodes:
        if node.get("Index Name"):
            names.add(str(node["Index Name"]))
        names |= _index_names(node.get("Plans", ()))
    return names


_MODELS = "SELECT MIN(model), MAX(model) FROM memory_vectors"


class _Prepared(NamedTuple):
    """A vector search's statement: exact (in the shared ``?`` spelling) or through the user's index (in the
    driver's ``%s`` spelling, run as it is), and a setting to apply before it in its transaction."""

    sql: str
    params: list[Any]
    setting: tuple[str, list[Any]] | None
    indexed: bool


def plain_vector_search(query: np.ndarray, k: int, where: MemoryFilter | None) -> bool:
    """True when a search's vector statements can be sent without asking anything first: no filter (whose ids
    are read first), a query of the index's size that is not all zeros, room for a hit."""
    vector = vector_value(query)
    return (where is None or where.is_open) and k > 0 and len(vector) == HNSW_DIMS and bool(np.linalg.norm(vector))


def _small_found(rows: list[Any], table: str, model: str) -> list[tuple[int, float]] | None:
    """The hits of a small user's search statement, or None when the count says the user is over the limit."""
    head = rows[0]
    if table == "memory_vectors":
        _refuse((head[4], head[5]), model)
    if int(head[3]) > EXACT_LIMIT:
        return None
    return [(int(r[1]), float(r[2])) for r in rows[1:]]


def _refuse(row: Any, model: str) -> None:
    """Raise when the stored vectors' models (``MIN``, ``MAX``) name another model than ``model``."""
    foreign = None if row is None else next((m for m in row if m is not None and m != model), None)
    if foreign is not None:
        raise EmbeddingMismatch(
            f"stored vectors were made by {foreign} but the embedder is {model}: run `narrative reindex`"
        )
