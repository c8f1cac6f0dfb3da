"""The preview a person reviews before anything is stored (Talking Rock's review step), and how it reads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from narrative.model import DeltaType
from narrative.write.compress import CATEGORIES, LABELS, Destination, PreviewEntity, ProposedDelta, public_data


@dataclass
class Preview:
    """What confirming would store; kept on the conversation while it is ready_to_close."""

    conversation_id: int
    title: str
    narrative: str
    entities: list[PreviewEntity]
    deltas: list[ProposedDelta]
    destination: Destination
    suggestion: Destination
    message_ids: list[int]
    computed_at: datetime
    model: str = "heuristic"
    passes: int = 1
    duration_ms: int = 0
    importance: int = 3
    emotions: list[str] = field(default_factory=list)
    original_narrative: str | None = None
    user_edited: bool = False
    removed: list[str] = field(default_factory=list)
    restates: int | None = None  # the memory that already says all the narrative says (confirm points to it)
    # one proposed memory per topic ({storyline_id, name, narrative, entity_keys, restates}) when the
    # conversation held two; ``narrative`` is then their texts joined (what an edit or a redirect starts from)
    parts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def proposes_parts(self) -> bool:
        """Whether confirming stores one memory per topic: there are two or more, and you neither rewrote the
        memory nor chose one storyline for it."""
        return len(self.parts) > 1 and not self.user_edited and self.destination == self.suggestion

    @property
    def kept(self) -> list[PreviewEntity]:
        return [e for e in self.entities if e.key not in self.removed]

    def extracted(self) -> dict[str, list[dict[str, Any]]]:
        """The kept entities by the seed's categories (people, tasks, decisions, …)."""
        out: dict[str, list[dict[str, Any]]] = {}
        for e in self.kept:
            out.setdefault(CATEGORIES[e.entity_type], []).append({"key": e.key, "name": e.name, **public_data(e.data)})
        return out

    def changes(self) -> dict[str, list[dict[str, Any]]]:
        """The deltas by the seed's categories (new_waiting_ons, resolved_threads, …)."""
        names = {
            DeltaType.NEW_WAITING_ON: "new_waiting_ons",
            DeltaType.RESOLVED_WAITING_ON: "resolved_waiting_ons",
            DeltaType.NEW_THREAD: "new_open_threads",
            DeltaType.RESOLVED_THREAD: "resolved_threads",
            DeltaType.PRIORITY_CHANGE: "priority_changes",
            DeltaType.STORYLINE_UPDATE: "storyline_updates",
        }
        out: dict[str, list[dict[str, Any]]] = {}
        for d in self.deltas:
            out.setdefault(names[d.delta_type], []).append(d.data)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "title": self.title,
            "narrative": self.narrative,
            "original_narrative": self.original_narrative,
            "user_edited": self.user_edited,
            "entities": [e.to_dict() for e in self.entities],
            "removed": self.removed,
            "restates": self.restates,
            "parts": self.parts,
            "one_per_topic": self.proposes_parts,
            "extracted": self.extracted(),
            "deltas": [d.to_dict() for d in self.deltas],
            "changes": self.changes(),
            "destination": self.destination.to_dict(),
            "suggestion": self.suggestion.to_dict(),
            "message_ids": self.message_ids,
            "importance": self.importance,
            "emotions": self.emotions,
            "model": self.model,
            "passes": self.passes,
            "duration_ms": self.duration_ms,
            "computed_at": self.computed_at.isoformat(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Preview:
        return cls(
            conversation_id=d["conversation_id"],
            title=d.get("title", ""),
            narrative=d["narrative"],
            entities=[PreviewEntity.from_dict(e) for e in d["entities"]],
            deltas=[ProposedDelta(DeltaType(x["type"]), dict(x["data"])) for x in d["deltas"]],
            destination=Destination(**d["destination"]),
            suggestion=Destination(**d["suggestion"]),
            message_ids=list(d["message_ids"]),
            computed_at=datetime.fromisoformat(d["computed_at"]),
            model=d.get("model", "heuristic"),
            passes=d.get("passes", 1),
            duration_ms=d.get("duration_ms", 0),
            importance=d.get("importance", 3),
            emotions=list(d.get("emotions", [])),
            original_narrative=d.get("original_narrative"),
            user_edited=d.get("user_edited", False),
            removed=list(d.get("removed", [])),
            restates=d.get("restates"),
            parts=[dict(x) for x in d.get("parts") or []],
        )

    def text(self, actions: Sequence[str] | None = None) -> str:
        """The review step as the seed draws it; ``actions`` replaces the closing "[confirm] [edit] …" line
        (an interface lists its own commands there)."""
        title = f' "{self.title}"' if self.title else ""
        lines = [f"Memory from conversation #{self.conversation_id}{title}:", ""]
        if self.proposes_parts:
            lines[0] = f"Memories from conversation #{self.conversation_id}{title}: {len(self.parts)} topics, one each:"
            for part in self.parts:
                lines.append(f"  • {part['name']} (#{part['storyline_id']}): {part['narrative']}")
                lines += _restating(part.get("restates"), "    ")
        else:
            lines.append(f"  {self.narrative}" + (" (edited by you)" if self.user_edited else ""))
            lines += _restating(self.restates, "  ")
        lines += ["", "Extracted:"]
        lines += [f"  • [{e.key}] {LABELS[e.entity_type]}: {e.label}" for e in self.kept] or ["  • nothing"]
        lines.append("Changes:")
        lines += [f"  • {_delta_line(d)}" for d in self.deltas]
        if not any(d.delta_type in (DeltaType.NEW_WAITING_ON, DeltaType.RESOLVED_WAITING_ON) for d in self.deltas):
            lines.append("  • No new waiting-ons")
        dest, how = self.destination, "suggested" if self.destination == self.suggestion else "chosen by you"
        where = f"{dest.name} (#{dest.storyline_id}, {how}; confidence {dest.confidence:.2f}: {dest.reason})"
        if self.proposes_parts:
            where = "each memory to its topic's storyline (redirect, or edit the text, to keep one memory)"
        lines += [
            "",
            f"Destination: {where}",
            "",
            *(actions if actions is not None else ["[confirm] [edit] [redirect] [split] [resume]"]),
        ]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


def _restating(memory_id: int | None, indent: str) -> list[str]:
    if memory_id is None:
        return []
    return [f"{indent}(it says no more than memory #{memory_id}: confirming keeps that memory, no copy)"]


def _delta_line(d: ProposedDelta) -> str:
    data = d.data
    if d.delta_type in (DeltaType.RESOLVED_WAITING_ON, DeltaType.RESOLVED_THREAD):
        origin = f" (open since conversation #{data['from_conversation']})" if data.get("from_conversation") else ""
        kind = "waiting-on" if d.delta_type is DeltaType.RESOLVED_WAITING_ON else "thread"
        return f"Resolved {kind}: {data['thread']}{origin} — “{data['evidence']}”"
    if d.delta_type is DeltaType.NEW_WAITING_ON:
        return f"New waiting-on: {data['thread']}"
    if d.delta_type is DeltaType.NEW_THREAD:
        return f"New open thread: {data['thread']}"
    if d.delta_type is DeltaType.PRIORITY_CHANGE:
        return f"Priority: {data['item']} {data.get('old') or '—'} → {data['new']}"
    return f"{d.delta_type.value}: {data}"
