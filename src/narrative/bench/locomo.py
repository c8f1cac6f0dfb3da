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
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from narrative.bench import replay
from narrative.bench import turns as shown_text
from narrative.bench.hits import DEPTH, filled, message_turns, shown
from narrative.engine import Memory, Turn

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
KS = (5, 10, 25, 50)
MODES = ("hybrid", "keyword", "vector")
CATEGORY_ORDER = ("multi-hop", "temporal", "open-domain", "single-hop", "adversarial", "overall")
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


def ingest(mem: Memory, sample: dict[str, Any]) -> replay.Ingested:
    """Replay one LoCoMo conversation through the write path; timing covers the turns only."""
    result = replay.Ingested()
    for _number, date, turns in sessions(sample):
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
        replay.replay(mem, date, batch, date + timedelta(seconds=30 * len(turns)), result, "dia_id")
    replay.count_memories(mem, result)
    return result


def dia_map(mem: Memory) -> dict[int, str]:
    return {m.id: str(m.meta.get("dia_id", "")) for m in mem.messages()}


def turn_map(mem: Memory) -> dict[int, shown_text.Turn]:
    """Message id -> the turn as a conversation memory writes it ("speaker: words"), named by its dia_id."""
    return message_turns(mem, "dia_id")


def evaluate(mem: Memory, sample: dict[str, Any], modes: Sequence[str] = MODES) -> list[dict[str, Any]]:
    """Per question: the default search, the tuned path and the baselines by turns shown and by text budget;
    memory-level recall@k of the tuned path in each mode (the secondary table)."""
    dia_of = dia_map(mem)
    turn_of = turn_map(mem)
    baselines = shown_text.Baselines(list(turn_of.values()), mem.embedder)
    rows = []
    for qa in sample["qa"]:
        wanted = evidence_ids(qa.get("evidence", []))
        if not wanted:
            continue
        question = str(qa["question"])
        row: dict[str, Any] = {"category": int(qa.get("category", 0)), "recall": {}, "latency_ms": {}, "turns": {}}
        started = time.perf_counter()
        default = mem.search(question, DEPTH, record=False)
        row["latency_ms"]["default"] = (time.perf_counter() - started) * 1000
        ranked = {"default": shown(default, turn_of)}
        filling = {"default": filled(mem, question, default, turn_of)}
        row["returned"] = len(default)
        for mode in modes:
            started = time.perf_counter()
            hits = mem.search(question, max(KS), mode=mode, streams=TURN_STREAMS, record=False)
            row["latency_ms"][mode] = (time.perf_counter() - started) * 1000
            found_by_rank = [{dia_of.get(i, "") for i in hit.memory.message_ids} for hit in hits]
            if mode == "hybrid":
                ranked["tuned"] = shown(hits, turn_of)
                filling["tuned"] = filled(mem, question, hits, turn_of, mode="hybrid", streams=TURN_STREAMS)
                row["turns_in_top10"] = len(set().union(*found_by_rank[:10]) - {""}) if found_by_rank else 0
            row["recall"][mode] = {
                k: len(wanted & set().union(*found_by_rank[:k])) / len(wanted) if found_by_rank else 0.0 for k in KS
            }
        ranked.update(baselines.rankings(question))
        row["turns"] = shown_text.score_paths(ranked, filling, wanted)  # the engine's budget measures, filled
        row["duplicates"] = {
            name: shown_text.duplicates(ranked[name]) for name in ("default", "tuned") if name in ranked
        }
        row["restated"] = {name: shown_text.restated(ranked[name]) for name in ("default", "tuned") if name in ranked}
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


def summarise_turns(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per ranking (default, tuned, baselines): turn and budget recall per category and overall."""
    return shown_text.group_table(rows, lambda row: CATEGORIES.get(row["category"], str(row["category"])))


def _mean(rows: Sequence[dict[str, Any]], measure: str, name: str) -> float:
    return round(float(sum(r[measure][name] for r in rows)) / max(1, len(rows)), 4)


def run(
    path: str | Path,
    *,
    embedder: str = "minilm",
    limit: int | None = None,
    keep: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    db: str | None = None,
) -> dict[str, Any]:
    """The whole benchmark over every conversation of ``path``; returns the report.

    Each conversation gets its own SQLite file, or, with ``db`` (a ``postgresql://`` URL),
    its own user in that database (emptied first).
    ``progress(done, total)`` is called after each conversation is ingested and after it is evaluated.
    """
    data = json.loads(Path(path).read_text("utf-8"))
    samples = data if isinstance(data, list) else [data]
    if limit is not None:
        samples = samples[:limit]
    rows: list[dict[str, Any]] = []
    ingests = []
    with replay.workdir(keep, "narrative-locomo-") as folder:
        for index, sample in enumerate(samples):
            name = str(sample.get("sample_id", f"sample-{index}"))
            with replay.fresh_memory(folder, name, embedder, db) as mem:
                ingests.append((name, ingest(mem, sample)))
                if progress is not None:
                    progress(2 * index + 1, 2 * len(samples))
                rows += evaluate(mem, sample)
                if progress is not None:
                    progress(2 * index + 2, 2 * len(samples))
    total_turns = sum(i.turns for _, i in ingests)
    seconds = sum(i.seconds for _, i in ingests)
    turn_table = summarise_turns(rows)
    return {
        "file": str(path),
        "store": "postgres" if db else "sqlite",
        "conversations": len(samples),
        "questions": len(rows),
        "ingest": {
            "turns": total_turns,
            "seconds": round(seconds, 2),
            "turns_per_s": round(total_turns / seconds, 1) if seconds else None,
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
        "turns": turn_table,
        "ratios": {path_name: shown_text.ratios(turn_table, path_name) for path_name in ("default", "tuned") if rows},
        "duplicates_top10": {name: _mean(rows, "duplicates", name) for name in ("default", "tuned")},
        "restated_top10": {name: _mean(rows, "restated", name) for name in ("default", "tuned")},
        "default_returned": {
            "mean": round(sum(r["returned"] for r in rows) / max(1, len(rows)), 2),
            "empty": sum(1 for r in rows if r["returned"] == 0),
        },
        "recall": summarise(rows),
        "hybrid_top10_distinct_turns": round(sum(r.get("turns_in_top10", 0) for r in rows) / max(1, len(rows)), 2),
        "search_ms": {
            name: shown_text.percentiles([r["latency_ms"][name] for r in rows]) for name in ("default", "hybrid")
        },
    }


def format_report(report: dict[str, Any]) -> str:
    lines = [
        f"LoCoMo retrieval — {report['file']}: {report['conversations']} conversations, "
        f"{report['questions']} questions",
        f"ingest: {report['ingest']['turns']} turns in {report['ingest']['seconds']} s "
        f"= {report['ingest']['turns_per_s']} turns/s (write path incl. embeddings)",
        f"search latency: default p50 {report['search_ms']['default']['p50']} ms, "
        f"p95 {report['search_ms']['default']['p95']} ms; tuned hybrid p50 {report['search_ms']['hybrid']['p50']} ms",
        "",
        "What a model reads. T@k: evidence among the first k distinct turns the results show;",
        "B@n: evidence in the results that fit within n tokens. default = Memory.search(question) as shipped;",
        "tuned = hybrid over the conversation, decision and research streams; bm25, minilm, rrf = single turns.",
        "",
    ]
    keys = shown_text.MEASURES
    header = f"{'path':<8} {'category':<12} {'n':>4} " + " ".join(f"{key:>6}" for key in keys)
    lines += [header, "-" * len(header)]
    for name, table in report["turns"].items():
        for category in CATEGORY_ORDER if name in ("default", "tuned") else ("overall",):
            if category in table:
                row = table[category]
                lines.append(f"{name:<8} {category:<12} {row['n']:>4} " + " ".join(f"{row[k]:>6.3f}" for k in keys))
        lines.append("")
    for name, ratio in report["ratios"].items():
        parts = "  ".join(f"{k} ×{r['ratio']:.2f} ({r['best_baseline']})" for k, r in ratio.items() if r["ratio"])
        lines.append(f"{name} vs best single-turn baseline: {parts}")
    dup, again = report["duplicates_top10"], report["restated_top10"]
    lines.append(
        f"duplicates in the top 10 (all source turns already shown above): default {dup['default']:.3f}, "
        f"tuned {dup['tuned']:.3f}"
    )
    lines.append(
        f"restated in the top 10 (≥ 80 % of the text's word 3-grams shown above, summaries included): "
        f"default {again['default']:.3f}, tuned {again['tuned']:.3f}"
    )
    ret = report["default_returned"]
    lines.append(f"default search returned {ret['mean']} results on average; {ret['empty']} questions got none")
    lines += ["", "Secondary: memory-level recall@k of the tuned path (comparable with earlier reports)", ""]
    lines += _memory_table(report)
    return "\n".join(lines)


def _memory_table(report: dict[str, Any]) -> list[str]:
    header = f"{'mode':<8} {'category':<12} {'n':>4} " + " ".join(f"{'R@' + str(k):>6}" for k in KS)
    lines = [header, "-" * len(header)]
    for mode, table in report["recall"].items():
        for name in CATEGORY_ORDER:
            if name in table:
                row = table[name]
                values = " ".join(f"{row['R@' + str(k)]:>6.3f}" for k in KS)
                lines.append(f"{mode:<8} {name:<12} {row['n']:>4} {values}")
        lines.append("")
    hybrid = report["recall"]["hybrid"]["overall"]
    for base in ("keyword", "vector"):
        other = report["recall"][base]["overall"]
        ratios_text = "  ".join(
            f"R@{k} ×{hybrid['R@' + str(k)] / other['R@' + str(k)]:.2f}" if other["R@" + str(k)] else f"R@{k} n/a"
            for k in KS
        )
        lines.append(f"hybrid vs {base}-only: {ratios_text}")
    lines.append(f"a top-10 tuned result covers {report['hybrid_top10_distinct_turns']} distinct turns on average")
    return lines


def compare(sqlite: dict[str, Any], postgres: dict[str, Any]) -> dict[str, Any]:
    """Both stores' overall recall side by side, and the largest gap in points (100 × recall)."""
    rows = {}
    gap = 0.0
    for mode in sqlite["recall"]:
        mine, theirs = sqlite["recall"][mode]["overall"], postgres["recall"][mode]["overall"]
        rows[mode] = {f"R@{k}": (mine[f"R@{k}"], theirs[f"R@{k}"]) for k in KS}
        gap = max([gap, *(abs(a - b) * 100 for a, b in rows[mode].values())])
    for path in ("default", "tuned"):
        mine, theirs = sqlite["turns"][path]["overall"], postgres["turns"][path]["overall"]
        rows[path] = {key: (mine[key], theirs[key]) for key in mine if key != "n"}
        gap = max([gap, *(abs(a - b) * 100 for a, b in rows[path].values())])
    return {"sqlite": sqlite, "postgres": postgres, "overall": rows, "max_gap_points": round(gap, 2)}


def format_comparison(report: dict[str, Any]) -> str:
    lines = [
        format_report(report["sqlite"]),
        "",
        "— the same run on PostgreSQL —",
        format_report(report["postgres"]),
        "",
        "overall recall, sqlite / postgres:",
    ]
    for mode, row in report["overall"].items():
        lines.append(f"{mode:<8} " + "  ".join(f"{k} {a:.3f}/{b:.3f}" for k, (a, b) in row.items()))
    lines.append(f"largest gap: {report['max_gap_points']} points")
    return "\n".join(lines)
