"""HTTP throughput of the API on loopback: search (with and without recording the use) and an auth-only call.

    python bench/interfaces_http.py --memories 10000 --clients 4 --seconds 10 --embedder hashing

Builds one user's store of synthetic memories (batched straight into the store, with vectors
from the chosen embedder), then starts the real command ``narrative serve`` in a subprocess
(so the server does not share this process's GIL) and drives it from ``--clients`` threads,
each with one keep-alive ``http.client`` connection, for ``--seconds`` per row.  Prints
requests/s and latency percentiles per row.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import narrative
from narrative import model

USER = "bench"
WORDS = (
    "garden",
    "volunteer",
    "watering",
    "plot",
    "compost",
    "seed",
    "swap",
    "rota",
    "badge",
    "map",
    "offline",
    "database",
    "sqlite",
    "firebase",
    "sister",
    "wedding",
    "speech",
    "lisbon",
    "porto",
    "bicycle",
    "route",
    "budget",
    "invoice",
    "meeting",
    "deadline",
    "review",
    "design",
    "notification",
    "schedule",
    "tomato",
    "raised",
    "bed",
    "soil",
    "clay",
    "measurement",
    "release",
    "bug",
    "test",
    "deploy",
    "server",
    "laptop",
    "train",
    "ticket",
    "recipe",
    "bread",
    "soup",
    "birthday",
    "gift",
    "doctor",
    "appointment",
    "insurance",
    "rent",
    "landlord",
    "kitchen",
    "paint",
    "shelf",
    "book",
    "chapter",
    "essay",
    "draft",
    "editor",
    "conference",
    "slides",
    "talk",
    "mentor",
    "interview",
    "salary",
    "contract",
    "holiday",
    "flight",
)


def sentence(rng: random.Random) -> str:
    picked = rng.sample(WORDS, 7)
    return (
        f"{picked[0].title()} {picked[1]} needs the {picked[2]} before the {picked[3]}; "
        f"we talked about {picked[4]}, {picked[5]} and {picked[6]}."
    )


def build(db: Path, count: int, embedder: str, seed: int = 7) -> str:
    """Fill ``db`` with ``count`` memories for USER; returns an API key for them."""
    rng = random.Random(seed)
    engine = narrative.Memory(db, user=USER, embedder=embedder, env={})
    start = datetime(2025, 1, 1, tzinfo=UTC)
    streams = [model.Stream.FACT, model.Stream.DECISION, model.Stream.CONVERSATION, model.Stream.RESEARCH]
    engine.your_story()  # creates the user
    for offset in range(0, count, 1000):
        texts = [sentence(rng) for _ in range(min(1000, count - offset))]
        with engine.store.transaction():
            stored = [
                engine.store.insert_memory(
                    model.MemoryItem(
                        id=0,
                        user_id=USER,
                        stream=streams[i % len(streams)],
                        source=model.Source.AGENT,
                        content=text,
                        importance=1 + i % 5,
                        created_at=start + timedelta(minutes=offset + i),
                    )
                )
                for i, text in enumerate(texts)
            ]
            if engine.embedder is not None:
                vectors = engine.embedder.embed_batch(texts)
                engine.store.put_memory_vectors(
                    USER, engine.embedder.identity, {m.id: vectors[i] for i, m in enumerate(stored)}
                )
    key = engine.create_api_key(label="bench")
    engine.close()
    return key


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_server(db: Path, embedder: str, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NARRATIVE_")}
    command = [
        sys.executable,
        "-m",
        "narrative.interfaces.cli",
        "--db",
        str(db),
        "--embedder",
        embedder,
        "serve",
        "--port",
        str(port),
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return process
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(process.stderr.read().decode() if process.stderr else "server exited") from None
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("server did not start")


@dataclass
class Row:
    name: str
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    elapsed: float = 0.0

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.elapsed if self.elapsed else 0.0

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] * 1e3 if ordered else 0.0


def drive(port: int, key: str, row: Row, paths: list[str], clients: int, seconds: float) -> None:
    """``clients`` threads, one keep-alive connection each, cycling through ``paths`` for ``seconds``."""
    lock = threading.Lock()
    stop = time.perf_counter() + seconds
    headers = {"Authorization": f"Bearer {key}"}

    def client(index: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine: list[float] = []
        errors = 0
        i = index
        while time.perf_counter() < stop:
            path = paths[i % len(paths)]
            i += clients
            began = time.perf_counter()
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                errors += 1
            mine.append(time.perf_counter() - began)
        conn.close()
        with lock:
            row.latencies += mine
            row.errors += errors

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    row.elapsed = time.perf_counter() - began


def in_process(db: Path, embedder: str, queries: list[str], k: int, seconds: float) -> Row:
    """The same searches straight on the engine, one thread: what HTTP adds is the difference."""
    row = Row(f"engine.search k={k} in-process, 1 thread")
    engine = narrative.Memory(db, user=USER, embedder=embedder, env={})
    engine.search(queries[0], k, record=False)
    began = time.perf_counter()
    i = 0
    while time.perf_counter() - began < seconds:
        start = time.perf_counter()
        engine.search(queries[i % len(queries)], k, record=False)
        row.latencies.append(time.perf_counter() - start)
        i += 1
    row.elapsed = time.perf_counter() - began
    engine.close()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--embedder", choices=["hashing", "minilm", "none"], default="hashing")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--db", type=Path, default=None, help="Reuse/keep the store here (default: a temp dir).")
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON too.")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        db = args.db or Path(scratch) / "bench.db"
        began = time.perf_counter()
        key = build(db, args.memories, args.embedder)
        built = time.perf_counter() - began
        rng = random.Random(11)
        words = [(rng.choice(WORDS), rng.choice(WORDS)) for _ in range(200)]
        baseline = in_process(db, args.embedder, [f"{a} {b}" for a, b in words], args.k, args.seconds)
        queries = [f"{a}%20{b}" for a, b in words]
        port = free_port()
        server = start_server(db, args.embedder, port)
        try:
            rows = [
                Row("GET /api/v1/me (auth + counts)"),
                Row(f"GET /api/v1/search k={args.k} record=false"),
                Row(f"GET /api/v1/search k={args.k} record=true (records a use)"),
            ]
            paths = [
                ["/api/v1/me"],
                [f"/api/v1/search?q={q}&k={args.k}&record=false" for q in queries],
                [f"/api/v1/search?q={q}&k={args.k}&record=true" for q in queries],
            ]
            drive(port, key, Row("warm-up"), paths[1][:8], 1, 3.0)  # loads the embedder in the server
            for row, row_paths in zip(rows, paths, strict=True):
                drive(port, key, row, row_paths, args.clients, args.seconds)
        finally:
            server.terminate()
            server.wait(timeout=30)

    print(
        f"\nnarrative HTTP on loopback: {args.memories:,} memories, embedder {args.embedder}, "
        f"{args.clients} keep-alive clients, {args.seconds:g} s per row (store built in {built:.1f} s)\n"
    )
    print(f"{'request':<44} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'errors':>7}")
    for row in [baseline, *rows]:
        print(
            f"{row.name:<44} {row.rate:>8.1f} {row.pct(50):>8.2f} {row.pct(95):>8.2f} {row.pct(99):>8.2f} "
            f"{row.errors:>7}"
        )
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "request": r.name,
                        "rps": round(r.rate, 1),
                        "p50_ms": round(r.pct(50), 2),
                        "p95_ms": round(r.pct(95), 2),
                        "mean_ms": round(statistics.fmean(r.latencies) * 1e3, 2) if r.latencies else None,
                        "errors": r.errors,
                    }
                    for r in [baseline, *rows]
                ],
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
