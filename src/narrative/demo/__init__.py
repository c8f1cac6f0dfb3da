"""The bundled sample: four short sessions of Maya building a community garden app.

Written for this project; loaded through the real write path (and, when the
close path is available, closed and confirmed like a user would).  After each
session the agent binds what it works with to the storyline of a given turn
(``bindings``: a goal, a tool set, a job; ``complete`` moves a binding to
history), so the demo shows a goal going stale while another one is touched.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from importlib import resources
from typing import Any


def sample() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files(__name__).joinpath("sample.json").read_text("utf-8"))
    return data


def load(memory: Any, data: dict[str, Any] | None = None, *, recent: bool = False) -> dict[str, Any]:
    """Replay the sample into ``memory`` (a :class:`narrative.Memory`); returns what was made.

    With ``recent`` the sessions are moved in time so that the last one ended
    yesterday (by the memory's clock), which keeps the greeting's "last 7 days"
    and staleness meaningful in a live demo.
    """
    from narrative.engine import Turn

    data = data or sample()
    shift = timedelta(0)
    if recent:
        last = max(datetime.fromisoformat(s["date"]) for s in data["sessions"])
        shift = memory.clock() - timedelta(days=1) - last
    user, assistant = data["user"], data["assistant"]
    made: dict[str, Any] = {"conversations": [], "turns": 0}
    for session in data["sessions"]:
        start = datetime.fromisoformat(session["date"]) + shift
        conversation = memory.start_conversation(session.get("title", ""), at=start)
        turns = [
            Turn(text, role, speaker=user if role == "user" else assistant, at=start + timedelta(minutes=2 * i))
            for i, (role, text) in enumerate(session["turns"])
        ]
        results = memory.remember_many(turns)
        made["turns"] += len(turns)
        made["conversations"].append(conversation.id)
        end = start + timedelta(minutes=2 * len(turns))
        made.setdefault("bindings", []).extend(_bind(memory, session.get("bindings", []), results, end))
        if hasattr(memory, "confirm_memory"):
            memory.close_conversation(conversation.id, at=end)
            memory.confirm_memory(conversation.id, at=end)
        else:
            memory.close_conversation(conversation.id)
    return made


def _bind(memory: Any, entries: list[dict[str, Any]], results: list[Any], at: datetime) -> list[int]:
    """Bind each entry to the storyline its ``turn`` was routed to, or complete the live binding it names."""
    if not hasattr(memory, "bind"):
        return []
    made = []
    for entry in entries:
        if "complete" in entry:
            live = [b for b in memory.list_bindings() if b.name == entry["complete"]]
            made += [memory.complete_binding(b.id, at=at).id for b in live]
            continue
        storyline = results[entry["turn"]].storyline.id
        bound = memory.bind(
            storyline, entry["kind"], entry["name"], status=entry.get("status"), payload=entry.get("payload"), at=at
        )
        made.append(bound.id)
    return made
