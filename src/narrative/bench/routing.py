"""How storylines line up with the source conversations of a LoCoMo-format file.

Two runs through the real write path, no LLM:

* **One user, all conversations.**  The sessions of every conversation in the
  file go to ONE user in time order (interleaved by session date, as one
  person's many threads); each session is a conversation, closed and confirmed
  as :func:`narrative.bench.locomo.ingest` does.  Every turn's message is then
  labelled with its source (conversation, session) through its metadata, and
  compared with the storyline the write path routed it to:

  - **purity**: each storyline is labelled by the source conversation most of
    its turns came from; purity is the share of all turns that sit in a
    storyline labelled with their own conversation (1.0 = no storyline mixes
    conversations).  Turns in the default storylines (small talk, thanks,
    about the assistant) and Your Story count like any other: those storylines
    are shared by design, and they lower purity when they take many turns.
    ``topic_purity`` is the same over topic storylines only, with the share of
    turns routed to shared storylines beside it.
  - **storylines per session**: the mean number of distinct storylines a
    session's turns were routed to (1.0 = each session stayed in one).
  - **NMI**: normalised mutual information between storyline and source
    conversation, I(S; C) / ((H(S) + H(C)) / 2) — the arithmetic-mean
    normalisation — in [0, 1].
* **One user per conversation**: storylines per session for each conversation
  on its own.

Nothing reads the questions or the evidence.  A session whose date falls
before the end of the previous one (two conversations a few minutes apart) is
moved to start one minute after it, so the one user's messages keep a single
time order.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from narrative.bench.locomo import ingest, sessions, turn_text
from narrative.engine import Memory, Turn
from narrative.errors import ValidationError

TURN_GAP = timedelta(seconds=30)


def nmi(left: Sequence[object], right: Sequence[object]) -> float:
    """Normalised mutual information of two labelings, arithmetic-mean normalisation (1.0 when both are
    constant and equal in shape)."""
    if len(left) != len(right):
        raise ValidationError("labelings differ in length")
    if not left:
        return 0.0
    _, a = np.unique(np.asarray([str(x) for x in left]), return_inverse=True)
    _, b = np.unique(np.asarray([str(x) for x in right]), return_inverse=True)
    joint = np.zeros((int(a.max()) + 1, int(b.max()) + 1))
    np.add.at(joint, (a, b), 1.0)
    joint /= joint.sum()
    pa, pb = joint.sum(axis=1), joint.sum(axis=0)

    def entropy(p: np.ndarray) -> float:
        p = p[p > 0]
        return float(-(p * np.log(p)).sum())

    nz = joint > 0
    mutual = float((joint[nz] * np.log(joint[nz] / np.outer(pa, pb)[nz])).sum())
    mean = (entropy(pa) + entropy(pb)) / 2
    return 1.0 if mean == 0 else max(0.0, min(1.0, mutual / mean))


def purity(storyline_of: Sequence[object], source_of: Sequence[object]) -> float:
    """Share of items whose storyline's majority source is their own source."""
    if not storyline_of:
        return 0.0
    by_storyline: dict[object, Counter[object]] = defaultdict(Counter)
    for storyline, source in zip(storyline_of, source_of, strict=True):
        by_storyline[storyline][source] += 1
    return sum(c.most_common(1)[0][1] for c in by_storyline.values()) / len(storyline_of)


def storylines_per_session(storyline_of: Sequence[object], session_of: Sequence[object]) -> float:
    """Mean number of distinct storylines a session's turns were routed to."""
    by_session: dict[object, set[object]] = defaultdict(set)
    for storyline, session in zip(storyline_of, session_of, strict=True):
        by_session[session].add(storyline)
    return sum(len(s) for s in by_session.values()) / len(by_session) if by_session else 0.0


def timeline(samples: Sequence[dict[str, Any]]) -> list[tuple[datetime, str, int, list[dict[str, Any]]]]:
    """Every session of every conversation, in date order: (date, conversation, session number, turns)."""
    found = []
    for index, sample in enumerate(samples):
        name = str(sample.get("sample_id", f"sample-{index}"))
        found += [(date, name, number, turns) for number, date, turns in sessions(sample)]
    return sorted(found, key=lambda row: (row[0], row[1], row[2]))


def ingest_interleaved(mem: Memory, samples: Sequence[dict[str, Any]]) -> int:
    """Feed every session of every sample to the one user of ``mem`` in time order; returns the turn count."""
    last_end: datetime | None = None
    count = 0
    for date, name, number, turns in timeline(samples):
        start = date if last_end is None or date > last_end else last_end + timedelta(minutes=1)
        mem.start_conversation(at=start)
        mem.remember_many(
            [
                Turn(
                    turn_text(t),
                    "user",
                    speaker=str(t.get("speaker", "")),
                    at=start + TURN_GAP * i,
                    meta={"dia_id": t.get("dia_id", ""), "source_conversation": name, "source_session": number},
                )
                for i, t in enumerate(turns)
            ]
        )
        last_end = start + TURN_GAP * len(turns)
        mem.close_conversation(at=last_end)
        mem.confirm_memory(at=last_end)
        count += len(turns)
    return count


def alignment(mem: Memory) -> dict[str, Any]:
    """Purity, storylines per session and NMI of the user's messages (labelled through their meta)."""
    shared = {s.id for s in mem.list_storylines() if s.kind.value in ("default", "your_story")}
    rows = [
        (m.storyline_id, str(m.meta.get("source_conversation", "")), m.meta.get("source_session"))
        for m in mem.messages(limit=1_000_000)
    ]
    storyline = [r[0] for r in rows]
    source = [r[1] for r in rows]
    session = [(r[1], r[2]) for r in rows]
    topic = [i for i, sid in enumerate(storyline) if sid not in shared]
    return {
        "turns": len(rows),
        "storylines_used": len(set(storyline)),
        "purity": round(purity(storyline, source), 4),
        "topic_purity": round(purity([storyline[i] for i in topic], [source[i] for i in topic]), 4),
        "shared_share": round(1 - len(topic) / len(rows), 4) if rows else 0.0,
        "storylines_per_session": round(storylines_per_session(storyline, session), 3),
        "nmi": round(nmi(storyline, source), 4),
        "sessions": len(set(session)),
    }


def run_routing(path: str | Path, *, embedder: str = "minilm", keep: str | None = None) -> dict[str, Any]:
    """Both routing runs over ``path``; returns the report.  ``keep``: a folder to keep the databases in
    (``one-user.db`` and one per conversation), to look at the routing decisions afterwards."""
    data = json.loads(Path(path).read_text("utf-8"))
    samples = data if isinstance(data, list) else [data]
    report: dict[str, Any] = {"file": str(path), "conversations": len(samples), "nmi_normalisation": "arithmetic"}
    with tempfile.TemporaryDirectory(prefix="narrative-routing-") as scratch_dir:
        scratch = Path(keep) if keep else Path(scratch_dir)
        scratch.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        with Memory(_fresh(scratch / "one-user.db"), user="reader", embedder=embedder) as mem:
            ingest_interleaved(mem, samples)
            report["one_user"] = alignment(mem)
        report["one_user"]["seconds"] = round(time.perf_counter() - started, 1)
        per: dict[str, Any] = {}
        for index, sample in enumerate(samples):
            name = str(sample.get("sample_id", f"sample-{index}"))
            with Memory(_fresh(scratch / f"{name}.db"), user=name, embedder=embedder) as mem:
                ingest(mem, sample)
                found = alignment_by_session(mem)
            per[name] = found
        report["per_conversation"] = per
    values = [v["storylines_per_session"] for v in per.values()]
    report["per_conversation_mean"] = round(sum(values) / len(values), 3) if values else None
    return report


def _fresh(db: Path) -> Path:
    """``db`` with any earlier run's files removed."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    return db


def alignment_by_session(mem: Memory) -> dict[str, Any]:
    """Storylines per session for one conversation on its own (sessions read from the dia_id, "D3:7")."""
    rows = [(m.storyline_id, str(m.meta.get("dia_id", "")).split(":")[0]) for m in mem.messages(limit=1_000_000)]
    return {
        "turns": len(rows),
        "storylines_used": len({r[0] for r in rows}),
        "storylines_per_session": round(storylines_per_session([r[0] for r in rows], [r[1] for r in rows]), 3),
    }


def format_routing(report: dict[str, Any]) -> str:
    one = report["one_user"]
    lines = [
        f"Routing — {report['file']}: {report['conversations']} conversations fed to one user in time order "
        f"({one['turns']} turns, {one['sessions']} sessions, {one['seconds']} s)",
        f"  storylines used:        {one['storylines_used']}",
        f"  purity:                 {one['purity']:.3f}  (topic storylines only: {one['topic_purity']:.3f}; "
        f"{one['shared_share']:.1%} of turns in shared default storylines)",
        f"  storylines per session: {one['storylines_per_session']:.2f}",
        f"  NMI (arithmetic mean):  {one['nmi']:.3f}",
        "One user per conversation: storylines per session",
    ]
    for name, row in report["per_conversation"].items():
        lines.append(
            f"  {name:<12} {row['storylines_per_session']:.2f}  ({row['turns']} turns, "
            f"{row['storylines_used']} storylines)"
        )
    lines.append(f"  mean         {report['per_conversation_mean']:.2f}")
    return "\n".join(lines)
