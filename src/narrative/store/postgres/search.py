"""Memory keyword search on PostgreSQL: an in-process BM25 index (vectors: :mod:`.vectors`).

The keyword index is the SQLite store's :class:`KeywordIndex`, fed from the
database and kept current from the ``memory_changes`` log before every search,
so a process answers with every write any process has committed.  Sequence
numbers are handed out when a row is written but become visible when its
transaction commits, possibly after a higher one; so each catch-up also re-reads
the entries of transactions that were still running at the previous catch-up
(``xid >= `` that snapshot's xmin).  Reading an entry twice is harmless (a transaction's own: see
``_CATCH_UP``).  The log prunes
itself; a prune that took an entry the index may still need (``memory_changes_pruned``
records how far prunes went) makes the index start afresh.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from narrative.errors import StoreError
from narrative.model import Conflict, MemoryBrief, Message, Stream
from narrative.store.filters import MemoryFilter
from narrative.store.keyword_index import KeywordIndex, keyword_request, query_terms, search_within
from narrative.store.passage_index import PassageKeywords
from narrative.store.postgres.base import PostgresBase, array_parameter
from narrative.store.sqlite.base import placeholders, to_time, to_time_required
from narrative.store.sqlite.conversations import _message
from narrative.store.sqlite.passages import conflict_from

#: The log's bounds and the snapshot's xmin (first row), then the entries to (re)read, in one statement.
#: The head row also says how far pruning went (highest seq and xid ever pruned: see migration 0002), and the
#: reader's own transaction id (none outside a transaction that wrote).  Entries of transactions still running are
#: read again each time, so the index shows each reader what it sees (its own writes, no one else's uncommitted
#: ones), except the reader's own entries up to a mark when the index last showed this same transaction's view: a
#: long transaction searching after each write read all its own entries again every time (quadratic).
_CATCH_UP = (
    "SELECT * FROM (SELECT 0 AS part, COALESCE((SELECT seq FROM memory_changes_pruned), 0) AS a,"
    " COALESCE((SELECT MAX(seq) FROM memory_changes), 0) AS b,"
    " pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS c,"
    " COALESCE((SELECT xid FROM memory_changes_pruned), 0) AS d, (SELECT MIN(seq) FROM memory_changes) AS e,"
    " pg_current_xact_id_if_assigned()::text AS f"
    " UNION ALL SELECT 1, seq, memory_id, NULL, NULL, NULL, (xid = pg_current_xact_id_if_assigned())::text"
    " FROM memory_changes WHERE (seq > ? OR xid >= ?::text::xid8)"
    " AND NOT COALESCE(xid::text = ? AND xid = pg_current_xact_id_if_assigned() AND seq <= ?, FALSE))"
    " AS log ORDER BY part, a"
)

#: A user's message count and id sum, then the messages above an id, in one statement (one snapshot): the
#: messages a process holds for the user, plus the new ones, must add up to both, or rows went (a delete) or came
#: below the mark (an import) and the user's messages are read again.
_MESSAGES_AFTER = (
    "SELECT 0 AS part, COUNT(*) AS a, COALESCE(SUM(id), 0) AS b, NULL AS c FROM messages WHERE user_id = ?"
    " UNION ALL SELECT 1, id, NULL, content || ' ' || speaker FROM messages WHERE user_id = ? AND id > ?"
    " ORDER BY part, a"
)
_LOWEST = -(2**63)  # below every BIGINT id
#: A memory as the keyword index and the briefs take it: (id, user, text, brief).
_MemoryRow = tuple[int, str, str, MemoryBrief]
#: What a user's first search reads for the indexes: memories, passages, conflicts.
_UserRows = tuple[list[_MemoryRow], list[tuple[int, int, str, str]], list[Conflict]]
_CONFLICT_COLUMNS = "id, user_id, memory_id, other_memory_id, passage_id, other_passage_id, reason, created_at"


@dataclass
class _HeldMessages:
    """One user's messages in a keyword index, up to the highest id read, with their count and id sum."""

    index: KeywordIndex = field(default_factory=KeywordIndex)
    highest: int = _LOWEST
    count: int = 0
    total: int = 0


@dataclass
class _HeldBriefs:
    """One user's memory briefs and conflicts as a search reads them, held beside the keyword index."""

    briefs: dict[int, MemoryBrief] = field(default_factory=dict)
    conflicts: dict[int, dict[int, Conflict]] = field(default_factory=dict)  # memory id → conflict id → conflict

    def add_conflict(self, conflict: Conflict) -> None:
        for side in (conflict.memory_id, conflict.other_memory_id):
            self.conflicts.setdefault(side, {})[conflict.id] = conflict

    def forget(self, memory_id: int) -> None:
        """Drop a memory's brief and every conflict naming it (from both sides)."""
        self.briefs.pop(memory_id, None)
        for conflict in self.conflicts.pop(memory_id, {}).values():
            other = conflict.other_memory_id if conflict.memory_id == memory_id else conflict.memory_id
            named = self.conflicts.get(other)
            if named is not None:
                named.pop(conflict.id, None)
                if not named:
                    del self.conflicts[other]

    def read(self, ids: list[int]) -> tuple[dict[int, MemoryBrief], list[Conflict]]:
        """The briefs of these memories (unknown ids skipped) and every conflict naming one of them, by id."""
        briefs = {i: brief for i in ids if (brief := self.briefs.get(i)) is not None}
        found = {c.id: c for i in ids for c in self.conflicts.get(i, {}).values()} if self.conflicts else {}
        return briefs, [found[k] for k in sorted(found)]


#: Most memories and messages one process holds for searches (:attr:`Settings.held_rows`); 0 = no bound.
HELD_ROWS = 1_000_000


class PostgresSearch(PostgresBase):
    def _init_search(self, held_rows: int = HELD_ROWS) -> None:
        self._keywords: KeywordIndex | None = None
        self._keywords_seq = 0
        self._keywords_xmin = 0
        self._keywords_pruned = (0, 0)  # the log's pruned marks (seq, xid) at the last catch-up
        self._keywords_dirty = False  # the index holds rows read inside a transaction not yet committed
        self._keywords_view: tuple[str | None, int] = (None, 0)  # whose view it shows, and its own entries read
        self._keyword_users: set[str] = set()  # users whose memories the index holds (loaded on their first search)
        self._briefs: dict[str, _HeldBriefs] = {}  # their memories' briefs and conflicts, kept with the index
        self._views = 0  # catch-ups (and resets) so far: a search's reads trust the index while this stands still
        self._view_memories: set[int] = set()  # memories the viewing transaction's own uncommitted entries put in
        self._names: dict[str, set[str]] = {}  # users' speaker names read inside a search (storylines log changes)
        self._passage_keywords = PassageKeywords()  # their passages, kept with the memories
        self._keyword_edits = 0  # changes made to the two indexes in place (a search ranked before them ranks again)
        self._held_messages: dict[str, _HeldMessages] = {}  # users whose messages were searched here
        self._messages_dirty = False  # the held messages include rows read inside a transaction
        self._held_rows = held_rows  # past this many held memories and messages, let the least recent users go
        self._recent: OrderedDict[str, None] = OrderedDict()  # users searched here, least recently first

    # --- keyword index -------------------------------------------------------------

    def keyword_search_memories(
        self, user_id: str, query: str, where: MemoryFilter | None = None, limit: int = 50
    ) -> list[tuple[int, float]]:
        """(memory id, BM25 score; higher is better) best first, only this user's, only within ``where`` (the
        filter is asked about the best hits, not read whole: :func:`search_within`)."""
        terms = query_terms(query)
        if not terms or limit <= 0:
            return []

        def search(count: int, allowed: set[int] | None) -> list[tuple[int, float]]:
            with self._keywords_for(user_id) as index:
                return index.search(user_id, terms, count, allowed=allowed)

        if where is None or where.is_open:
            return search(limit, None)
        return search_within(
            search,
            limit,
            lambda ids: self.memory_ids_matching(user_id, where, among=ids),  # type: ignore[attr-defined]
            lambda: self._ids_matching(user_id, where),
        )

    def keyword_search_passages(
        self, user_id: str, query: str, where: MemoryFilter | None = None, limit: int = 50
    ) -> list[tuple[int, float]]:
        """(passage id, BM25 score) best first, only this user's, only passages whose memory is within ``where``."""
        request = keyword_request(query, limit, where, lambda w: self._ids_matching(user_id, w))
        if request is None:
            return []
        terms, allowed = request
        with self._keywords_for(user_id):
            return self._passage_keywords.search(user_id, terms, limit, allowed)

    def keyword_search_memories_and_passages(
        self, user_id: str, query: str, where: MemoryFilter | None = None, limit: int = 50
    ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """What :meth:`keyword_search_memories` and :meth:`keyword_search_passages` return, with one catch-up
        of the change log (one round trip) and one read of the filter's ids."""
        request = keyword_request(query, limit, where, lambda w: self._ids_matching(user_id, w))
        if request is None:
            return [], []
        terms, allowed = request
        with self._keywords_for(user_id) as index:
            return index.search(user_id, terms, limit, allowed=allowed), self._passage_keywords.search(
                user_id, terms, limit, allowed
            )

    def _keyword_search_sending(
        self, user_id: str, query: str, limit: int, send: Callable[[], None]
    ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """An unfiltered :meth:`keyword_search_memories_and_passages` inside the caller's read-only pipelined
        transaction, which calls ``send`` right behind the change log's catch-up, before its answer is read: what
        ``send`` queues (the vector searches) runs on the server with the catch-up, and the search waits for the
        server once.  Meanwhile this thread ranks by keyword on the index as held; when the catch-up then changes
        the index (another process wrote, or the user is new here), it ranks again on the index caught up.
        (Reading a pipelined answer reads every answer queued, so ranking after the catch-up's answer would wait
        for the vector searches too.)  ``send`` is called once whatever happens, also with no searchable word (a
        search by vector alone: ``query`` empty)."""
        terms = query_terms(query) if limit > 0 else []
        Ranked = tuple[list[tuple[int, float]], list[tuple[int, float]]]
        ranked: list[tuple[KeywordIndex, PassageKeywords, int, Ranked]] = []

        def send_and_rank() -> None:
            send()
            held, passages = self._keywords, self._passage_keywords
            if terms and held is not None and user_id in self._keyword_users:  # under the lock (_keywords_for)
                found = (held.search(user_id, terms, limit), passages.search(user_id, terms, limit, None))
                ranked.append((held, passages, self._keyword_edits, found))

        # the transaction only reads: every row the catch-up sees is committed, as outside a transaction
        with self._keywords_for(user_id, outermost=True, sending=send_and_rank) as index:
            if not terms:
                return [], []
            if ranked:
                held, passages, edits, found = ranked[0]
                if held is index and passages is self._passage_keywords and edits == self._keyword_edits:
                    return found
            return index.search(user_id, terms, limit), self._passage_keywords.search(user_id, terms, limit, None)

    def memory_briefs_and_conflicts(
        self, user_id: str, memory_ids: Iterable[int]
    ) -> tuple[dict[int, MemoryBrief], list[Conflict]]:
        """:meth:`memory_briefs` and :meth:`conflicts_of` of the same memories (a search's candidates), from this
        process: they are kept with the keyword index from the change log (a user's are read with their memories
        on their first search here), so this costs one catch-up.  A search of 100,000 memories read its 100-200
        candidates' briefs and conflicts from the server: 1.3-2.4 ms of its time."""
        ids = list(dict.fromkeys(memory_ids))
        if not ids:
            return {}, []
        with self._keywords_for(user_id):
            return self._briefs[user_id].read(ids)

    def memory_briefs(self, user_id: str, memory_ids: Iterable[int]) -> dict[int, MemoryBrief]:
        """Stream, time, sources and end of validity of these memories of ``user_id`` (unknown ids skipped): from
        this process when it holds the user's (caught up first), else read."""
        ids = list(dict.fromkeys(memory_ids))
        if not ids:
            return {}
        if user_id not in self._keyword_users:  # a writer that never searched this user: read, not load them all
            found: dict[int, MemoryBrief] = super().memory_briefs(user_id, ids)  # type: ignore[misc]
            return found
        with self._keywords_for(user_id):
            return self._briefs[user_id].read(ids)[0]

    def search_messages(self, user_id: str, query: str, limit: int = 20) -> list[tuple[Message, float]]:
        """(message, BM25 score) best first, only this user's (the write path looks for what a speaker said
        before). The process keeps each searched user's messages in a keyword index and reads only the messages
        written since, with a check that the rest are unchanged: it used to read every message of the user on
        every call."""
        terms = query_terms(query)
        if not terms or limit <= 0:
            return []
        outermost = not self.in_transaction
        with self.pinned(), self._lock:
            hits = self._messages_of(user_id, outermost).index.search(user_id, terms, limit)
        if not hits:
            return []
        ids = [i for i, _ in hits]
        found = {
            r["id"]: _message(r)  # type: ignore[arg-type]  # read by name like sqlite3.Row
            for r in self._all(
                f"SELECT * FROM messages WHERE user_id = ? AND id IN ({placeholders(ids)})", [user_id, *ids]
            )
        }
        return [(found[i], score) for i, score in hits if i in found]

    def _messages_of(self, user_id: str, outermost: bool) -> _HeldMessages:
        """The user's messages as of now: the held ones and those written since (read again from scratch when
        the count or the sum of ids says that held rows went or rows came in below the highest id held)."""
        if outermost:
            self._messages_dirty = False  # whatever was taken inside earlier transactions is settled
        held = self._held_messages.get(user_id)
        for mark in ([held.highest] if held is not None else []) + [_LOWEST]:
            rows = self._all(_MESSAGES_AFTER, (user_id, user_id, mark))
            head, new = rows[0], rows[1:]
            count, total = int(head[1]), int(head[2])
            base = held if held is not None and mark != _LOWEST else _HeldMessages()
            ids = [int(r[1]) for r in new]
            if (base.count + len(ids), base.total + sum(ids)) != (count, total):
                continue  # rows went, or came below the mark: read the user's messages again
            base.index.upsert((i, user_id, str(r[3])) for i, r in zip(ids, new, strict=True))
            base.highest, base.count, base.total = max([base.highest, *ids]), count, total
            self._held_messages[user_id] = base
            self._messages_dirty = self._messages_dirty or (bool(ids) and not outermost)
            self._recent[user_id] = None
            self._recent.move_to_end(user_id)
            if ids:
                self._let_go(user_id)
            return base
        raise StoreError(f"the messages of {user_id!r} did not add up twice in one snapshot")  # pragma: no cover

    def _ids_matching(self, user_id: str, where: MemoryFilter) -> set[int]:
        found: set[int] = self.memory_ids_matching(user_id, where)  # type: ignore[attr-defined]
        return found

    @contextmanager
    def _keywords_for(
        self, user_id: str, outermost: bool | None = None, sending: Callable[[], None] | None = None
    ) -> Iterator[KeywordIndex]:
        """The keyword index holding ``user_id``'s memories, caught up with the change log, under the lock.

        A user's memories are read on their first search in this process (a worker
        holds the users it serves, not the whole database).  One statement reads the
        log's bounds, the snapshot's xmin and the new entries; statements after it may
        see later commits, whose entries the next catch-up reads again (never misses).
        The thread holds its connection before taking the lock, so no thread waits
        for a pooled connection while holding the lock; and it gives the connection
        back before it builds a newly read user into the index (about a second for
        100,000 memories), keeping the lock, so no other catch-up runs in between.
        ``sending`` (inside a pipelined transaction) queues more statements right behind the catch-up, before its
        answer is read (one wait for all), and may work in process meanwhile on the index as held.
        """
        outermost = not self.in_transaction if outermost is None else outermost
        with self.pinned():
            self._lock.acquire()
            try:
                held = self._keywords if self._still_read(user_id, outermost) else None
                if held is not None and sending is not None:
                    sending()
                index = held if held is not None else self._caught_up(outermost, sending)
                new = None if user_id in self._keyword_users else self._user_rows(user_id)
            except BaseException:
                self._lock.release()
                raise
        try:  # the connection is back in the pool (unless a transaction or an outer block holds it)
            self._recent[user_id] = None
            self._recent.move_to_end(user_id)
            if new is not None:
                self._add_user(index, user_id, new, outermost)
                self._let_go(user_id)
            if held is None:
                self._seen_by_search(user_id, outermost)
            yield index
        finally:
            self._lock.release()

    @contextmanager
    def reading(self, user_id: str) -> Iterator[None]:
        """One search's reads of ``user_id``'s memories.  The first read that needs the keyword index (with the
        held briefs and conflicts) catches it up with the change log; the search's later reads use that view, as a
        transaction would give it, instead of catching up again (a hybrid search caught up twice: for the keyword
        search and for the candidates' briefs).  Another thread's catch-up in between may have moved the shared
        index to its own view (a writer's uncommitted rows): a read then catches up again.  Inside a transaction,
        or inside another search's block, reads go as usual."""
        local = self._local
        if getattr(local, "reading", None) is not None or self.in_transaction:
            yield
            return
        local.reading = (user_id, None)
        try:
            yield
        finally:
            local.reading = None

    def participant_names(self, user_id: str) -> set[str]:
        """The speakers' names.  Inside :meth:`reading` they come from this process, read once and kept until the
        change log says a storyline was made, removed or given other participants.  Held names are given as they
        are, before the search's catch-up (which is sent with its vector search): a search asks again after it
        and searches again in the rare case that the names changed meanwhile (see ``read.search``).  Names not
        held yet cost the search's first catch-up and their read."""
        reading = getattr(self._local, "reading", None)
        if reading is None or reading[0] != user_id or self.in_transaction:
            found: set[str] = super().participant_names(user_id)  # type: ignore[misc]  # the storyline rows'
            return found
        with self._lock:
            held = self._names.get(user_id) if user_id in self._keyword_users else None
        if held is not None:
            return set(held)
        with self._keywords_for(user_id):
            names = self._names.get(user_id)
            if names is None:
                names = self._names[user_id] = super().participant_names(user_id)  # type: ignore[misc]
            return set(names)

    def _still_read(self, user_id: str, outermost: bool) -> bool:
        """True inside :meth:`reading` for ``user_id`` once it has caught up, while no catch-up has moved the
        index since."""
        reading = getattr(self._local, "reading", None)
        return (
            outermost
            and reading is not None
            and reading[0] == user_id
            and reading[1] == self._views
            and self._keywords is not None
            and user_id in self._keyword_users
        )

    def _seen_by_search(self, user_id: str, outermost: bool) -> None:
        """Inside :meth:`reading` for ``user_id``: the index as just caught up is the search's view."""
        reading = getattr(self._local, "reading", None)
        if outermost and reading is not None and reading[0] == user_id:
            self._local.reading = (user_id, self._views)

    def _caught_up(self, outermost: bool, sending: Callable[[], None] | None = None) -> KeywordIndex:
        """The index with every logged change applied, or a fresh one when a prune took an entry it needed.

        After a catch-up at sequence S with snapshot xmin X, the index still needs only the
        entries with seq > S or xid >= X; if a prune since the last catch-up took any such entry
        (the log's pruned marks moved past S or to X), it starts afresh.
        """
        self._views += 1
        if outermost:
            self._keywords_dirty = False  # whatever was taken inside earlier transactions is settled
        view_xid, view_seq = self._keywords_view
        asked = self._exec(_CATCH_UP, (self._keywords_seq, str(self._keywords_xmin), view_xid, view_seq))
        if sending is not None:
            sending()  # queued behind the catch-up: one wait for all (psycopg reads every queued answer)
        rows = asked.fetchall()
        head, changes = rows[0], rows[1:]
        mine = [int(r[1]) for r in changes if r[6] == "true"]
        kept = view_seq if head[6] is not None and head[6] == view_xid else 0
        self._keywords_view = (head[6], max([kept, *mine]))  # whose view the index shows now
        # the memories another transaction's own entries put in: this reader cannot see those entries (they are
        # not committed), so it reads the memories again itself, as it sees them
        shown_before = self._view_memories if head[6] != view_xid else set()
        taken = {int(r[2]) for r in changes if r[6] == "true"}
        self._view_memories = (self._view_memories | taken if head[6] == view_xid else taken) if head[6] else set()
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
            self._keyword_users, self._briefs, self._names = set(), {}, {}
            self._passage_keywords = PassageKeywords()
            self._keywords_dirty = not outermost
            return index
        if changes or shown_before:
            self._keywords_seq = max([self._keywords_seq, *(int(r[1]) for r in changes)])
            self._refresh_keywords(index, {int(r[2]) for r in changes} | shown_before)
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

    def _user_rows(self, user_id: str) -> _UserRows:
        """A user's memories, passages and conflicts as the indexes take them (read on their first search here)."""
        return (
            self._memory_rows("m.user_id = ?", [user_id]),
            self._passage_rows("p.user_id = ?", [user_id]),
            self._conflict_rows("user_id = ?", [user_id]),
        )

    def _add_user(self, index: KeywordIndex, user_id: str, rows: _UserRows, outermost: bool) -> None:
        memories, passages, conflicts = rows
        self._keyword_edits += 1
        index.upsert(row[:3] for row in memories)
        held = self._briefs[user_id] = _HeldBriefs({row[0]: row[3] for row in memories})
        for conflict in conflicts:
            held.add_conflict(conflict)
        self._passage_keywords.add(passages)
        self._keyword_users.add(user_id)
        self._keywords_dirty = self._keywords_dirty or not outermost

    def _let_go(self, keep: str) -> None:
        """Past :attr:`_held_rows` held memories and messages, forget the least recently searched users' (never
        ``keep``'s, the user being searched): a worker serving many users keeps those it serves now, in bounded
        memory, and reads a user let go again on their next search (as on their first).  Under the lock."""
        if self._held_rows <= 0:
            return
        held = {user: self._held_by(user) for user in self._recent}
        total = sum(held.values())
        for user, rows in held.items():  # least recently searched first
            if user == keep or (rows and total <= self._held_rows):
                continue
            self._forget_user(user)  # also a user with nothing held any more (the index started afresh)
            total -= rows

    def _held_by(self, user_id: str) -> int:
        briefs, messages = self._briefs.get(user_id), self._held_messages.get(user_id)
        return (len(briefs.briefs) if briefs is not None else 0) + (messages.count if messages is not None else 0)

    def _forget_user(self, user_id: str) -> None:
        """Drop what this process holds of one user (their memories, passages, briefs, names and messages)."""
        self._keyword_edits += 1
        self._recent.pop(user_id, None)
        held = self._briefs.pop(user_id, None)
        if held is not None and self._keywords is not None:
            self._keywords.drop_user(user_id)
            self._passage_keywords.drop_user(user_id, held.briefs)
        self._keyword_users.discard(user_id)
        self._names.pop(user_id, None)
        self._held_messages.pop(user_id, None)

    def _memory_rows(self, where: str, params: list[Any]) -> list[_MemoryRow]:
        """(id, user, text the index takes, brief) of the memories ``where`` selects (columns of ``m``)."""
        rows = self._all(
            "SELECT m.id, m.user_id, m.content, m.key_points, m.stream, COALESCE(m.event_at, m.created_at),"
            " m.valid_to, ARRAY(SELECT s.message_id FROM memory_sources s WHERE s.memory_id = m.id"
            f" ORDER BY s.message_id) FROM memories m WHERE {where}",
            params,
        )
        return [
            (
                int(r[0]),
                str(r[1]),
                f"{r[2]} {r[3]}" if r[3] else str(r[2]),
                MemoryBrief(Stream(r[4]), to_time_required(r[5]), tuple(int(i) for i in r[7]), to_time(r[6])),
            )
            for r in rows
        ]

    def _conflict_rows(self, where: str, params: list[Any]) -> list[Conflict]:
        return [conflict_from(r) for r in self._all(f"SELECT {_CONFLICT_COLUMNS} FROM conflicts WHERE {where}", params)]

    def _passage_rows(self, where: str, params: list[Any]) -> list[tuple[int, int, str, str]]:
        rows = self._all(
            "SELECT p.id, p.memory_id, p.user_id, m.speaker, substr(m.content, p.char_start + 1,"
            " p.char_end - p.char_start) FROM passages p JOIN messages m ON m.id = p.message_id"
            f" WHERE p.parts > 1 AND {where}",
            params,
        )
        return [(int(r[0]), int(r[1]), str(r[2]), f"{r[3]} {r[4]}".strip()) for r in rows]

    def _refresh_keywords(self, index: KeywordIndex, memory_ids: set[int]) -> None:
        """Re-read changed memories: those of loaded users go in, the rest (deleted, other users) go out.  A
        negative id is a storyline whose participants changed: the held speaker names are read again."""
        self._keyword_edits += 1
        if any(i < 0 for i in memory_ids):
            self._names = {}
            memory_ids = {i for i in memory_ids if i >= 0}
        ids = sorted(memory_ids)
        rows: list[_MemoryRow] = []
        passages: list[tuple[int, int, str, str]] = []
        conflicts: dict[int, Conflict] = {}
        for start in range(0, len(ids), 500):
            chunk = array_parameter(ids[start : start + 500])
            rows += self._memory_rows("m.id = ANY(?)", [chunk])
            passages += self._passage_rows("p.memory_id = ANY(?)", [chunk])
            named = self._conflict_rows("memory_id = ANY(?) OR other_memory_id = ANY(?)", [chunk, chunk])
            conflicts.update((c.id, c) for c in named)
        kept = [row for row in rows if row[1] in self._keyword_users]
        gone = memory_ids - {row[0] for row in kept}
        index.remove(gone)
        index.upsert(row[:3] for row in kept)
        for held in self._briefs.values():  # every user's: a memory may have moved to another
            for memory_id in memory_ids:
                held.forget(memory_id)
        for memory_id, user_id, _, brief in kept:
            self._briefs[user_id].briefs[memory_id] = brief
        for conflict in conflicts.values():
            if conflict.user_id in self._briefs:
                self._briefs[conflict.user_id].add_conflict(conflict)
        self._passage_keywords.replace(memory_ids, [row for row in passages if row[2] in self._keyword_users])

    def _rolled_back(self) -> None:
        """Work was undone: if the indexes took rows from inside the transaction, rebuild them on the next
        search."""
        with self._lock:
            self._views += 1
            self._keywords_view = (None, 0)
            if self._keywords_dirty:
                self._keywords, self._keywords_dirty, self._keyword_users, self._briefs = None, False, set(), {}
                self._passage_keywords, self._view_memories, self._names = PassageKeywords(), set(), {}
            if self._messages_dirty:
                self._held_messages, self._messages_dirty = {}, False

    def drop_index(self) -> None:
        """Forget the in-process keyword indexes; the next search rebuilds them (vectors live in the database)."""
        with self._lock:
            self._views += 1
            self._keywords_view = (None, 0)
            self._keywords, self._keyword_users, self._briefs = None, set(), {}
            self._passage_keywords, self._view_memories, self._names = PassageKeywords(), set(), {}
            self._held_messages, self._messages_dirty = {}, False
