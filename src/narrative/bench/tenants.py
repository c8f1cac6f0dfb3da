"""Many tenants in one PostgreSQL database: ``users`` users with ``each`` memories, searched by random users.

Each user's memories go in through ``add_memories`` (synthetic sentences, pool vectors with a jitter, as in
:mod:`narrative.bench.latency`).  Then random users search: the first search of a user (which loads their
keyword index in this process) is timed apart from the searches after it, and for a sample of searches
PostgreSQL's own plan (``EXPLAIN ANALYZE``) says which index the vector search used and how many rows of
``memory_vectors`` it read: never more than the user's own, and only through an index that holds nothing else
(the primary key with the user's id, or the user's own HNSW index).
"""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np

from narrative.bench.latency import chunk_vectors, sentence, timing
from narrative.engine import Memory

PLANS_CHECKED = 50


def measure(
    url: str,
    users: int,
    each: int,
    pool_vectors: np.ndarray,
    queries: tuple[list[str], np.ndarray],
    searches: int = 200,
    seed: int = 29,
) -> dict[str, Any]:
    """Build the tenants (under a prefix of their own) and time searches by random users."""
    query_texts, query_vectors = queries
    prefix = f"tenant{users}x{each}-{int(time.time())}-"
    names = [f"{prefix}{u}" for u in range(users)]
    rng = random.Random(seed)
    with Memory(url, user=names[0]) as mem:
        started = time.perf_counter()
        texts = random.Random(seed)
        for number, name in enumerate(names):
            items = [{"content": sentence(texts), "importance": 1 + i % 5} for i in range(each)]
            start = number * each
            mem.add_memories(items, vectors=chunk_vectors(pool_vectors, seed, start, start + each), user=name)
        build = time.perf_counter() - started
        for text in query_texts:  # embed every query once: the timings below are the stores'
            mem.search(text, 1, mode="vector", record=False, user=names[0])
        chosen = [rng.choice(names) for _ in range(searches)]
        first: list[float] = []
        seen: set[str] = set()
        times: dict[str, list[float]] = {"hybrid": [], "vector": [], "keyword": []}
        for i, name in enumerate(chosen):
            text = query_texts[i % len(query_texts)]
            if name not in seen:
                seen.add(name)
                t = time.perf_counter()
                mem.search(text, 10, record=False, user=name)
                first.append((time.perf_counter() - t) * 1000)
            for mode, found in times.items():
                t = time.perf_counter()
                mem.search(text, 10, mode=mode, record=False, user=name)
                found.append((time.perf_counter() - t) * 1000)
        plans = _plans(mem, chosen[:PLANS_CHECKED], query_vectors, each)
    return {
        "users": users,
        "per_user": each,
        "memories": users * each,
        "build_s": round(build, 1),
        "searches": searches,
        "first_search": timing(first),
        **{mode: timing(found) for mode, found in times.items()},
        "plans": plans,
    }


def _plans(mem: Memory, names: list[str], query_vectors: np.ndarray, each: int) -> dict[str, Any]:
    """What PostgreSQL read for a sample of vector searches (k=100, the hybrid's candidate pool)."""
    explain = getattr(mem.store, "explain_vector_search", None)
    if explain is None or mem.embedder is None:
        return {}
    kinds: dict[str, int] = {}
    most = 0
    foreign = 0
    for i, name in enumerate(names):
        plan = explain(name, query_vectors[i % len(query_vectors)], mem.embedder.identity, k=100)
        most = max(most, plan["rows_read"])
        for node in plan["nodes"]:
            index = str(node["index"] or "none")
            kind = (
                "primary key"
                if index == "memory_vectors_pkey"
                else "own HNSW index"
                if index.startswith("memory_vectors_user_")
                else f"other ({node['type']}, {index})"
            )
            kinds[kind] = kinds.get(kind, 0) + 1
            own = kind == "own HNSW index" or (kind == "primary key" and f"'{name}'" in str(node["condition"]))
            foreign += 0 if own and node["rows"] <= each else 1
    return {"checked": len(names), "max_rows_read": most, "rows_per_user": each, "scans": kinds, "foreign": foreign}


def format_rows(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "Many tenants on PostgreSQL, searched by random users (k=10; query vectors cached):",
        f"{'users':>7} {'each':>6} {'mode':<14} {'p50 ms':>8} {'p95 ms':>8}",
    ]
    for row in rows:
        head = f"{row['users']:>7} {row['per_user']:>6}"
        for mode in ("first_search", "hybrid", "vector", "keyword"):
            label = "first search" if mode == "first_search" else mode
            lines.append(f"{head} {label:<14} {row[mode]['p50_ms']:>8.2f} {row[mode]['p95_ms']:>8.2f}")
        plans = row["plans"]
        if plans:
            scans = ", ".join(f"{kind} ×{count}" for kind, count in sorted(plans["scans"].items()))
            lines.append(
                f"{head} plans of {plans['checked']} vector searches: {scans}; at most {plans['max_rows_read']} rows"
                f" read (a user has {plans['rows_per_user']}); scans that read another user's rows:"
                f" {plans['foreign']}"
            )
        lines.append(f"{head} {row['memories']} memories inserted in {row['build_s']} s")
    return lines
