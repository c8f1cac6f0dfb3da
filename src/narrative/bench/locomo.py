"""LoCoMo retrieval benchmark through the real write and read paths.

For each conversation of a LoCoMo-format file: a fresh store; every session
becomes a conversation started at the session's date; every turn goes through
``remember_many`` (speaker kept, image captions kept as text, the turn's
``dia_id`` in the message metadata); each session is closed (and confirmed when
the close path is there).  Then every question runs through ``search`` in three
modes — hybrid, keyword only (BM25) and vector only — and the returned
memories are mapped back to dia_ids through their provenance (memory →
source messages → ``dia_id``).  Recall@k per question is the fraction of its
evidence dia_ids found in the top k memories (the official LoCoMo retrieval
metric); reported per category and overall.

Only memories whose provenance is a single turn's messages take part
(streams conversation, decision, research): narrative links and reflections
cover whole sessions, and counting every turn they summarise as "found" would
inflate recall without putting the evidence text in front of a model.
Nothing reads the questions or the evidence while ingesting.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from narrative.engine import Memory, Turn

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
KS = (5, 10, 25, 50)
MODES = ("hybrid", "keyword", "vector")
TURN_STREAMS = ("conversation", "decision", "research")
_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M%p on %d %B, %Y")


def parse_session_date(text: str) -> datetime:
    cleaned = re.sub(r"\s+", " ", text.strip())
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(f"unrecognised LoCoMo session date {text!r}")


def evidence_ids(evidence: Sequence[str]) -> set[str]:
    """Evidence entries may hold several ids separated by ';' or spaces."""
    ids: set[str] = set()
    for entry in evidence:
        for part in re.split(r"[;\s]+", entry):
            if part.strip():
                ids.add(part.strip())
    return ids


def sessions(sample: dict[str, Any]) -> list[tuple[int, datetime, list[dict[str, Any]]]]:
    conversation = sample["conversation"]
    found = []
    for key, turns in conversation.items():
        match = re.fullmatch(r"session_(\d+)", key)
        if match and isinstance(turns, list) and turns:
            number = int(match.group(1))
            date = parse_session_date(conversation[f"session_{number}_date_time"])
            found.append((number, date, turns))
    return sorted(found)


def turn_text(turn: dict[str, Any]) -> str:
    text = str(turn.get("text", "")).strip()
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [shares a photo: {caption}]".strip()
    return text or "[no text]"


@dataclass
class Ingested:
    turns: int = 0
    seconds: float = 0.0
    storylines: int = 0
    narratives: int = 0
    memories_by_stream: dict[str, int] = field(default_factory=dict)


def ingest(mem: Memory, sample: dict[str, Any]) -> Ingested:
    """Replay one LoCoMo conversation through the write path; timing covers the turns only."""
    result = Ingested()
    for _number, date, turns in sessions(sample):
        mem.start_conversation(at=date)
        batch = [
            Turn(
                turn_text(t),
                "user",
                speaker=str(t.get("speaker", "")),
                at=date + timedelta(seconds=30 * i),
                meta={"dia_id": t.get("dia_id", "")},
            )
            for i, t in enumerate(turns)
        ]
        started = time.perf_counter()
        mem.remember_many(batch)
        result.seconds += time.perf_counter() - started
        result.turns += len(batch)
        end = date + timedelta(seconds=30 * len(turns))
        mem.close_conversation(at=end)
        if hasattr(mem, "confirm_memory"):
            mem.confirm_memory(at=end)
    result.storylines = len(mem.list_storylines())
    result.narratives = len(mem.list_narratives(limit=10_000))
    for memory in mem.list_memories(limit=100_000):
        result.memories_by_stream[memory.stream.value] = result.memories_by_stream.get(memory.stream.value, 0) + 1
    return result


def dia_map(mem: Memory) -> dict[int, str]:
    return {m.id: str(m.meta.get("dia_id", "")) for m in mem.messages()}


def evaluate(mem: Memory, sample: dict[str, Any], modes: Sequence[str] = MODES) -> list[dict[str, Any]]:
    """Per question and mode: recall@k for every k, and how many dia_ids the top 10 covered."""
    dia_of = dia_map(mem)
    rows = []
    for qa in sample["qa"]:
        wanted = evidence_ids(qa.get("evidence", []))
        if not wanted:
            continue
        row: dict[str, Any] = {"category": int(qa.get("category", 0)), "recall": {}, "latency_ms": {}}
        for mode in modes:
            started = time.perf_counter()
            hits = mem.search(str(qa["question"]), max(KS), mode=mode, streams=TURN_STREAMS, record=False)
            row["latency_ms"][mode] = (time.perf_counter() - started) * 1000
            found_by_rank = [{dia_of.get(i, "") for i in hit.memory.message_ids} for hit in hits]
            if mode == "hybrid":
                row["turns_in_top10"] = len(set().union(*found_by_rank[:10]) - {""}) if found_by_rank else 0
            row["recall"][mode] = {
                k: len(wanted & set().union(*found_by_rank[:k])) / len(wanted) if found_by_rank else 0.0 for k in KS
            }
        rows.append(row)
    return rows


def summarise(rows: Sequence[dict[str, Any]], modes: Sequence[str] = MODES) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for mode in modes:
        by_category: dict[str, list[dict[int, float]]] = defaultdict(list)
        for row in rows:
            by_category[CATEGORIES.get(row["category"], str(row["category"]))].append(row["recall"][mode])
            by_category["overall"].append(row["recall"][mode])
        table[mode] = {
            name: {"n": len(values), **{f"R@{k}": round(sum(v[k] for v in values) / len(values), 4) for k in KS}}
            for name, values in by_category.items()
        }
    return table


def run(
    path: str | Path,
    *,
    embedder: str = "minilm",
    limit: int | None = None,
    keep: str | None = None,
    db: str | None = None,
) -> dict[str, Any]:
    """The whole benchmark over every conversation of ``path``; returns the report.

    Each conversation gets its own SQLite file, or, with ``db`` (a ``postgresql://`` URL),
    its own user in that database (emptied first).
    """
    data = json.loads(Path(path).read_text("utf-8"))
    samples = data if isinstance(data, list) else [data]
    if limit is not None:
        samples = samples[:limit]
    rows: list[dict[str, Any]] = []
    ingests = []
    scratch = None if keep else tempfile.TemporaryDirectory(prefix="narrative-locomo-")
    workdir = Path(keep) if keep else Path(scratch.name)  # type: ignore[union-attr]
    workdir.mkdir(parents=True, exist_ok=True)
    for index, sample in enumerate(samples):
        name = str(sample.get("sample_id", f"sample-{index}"))
        target: str | Path = workdir / f"{name}.db"
        if db is None:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{target}{suffix}").unlink(missing_ok=True)
        else:
            target = db
            with Memory(db, user=name, embedder=embedder) as old:
                old.store.delete_user(name)
        with Memory(target, user=name, embedder=embedder) as mem:
            ingests.append((name, ingest(mem, sample)))
            rows += evaluate(mem, sample)
    if scratch is not None:
        scratch.cleanup()
    turns = sum(i.turns for _, i in ingests)
    seconds = sum(i.seconds for _, i in ingests)
    latencies = sorted(row["latency_ms"]["hybrid"] for row in rows)
    return {
        "file": str(path),
        "store": "postgres" if db else "sqlite",
        "conversations": len(samples),
        "questions": len(rows),
        "ingest": {
            "turns": turns,
            "seconds": round(seconds, 2),
            "turns_per_s": round(turns / seconds, 1) if seconds else None,
            "per_conversation": {
                name: {
                    "turns": i.turns,
                    "storylines": i.storylines,
                    "narratives": i.narratives,
                    "memories": i.memories_by_stream,
                }
                for name, i in ingests
            },
        },
        "recall": summarise(rows),
        "hybrid_top10_distinct_turns": round(sum(r.get("turns_in_top10", 0) for r in rows) / max(1, len(rows)), 2),
        "hybrid_search_ms": {
            "p50": round(latencies[len(latencies) // 2], 2) if latencies else None,
            "p95": round(latencies[int(len(latencies) * 0.95)], 2) if latencies else None,
        },
    }


def format_report(report: dict[str, Any]) -> str:
    lines = [
        f"LoCoMo retrieval — {report['file']}: {report['conversations']} conversations, "
        f"{report['questions']} questions",
        f"ingest: {report['ingest']['turns']} turns in {report['ingest']['seconds']} s "
        f"= {report['ingest']['turns_per_s']} turns/s (write path incl. embeddings)",
        f"hybrid search latency: p50 {report['hybrid_search_ms']['p50']} ms, "
        f"p95 {report['hybrid_search_ms']['p95']} ms",
        f"a top-10 hybrid result covers {report['hybrid_top10_distinct_turns']} distinct turns on average"
        " (a conversation memory is an exchange: the turn and the one it answers)",
        "",
    ]
    header = f"{'mode':<8} {'category':<12} {'n':>4} " + " ".join(f"{'R@' + str(k):>6}" for k in KS)
    lines.append(header)
    lines.append("-" * len(header))
    order = ["multi-hop", "temporal", "open-domain", "single-hop", "adversarial", "overall"]
    for mode, table in report["recall"].items():
        for name in order:
            if name in table:
                row = table[name]
                values = " ".join(f"{row['R@' + str(k)]:>6.3f}" for k in KS)
                lines.append(f"{mode:<8} {name:<12} {row['n']:>4} {values}")
        lines.append("")
    hybrid = report["recall"]["hybrid"]["overall"]
    for base in ("keyword", "vector"):
        other = report["recall"][base]["overall"]
        ratios = "  ".join(
            f"R@{k} ×{hybrid['R@' + str(k)] / other['R@' + str(k)]:.2f}" if other["R@" + str(k)] else f"R@{k} n/a"
            for k in KS
        )
        lines.append(f"hybrid vs {base}-only: {ratios}")
    return "\n".join(lines)


def compare(sqlite: dict[str, Any], postgres: dict[str, Any]) -> dict[str, Any]:
    """Both stores' overall recall side by side, and the largest gap in points (100 × recall)."""
    rows = {}
    gap = 0.0
    for mode in sqlite["recall"]:
        mine, theirs = sqlite["recall"][mode]["overall"], postgres["recall"][mode]["overall"]
        rows[mode] = {f"R@{k}": (mine[f"R@{k}"], theirs[f"R@{k}"]) for k in KS}
        gap = max([gap, *(abs(a - b) * 100 for a, b in rows[mode].values())])
    return {"sqlite": sqlite, "postgres": postgres, "overall": rows, "max_gap_points": round(gap, 2)}


def format_comparison(report: dict[str, Any]) -> str:
    lines = [format_report(report["sqlite"]), "", "— the same run on PostgreSQL —", format_report(report["postgres"]),
             "", "overall recall, sqlite / postgres:"]
    for mode, row in report["overall"].items():
        lines.append(f"{mode:<8} " + "  ".join(f"{k} {a:.3f}/{b:.3f}" for k, (a, b) in row.items()))
    lines.append(f"largest gap: {report['max_gap_points']} points")
    return "\n".join(lines)
