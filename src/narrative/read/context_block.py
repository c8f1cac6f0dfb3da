"""What :func:`narrative.read.context.build_context` returns, and how it counts tokens: the block, its sections'
use of the budget, the memories recalled into its scene, and a token counter that counts each line once."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from narrative.model import Conversation, Entity, MemoryItem, Message, Narrative, Storyline
from narrative.providers.tokens import ApproxTokenCounter, TokenCounter
from narrative.read.agenda import Agenda
from narrative.read.scene import Scene

__all__ = ["LAYOUT", "ContextBlock", "LineCachedCounter", "Recalled", "SectionInfo", "plain"]

#: The sections, in the order they are printed.
LAYOUT = (
    "about_you",
    "storyline",
    "bindings",
    "scene_memory",
    "open_threads",
    "reminders",
    "latest_narrative",
    "other_storylines",
    "recent_messages",
)


@dataclass(frozen=True)
class Recalled:
    """One memory shown in the scene: why it is there (``origin`` search|storyline), its score and reason."""

    memory: MemoryItem
    rank: int
    origin: str
    score: float
    why: str
    position: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory.id,
            "rank": self.rank,
            "origin": self.origin,
            "score": round(self.score, 6),
            "why": self.why,
            "position": self.position,
            "text": self.text,
            "stream": self.memory.stream.value,
            "retention": self.memory.retention.value,
            "storyline_id": self.memory.storyline_id,
        }


@dataclass(frozen=True)
class SectionInfo:
    """How one section used its part of the budget."""

    name: str
    limit: int
    tokens: int
    shown: int
    dropped: int

    def to_dict(self) -> dict[str, int]:
        return {"limit": self.limit, "tokens": self.tokens, "shown": self.shown, "dropped": self.dropped}


@dataclass(frozen=True)
class ContextBlock:
    """The assembled context: ``text`` to paste into a prompt, the parts it was made of, ``to_dict()``."""

    query: str
    budget: int
    tokens: int
    counter: str
    text: str
    chat_length: int
    storyline: Storyline | None
    scene: Scene | None
    memories: tuple[Recalled, ...]
    conversation: Conversation | None
    recent: tuple[Message, ...]
    threads: tuple[Entity, ...]
    narrative: Narrative | None
    auxiliary: tuple[Storyline, ...]
    sections: tuple[SectionInfo, ...] = ()
    use_id: int | None = None
    agenda: Agenda | None = None  # what the bindings and reminders sections drew on (all of it, shown or not)
    about: tuple[MemoryItem, ...] = ()  # the facts of Your Story shown under about_you, newest first

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "budget": self.budget,
            "tokens": self.tokens,
            "counter": self.counter,
            "use_id": self.use_id,
            "chat_length": self.chat_length,
            "layout": list(LAYOUT),
            "sections": {s.name: s.to_dict() for s in self.sections},
            "about_you": plain(self.about),
            "storyline": plain(self.storyline),
            "scene_memory": {
                **(self.scene.to_dict() if self.scene is not None else {"buckets": []}),
                "memories": [m.to_dict() for m in self.memories],
            },
            "open_threads": plain(self.threads),
            "latest_narrative": plain(self.narrative),
            "other_storylines": plain(self.auxiliary),
            "recent_messages": {"conversation": plain(self.conversation), "messages": plain(self.recent)},
            **(self.agenda.to_dict() if self.agenda is not None else {}),
            "text": self.text,
        }


# --- counting ----------------------------------------------------------------------------------------------

_BREAK = re.compile(r"\s*\n\s*")


class LineCachedCounter:
    """A token counter that counts each line once: ``count(text)`` = Σ lines + 1 per line break.

    Exact for counters under which a whitespace run holding a newline costs 1 and no token spans it
    (``ApproxTokenCounter``). A context is counted many times while it is fitted, and most of its lines
    (messages, threads, summaries, the scene's memories) recur from one call to the next, so the
    counts of lines are memoised (``size`` lines at most; the memo is cleared when full).
    """

    def __init__(self, base: TokenCounter | None = None, size: int = 50_000) -> None:
        self.base = base or ApproxTokenCounter()
        self.identity: str = self.base.identity
        self.size = size
        self._memo: dict[str, int] = {}

    def count(self, text: str) -> int:
        parts = _BREAK.split(text)
        total = len(parts) - 1
        memo = self._memo
        for part in parts:
            if not part:
                continue
            cost = memo.get(part)
            if cost is None:
                cost = self.base.count(part)
                if len(memo) >= self.size:
                    memo.clear()
                memo[part] = cost
            total += cost
        return total


# --- plain values ------------------------------------------------------------------------------------------


def plain(value: Any) -> Any:
    """A model dataclass (or a collection of them) as JSON-able values, named as in the model."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
