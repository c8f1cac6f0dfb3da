"""Latency benchmark: ingest speed (``bench.ingest``), recall latency at 10k/100k memories, peak RSS,
ChromaDB in the same run.

Memories are synthetic but realistic: sentences from templates about people,
places, plans and feelings.  A pool of distinct sentences is embedded with the
real model; larger stores reuse those vectors with a small per-memory jitter
(re-normalised) so that 100k memories can be built on a laptop CPU in minutes.
The same vectors go into ChromaDB (cosine HNSW, the store of the ITSERR seed),
and the same queries run against both.
"""

from __future__ import annotations

import random
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from narrative.bench import ingest
from narrative.engine import Memory, Turn

CHUNK = 5000  # memories per add_memories call (and per chunk of generated vectors)

NAMES = ["Maya", "Sam", "Lena", "Jon", "Priya", "Tomas", "Aiko", "Ravi", "Nora", "Diego", "Elif", "Kwame"]
PLACES = ["Lisbon", "Porto", "the allotment", "the climbing gym", "Kyoto", "the library", "the office", "Berlin"]
THINGS = [
    "the garden app",
    "the wedding speech",
    "the marathon",
    "the thesis chapter",
    "the kitchen remodel",
    "the photo book",
    "the budget spreadsheet",
    "the piano recital",
    "the job interview",
    "the road trip",
]
FEELINGS = ["excited", "anxious", "relieved", "proud", "frustrated", "grateful", "nervous", "happy"]
TEMPLATES = [
    "{a} decided to work on {t} first because {b} is waiting on it.",
    "{a} felt {f} after talking with {b} about {t}.",
    "{a} is planning a trip to {p} with {b} next month.",
    "{a} asked whether {t} should be finished before the trip to {p}.",
    "{b} promised to send {a} the notes about {t} by Friday.",
    "{a} realised that {t} matters more than expected and felt {f}.",
    "{a} met {b} at {p} and they talked about {t} for hours.",
    "{a} is waiting on {b} to review {t} before going further.",
    "{a} chose {p} over the other options because it is cheaper and closer.",
    "{a} read a book about {t} and took notes on page {n}.",
]
QUERIES = [
    "what did {a} decide about {t}",
    "who is {a} waiting on",
    "trip to {p}",
    "how did {a} feel about {t}",
    "notes about {t}",
    "when is {a} going to {p}",
    "what matters most to {a}",
    "{a} and {b} talking",
]


def sentence(rng: random.Random, templates: Sequence[str] = TEMPLATES) -> str:
    a, b = rng.sample(NAMES, 2)
    return rng.choice(templates).format(
        a=a, b=b, p=rng.choice(PLACES), t=rng.choice(THINGS), f=rng.choice(FEELINGS), n=rng.randint(3, 300)
    )


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def forget_user(db: str, user: str) -> None:
    """Start a shared database's bench user from nothing (an earlier run may have left rows)."""
    with Memory(db, user=user, embedder="none") as old:
        old.store.delete_user(user)


def timed_turns(mem: Memory, rng: random.Random, turns: int) -> float:
    """Seconds to remember ``turns`` of the bench's sentences (Maya and Rook taking turns) through the write path."""
    batch = [
        Turn(sentence(rng), "user" if i % 2 == 0 else "assistant", speaker="Maya" if i % 2 == 0 else "Rook")
        for i in range(turns)
    ]
    started = time.perf_counter()
    mem.remember_many(batch)
    return time.perf_counter() - started


def measure_ingest(workdir: Path, turns: int, embedder: str, postgres: str | None = None) -> dict[str, Any]:
    """Turns per second through the real write path (routing, extraction, narrative, embeddings)."""
    rng = random.Random(7)
    target = postgres or workdir / f"ingest-{embedder}.db"
    if postgres:
        forget_user(postgres, f"ingest-{embedder}")
    with Memory(target, user=f"ingest-{embedder}", embedder=embedder) as mem:
        if mem.embedder is not None:
            mem.embedder.embed_batch(["warm up"])
        seconds = timed_turns(mem, rng, turns)
    return {
        "store": "postgres" if postgres else "sqlite",
        "embedder": embedder,
        "turns": turns,
        "seconds": round(seconds, 2),
        "turns_per_s": round(turns / seconds, 1),
    }


def chunk_vectors(pool_vectors: np.ndarray, seed: int, start: int, end: int) -> np.ndarray:
    """Rows ``start..end`` of a store's vectors: pool embeddings with a small jitter, re-normalised.

    Each chunk comes from its own seed, so any chunk can be made again (for exact answers) without
    holding a million vectors.
    """
    rng = np.random.default_rng([seed, start])
    picks = rng.integers(0, len(pool_vectors), size=end - start)
    vectors = pool_vectors[picks] + rng.normal(0.0, 0.02, size=(end - start, pool_vectors.shape[1]))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.asarray(vectors, dtype=np.float32)


def build_store(
    mem: Memory, size: int, pool_texts: list[str], pool_vectors: np.ndarray, seed: int, user: str | None = None
) -> np.ndarray:
    """Insert ``size`` memories in bulk (chunks of 5,000); returns their ids in insertion order.

    Every memory gets its own generated sentence (a realistic spread of words for
    BM25); its vector is a pool sentence's embedding with a small jitter.
    """
    texts = random.Random(seed)
    # streams without follow-up work: a new decision or research item is linked to every earlier one of its
    # stream (engine/followups.py), work that grows with the square of a store this size and is not search
    streams = ["conversation", "fact"]
    ids = np.empty(size, dtype=np.int64)
    for start in range(0, size, CHUNK):
        end = min(size, start + CHUNK)
        items = [
            {"content": sentence(texts), "stream": streams[i % 2], "importance": 1 + i % 5} for i in range(start, end)
        ]
        made = mem.add_memories(items, vectors=chunk_vectors(pool_vectors, seed, start, end), user=user)
        ids[start:end] = [m.id for m in made]
    return ids


def exact_top(
    ids: np.ndarray, pool_vectors: np.ndarray, seed: int, query_vectors: np.ndarray, k: int
) -> list[tuple[set[int], float]]:
    """The true ``k`` nearest memory ids of each query and the k-th best cosine (brute force, chunk by chunk)."""
    queries = np.asarray(query_vectors, dtype=np.float32)
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    best_scores = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_ids = np.zeros((len(queries), 0), dtype=np.int64)
    for start in range(0, len(ids), CHUNK):
        end = min(len(ids), start + CHUNK)
        scores = queries @ chunk_vectors(pool_vectors, seed, start, end).T
        scores = np.concatenate([best_scores, scores], axis=1)
        candidates = np.concatenate([best_ids, np.broadcast_to(ids[start:end], (len(queries), end - start))], axis=1)
        keep = np.argsort(-scores, axis=1)[:, :k]
        best_scores = np.take_along_axis(scores, keep, axis=1)
        best_ids = np.take_along_axis(candidates, keep, axis=1)
    return [(set(row.tolist()), float(scores[-1])) for row, scores in zip(best_ids, best_scores, strict=True)]


def recall_at(
    mem: Memory, user: str, query_vectors: np.ndarray, truth: list[tuple[set[int], float]], k: int
) -> tuple[float, float]:
    """Mean recall@k of the store's vector search (the index it uses) against exact search, and the share of
    its hits that are as close as the exact k-th, give or take 0.005 of cosine (a miss among near-ties)."""
    assert mem.embedder is not None
    recalls, close = [], []
    for q, (exact, kth) in zip(np.asarray(query_vectors, dtype=np.float32), truth, strict=True):
        hits = mem.store.vector_search(user, q, mem.embedder.identity, k=k)
        recalls.append(len({i for i, _ in hits} & exact) / k)
        close.append(sum(1 for _, score in hits if score >= kth - 0.005) / k)
    return round(float(np.mean(recalls)), 4), round(float(np.mean(close)), 4)


def timing(times: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": round(percentile(times, 0.5), 3), "p95_ms": round(percentile(times, 0.95), 3)}


def time_alternately(
    mems: Sequence[Memory], queries: list[str], mode: str, embedded: bool = False
) -> list[list[float]]:
    """Milliseconds of each search on each store (a list per store), the stores taking turns: query i runs on
    every store, in order, before query i + 1 runs on any. A machine that is busier in one second than the next
    then weighs on every store alike, and the stores' ratio measures the stores, not the load. ``embedded``: with
    the query's embedding in the time (the embedder's query cache is emptied before each search, so the texts are
    the same as the other rows', not made unique)."""
    forgets = [getattr(mem.embedder, "clear_cache", None) if embedded else None for mem in mems]
    out: list[list[float]] = [[] for _ in mems]
    for query in queries:
        for mem, forget, times in zip(mems, forgets, out, strict=True):
            if forget is not None:
                forget()
            started = time.perf_counter()
            mem.search(query, 10, mode=mode, record=False)
            times.append((time.perf_counter() - started) * 1000)
    return out


def time_chroma(size: int, pool_vectors: np.ndarray, query_vectors: np.ndarray, workdir: Path) -> dict[str, Any] | None:
    """The same vectors (made again chunk by chunk) in ChromaDB, the same queries."""
    try:
        import chromadb
    except ImportError:
        return None
    client = chromadb.PersistentClient(path=str(workdir / "chroma"))
    collection = client.create_collection(
        f"bench{size}", metadata={"hnsw:space": "cosine", "hnsw:construction_ef": 100, "hnsw:search_ef": 50}
    )
    started = time.perf_counter()
    for start in range(0, size, CHUNK):
        end = min(size, start + CHUNK)
        vectors = chunk_vectors(pool_vectors, size, start, end)
        collection.add(ids=[str(i) for i in range(start, end)], embeddings=vectors.tolist())
    build = time.perf_counter() - started
    times = []
    for q in query_vectors:
        t = time.perf_counter()
        collection.query(query_embeddings=[q.tolist()], n_results=10)
        times.append((time.perf_counter() - t) * 1000)
    return {"build_s": round(build, 1), **timing(times)}


def measure_size(
    opens: Sequence[Callable[[], Memory]],
    size: int,
    pool_texts: list[str],
    pool_vectors: np.ndarray,
    queries: tuple[list[str], np.ndarray],
    model_rss_mb: float,
    turns_into: int = 0,
) -> list[dict[str, Any]]:
    """Build a store of ``size`` memories in each store ``opens`` opens, one store after the other, and time the
    same searches on all of them, the stores taking turns (one row of the report each); then ``turns_into`` turns
    through the write path into each.

    A store's peak RSS is read after its searches, or, when another store is built after it, as soon as it is
    built and its indexes loaded, so that the next store's memory is not counted in it."""
    query_texts, query_vectors = queries
    with ExitStack() as stack:
        mems: list[Memory] = []
        built: list[tuple[np.ndarray, dict[str, Any]]] = []
        for number, open_store in enumerate(opens):
            mem = stack.enter_context(open_store())
            ids, row = build_and_load(mem, size, pool_texts, pool_vectors)
            if number < len(opens) - 1:
                row.update(rss_figures(size, model_rss_mb))
            mems.append(mem)
            built.append((ids, row))
        for (_, row), timed in zip(built, time_rows(mems, query_texts), strict=True):
            row.update(timed)
            if len(mems) > 1:
                row["alternated"] = True  # its searches took turns with the other stores'
        for mem, (ids, row) in zip(mems, built, strict=True):
            row.update(search_figures(mem, ids, pool_vectors, query_texts, query_vectors, size))
            if "peak_rss_mb" not in row:
                row.update(rss_figures(size, model_rss_mb))
        if turns_into:  # last: it adds to the store
            for mem, (_, row) in zip(mems, built, strict=True):
                row["turns_into"] = measure_turns_into(mem, turns_into)
    return [row for _, row in built]


def build_and_load(
    mem: Memory, size: int, pool_texts: list[str], pool_vectors: np.ndarray
) -> tuple[np.ndarray, dict[str, Any]]:
    """Insert ``size`` memories and load (SQLite) or build (PostgreSQL) the indexes with a first search; the
    memories' ids and the row's build times."""
    started = time.perf_counter()
    ids = build_store(mem, size, pool_texts, pool_vectors, seed=size)
    build = time.perf_counter() - started
    started = time.perf_counter()
    mem.search("warm up the index", 10, record=False)  # loads (SQLite) or builds (PostgreSQL) the indexes
    return ids, {"memories": size, "build_s": round(build, 1), "index_s": round(time.perf_counter() - started, 1)}


def time_rows(mems: Sequence[Memory], query_texts: list[str]) -> list[dict[str, Any]]:
    """The timed rows of each store, the stores taking turns on every query (``time_alternately``)."""
    rows: list[dict[str, Any]] = [{} for _ in mems]
    # the first pass over the queries after the index is loaded, reported on its own: it reads the store's pages
    # (and the keyword index's) for the first time, which the rows below find read
    for row, times in zip(rows, time_alternately(mems, query_texts, "hybrid", embedded=True), strict=True):
        row["first_pass"] = timing(times)
    for mem in mems:
        for query in query_texts:  # warm the query-embedding cache: the mode rows exclude the model
            mem.search(query, 1, mode="vector", record=False)
    for mode in ("hybrid", "vector", "keyword"):
        for row, times in zip(rows, time_alternately(mems, query_texts, mode), strict=True):
            row[mode] = {**timing(times), "mean_ms": round(statistics.fmean(times), 3)}
    for row, times in zip(rows, time_alternately(mems, query_texts, "hybrid", embedded=True), strict=True):
        row["hybrid+embedding"] = timing(times)
    return rows


def search_figures(
    mem: Memory, ids: np.ndarray, pool_vectors: np.ndarray, query_texts: list[str], query_vectors: np.ndarray, size: int
) -> dict[str, Any]:
    """One store's query embedding time, the recall of its vector search against exact search, and (PostgreSQL)
    the plan of its vector search."""
    assert mem.embedder is not None
    embed_times = []
    for text in query_texts[:50]:
        t = time.perf_counter()
        mem.embedder.embed_batch([text + " ?"])  # uncached
        embed_times.append((time.perf_counter() - t) * 1000)
    row: dict[str, Any] = {"query_embedding": timing(embed_times)}
    user = mem.settings.user
    sample = min(len(query_vectors), 50)
    truth = exact_top(ids, pool_vectors, size, query_vectors[:sample], 10)
    row["recall@10"], row["within_0.005@10"] = recall_at(mem, user, query_vectors[:sample], truth, 10)
    explain = getattr(mem.store, "explain_vector_search", None)
    if explain is not None:  # PostgreSQL: which index the search used, and how many rows it read
        plan = explain(user, query_vectors[0], mem.embedder.identity, k=100)
        row["plan"] = {"indexes": plan["indexes"], "rows_read": plan["rows_read"]}
    return row


def rss_figures(size: int, model_rss_mb: float) -> dict[str, float]:
    """The process's peak RSS so far, and what it is per memory above the model's."""
    peak = peak_rss_mb()
    return {"peak_rss_mb": round(peak, 1), "kb_per_memory_above_model": round((peak - model_rss_mb) * 1024 / size, 2)}


def measure_turns_into(mem: Memory, turns: int) -> dict[str, Any]:
    """Turns per second through the write path into a store that already holds many memories: what a user with a
    long history pays per turn (the write path reads the user's earlier memories, e.g. for corrections)."""
    seconds = timed_turns(mem, random.Random(13), turns)
    return {"turns": turns, "seconds": round(seconds, 2), "turns_per_s": round(turns / seconds, 1)}


def run(
    sizes: Sequence[int],
    *,
    queries: int = 200,
    chroma: bool = True,
    pool: int = 2000,
    ingest_turns: int = 400,
    postgres: str | None = None,
    postgres_max: int = 100_000,
    tenants: Sequence[tuple[int, int]] = (),
    tenant_searches: int = 200,
    message_search: int = 0,
    turns_into: int = 100,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Every figure for SQLite, and (with ``postgres``, a URL) the same for PostgreSQL in the same run (sizes up
    to ``postgres_max``), then ``tenants`` ((users, memories each) on PostgreSQL); ``progress(done, total)``
    after each step; ``message_search``: the write path's search of earlier messages at a user with that many
    messages, on both stores; ``turns_into``: turns remembered into each store after its searches (the default
    embedder included)."""
    from narrative.bench import message_search as messages_bench
    from narrative.bench import tenants as tenant_bench

    steps = 1 + len(sizes) + (len(tenants) if postgres else 0)
    workdir = Path(tempfile.mkdtemp(prefix="narrative-latency-"))
    rng = random.Random(11)
    report: dict[str, Any] = {
        "ingest": ingest.measure(workdir, ingest_turns, progress) if ingest_turns else None,
        "ingest_by_store": [
            measure_ingest(workdir, ingest_turns, e, url) for url in [None, postgres] for e in ("minilm", "none")
        ]
        if postgres and ingest_turns
        else [],
        "sizes": [],
        "tenants": [],
        "message_search": messages_bench.measure(workdir, message_search, postgres) if message_search else [],
    }
    if not sizes and not (postgres and tenants):
        return report
    with Memory(workdir / "pool.db", user="pool") as pool_mem:
        embedder = pool_mem.embedder
        assert embedder is not None
        pool_texts = list(dict.fromkeys(sentence(rng) for _ in range(pool * 2)))[:pool]
        started = time.perf_counter()
        pool_vectors = embedder.embed_batch(pool_texts)
        report["embed_texts_per_s"] = round(len(pool_texts) / (time.perf_counter() - started), 1)
        query_texts = [
            rng.choice(QUERIES).format(
                a=rng.choice(NAMES), b=rng.choice(NAMES), p=rng.choice(PLACES), t=rng.choice(THINGS)
            )
            for _ in range(queries)
        ]
        query_vectors = embedder.embed_batch(query_texts)
    model_rss = peak_rss_mb()  # the model loaded and used: what the stores add is measured above this
    report["model_rss_mb"] = round(model_rss, 1)
    if progress is not None:
        progress(1, steps)
    step = 1
    for size in sizes:
        urls = [None, postgres] if postgres and size <= postgres_max else [None]
        opens = [partial(open_bench_store, url, workdir / f"store-{size}.db", f"bench-{size}") for url in urls]
        rows = measure_size(opens, size, pool_texts, pool_vectors, (query_texts, query_vectors), model_rss, turns_into)
        for url, row in zip(urls, rows, strict=True):
            row["store"] = "postgres" if url else "sqlite"
            row["chroma"] = time_chroma(size, pool_vectors, query_vectors, workdir) if chroma and not url else None
            report["sizes"].append(row)
        step += 1
        if progress is not None:
            progress(step, steps)
    for users, each in tenants:
        if not postgres:
            break
        report["tenants"].append(
            tenant_bench.measure(postgres, users, each, pool_vectors, (query_texts, query_vectors), tenant_searches)
        )
        step += 1
        if progress is not None:
            progress(step, steps)
    return report


def open_bench_store(url: str | None, path: Path, user: str) -> Memory:
    """The bench store of ``user``: the SQLite file ``path``, or the PostgreSQL database ``url``, where the user
    starts from nothing (an earlier run may have left rows)."""
    if url:
        forget_user(url, user)
    return Memory(url or path, user=user)


def format_report(report: dict[str, Any]) -> str:
    from narrative.bench import tenants as tenant_bench

    lines = [] if report["ingest"] is None else [ingest.format_report(report["ingest"]), ""]
    if report.get("ingest_by_store"):
        lines.append("Ingest by store, the same turns through the write path:")
        for row in report["ingest_by_store"]:
            lines.append(
                f"  {row['store']:<8} embedder {row['embedder']:<7} {row['turns']} turns in {row['seconds']} s"
                f" = {row['turns_per_s']} turns/s"
            )
        lines.append("")
    if report["sizes"]:
        lines += _size_lines(report)
    if report.get("tenants"):
        lines += ["", *tenant_bench.format_rows(report["tenants"])]
    if report.get("message_search"):
        from narrative.bench import message_search as messages_bench

        lines += ["", *messages_bench.format_rows(report["message_search"])]
    return "\n".join(lines)


def _size_lines(report: dict[str, Any]) -> list[str]:
    lines = [
        "Recall latency, k=10 ('hybrid+embedding' embeds every query, 'first pass' is its first pass after the"
        " index is loaded, before any other row; the mode rows reuse cached query vectors);"
        f" the model alone: {report.get('model_rss_mb', '?')} MB RSS",
        f"{'memories':>9} {'store':<8} {'mode':<16} {'p50 ms':>8} {'p95 ms':>8}",
    ]
    for row in report["sizes"]:
        head = f"{row['memories']:>9} {row['store']:<8}"
        for mode in ("hybrid", "vector", "keyword"):
            lines.append(f"{head} {mode:<16} {row[mode]['p50_ms']:>8.2f} {row[mode]['p95_ms']:>8.2f}")
        embed = row["query_embedding"]
        lines.append(f"{head} {'query embedding':<16} {embed['p50_ms']:>8.2f} {embed['p95_ms']:>8.2f}")
        both = row["hybrid+embedding"]
        lines.append(f"{head} {'hybrid+embedding':<16} {both['p50_ms']:>8.2f} {both['p95_ms']:>8.2f}")
        if "first_pass" in row:
            first = row["first_pass"]
            lines.append(f"{head} {'  first pass':<16} {first['p50_ms']:>8.2f} {first['p95_ms']:>8.2f}")
        chroma = row["chroma"]
        if chroma:
            lines.append(
                f"{row['memories']:>9} {'chromadb vector':<16} {chroma['p50_ms']:>8.2f} {chroma['p95_ms']:>8.2f}"
            )
            ratio = chroma["p95_ms"] / row["vector"]["p95_ms"] if row["vector"]["p95_ms"] else float("nan")
            lines.append(f"{row['memories']:>9} ratio chroma/narrative vector p95 = {ratio:.2f}×")
        lines.append(
            f"{head} vector recall@10 against exact search {row['recall@10']}"
            f" ({row['within_0.005@10']} of its hits within 0.005 of the exact 10th's cosine)"
            + (
                f"; plan: {', '.join(row['plan']['indexes'])}, {row['plan']['rows_read']} rows read"
                if "plan" in row
                else ""
            )
        )
        lines.append(
            f"{head} peak RSS {row['peak_rss_mb']} MB ({row['kb_per_memory_above_model']} KB per memory above the"
            f" model); inserted in {row['build_s']} s, indexes ready {row['index_s']} s later"
        )
        into = row.get("turns_into")
        if into:
            lines.append(
                f"{head} write path into this store: {into['turns']} turns in {into['seconds']} s"
                f" = {into['turns_per_s']} turns/s (with the embedder)"
            )
    by_size: dict[int, dict[str, Any]] = {}
    for row in report["sizes"]:
        by_size.setdefault(row["memories"], {})[row["store"]] = row
    for size, stores in by_size.items():
        if "sqlite" in stores and "postgres" in stores:
            lite, pg = stores["sqlite"], stores["postgres"]
            if lite.get("alternated") and pg.get("alternated"):
                lines.append(f"{size:>9} searches timed alternately: each query on SQLite, then on PostgreSQL")
            lines.append(
                f"{size:>9} PostgreSQL ÷ SQLite p95: hybrid {_ratio(pg, lite, 'hybrid')}×,"
                f" vector {_ratio(pg, lite, 'vector')}×, keyword {_ratio(pg, lite, 'keyword')}×"
            )
    return lines


def _ratio(a: dict[str, Any], b: dict[str, Any], mode: str) -> str:
    low = b[mode]["p95_ms"]
    return f"{a[mode]['p95_ms'] / low:.2f}" if low else "nan"
