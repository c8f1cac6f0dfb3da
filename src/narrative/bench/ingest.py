"""Ingest benchmark: importing a history through the real write path, against the bare model on the same texts.

A history is LoCoMo-like: two people talking in sessions of ``session_turns``
turns a few days apart, every turn through ``remember_many`` (one call per
session, as an import does), every session closed and confirmed.  The
embedder is wrapped to record each call's texts, so the report says how many
texts were embedded per turn, and after each session the bare model embeds
exactly that session's calls again (same texts, same lengths, same batch
sizes, its single-text cache off): its texts/s on this machine, measured
interleaved with the import so that both see the same load.  The ratio
``turns/s ÷ bare texts/s`` is what the write path keeps of the model's speed.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from narrative.engine import Memory, Turn
from narrative.providers.embed import Embedder, MiniLMEmbedder

Progress = Callable[[int, int], None]

NAMES = ("Caroline", "Melanie")
OPENERS = ("Hey {o}! ", "Wow! ", "Thanks, {o}! ", "", "", "Yeah! ", "That's great! ", "Oh nice! ")
NEWS = (
    "I went to {p} last weekend with my {r} and it was so much fun.",
    "I've been working on {t} and it's finally coming together.",
    "My {r} and I tried {a} yesterday, it was amazing.",
    "I started taking {a} classes, it's a great way to relax after work.",
    "I'm thinking about a trip to {p} next month to clear my head.",
    "We finally finished {t}, it took ages but it looks great.",
    "I decided to sign up for {a} because I need something just for me.",
    "I ran into an old friend at {p} and we talked for hours about {t}.",
)
FEELINGS = (
    "It means a lot to me.",
    "I'm so proud of how far I've come.",
    "It's been a bit stressful but totally worth it.",
    "Your support really keeps me going.",
    "Honestly it made my whole week.",
)
QUESTIONS = (
    "How have you been?",
    "What have you been up to lately?",
    "Have you ever tried {a}?",
    "What got you into {a}?",
    "How's {t} going?",
)
PLACES = ("the beach", "the museum", "a pottery workshop", "the mountains", "a concert", "the park", "Lisbon")
THINGS = (
    "the garden",
    "my painting",
    "the adoption papers",
    "the new shelves",
    "the photo album",
    "my speech",
    "the kids' treehouse",
    "my novel",
)
ACTIVITIES = ("pottery", "painting", "hiking", "swimming", "guitar", "yoga", "camping", "baking")
RELATIVES = ("kids", "husband", "mom", "sister", "best friend")


def _turn_text(rng: random.Random, other: str) -> str:
    """A chatty LoCoMo-like turn (about 130 characters): an opener, news, maybe a feeling and a question."""
    parts = [rng.choice(NEWS)]
    if rng.random() < 0.5:
        parts.append(rng.choice(FEELINGS))
    if rng.random() < 0.3:
        parts.append(rng.choice(QUESTIONS))
    text = rng.choice(OPENERS) + " ".join(parts)
    return text.format(
        o=other, p=rng.choice(PLACES), t=rng.choice(THINGS), a=rng.choice(ACTIVITIES), r=rng.choice(RELATIVES)
    )


def history(turns: int, session_turns: int = 20, seed: int = 7) -> list[tuple[datetime, list[Turn]]]:
    """Sessions of LoCoMo-like turns: two speakers taking turns, each session a few days after the last."""
    rng = random.Random(seed)
    sessions: list[tuple[datetime, list[Turn]]] = []
    start = datetime(2024, 3, 1, 18, 0, tzinfo=UTC)
    for first in range(0, turns, session_turns):
        date = start + timedelta(days=3 * len(sessions))
        batch = []
        for i in range(min(session_turns, turns - first)):
            text = _turn_text(rng, NAMES[(i + 1) % 2])
            batch.append(Turn(text, "user", speaker=NAMES[i % 2], at=date + timedelta(seconds=30 * i)))
        sessions.append((date, batch))
    return sessions


def with_an_assistant(sessions: Sequence[tuple[datetime, list[Turn]]]) -> list[tuple[datetime, list[Turn]]]:
    """The same sessions with every second turn said by an assistant (a user talking to an agent)."""
    return [
        (date, [replace(t, role="assistant" if i % 2 else "user") for i, t in enumerate(batch)])
        for date, batch in sessions
    ]


@dataclass
class RecordingEmbedder:
    """An embedder that passes every call on and records its texts (in order, as batched)."""

    inner: Embedder
    calls: list[tuple[str, list[str]]] = field(default_factory=list)  # (phase, texts)
    phase: str = "write"

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def dims(self) -> int:
        return self.inner.dims

    @property
    def batch_size(self) -> int:
        return self.inner.batch_size

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append((self.phase, list(texts)))
        return self.inner.embed_batch(texts)

    def texts(self, phase: str | None = None) -> int:
        return sum(len(texts) for p, texts in self.calls if phase in (None, p))


def import_history(
    mem: Memory,
    sessions: Sequence[tuple[datetime, list[Turn]]],
    progress: Progress | None = None,
    recorder: RecordingEmbedder | None = None,
    bare: BareModel | None = None,
) -> tuple[float, float]:
    """Replay the sessions; returns (seconds in ``remember_many``, seconds in all, closes included).

    With ``bare``, the calls each session made are embedded again by the bare model right after it (and
    outside the timings), so both are measured under the same load of the machine.
    """
    writing = elapsed = 0.0
    total = sum(len(batch) for _, batch in sessions)
    done = 0
    for date, batch in sessions:
        recorded = 0 if recorder is None else len(recorder.calls)
        started = time.perf_counter()
        mem.start_conversation(at=date)
        if recorder is not None:
            recorder.phase = "write"
        t = time.perf_counter()
        mem.remember_many(batch)
        writing += time.perf_counter() - t
        if recorder is not None:
            recorder.phase = "close"
        end = date + timedelta(seconds=30 * len(batch))
        mem.close_conversation(at=end)
        mem.confirm_memory(at=end)
        elapsed += time.perf_counter() - started
        if bare is not None and recorder is not None:
            bare.replay(recorder.calls[recorded:])
        done += len(batch)
        if progress is not None:
            progress(done, total)
    return writing, elapsed


class BareModel:
    """The model alone (its single-text cache off), embedding recorded calls again; seconds per phase."""

    def __init__(self, runtime: str) -> None:
        self.model = MiniLMEmbedder(runtime=runtime, cache_size=0)
        self.model.embed_batch(["warm up"])
        self.seconds: dict[str, float] = {"write": 0.0, "close": 0.0}

    def replay(self, calls: Sequence[tuple[str, list[str]]]) -> None:
        for phase, texts in calls:
            started = time.perf_counter()
            self.model.embed_batch(texts)
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - started


def measure(workdir: Path, turns: int = 400, progress: Progress | None = None) -> dict[str, Any]:
    """Import the same history with MiniLM (recorded; the bare model replays each session's calls right after
    it) and without an embedder."""
    sessions = history(turns)
    model = MiniLMEmbedder()
    model.embed_batch(["warm up"])
    recorder = RecordingEmbedder(model)
    bare = BareModel(model.runtime)
    with Memory(workdir / "ingest-minilm.db", user="bench", embedder=recorder) as mem:
        writing, total = import_history(mem, sessions, progress, recorder, bare)
    with Memory(workdir / "ingest-none.db", user="bench", embedder="none") as mem:
        none_writing, none_total = import_history(mem, sessions)
    chat = RecordingEmbedder(model)  # the same turns between a user and an assistant: texts only
    with Memory(workdir / "ingest-assistant.db", user="bench", embedder=chat) as mem:
        import_history(mem, with_an_assistant(sessions))
    write_rate = recorder.texts("write") / bare.seconds["write"]
    all_rate = recorder.texts() / (bare.seconds["write"] + bare.seconds["close"])
    return {
        "turns": turns,
        "sessions": len(sessions),
        "minilm": _speed(turns, writing, total),
        "none": _speed(turns, none_writing, none_total),
        "calls": len(recorder.calls),
        "texts_embedded": recorder.texts(),
        "texts_per_turn": round(recorder.texts() / turns, 3),
        "assistant_texts_per_turn": round(chat.texts() / turns, 3),
        "write_texts_per_turn": round(recorder.texts("write") / turns, 3),
        "bare_texts_per_s": round(all_rate, 1),
        "bare_write_texts_per_s": round(write_rate, 1),
        "ratio": round(turns / total / all_rate, 3),
        "write_ratio": round(turns / writing / write_rate, 3),
    }


def _speed(turns: int, writing: float, total: float) -> dict[str, float]:
    return {
        "write_s": round(writing, 2),
        "total_s": round(total, 2),
        "turns_per_s": round(turns / writing, 1),
        "turns_per_s_with_closing": round(turns / total, 1),
    }


def format_report(report: dict[str, Any]) -> str:
    m, n = report["minilm"], report["none"]
    return "\n".join(
        [
            f"Importing a history: {report['turns']} LoCoMo-like turns in {report['sessions']} sessions,"
            " each closed and confirmed",
            f"  embedder minilm  {m['turns_per_s_with_closing']} turns/s ({m['total_s']} s);"
            f" remember_many alone {m['turns_per_s']} turns/s ({m['write_s']} s)",
            f"  embedder none    {n['turns_per_s_with_closing']} turns/s ({n['total_s']} s);"
            f" remember_many alone {n['turns_per_s']} turns/s ({n['write_s']} s)",
            f"  texts embedded per turn: {report['texts_per_turn']} ({report['texts_embedded']} texts in"
            f" {report['calls']} calls; remember_many alone {report['write_texts_per_turn']})",
            f"  texts embedded per turn with the second speaker an assistant: {report['assistant_texts_per_turn']}",
            f"  the bare model on the same calls: {report['bare_texts_per_s']} texts/s"
            f" (remember_many's calls alone {report['bare_write_texts_per_s']} texts/s)",
            f"  ratio turns/s ÷ bare texts/s: {report['ratio']} (remember_many alone {report['write_ratio']})",
        ]
    )
