"""The write path's types around :class:`narrative.write.turn.TurnWriter`: what a turn produced, what closing a
conversation sealed, what a batch of turns already knows, the write settings, and the LLM's role in a turn."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from narrative.model import Binding, Entity, MemoryItem, Message, Narrative, Storyline, StorylineStatus
from narrative.store.protocol import Store
from narrative.write import routing, supersede

if TYPE_CHECKING:
    from narrative.write.extract import TurnExtraction

__all__ = ["ConversationEnd", "TurnAssist", "TurnContext", "TurnResult", "WriteSettings"]


class TurnAssist(Protocol):
    """What an LLM adds to a turn; each method returns None to mean "use the heuristic"."""

    def begin_turn(self) -> None: ...
    def extract_turn(
        self, text: str, *, speaker: str = "", role: str = "user", previous: str | None = None
    ) -> TurnExtraction: ...
    def continuity(self, storyline: Storyline, previous: str, text: str) -> bool | None: ...
    def storyline_summary(self, storyline: Storyline, text: str) -> dict[str, Any] | None: ...
    def narrative_sentence(self, topic: str, previous_summary: str, text: str) -> str | None: ...
    def judge_statement(self, speaker: str, earlier: str, earlier_said: str, new: str, new_said: str) -> str | None: ...


@dataclass
class TurnResult:
    message: Message
    storyline: Storyline
    decision: str
    scores: dict[str, Any]
    memories: list[MemoryItem] = field(default_factory=list)
    entities: list[Entity] = field(default_factory=list)
    narrative: Narrative | None = None
    sealed: list[Narrative] = field(default_factory=list)
    reflections: list[MemoryItem] = field(default_factory=list)
    settled: supersede.Settled = field(default_factory=supersede.Settled)
    # NarraNexus: the storyline's live bindings, and the binding names of up to two other recent storylines
    bindings: list[Binding] = field(default_factory=list)
    auxiliary: list[dict[str, Any]] = field(default_factory=list)

    def describe(self) -> str:
        lines = [
            f"message #{self.message.id} (position {self.message.position}) → {self.storyline.name} [{self.decision}]"
        ]
        lines += [f"  memory #{m.id} [{m.stream.value}] {m.content[:90]}" for m in self.memories]
        lines += [f"  entity {e.entity_type.value}: {e.name}" for e in self.entities]
        if self.narrative is not None:
            lines.append(f"  narrative #{self.narrative.id}: {self.narrative.summary}")
        lines += [f"  sealed narrative #{n.id}: {n.summary}" for n in self.sealed]
        lines += [f"  reflection #{m.id}: {m.content[:90]}" for m in self.reflections]
        lines += supersede.describe(self.settled)
        lines += [f"  bound {b.kind.value} #{b.id}: {b.name} ({b.status})" for b in self.bindings]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "message_id": self.message.id,
            "position": self.message.position,
            "storyline": {"id": self.storyline.id, "name": self.storyline.name},
            "decision": self.decision,
            "scores": self.scores,
            "memory_ids": [m.id for m in self.memories],
            "entities": [{"id": e.id, "type": e.entity_type.value, "name": e.name} for e in self.entities],
            "narrative_id": None if self.narrative is None else self.narrative.id,
            "sealed_narrative_ids": [n.id for n in self.sealed],
            "reflection_ids": [m.id for m in self.reflections],
            "superseded": [
                {
                    "message_id": x.passage.message_id,
                    "passage_id": x.passage.id,
                    "memory_ids": list(x.memories),
                    "reason": x.reason,
                }
                for x in self.settled.superseded
            ],
            "conflicts": [{"memory_id": c.other_memory_id, "reason": c.reason} for c in self.settled.conflicts],
            "bindings": [
                {"id": b.id, "kind": b.kind.value, "name": b.name, "status": b.status, "payload": b.payload}
                for b in self.bindings
            ],
            "auxiliary": self.auxiliary,
        }


@dataclass
class ConversationEnd:
    """What closing a conversation added to the chain: the running links it sealed."""

    sealed: list[Narrative] = field(default_factory=list)


@dataclass
class TurnContext:
    """What a batch of turns already knows.  Valid only inside the batch's write transaction; a failed turn
    ends the batch (and its context)."""

    routed: dict[int, int] = field(default_factory=dict)  # message id → storyline id, for this batch's messages
    storylines: dict[int, Storyline] = field(default_factory=dict)  # as stored now
    complete: bool = False  # ``storylines`` holds every storyline of the user (archived ones too)

    def remember(self, storyline: Storyline) -> Storyline:
        self.storylines[storyline.id] = storyline
        return storyline

    def all_storylines(self, store: Store, user_id: str) -> list[Storyline]:
        """The user's storylines that are not archived (read once per batch, then kept current here)."""
        if not self.complete:
            for storyline in store.list_storylines(user_id, include_archived=True):
                self.storylines.setdefault(storyline.id, storyline)
            self.complete = True
        return [s for s in self.storylines.values() if s.status is not StorylineStatus.ARCHIVED]


@dataclass
class WriteSettings:
    reflect_every: int = 10
    refresh_every: int = 5
    exchange_turns: int = 2  # turns per conversation memory: the turn and the one it answers
    stream_threshold: int = 200
    thresholds: routing.RoutingThresholds = field(default_factory=routing.RoutingThresholds)
