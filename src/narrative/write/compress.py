"""The compression pipeline of the close path, stage by stage, each with rules and an optional LLM.

1. **entities** — the per-turn entities the write path already stored for the conversation,
   consolidated by (type, name); messages the write path never processed go through the heuristic
   extractor; with an LLM the ``entity_extraction`` pass adds what no existing entity covers;
2. **narrative memory** — :func:`narrative.write.compose.compose_narrative`: 2–4 sentences, most significant first —
   decisions and why (or the key moment when nothing was decided), an insight, what the conversation
   settled, what stays open, the feeling, who was involved; or the ``narrative_memory`` prompt;
3. **state deltas** — :func:`compute_deltas`, by rule: resolutions of open items
   (:mod:`narrative.write.resolve`), new waiting-ons and threads, priority changes (with the
   previous priority of the same item when one is known);
4. **destination** — :func:`suggest_destination`: the storyline scoring highest on messages routed
   there + 2 × entities found there + 2 × its threads settled here; confidence = its share of the
   score × min(1, score / 6); below ``SUGGEST_AT`` the suggestion stays Your Story; with an LLM the
   ``routing_suggestion`` prompt may name another storyline.

Every LLM step returns None on any failure and the rule is used instead (:class:`LLMCloseAssist`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from narrative.errors import InvalidTransition, ValidationError
from narrative.model import (
    DeltaType,
    EntityType,
    MemoryItem,
    Message,
    Role,
    Storyline,
    StorylineKind,
    StorylineStatus,
)
from narrative.store.protocol import Store
from narrative.text import patterns as P
from narrative.text.lines import entity_label
from narrative.text.people import find_things
from narrative.text.words import word_keys
from narrative.write import resolve
from narrative.write.answers import prose

if TYPE_CHECKING:
    from narrative.providers.llm import LLM
    from narrative.write.extract import ExtractedEntity, Extractor

CATEGORIES: dict[EntityType, str] = {
    EntityType.PERSON: "people", EntityType.TASK: "tasks", EntityType.DECISION: "decisions",
    EntityType.WAITING_ON: "waiting_on", EntityType.QUESTION_RESOLVED: "questions_resolved",
    EntityType.QUESTION_OPENED: "questions_opened", EntityType.BLOCKER_CLEARED: "blockers_cleared",
    EntityType.PRIORITY_CHANGE: "priority_changes", EntityType.STORYLINE_REFERENCE: "storyline_references",
    EntityType.INSIGHT: "insights",
}  # fmt: skip
LABELS: dict[EntityType, str] = {
    EntityType.PERSON: "Person", EntityType.TASK: "Task", EntityType.DECISION: "Decision",
    EntityType.WAITING_ON: "Waiting on", EntityType.QUESTION_RESOLVED: "Question resolved",
    EntityType.QUESTION_OPENED: "Open question", EntityType.BLOCKER_CLEARED: "Unblocked",
    EntityType.PRIORITY_CHANGE: "Priority", EntityType.STORYLINE_REFERENCE: "Storyline", EntityType.INSIGHT: "Insight",
}  # fmt: skip
SUGGEST_AT = 0.5  # below this confidence the suggestion stays Your Story


# --- what a preview is made of ------------------------------------------------------------------


@dataclass
class PreviewEntity:
    """One consolidated entity: stored rows (``entity_ids``) or a new one stored at confirm."""

    key: str
    entity_type: EntityType
    name: str
    data: dict[str, Any] = field(default_factory=dict)
    entity_ids: list[int] = field(default_factory=list)
    storyline_id: int | None = None
    message_id: int | None = None

    @property
    def label(self) -> str:
        return entity_label(self.entity_type, self.name, self.data)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "type": self.entity_type.value,
            "name": self.name,
            "data": self.data,
            "entity_ids": self.entity_ids,
            "storyline_id": self.storyline_id,
            "message_id": self.message_id,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PreviewEntity:
        return cls(
            d["key"],
            EntityType(d["type"]),
            d["name"],
            dict(d.get("data") or {}),
            list(d["entity_ids"]),
            d.get("storyline_id"),
            d.get("message_id"),
        )


@dataclass(frozen=True)
class ProposedDelta:
    delta_type: DeltaType
    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.delta_type.value, "data": self.data}


@dataclass(frozen=True)
class Destination:
    storyline_id: int
    name: str
    confidence: float
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "storyline_id": self.storyline_id,
            "name": self.name,
            "confidence": self.confidence,
            "reason": self.reason,
        }


# --- the LLM's part ----------------------------------------------------------------------------


class CloseAssist(Protocol):
    """What an LLM adds at close; every method returns None for "use the rules"."""

    identity: str
    calls: int

    def entities(self, transcript: str) -> list[ExtractedEntity] | None: ...
    def narrative(self, entities: dict[str, Any], storyline: str, date: str, duration: str) -> str | None: ...
    def route(
        self, narrative: str, entities: dict[str, Any], storylines: Sequence[Storyline]
    ) -> Destination | None: ...
    def resolves(self, thread: str, message: str) -> tuple[bool, float] | None: ...


@dataclass
class CloseTools:
    extractor: Extractor
    assist: CloseAssist | None = None
    similarity: resolve.Similarity | None = None


def public_data(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in ("sentence", "speaker")}


def gather_entities(
    store: Store, user_id: str, conversation_id: int, messages: Sequence[Message], extractor: Extractor
) -> list[PreviewEntity]:
    """Stored per-turn entities consolidated by (type, name), plus those of messages never processed."""
    items: dict[tuple[EntityType, str], PreviewEntity] = {}

    def add(
        kind: EntityType, name: str, data: dict[str, Any], eid: int | None, sid: int | None, mid: int | None
    ) -> None:
        key = (kind, name.casefold().strip())
        item = items.get(key)
        if item is None:
            item = items[key] = PreviewEntity(f"e{len(items) + 1}", kind, name, dict(data), [], sid, mid)
        if eid is not None:
            item.entity_ids.append(eid)

    stored = store.list_entities(user_id, conversation_id=conversation_id, limit=100_000)
    for e in sorted(stored, key=lambda e: (e.created_at, e.id)):
        mid = e.data.get("message_id")
        add(e.entity_type, e.name, e.data, e.id, e.storyline_id, mid if isinstance(mid, int) else None)
    previous: str | None = None
    for m in messages:
        if m.storyline_id is None:  # the write path never ran on it: extract now
            found = extractor.extract_turn(m.content, speaker=m.speaker, role=m.role.value, previous=previous)
            for x in found.entities:
                if x.entity_type is EntityType.PERSON and x.name == m.speaker:
                    continue
                if x.entity_type is EntityType.QUESTION_OPENED and m.role is not Role.USER:
                    continue
                add(x.entity_type, x.name, {**x.data, "message_id": m.id, "speaker": m.speaker}, None, None, m.id)
        previous = m.content
    things = named_things(messages, list(items.values()))
    kept = [e for e in items.values() if not (e.entity_type is EntityType.PERSON and e.name.casefold() in things)]
    return [replace(e, key=f"e{i + 1}") for i, e in enumerate(_one_each(kept))]


_RESTATED_TYPES = (EntityType.TASK, EntityType.WAITING_ON, EntityType.QUESTION_OPENED)


def _one_each(entities: list[PreviewEntity]) -> list[PreviewEntity]:
    """Open items said twice ("I'm waiting on Dana to send the samples", then "Dana will send the samples on
    Monday") are one item: the one that says more keeps the other's rows."""
    kept = list(entities)
    for e in entities:
        if e.entity_type not in _RESTATED_TYPES:
            continue
        keys = word_keys(e.label)
        fuller = next(
            (
                o
                for o in kept
                if o is not e
                and o.entity_type is e.entity_type
                and keys <= word_keys(o.label)
                and (keys != word_keys(o.label) or len(e.label) < len(o.label))
            ),
            None,
        )
        if fuller is not None and keys:
            fuller.entity_ids.extend(e.entity_ids)
            kept.remove(e)
    return kept


def named_things(messages: Sequence[Message], entities: Sequence[PreviewEntity]) -> set[str]:
    """Lowercase names the conversation uses as things, not people: a tool or product ("we picked Postgres",
    "using Figma"), or what a decision chose or set aside — so "People involved" never lists Postgres."""
    things = {t for m in messages for t in find_things(P.split_sentences(P.normalize(m.content)))}
    for e in entities:
        if e.entity_type is EntityType.DECISION:
            said = [str(e.data.get("what") or e.name), *(str(a) for a in e.data.get("alternatives") or [])]
            words = [w.strip('.,;:!?()"“”') for text in said for w in text.split()]
            things.update(w.casefold() for w in words if w[:1].isupper() and not w.endswith(("'s", "’s")))
    return things


def merge_entities(entities: list[PreviewEntity], extra: Sequence[ExtractedEntity]) -> None:
    """Add the LLM's entities that no existing one of the same type already covers."""
    for x in extra:
        keys = word_keys(x.name)
        covered = False
        for e in entities:
            if e.entity_type is not x.entity_type:
                continue
            theirs = word_keys(e.name)
            small = min(len(keys), len(theirs)) or 1
            if e.name.casefold() == x.name.casefold() or len(keys & theirs) / small >= 0.6:
                covered = True
                break
        if not covered:
            entities.append(
                PreviewEntity(f"e{len(entities) + 1}", x.entity_type, x.name, {**x.data, "extracted_by": "llm"})
            )


def transcript(messages: Sequence[Message], max_chars: int = 24_000) -> str:
    lines = [f"[{m.position}] {m.speaker or m.role.value}: {m.content}" for m in messages]
    text = "\n".join(lines)
    return text if len(text) <= max_chars else "…\n" + text[-max_chars:]


def extracted_summary(entities: Sequence[PreviewEntity]) -> dict[str, Any]:
    out: dict[str, list[dict[str, Any]]] = {}
    for e in entities:
        out.setdefault(CATEGORIES[e.entity_type], []).append({"name": e.name, **public_data(e.data)})
    return out


def duration_text(messages: Sequence[Message]) -> str:
    minutes = int((messages[-1].created_at - messages[0].created_at).total_seconds() // 60)
    return f"{minutes} minutes, {len(messages)} messages"


def importance_of(
    entities: Sequence[PreviewEntity], resolutions: Sequence[resolve.Resolution], exchanges: Sequence[MemoryItem]
) -> int:
    score = 3
    if any(e.entity_type is EntityType.DECISION for e in entities) or resolutions:
        score += 1
    if any(m.importance >= 4 for m in exchanges):
        score += 1
    return min(5, score)


# --- state deltas ------------------------------------------------------------------------------


def compute_deltas(
    store: Store,
    user_id: str,
    conversation_id: int,
    entities: Sequence[PreviewEntity],
    resolutions: Sequence[resolve.Resolution],
) -> list[ProposedDelta]:
    """Resolutions of earlier items, new waiting-ons and threads, priority changes (rules)."""
    deltas: list[ProposedDelta] = []
    settled: set[int] = set()
    for r in resolutions:
        settled.add(r.entity.id)
        waiting = r.entity.entity_type is EntityType.WAITING_ON
        kind = DeltaType.RESOLVED_WAITING_ON if waiting else DeltaType.RESOLVED_THREAD
        own = r.entity.conversation_id == conversation_id
        deltas.append(
            ProposedDelta(
                kind,
                {
                    "entity_id": r.entity.id,
                    "thread": r.label,
                    "kind": r.entity.entity_type.value,
                    "from_conversation": None if own else r.entity.conversation_id,
                    "evidence": r.evidence.sentence,
                    "message_id": r.evidence.message.id,
                    "resolved_by_entity_id": r.evidence.entity_id,
                    "resolved_by_key": r.evidence.entity_key,
                    "confidence": r.confidence,
                    "method": r.method,
                },
            )
        )
    earlier = [
        e
        for e in store.list_entities(user_id, entity_types=[EntityType.PRIORITY_CHANGE])
        if e.conversation_id != conversation_id
    ]
    for e in entities:
        if e.entity_ids and set(e.entity_ids) & settled:
            continue
        if e.entity_type is EntityType.WAITING_ON:
            deltas.append(
                ProposedDelta(
                    DeltaType.NEW_WAITING_ON,
                    {
                        "thread": e.label,
                        "who": e.data.get("who", ""),
                        "what": e.data.get("what", e.name),
                        "key": e.key,
                        "entity_ids": e.entity_ids,
                    },
                )
            )
        elif e.entity_type in (EntityType.TASK, EntityType.QUESTION_OPENED):
            deltas.append(
                ProposedDelta(
                    DeltaType.NEW_THREAD,
                    {"thread": e.label, "kind": e.entity_type.value, "key": e.key, "entity_ids": e.entity_ids},
                )
            )
        elif e.entity_type is EntityType.PRIORITY_CHANGE:
            item = str(e.data.get("item") or e.name)
            before = next((p for p in earlier if word_keys(item) & word_keys(p.name)), None)
            deltas.append(
                ProposedDelta(
                    DeltaType.PRIORITY_CHANGE,
                    {
                        "item": item,
                        "old": None if before is None else before.data.get("new"),
                        "new": e.data.get("new", ""),
                        "key": e.key,
                        "entity_ids": e.entity_ids,
                    },
                )
            )
    return deltas


# --- the destination ---------------------------------------------------------------------------


def suggest_destination(
    store: Store,
    user_id: str,
    messages: Sequence[Message],
    entities: Sequence[PreviewEntity],
    resolutions: Sequence[resolve.Resolution],
    your_story: Storyline,
) -> Destination:
    """The storyline holding most of the conversation, or Your Story when none clearly does."""
    eligible = {
        s.id: s
        for s in store.list_storylines(user_id)
        if s.kind not in (StorylineKind.YOUR_STORY, StorylineKind.DEFAULT)
    }
    counts: dict[int, Counter[str]] = {}
    for sid, what in (
        [(m.storyline_id, "messages") for m in messages]
        + [(e.storyline_id, "entities") for e in entities]
        + [(r.entity.storyline_id, "threads it settles") for r in resolutions]
    ):
        if sid in eligible:
            counts.setdefault(sid, Counter())[what] += 1
    scores = {sid: c["messages"] + 2 * c["entities"] + 2 * c["threads it settles"] for sid, c in counts.items()}
    if not scores:
        return Destination(your_story.id, your_story.name, 1.0, "nothing in it belongs to a storyline of its own")
    top = max(scores, key=lambda sid: (scores[sid], -sid))
    confidence = round(scores[top] / sum(scores.values()) * min(1.0, scores[top] / 6), 2)
    singular = {"messages": "message", "entities": "entity", "threads it settles": "thread it settles"}
    reason = ", ".join(f"{n} {what if n != 1 else singular[what]}" for what, n in counts[top].items()) + " here"
    if confidence < SUGGEST_AT:
        return Destination(
            your_story.id,
            your_story.name,
            round(1 - confidence, 2),
            f"no storyline clearly holds it (closest: {eligible[top].name}, {confidence:.2f})",
        )
    return Destination(top, eligible[top].name, confidence, reason)


def destination_for(store: Store, user_id: str, storyline_id: int, reason: str) -> Destination:
    storyline = store.get_storyline(user_id, storyline_id)
    if storyline.status is StorylineStatus.ARCHIVED:
        raise InvalidTransition(
            f"storyline {storyline_id} ({storyline.name}) is archived and takes nothing new: choose another"
            " (`narrative storylines` lists the open ones)"
        )
    return Destination(storyline.id, storyline.name, 1.0, reason)


# --- the LLM's passes --------------------------------------------------------------------------

#: category → (entity type, the field that names it, the other fields kept)
_SHAPES: dict[str, tuple[EntityType, str, tuple[str, ...]]] = {
    "people": (EntityType.PERSON, "name", ("context", "relation")),
    "tasks": (EntityType.TASK, "description", ("status", "priority")),
    "decisions": (EntityType.DECISION, "what", ("why", "alternatives")),
    "waiting_on": (EntityType.WAITING_ON, "what", ("who", "since")),
    "questions_opened": (EntityType.QUESTION_OPENED, "question", ()),
    "questions_resolved": (EntityType.QUESTION_RESOLVED, "question", ("answer",)),
    "blockers_cleared": (EntityType.BLOCKER_CLEARED, "what", ("unblocks",)),
    "priority_changes": (EntityType.PRIORITY_CHANGE, "item", ("old", "new")),
    "insights": (EntityType.INSIGHT, "insight", ("context",)),
}


def _check_entities(obj: dict[str, Any]) -> dict[str, Any]:
    from narrative.write.extract import ExtractedEntity

    items: list[ExtractedEntity] = []
    for category, entries in obj.items():
        if category not in _SHAPES:
            continue
        kind, naming, kept = _SHAPES[category]
        if not isinstance(entries, list):
            raise ValidationError(f"{category} is not a list", field=category)
        for entry in entries:
            name = str(entry[naming]).strip()
            if not name:
                continue
            data = {k: entry[k] for k in kept if entry.get(k) not in (None, "", [])}
            if kind is EntityType.WAITING_ON:
                data["what"] = name
                name = f"{data['who']}: {name}" if data.get("who") else name
            if kind is EntityType.PRIORITY_CHANGE:
                data["item"] = name
            items.append(ExtractedEntity(kind, name[:300], data))
    return {"items": items}


def _check_route(obj: dict[str, Any]) -> dict[str, Any]:
    from narrative.providers.llm import check_fields

    out = check_fields(obj, {"suggested_destination": str, "confidence": float})
    if not 0.0 <= out["confidence"] <= 1.0:
        raise ValidationError("confidence outside 0–1", field="confidence")
    out["reasoning"] = str(obj.get("reasoning") or "")
    return out


def _check_verdict(obj: dict[str, Any]) -> dict[str, Any]:
    from narrative.providers.llm import check_fields

    return check_fields(obj, {"resolves": bool, "confidence": float})


class LLMCloseAssist:
    """The close path's LLM passes over :func:`~narrative.providers.llm.ask_json` / ``ask_text``.

    ``calls`` counts the answers that were used (the compression passes beyond the rules).
    """

    def __init__(self, llm: LLM) -> None:
        self.llm = llm
        self.identity = llm.identity
        self.calls = 0

    def entities(self, transcript: str) -> list[ExtractedEntity] | None:
        from narrative.providers.llm import ask_json

        got = ask_json(self.llm, None, "entity_extraction", {"transcript": transcript}, _check_entities)
        if got is None:
            return None
        self.calls += 1
        items: list[ExtractedEntity] = got["items"]
        return items

    def narrative(self, entities: dict[str, Any], storyline: str, date: str, duration: str) -> str | None:
        from narrative.providers.llm import ask_text

        variables = {"entities": entities, "storyline": storyline, "date": date, "duration": duration}
        text = ask_text(self.llm, None, "narrative_memory", variables)
        # two to four sentences about what the conversation produced were asked for: nothing else is stored
        material = f"{storyline}\n{json.dumps(entities, ensure_ascii=False, default=str)}"
        answer = prose(text, "narrative_memory", sentences=(2, 4), max_chars=1200, material=material)
        if answer is None:
            return None
        self.calls += 1
        return answer

    def route(self, narrative: str, entities: dict[str, Any], storylines: Sequence[Storyline]) -> Destination | None:
        from narrative.providers.llm import ask_json

        candidates = [
            s for s in storylines if s.kind is not StorylineKind.DEFAULT and s.status is not StorylineStatus.ARCHIVED
        ]
        listing = "\n".join(f"- {s.name}: {(s.summary or s.description)[:200]}" for s in candidates)
        variables = {"memory_narrative": narrative, "entities": entities, "storylines": listing}
        got = ask_json(self.llm, None, "routing_suggestion", variables, _check_route)
        if got is None:
            return None
        wanted = got["suggested_destination"].strip().casefold()
        chosen = next((s for s in candidates if s.name.casefold() == wanted), None)
        if chosen is None:
            return None
        self.calls += 1
        reason = f"suggested by {self.identity}" + (f": {got['reasoning']}" if got["reasoning"] else "")
        return Destination(chosen.id, chosen.name, round(got["confidence"], 2), reason)

    def resolves(self, thread: str, message: str) -> tuple[bool, float] | None:
        from narrative.providers.llm import ask_json

        got = ask_json(self.llm, None, "thread_resolution", {"thread": thread, "message": message}, _check_verdict)
        if got is None:
            return None
        self.calls += 1
        return bool(got["resolves"]), float(got["confidence"])
