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
        text = f"waiting on {who} to {what}" if who and what else f"waiting on {who or what or name}"
        return _with_due(text, data)
    text = _OPEN_PREFIX.sub("", name.strip())
    return _with_due(text[:1].lower() + text[1:], data) if entity_type is EntityType.TASK else text


def _with_due(text: str, data: dict[str, Any]) -> str:
    """The item, with its deadline when its words lost it ("finish the slides (by Thursday)")."""
    due = str(data.get("due") or "").strip()
    return f"{text} (by {due})" if due and due.casefold() not in text.casefold() else text
