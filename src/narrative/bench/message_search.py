"""The write path's search of a speaker's earlier messages (``search_messages``, asked for each statement that
carries a change cue) at a user with many messages.

Timed on SQLite (FTS5) and on PostgreSQL (an in-process index of the user's messages, caught up before each
search), beside the baseline measured in the same run: every message of the user read and ranked by BM25 on
every call, which is what PostgreSQL did before.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from narrative.bench.latency import forget_user, sentence, timing
from narrative.engine import Memory
from narrative.model import Role
from narrative.store.keyword_index import KeywordIndex, query_terms

SEARCHES = 20
LIMIT = 40  # what the write path asks for (8 × its candidates)
SENTENCES = 6  # per message: about 300 characters
BATCH = 64  # messages per transaction, as remember_many writes them (one conversation row updated per message
# grows a chain of row versions inside a transaction: thousands in one transaction cost PostgreSQL quadratic time)


def measure(workdir: Path, messages: int, postgres: str | None, searches: int = SEARCHES) -> list[dict[str, Any]]:
    """One row per store: ``messages`` messages of one user, then ``searches`` timed searches after a first one."""
    return [_measure_one(workdir, messages, url, searches) for url in ([None, postgres] if postgres else [None])]


def _measure_one(workdir: Path, messages: int, url: str | None, searches: int) -> dict[str, Any]:
    user = f"messages-{messages}"
    if url:
        forget_user(url, user)
    with Memory(url or workdir / f"messages-{messages}.db", user=user, embedder="none") as mem:
        store = mem.store
        now = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
        store.ensure_user(user, now)
        texts = random.Random(messages)
        started = time.perf_counter()
        conversation = store.insert_conversation(user, now)
        for start in range(0, messages, BATCH):  # transactions the size of remember_many's
            with store.transaction():
                for i in range(start, min(messages, start + BATCH)):
                    text = " ".join(sentence(texts) for _ in range(SENTENCES))
                    role = Role.USER if i % 2 == 0 else Role.ASSISTANT
                    store.insert_message(user, conversation.id, role, text, now + timedelta(seconds=i))
        build = time.perf_counter() - started
        queries = [sentence(random.Random(messages + 1 + i)) for i in range(searches + 1)]
        row: dict[str, Any] = {"store": "postgres" if url else "sqlite", "messages": messages}
        row["build_s"] = round(build, 1)
        first, times = _times(lambda q: store.search_messages(user, q, LIMIT), queries)
        row["first_ms"], row["search"] = round(first, 2), timing(times)
        if url:
            row["every_message"] = timing(_times(lambda q: _every_message(store, user, q), queries)[1])
        return row


def _times(search: Any, queries: list[str]) -> tuple[float, list[float]]:
    """The first search's milliseconds (it loads what later ones reuse), then the others'."""
    started = time.perf_counter()
    search(queries[0])
    first = (time.perf_counter() - started) * 1000
    out = []
    for query in queries[1:]:
        started = time.perf_counter()
        search(query)
        out.append((time.perf_counter() - started) * 1000)
    return first, out


def _every_message(store: Any, user: str, query: str) -> list[tuple[int, float]]:
    """The baseline: every message of the user read, indexed and ranked, on every call."""
    index = KeywordIndex()
    index.upsert((m.id, user, f"{m.content} {m.speaker}") for m in store.list_messages(user))
    return index.search(user, query_terms(query), LIMIT)


def format_rows(rows: list[dict[str, Any]]) -> list[str]:
    lines = [f"The write path's search of earlier messages (search_messages, {LIMIT} asked):"]
    for row in rows:
        head = f"  {row['store']:<8} {row['messages']:>7} messages"
        lines.append(f"{head}  first search     {row['first_ms']:>8.2f} ms (inserted in {row['build_s']} s)")
        lines.append(
            f"{head}  search           p50 {row['search']['p50_ms']:>8.2f} ms  p95 {row['search']['p95_ms']:>8.2f} ms"
        )
        if "every_message" in row:
            every = row["every_message"]
            lines.append(f"{head}  every message    p50 {every['p50_ms']:>8.2f} ms  p95 {every['p95_ms']:>8.2f} ms")
            ratio = every["p50_ms"] / row["search"]["p50_ms"] if row["search"]["p50_ms"] else float("nan")
            lines.append(f"{head}  every message ÷ search at the median: {ratio:.1f}×")
    return lines
