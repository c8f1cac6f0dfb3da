"""BEAM retrieval benchmark through the real write and read paths.

A BEAM folder holds one folder per chat, each with ``chat.json`` (batches of user ↔ assistant messages with
ids) and ``probing_questions.json`` (questions per ability, with the ids of the messages that answer them).

For each chat (folders sorted): a fresh store; every batch becomes one conversation, started at the batch's time
(its ``time_anchor``, else its first message's, else where the last batch ended); every message goes through
``remember_many`` with its role as given and its BEAM id in the metadata (``beam_id``), a minute after the one
before it or at its own ``time_anchor``; each conversation is closed and its memory confirmed.  Nothing reads the
questions while ingesting.

Then every question with evidence (all abilities but abstention) is asked of the default search exactly as
shipped, and scored beside single-message BM25, MiniLM and RRF baselines by what a reader is shown
(:mod:`narrative.bench.turns`), with the measures of facts that changed and of statements that disagree
(:mod:`narrative.bench.updates`).  The report is laid out in :mod:`narrative.bench.beam_report`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from narrative.bench import replay, updates
from narrative.bench import turns as shown_text
from narrative.bench.hits import DEPTH, filled, message_turns, shown
from narrative.engine import Memory, Turn
from narrative.errors import ValidationError
from narrative.model import Message
from narrative.text.lines import turn_line
from narrative.write.embedding import passage_text

ABILITIES = (
    "information_extraction",
    "multi_session_reasoning",
    "knowledge_update",
    "temporal_reasoning",
    "event_ordering",
    "contradiction_resolution",
    "summarization",
    "instruction_following",
    "preference_following",
)
UNSCORED = ("abstention",)  # no evidence: the right answer is that the chat does not say
# abilities whose evidence has two sides: (the side that answers now or first, the other side)
SIDES = {
    "knowledge_update": ("original_info", "updated_info"),
    "contradiction_resolution": ("first_statement", "second_statement"),
    "temporal_reasoning": ("first_event", "second_event"),
}
KEY = "beam_id"  # the message metadata naming its BEAM id
START = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)  # when a chat names no time before its first message
STEP = timedelta(minutes=1)
_ANCHOR_FORMATS = ("%B-%d-%Y", "%b-%d-%Y", "%B %d, %Y", "%b %d, %Y", "%Y-%m-%d")


# --- the format ------------------------------------------------------------------------------------------------


def parse_anchor(text: object) -> datetime | None:
    """A BEAM time anchor ("March-15-2024") as noon UTC of that day; None when absent or unreadable."""
    if not isinstance(text, str) or not text.strip():
        return None
    cleaned = re.sub(r"\s+", " ", text.strip())
    for fmt in _ANCHOR_FORMATS:
        try:
            return datetime.strptime(cleaned, fmt).replace(hour=12, tzinfo=UTC)
        except ValueError:
            continue
    return None


def chat_folders(root: str | Path) -> list[Path]:
    """The chat folders of a BEAM folder (those holding chat.json), numbered ones in numeric order."""
    found = [p for p in Path(root).iterdir() if (p / "chat.json").is_file()]
    return sorted(found, key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0, p.name))


@dataclass(frozen=True)
class Session:
    """One batch as a conversation: when it starts, its messages with their times, when it ends."""

    start: datetime
    messages: tuple[tuple[dict[str, Any], datetime], ...]
    end: datetime


def sessions(chat: Sequence[dict[str, Any]]) -> list[Session]:
    """The batches of a chat in order, timed: time never runs backwards, and moves a minute per message unless a
    message (or its batch) names a later day."""
    last: datetime | None = None

    def tick(anchor: datetime | None) -> datetime:
        nonlocal last
        if anchor is not None and (last is None or anchor > last):
            last = anchor
        else:
            last = START if last is None else last + STEP
        return last

    found = []
    for batch in chat:
        messages = [m for group in batch.get("turns", []) for m in group]
        first = messages[0].get("time_anchor") if messages else None
        start = tick(parse_anchor(batch.get("time_anchor")) or parse_anchor(first))
        timed = tuple((m, tick(parse_anchor(m.get("time_anchor")))) for m in messages)
        found.append(Session(start, timed, tick(None)))
    return found


def message_ids(value: object) -> frozenset[str]:
    """Every message id in an evidence value (a list, nested lists, or a dict of lists), as text."""
    if isinstance(value, bool) or value is None:
        return frozenset()
    if isinstance(value, int | str):
        return frozenset({str(value).strip()}) if str(value).strip() else frozenset()
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return frozenset().union(*(message_ids(v) for v in value))
    return frozenset()


@dataclass(frozen=True)
class Evidence:
    """What a question is scored on: the messages T@k and B@n look for, and for two-sided abilities the two
    sides (knowledge update: original, updated; contradiction: first, second statement; temporal: two events)."""

    wanted: frozenset[str]
    sides: tuple[frozenset[str], frozenset[str]] | None = None


def evidence(ability: str, source: object) -> Evidence | None:
    """A question's evidence, or None when it has none (abstention).  A knowledge update is scored on what
    answers now (``updated_info``); contradictions and temporal questions on both sides together."""
    if ability in UNSCORED:
        return None
    sides = None
    if isinstance(source, dict) and ability in SIDES:
        sides = (message_ids(source.get(SIDES[ability][0])), message_ids(source.get(SIDES[ability][1])))
    wanted = sides[1] if ability == "knowledge_update" and sides is not None else message_ids(source)
    return Evidence(wanted, sides) if wanted else None


# --- ingestion -------------------------------------------------------------------------------------------------


@dataclass
class Cost:
    """The write path's speed and the bare model's on the same passages, in the same run."""

    passages: int = 0
    model_seconds: float = 0.0


def ingest(mem: Memory, chat: Sequence[dict[str, Any]]) -> replay.Ingested:
    """Replay one BEAM chat through the write path; ``seconds`` covers ``remember_many`` only."""
    result = replay.Ingested()
    for session in sessions(chat):
        batch = [
            Turn(str(m.get("content", "")), str(m.get("role", "user")), at=at, meta={KEY: m.get("id")})
            for m, at in session.messages
        ]
        replay.replay(mem, session.start, batch, session.end, result, KEY)
    replay.count_memories(mem, result)
    return result


def embedded_passages(mem: Memory, messages: Sequence[Message]) -> list[str]:
    """The texts the write path embedded for these messages' passages, one per passage, made as the engine makes
    them: the bare model is timed on exactly these, and their number is the report's passages.

    The engine stores a message the model reads whole as one passage and a long one as several; a message with
    no stored passage counts as one, its whole turn line."""
    found = mem.store.passages_of_messages(mem.user, [m.id for m in messages])
    texts: list[str] = []
    for message in messages:
        spans = found.get(message.id, [])
        texts += [passage_text(message, p.start, p.end) for p in spans] or [turn_line(message)]
    return texts


def time_model(mem: Memory, texts: Sequence[str]) -> float:
    """Seconds the bare model (``mem.embedder``) takes to embed the texts in batches of its batch size."""
    embedder = mem.embedder
    if embedder is None or not texts:
        return 0.0
    size = max(1, getattr(embedder, "batch_size", 32))
    started = time.perf_counter()
    for first in range(0, len(texts), size):
        embedder.embed_batch(list(texts[first : first + size]))
    return time.perf_counter() - started


# --- scoring ---------------------------------------------------------------------------------------------------


def questions(probing: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any], Evidence]]:
    """Every question with evidence: (ability, question, evidence), abilities in the report's order."""
    order = [a for a in ABILITIES if a in probing] + sorted(a for a in probing if a not in ABILITIES)
    for ability in order:
        for item in probing[ability] or []:
            found = evidence(ability, item.get("source_chat_ids"))
            if found is not None and str(item.get("question", "")).strip():
                yield ability, item, found


def evaluate(mem: Memory, probing: dict[str, Any], chat: str) -> list[dict[str, Any]]:
    """Per question: the default search and the baselines by messages shown and by text budget, and the
    measures of its ability (knowledge update: current, stale; contradiction: both, said)."""
    turn_of = message_turns(mem, KEY)
    baselines = shown_text.Baselines(list(turn_of.values()), mem.embedder)
    rows = []
    for ability, item, found in questions(probing):
        question = str(item["question"])
        started = time.perf_counter()
        default = mem.search(question, DEPTH, record=False)
        latency = (time.perf_counter() - started) * 1000
        ranked = {"default": shown(default, turn_of), **baselines.rankings(question)}
        reading = {**ranked, "default": filled(mem, question, default, turn_of)}  # what the budgets read
        row: dict[str, Any] = {
            "chat": chat,
            "ability": ability,
            "question": question,
            "evidence": sorted(found.wanted, key=_id_order),
            "turns": shown_text.score_paths(ranked, {"default": reading["default"]}, set(found.wanted)),
            "returned": len(default),
            "latency_ms": round(latency, 2),
            "duplicates": shown_text.duplicates(ranked["default"]),
            "restated": shown_text.restated(ranked["default"]),
        }
        if found.sides is not None and ability == "knowledge_update":
            original, updated = found.sides
            row["update"] = {
                name: {"current": updates.current(items, updated), "stale": updates.stale(items, original, updated)}
                for name, items in reading.items()
            }
        if found.sides is not None and ability == "contradiction_resolution":
            first, second = found.sides
            row["contradiction"] = {
                name: {"both": updates.both_sides(items, first, second), "said": updates.said(items)}
                for name, items in reading.items()
            }
        rows.append(row)
    return rows


def _id_order(key: str) -> tuple[int, str]:
    return (int(key), "") if key.isdigit() else (1 << 62, key)


# --- the run ---------------------------------------------------------------------------------------------------


def run(
    path: str | Path,
    *,
    embedder: str = "minilm",
    limit: int | None = None,
    keep: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    db: str | None = None,
) -> dict[str, Any]:
    """The whole benchmark over the chats of ``path``; returns the report.

    Each chat gets its own SQLite file (``chat-N.db``), or, with ``db`` (a ``postgresql://`` URL), its own user
    in that database (emptied first).  ``progress(done, total)`` is called after each chat is ingested and after
    it is evaluated.
    """
    folders = chat_folders(path)[:limit] if limit is not None else chat_folders(path)
    if not folders:
        raise ValidationError(f"{path} holds no BEAM chat: expected folders with chat.json and probing_questions.json")
    rows: list[dict[str, Any]] = []
    ingests: list[tuple[str, replay.Ingested, Cost]] = []
    skipped = 0
    with replay.workdir(keep, "narrative-beam-") as folder:
        for index, chat_folder in enumerate(folders):
            name = f"chat-{chat_folder.name}"
            chat = json.loads((chat_folder / "chat.json").read_text("utf-8"))
            with replay.fresh_memory(folder, name, embedder, db) as mem:
                ingested = ingest(mem, chat)
                texts = embedded_passages(mem, mem.messages())
                cost = Cost(len(texts), time_model(mem, texts))
                ingests.append((chat_folder.name, ingested, cost))
                if progress is not None:
                    progress(2 * index + 1, 2 * len(folders))
                probing = json.loads((chat_folder / "probing_questions.json").read_text("utf-8"))
                rows += evaluate(mem, probing, chat_folder.name)
                skipped += sum(len(v or []) for v in probing.values()) - len(list(questions(probing)))
                if progress is not None:
                    progress(2 * index + 2, 2 * len(folders))
    return summarise(str(path), "postgres" if db else "sqlite", ingests, rows, skipped)


def summarise(
    path: str,
    store: str,
    ingests: Sequence[tuple[str, replay.Ingested, Cost]],
    rows: list[dict[str, Any]],
    skipped: int,
) -> dict[str, Any]:
    """The report: ingest cost, the measures per path and ability, the ratios to the best baseline, the measures
    of updates and contradictions, and every question's row."""
    table = shown_text.group_table(rows, lambda row: row["ability"])
    return {
        "folder": path,
        "store": store,
        "chats": len(ingests),
        "questions": len(rows),
        "questions_without_evidence": skipped,
        "ingest": _ingest_cost(ingests),
        "turns": table,
        "ratios": {group: shown_text.ratios(table, "default", group) for group in table.get("default", {})},
        "knowledge_update": _shares(rows, "update", ("current", "stale")),
        "contradiction": _shares(rows, "contradiction", ("both", "said")),
        "duplicates_top10": {"default": _mean(r["duplicates"] for r in rows)},
        "restated_top10": {"default": _mean(r["restated"] for r in rows)},
        "default_returned": {
            "mean": round(_mean(r["returned"] for r in rows), 2),
            "empty": sum(1 for r in rows if r["returned"] == 0),
        },
        "search_ms": {"default": shown_text.percentiles([r["latency_ms"] for r in rows])},
        "rows": rows,
    }


def _ingest_cost(ingests: Sequence[tuple[str, replay.Ingested, Cost]]) -> dict[str, Any]:
    messages = sum(i.turns for _, i, _ in ingests)
    seconds = sum(i.seconds for _, i, _ in ingests)
    passages = sum(c.passages for _, _, c in ingests)
    model_seconds = sum(c.model_seconds for _, _, c in ingests)
    write_rate = passages / seconds if seconds else None
    model_rate = passages / model_seconds if model_seconds else None
    return {
        "messages": messages,
        "seconds": round(seconds, 2),
        "messages_per_s": round(messages / seconds, 2) if seconds else None,
        "passages": passages,
        "passages_per_s": None if write_rate is None else round(write_rate, 2),
        "closing_seconds": round(sum(i.closing_seconds for _, i, _ in ingests), 2),
        "model": {
            "passages": passages,
            "seconds": round(model_seconds, 2),
            "passages_per_s": None if model_rate is None else round(model_rate, 1),
        },
        "ratio": round(write_rate / model_rate, 3) if write_rate and model_rate else None,
        "refused": [
            {"chat": name, "id": r.key, "characters": r.characters, "error": r.error}
            for name, i, _ in ingests
            for r in i.refused
        ],
        "per_chat": {
            name: {
                "messages": i.turns,
                "refused": len(i.refused),
                "seconds": round(i.seconds, 2),
                "storylines": i.storylines,
                "narratives": i.narratives,
                "memories": i.memories_by_stream,
            }
            for name, i, _ in ingests
        },
    }


def _shares(rows: Sequence[dict[str, Any]], measure: str, keys: Sequence[str]) -> dict[str, Any]:
    """Per path, the share of the questions that have ``measure`` for which each key holds."""
    having = [r[measure] for r in rows if measure in r]
    paths = list(having[0]) if having else []
    return {p: {"n": len(having), **{k: round(_mean(float(h[p][k]) for h in having), 4) for k in keys}} for p in paths}


def _mean(values: Iterable[float]) -> float:
    items = list(values)
    return round(sum(items) / len(items), 4) if items else 0.0
