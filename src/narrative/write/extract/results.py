"""What extraction returns: the entities, decisions and research items of one turn, and the protocol."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from narrative.model import DecisionDetails, EntityType, ResearchDetails

# --- results -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExtractedEntity:
    """An entity found in a turn; ``data`` holds type-specific fields (who/what/why/…) and the sentence."""

    entity_type: EntityType
    name: str
    data: dict[str, Any] = field(default_factory=dict)


class ExtractedDecision(NamedTuple):
    """A decision-stream item: the sentence it came from and its ITSERR details."""

    content: str
    details: DecisionDetails


class ExtractedResearch(NamedTuple):
    """A research-stream item: the sentence it came from and its source reference."""

    content: str
    details: ResearchDetails


@dataclass(frozen=True)
class TurnExtraction:
    """Everything the write path keeps from one turn."""

    question_type: str | None = None
    is_clarification: bool = False
    topic_tags: tuple[str, ...] = ()
    importance: int = 2
    emotions: tuple[str, ...] = ()
    entities: tuple[ExtractedEntity, ...] = ()
    decisions: tuple[ExtractedDecision, ...] = ()
    research: tuple[ExtractedResearch, ...] = ()
    people: tuple[str, ...] = ()
    key_points: str = ""
    about_you: tuple[str, ...] = ()  # the person's own words on who they are ("I'm a nurse"): Your Story's notes

    def of_type(self, entity_type: EntityType) -> tuple[ExtractedEntity, ...]:
        """The entities of one type, in extraction order."""
        return tuple(e for e in self.entities if e.entity_type is entity_type)


class Extractor(Protocol):
    """Anything that extracts a turn; ``identity`` is recorded as ``Memory.extraction_model``."""

    identity: str

    def extract_turn(
        self, text: str, *, speaker: str = "", role: str = "user", previous: str | None = None
    ) -> TurnExtraction: ...
