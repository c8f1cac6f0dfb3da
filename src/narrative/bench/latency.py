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
from pathlib import Path
from typing import Any

import numpy as np

from narrative.bench import ingest
from narrative.engine import Memory, Turn

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


def measure_ingest(workdir: Path, turns: int, embedder: str, postgres: str | None = None) -> dict[str, Any]:
    """Turns per second through the real write path (routing, extraction, narrative, embeddings)."""
    rng = random.Random(7)
    target = postgres or workdir / f"ingest-{embedder}.db"
    if postgres:
        forget_user(postgres, f"ingest-{embedder}")
    with Memory(target, user=f"ingest-{embedder}", embedder=embedder) as mem:
        if mem.embedder is not None:
            mem.embedder.embed_batch(["warm up"])
        batch = [
            Turn(sentence(rng), "user" if i % 2 == 0 else "assistant", speaker="Maya" if i % 2 == 0 else "Rook")
            for i in range(turns)
        ]
        started = time.perf_counter()
        mem.remember_many(batch)
        seconds = time.perf_counter() - started
    return {
        "store": "postgres" if postgres else "sqlite",
        "embedder": embedder,
        "turns": turns,
        "seconds": round(seconds, 2),
        "turns_per_s": round(turns / seconds, 1),
    }


def build_store(mem: Memory, size: int, pool_texts: list[str], pool_vectors: np.ndarray, seed: int) -> np.ndarray:
    """Insert ``size`` memories in bulk; returns their vectors (also used for ChromaDB).

    Every memory gets its own generated sentence (a realistic spread of words for
    BM25); its vector is a pool sentence's embedding with a small jitter.
    """
    rng = np.random.default_rng(seed)
    texts = random.Random(seed)
    picks = rng.integers(0, len(pool_texts), size=size)
    jitter = rng.normal(0.0, 0.02, size=(size, pool_vectors.shape[1])).astype(np.float32)
    vectors = pool_vectors[picks] + jitter
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    streams = ["conversation", "decision", "research", "fact"]
    chunk = 5000
    for start in range(0, size, chunk):
        end = min(size, start + chunk)
        items = [
            {"content": sentence(texts), "stream": streams[i % 4], "importance": 1 + i % 5} for i in range(start, end)
        ]
        mem.add_memories(items, vectors=vectors[start:end])
    return vectors.astype(np.float32)


def time_queries(mem: Memory, queries: list[str], mode: str) -> list[float]:
    out = []
    for query in queries:
        started = time.perf_counter()
        mem.search(query, 10, mode=mode, record=False)
        out.append((time.perf_counter() - started) * 1000)
    return out


def time_chroma(vectors: np.ndarray, query_vectors: np.ndarray, workdir: Path) -> dict[str, Any] | None:
    try:
        import chromadb
    except ImportError:
        return None
    client = chromadb.PersistentClient(path=str(workdir / "chroma"))
    collection = client.create_collection(
        f"bench{len(vectors)}", metadata={"hnsw:space": "cosine", "hnsw:construction_ef": 100, "hnsw:search_ef": 50}
    )
    started = time.perf_counter()
    for start in range(0, len(vectors), 5000):
        end = min(len(vectors), start + 5000)
        collection.add(ids=[str(i) for i in range(start, end)], embeddings=vectors[start:end].tolist())
    build = time.perf_counter() - started
    times = []
    for q in query_vectors:
        t = time.perf_counter()
        collection.query(query_embeddings=[q.tolist()], n_results=10)
        times.append((time.perf_counter() - t) * 1000)
    return {
        "build_s": round(build, 1),
        "p50_ms": round(percentile(times, 0.5), 3),
        "p95_ms": round(percentile(times, 0.95), 3),
    }


def measure_size(
    mem: Memory, size: int, pool_texts: list[str], pool_vectors: np.ndarray, query_texts: list[str]
) -> dict[str, Any]:
    """Build a store of ``size`` memories and time searches on it (one row of the report)."""
    started = time.perf_counter()
    vectors = build_store(mem, size, pool_texts, pool_vectors, seed=size)
    build = time.perf_counter() - started
    mem.search("warm up the index", 10, record=False)
    row: dict[str, Any] = {"memories": size, "build_s": round(build, 1), "vectors": vectors}
    fresh = [f"{q} ({size}-{i})" for i, q in enumerate(query_texts)]  # never seen: embedded in the timing
    times = time_queries(mem, fresh, "hybrid")
    row["hybrid+embedding"] = {
        "p50_ms": round(percentile(times, 0.5), 3),
        "p95_ms": round(percentile(times, 0.95), 3),
    }
    for query in query_texts:  # warm the query-embedding cache: the rows below exclude the model
        mem.search(query, 1, mode="vector", record=False)
    for mode in ("hybrid", "vector", "keyword"):
        times = time_queries(mem, query_texts, mode)
        row[mode] = {
            "p50_ms": round(percentile(times, 0.5), 3),
            "p95_ms": round(percentile(times, 0.95), 3),
            "mean_ms": round(statistics.fmean(times), 3),
        }
    assert mem.embedder is not None
    embed_times = []
    for text in query_texts[:50]:
        t = time.perf_counter()
        mem.embedder.embed_batch([text + " ?"])  # uncached
        embed_times.append((time.perf_counter() - t) * 1000)
    row["query_embedding"] = {
        "p50_ms": round(percentile(embed_times, 0.5), 3),
        "p95_ms": round(percentile(embed_times, 0.95), 3),
    }
    row["peak_rss_mb"] = round(peak_rss_mb(), 1)
    return row


def run(
    sizes: Sequence[int],
    *,
    queries: int = 200,
    chroma: bool = True,
    pool: int = 2000,
    ingest_turns: int = 400,
    postgres: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Every figure for SQLite, and (with ``postgres``, a URL) the same for PostgreSQL in the same run;
    ``progress(done, total)`` after each step."""
    steps = 1 + len(sizes)
    workdir = Path(tempfile.mkdtemp(prefix="narrative-latency-"))
    rng = random.Random(11)
    report: dict[str, Any] = {
        "ingest": ingest.measure(workdir, ingest_turns, progress) if ingest_turns else None,
        "ingest_by_store": [
            measure_ingest(workdir, ingest_turns, e, url)
            for url in [None, postgres]
            if postgres
            for e in ("minilm", "none")
        ]
        if postgres and ingest_turns
        else [],
        "sizes": [],
    }
    if not sizes:
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
    if progress is not None:
        progress(1, steps)
    for step, size in enumerate(sizes, start=2):
        for url in [None, postgres] if postgres else [None]:
            target = url or workdir / f"store-{size}.db"
            if url:
                forget_user(url, f"bench-{size}")
            with Memory(target, user=f"bench-{size}") as mem:
                row = measure_size(mem, size, pool_texts, pool_vectors, query_texts)
            row["store"] = "postgres" if url else "sqlite"
            row["chroma"] = time_chroma(row.pop("vectors"), query_vectors, workdir) if chroma and not url else None
            report["sizes"].append(row)
        if progress is not None:
            progress(step, steps)
    return report


def format_report(report: dict[str, Any]) -> str:
    lines = [] if report["ingest"] is None else [ingest.format_report(report["ingest"]), ""]
    if report.get("ingest_by_store"):
        lines.append("Ingest by store, the same turns through the write path:")
        for row in report["ingest_by_store"]:
            lines.append(
                f"  {row['store']:<8} embedder {row['embedder']:<7} {row['turns']} turns in {row['seconds']} s"
                f" = {row['turns_per_s']} turns/s"
            )
        lines.append("")
    if not report["sizes"]:
        return "\n".join(lines)
    lines += [
        "Recall latency, k=10 ('hybrid+embedding' embeds every query; the mode rows reuse cached query vectors):",
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
        chroma = row["chroma"]
        if chroma:
            lines.append(
                f"{row['memories']:>9} {'chromadb vector':<16} {chroma['p50_ms']:>8.2f} {chroma['p95_ms']:>8.2f}"
            )
            ratio = chroma["p95_ms"] / row["vector"]["p95_ms"] if row["vector"]["p95_ms"] else float("nan")
            lines.append(f"{row['memories']:>9} ratio chroma/narrative vector p95 = {ratio:.2f}×")
        lines.append(f"{head} peak RSS {row['peak_rss_mb']} MB; built in {row['build_s']} s")
    return "\n".join(lines)
