"""Exact (numpy) against HNSW (hnswlib) for the SQLite store's in-process vector index.

    python bench/vector_index.py --n 10000,100000 --dims 384

For each size: clustered random vectors (Gaussian blobs around random
centres, normalised, roughly like sentence embeddings of related texts), one
user, the same data loaded into ``VectorIndex(backend="exact")`` and
``VectorIndex(backend="hnsw")``.  Measures bulk add throughput (batches of
1,000, as a rebuild from the database does), single-row add latency (the write
path), search p50/p95 for k=50 without and with an ``allowed`` filter, and
recall@10 against the exact answer.  Prints one table per size with the
HNSW/exact ratio.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import numpy.typing as npt

from narrative.store.vector_index import Backend, VectorIndex

Matrix = npt.NDArray[np.float32]
USER = "bench"


@dataclass
class Result:
    backend: str
    figures: dict[str, float] = field(default_factory=dict)


def clustered(n: int, dims: int, rng: np.random.Generator, centres: Matrix, spread: float) -> Matrix:
    """``n`` normalised points scattered around randomly chosen ``centres``."""
    picks = rng.integers(0, len(centres), size=n)
    points = centres[picks] + rng.normal(scale=spread, size=(n, dims)).astype(np.float32)
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points.astype(np.float32)


def percentile(samples: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples), q)) * 1e3


def timed(calls: Sequence[Callable[[], object]]) -> list[float]:
    times = []
    for call in calls:
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def exact_top(data: Matrix, ids: npt.NDArray[np.int64], query: Matrix, k: int, rows: npt.NDArray[np.int64]) -> set[int]:
    scores = data[rows] @ query
    best = np.argsort(-scores)[:k]
    return {int(i) for i in ids[rows][best]}


def recall(
    index: VectorIndex, data: Matrix, ids: npt.NDArray[np.int64], queries: Matrix, allowed: set[int] | None
) -> float:
    rows = np.arange(len(ids)) if allowed is None else np.flatnonzero(np.isin(ids, list(allowed)))
    found = 0
    for query in queries:
        truth = exact_top(data, ids, query, 10, rows)
        got = {i for i, _ in index.search(USER, query, 10, allowed)}
        found += len(truth & got)
    return found / (10 * len(queries))


def run_backend(
    backend: Backend, data: Matrix, ids: npt.NDArray[np.int64], queries: Matrix, args: argparse.Namespace
) -> Result:
    result = Result(backend)
    index = VectorIndex(
        data.shape[1], backend=backend, ef_search=args.ef, ef_construction=args.ef_construction, m=args.m
    )
    bulk = len(data) - args.singles
    start = time.perf_counter()
    for offset in range(0, bulk, 1000):
        stop = min(offset + 1000, bulk)
        index.add(ids[offset:stop].tolist(), [USER] * (stop - offset), data[offset:stop])
    result.figures["bulk add (vectors/s)"] = bulk / (time.perf_counter() - start)
    singles = [partial(index.add, [int(ids[row])], [USER], data[row : row + 1]) for row in range(bulk, len(data))]
    result.figures["single add p50 (ms)"] = percentile(timed(singles), 50)
    allowed = set(random.Random(7).sample(ids.tolist(), max(1, int(len(ids) * args.selectivity))))
    for label, filt in (("no filter", None), (f"allowed {args.selectivity:.0%}", allowed)):
        for query in queries[:5]:  # warm up
            index.search(USER, query, args.k, filt)
        times = timed([partial(index.search, USER, query, args.k, filt) for query in queries])
        result.figures[f"search k={args.k} {label} p50 (ms)"] = percentile(times, 50)
        result.figures[f"search k={args.k} {label} p95 (ms)"] = percentile(times, 95)
        result.figures[f"recall@10 {label}"] = recall(index, data, ids, queries, filt)
    return result


def print_table(n: int, dims: int, results: list[Result]) -> None:
    exact, hnsw = results
    print(f"\nn={n:,} dims={dims}")
    print(f"{'metric':<34}{'exact':>12}{'hnsw':>12}{'hnsw/exact':>12}")
    for metric, value in exact.figures.items():
        other = hnsw.figures[metric]
        ratio = other / value if value else float("nan")
        print(f"{metric:<34}{value:>12.3f}{other:>12.3f}{ratio:>12.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", default="10000,100000", help="comma-separated index sizes")
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=50)
    parser.add_argument("--ef", type=int, default=64, help="ef_search for the HNSW backend")
    parser.add_argument("--ef-construction", type=int, default=64, help="ef_construction for the HNSW backend")
    parser.add_argument("--m", type=int, default=16, help="M (graph degree) for the HNSW backend")
    parser.add_argument("--spread", type=float, default=0.9, help="cluster noise; larger is harder for HNSW")
    parser.add_argument("--selectivity", type=float, default=0.1, help="share of ids in the allowed filter")
    parser.add_argument("--singles", type=int, default=200, help="rows added one at a time after the bulk load")
    args = parser.parse_args()
    rng = np.random.default_rng(42)
    for n in (int(part) for part in args.n.split(",")):
        centres = rng.normal(size=(max(16, n // 200), args.dims)).astype(np.float32)
        data = clustered(n, args.dims, rng, centres, args.spread)
        queries = clustered(args.queries, args.dims, rng, centres, args.spread)
        ids = np.arange(1, n + 1, dtype=np.int64)
        results = [run_backend(backend, data, ids, queries, args) for backend in ("exact", "hnsw")]
        print_table(n, args.dims, results)


if __name__ == "__main__":
    main()
