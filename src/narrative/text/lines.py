"""How things read as text: a turn, an exchange (the turn it answers, then the turn), an open item."""

from __future__ import annotations

import re
from typing import Any

from narrative.model import EntityType, Message

__all__ = ["entity_label", "exchange_text", "turn_line"]

_OPEN_PREFIX = re.compile(r"^(?:open\s+question|question|todo|to-do)\s*:\s*", re.IGNORECASE)


def turn_line(message: Message) -> str:
    """One turn as a line: who said it, then what was said (as conversation memories write it)."""
    return f"{message.speaker}: {message.content}" if message.speaker else message.content


def exchange_text(previous: Message | None, message: Message) -> str:
    """An exchange (ITSERR's conversation-stream unit): the turn it answers, then the turn."""
    if previous is None:
        return turn_line(message)
    return f"{turn_line(previous)}\n{turn_line(message)}"


def entity_label(entity_type: EntityType, name: str, data: dict[str, Any]) -> str:
    """How an item reads in a sentence: "waiting on Sam to send the measurements", a bare question, …"""
    if entity_type is EntityType.WAITING_ON:
        who, what = str(data.get("who") or "").strip(), str(data.get("what") or "").strip()
        if who and what:
            return f"waiting on {who} to {what}"
        return f"waiting on {who or what or name}"
    text = _OPEN_PREFIX.sub("", name.strip())
    return text[:1].lower() + text[1:] if entity_type is EntityType.TASK else text
