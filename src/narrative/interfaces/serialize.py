"""Plain JSON-able values from the model (shared by the CLI, the MCP server and the HTTP API)."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from enum import Enum
from typing import Any

import numpy as np


def plain(value: Any) -> Any:
    """Dataclasses, enums, datetimes, tuples and numpy scalars → JSON-able values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(value, "to_dict"):
            return plain(value.to_dict())
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def to_json(value: Any, indent: int | None = 2) -> str:
    return json.dumps(plain(value), indent=indent, ensure_ascii=False, sort_keys=False)


def hit_dict(hit: Any) -> dict[str, Any]:
    """A search hit as the interfaces show it: the memory (its own ``id``, as every object's), its score and why it
    was returned.  The same keys in the CLI's --json, the HTTP API and the MCP tools.

    ``valid_to`` and ``superseded_by`` say whether the memory is current: both null while it is, else when a later
    memory superseded it and which one (only ``include_superseded`` or ``as_of`` return such a hit)."""
    memory = hit.memory
    return {
        "id": memory.id,
        "content": memory.content,
        "text": hit.text or memory.content,
        "shown_message_ids": list(hit.shown),
        "also": list(hit.also),
        "stream": memory.stream.value,
        "source": memory.source.value,
        "importance": memory.importance,
        "storyline_id": memory.storyline_id,
        "conversation_id": memory.conversation_id,
        "narrative_id": memory.narrative_id,
        "message_ids": list(memory.message_ids),
        "created_at": (memory.event_at or memory.created_at).isoformat(),
        "valid_to": None if memory.valid_to is None else memory.valid_to.isoformat(),
        "superseded_by": memory.superseded_by,
        "metadata": dict(memory.metadata),
        "score": round(hit.score, 6),
        "conflicts": list(getattr(hit, "conflicts", ())),
        "why": hit.why(),
    }
