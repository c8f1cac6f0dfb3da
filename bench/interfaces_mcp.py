"""MCP tool-call latency for ``recall`` and ``get_context`` at 10k memories, over stdio.

    python bench/interfaces_mcp.py                      # builds bench/results/mcp-10000.db once, then reuses it
    python bench/interfaces_mcp.py --memories 10000 --queries 100

The store is the synthetic one of ``bench/context.py`` (same builder, same questions: realistic
sessions over a dozen topics replayed through ``remember_many`` with MiniLM embeddings in batches),
cached under ``bench/results/`` (gitignored).  The server runs as a real subprocess
(``python -m narrative.interfaces.cli --db … --user bench mcp``) on a copy of the cached store, and
the official SDK client (``stdio_client`` + ``ClientSession``) times each ``tools/call`` end to end:
JSON-RPC over pipes, argument validation, the engine call, serialisation of the result.

Two passes per tool: cold (each question seen for the first time: the server embeds it) and warm
(the same questions again: the query embedding is cached).  For comparison each call is also timed
in-process on the engine (``Memory.recall`` / ``Memory.context``) right after its MCP twin, so both
see the same machine load and the table shows what MCP adds (transport, validation, serialisation).
"""

from __future__ import annotations

import argparse
import functools
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import narrative
from narrative.providers.embed import MiniLMEmbedder

sys.path.insert(0, str(Path(__file__).resolve().parent))
from context import build, questions  # bench/context.py: the shared synthetic store

USER = "bench"
RESULTS = Path(__file__).resolve().parent / "results"
MAX_QUERIES = 120  # two tools × this many distinct questions must fit the shared question space
Timings = dict[str, list[float]]


def ensure_store(db: Path, memories: int, seed: int) -> int:
    """Build the store through the engine (batched MiniLM embeddings) unless the cached file is big enough."""
    db.parent.mkdir(parents=True, exist_ok=True)
    with narrative.Memory(db, user=USER, embedder=MiniLMEmbedder(batch_size=64, num_threads=2), env={}) as mem:
        have = mem.store.count_rows("memories", USER)
        if have < memories:
            print(f"building {db} up to {memories} memories (a few minutes, once)…", flush=True)
            built = build(mem, memories, seed)
            print(f"built in {built['seconds']:.0f} s", flush=True)
        return mem.store.count_rows("memories", USER)


def copy_store(source: Path, target: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{source}{suffix}").exists():
            shutil.copyfile(f"{source}{suffix}", f"{target}{suffix}")
    return target


async def measure(
    served: Path, local: Path, calls: Sequence[tuple[str, dict[str, Any]]]
) -> tuple[list[float], list[float], list[int]]:
    """Each call over MCP (a fresh stdio server on ``served``) and then in-process on the engine (on
    ``local``, a second copy: two processes writing uses to one file would flush each other's page
    cache), interleaved so that both see the same machine load; wall times (ms), MCP response sizes."""
    import torch

    torch.set_num_threads(1)  # as the server's default embedder
    args = ["-m", "narrative.interfaces.cli", "--db", str(served), "--user", USER, "mcp"]
    params = StdioServerParameters(command=sys.executable, args=args)
    over_mcp: list[float] = []
    direct: list[float] = []
    sizes: list[int] = []
    with narrative.Memory(local, user=USER, env={}) as mem:
        engine: dict[str, Callable[..., Any]] = {
            "recall": lambda query, k: mem.recall(query, k, depth=1),
            "get_context": lambda query, budget=2000: mem.context(query, budget),
        }
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            for name, arguments in (("recall", {"query": "warm up", "k": 1}), ("get_context", {"query": "warm up"})):
                await session.call_tool(name, arguments, read_timeout_seconds=300)  # loads the model once
                engine[name](**arguments)
            for name, arguments in calls:
                start = time.perf_counter()
                result = await session.call_tool(name, arguments, read_timeout_seconds=60)
                over_mcp.append((time.perf_counter() - start) * 1e3)
                if result.is_error:
                    raise SystemExit(f"{name} failed: {result.content}")
                sizes.append(sum(len(getattr(block, "text", "")) for block in result.content))
                start = time.perf_counter()
                engine[name](**arguments)
                direct.append((time.perf_counter() - start) * 1e3)
    return over_mcp, direct, sizes


def plan(qs: list[str], k: int, budget: int) -> list[tuple[str, dict[str, Any]]]:
    """Cold pass then warm pass, recall and get_context alternating; each tool has its own questions
    (even ones for recall, odd ones for get_context), so a cold call never finds its query embedded."""
    pairs = zip(qs[0::2], qs[1::2], strict=True)
    one: list[tuple[str, dict[str, Any]]] = []
    for r, g in pairs:
        one += [("recall", {"query": r, "k": k}), ("get_context", {"query": g, "budget": budget})]
    return one + one


def split(times: list[float], n: int) -> Timings:
    """Back into (tool, pass) series: the plan is [cold: r, c, r, c, …][warm: r, c, …]."""
    half = 2 * n
    return {
        "recall cold": times[0:half:2],
        "get_context cold": times[1:half:2],
        "recall warm": times[half::2],
        "get_context warm": times[half + 1 :: 2],
    }


def row(name: str, mcp: list[float], direct: list[float], size: float) -> str:
    p50, p95 = statistics.median(mcp), float(np.percentile(np.asarray(mcp), 95))
    d50, d95 = statistics.median(direct), float(np.percentile(np.asarray(direct), 95))
    return (
        f"{name:<20}{len(mcp):>5}{p50:>9.1f}{p95:>9.1f}{max(mcp):>9.1f}{d50:>11.1f}{d95:>9.1f}{p50 - d50:>10.1f}"
        f"{size / 1024:>9.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=10_000, help="store size (built once, then cached)")
    parser.add_argument("--queries", type=int, default=100, help="distinct questions per tool and pass")
    parser.add_argument("--k", type=int, default=10, help="recall: hits per call")
    parser.add_argument("--budget", type=int, default=2000, help="get_context: token budget")
    parser.add_argument("--db", default=None, help="cached store (default bench/results/mcp-<memories>.db)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if not 1 <= args.queries <= MAX_QUERIES:
        parser.error(f"--queries must be 1..{MAX_QUERIES} (bench/context.py has about 280 distinct questions)")

    cached = Path(args.db) if args.db else RESULTS / f"mcp-{args.memories}.db"
    have = ensure_store(cached, args.memories, args.seed)
    qs = questions(random.Random(args.seed + 1), 2 * args.queries)
    calls = plan(qs, args.k, args.budget)
    with tempfile.TemporaryDirectory() as tmp:
        # copies: the uses the calls record stay out of the cached store
        served, local = copy_store(cached, Path(tmp, "served.db")), copy_store(cached, Path(tmp, "local.db"))
        print(f"store {cached}: {have} memories; {len(calls)} tool calls over stdio…", flush=True)
        mcp_times, direct_times, sizes = anyio.run(functools.partial(measure, served, local, calls))
    mcp, direct = split(mcp_times, args.queries), split(direct_times, args.queries)
    size = split([float(s) for s in sizes], args.queries)

    print()
    print(f"MCP tools/call over stdio at {have} memories (ms; in-process engine call for comparison)")
    print(f"{'call':<20}{'n':>5}{'p50':>9}{'p95':>9}{'max':>9}{'engine p50':>11}{'p95':>9}{'MCP adds':>10}{'KiB':>9}")
    for name in mcp:
        print(row(name, mcp[name], direct[name], statistics.mean(size[name])))


if __name__ == "__main__":
    main()
