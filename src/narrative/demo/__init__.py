"""The bundled sample: four short sessions of Maya building a community garden app.

Written for this project; loaded through the real write path (and, when the
close path is available, closed and confirmed like a user would).
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
        memory.remember_many(turns)
        made["turns"] += len(turns)
        made["conversations"].append(conversation.id)
        end = start + timedelta(minutes=2 * len(turns))
        if hasattr(memory, "confirm_memory"):
            memory.close_conversation(conversation.id, at=end)
            memory.confirm_memory(conversation.id, at=end)
        else:
            memory.close_conversation(conversation.id)
    return made
