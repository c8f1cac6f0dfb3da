"""The close path (Talking Rock): preview → review → confirm, without an LLM or with one.

::

    close ──► ready_to_close: a Preview is computed (narrative.write.compress) and kept on the conversation
                 │  edit (narrative, over-extracted entities) · redirect · resume (drops it)
                 ▼
    confirm / split ──► compressing ──► archived: one memory per part, entities attached, deltas applied,
                                         running links sealed, a closing reflection, compression recorded

Confirmed memories are stored with ``stream=narrative``, ``source=narrative`` and
``user_reviewed=True`` — that flag tells them apart from the sealed running-narrative links the
write path stores with the same stream and source.  Each links to every message of the
conversation (provenance), so the archived transcript is one hop away, and carries the
conversation's entities; an edited one keeps the proposed text in ``original_content``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from narrative.checks import require_text
from narrative.errors import InvalidTransition, NotFound, ValidationError
from narrative.model import (
    OPEN_ENTITY_TYPES,
    Conversation,
    ConversationStatus,
    DeltaType,
    Entity,
    EntityType,
    MemoryItem,
    Message,
    Source,
    StateDelta,
    Stream,
)
from narrative.store.filters import MemoryFilter
from narrative.store.protocol import Store
from narrative.write import history, lifecycle, resolve
from narrative.write.compress import (
    CATEGORIES,
    LABELS,
    CloseTools,
    Destination,
    PreviewEntity,
    ProposedDelta,
    compose_narrative,
    compute_deltas,
    duration_text,
    extracted_summary,
    gather_entities,
    importance_of,
    merge_entities,
    public_data,
    suggest_destination,
    transcript,
    user_said,
)

if TYPE_CHECKING:
    from narrative.write.turn import ConversationEnd

# --- the preview -------------------------------------------------------------------------------


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
        )

    def text(self, actions: Sequence[str] | None = None) -> str:
        """The review step as the seed draws it; ``actions`` replaces the closing "[confirm] [edit] …" line
        (an interface lists its own commands there)."""
        title = f' "{self.title}"' if self.title else ""
        lines = [f"Memory from conversation #{self.conversation_id}{title}:", "", f"  {self.narrative}", ""]
        edited = " (edited by you)" if self.user_edited else ""
        if edited:
            lines[-2] += edited
        lines.append("Extracted:")
        lines += [f"  • [{e.key}] {LABELS[e.entity_type]}: {e.label}" for e in self.kept] or ["  • nothing"]
        lines.append("Changes:")
        lines += [f"  • {_delta_line(d)}" for d in self.deltas]
        if not any(d.delta_type in (DeltaType.NEW_WAITING_ON, DeltaType.RESOLVED_WAITING_ON) for d in self.deltas):
            lines.append("  • No new waiting-ons")
        dest, how = self.destination, "suggested" if self.destination == self.suggestion else "chosen by you"
        lines += [
            "",
            f"Destination: {dest.name} (#{dest.storyline_id}, {how}; confidence {dest.confidence:.2f}: {dest.reason})",
            "",
            *(actions if actions is not None else ["[confirm] [edit] [redirect] [split] [resume]"]),
        ]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


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


# --- building the preview ----------------------------------------------------------------------


def build_preview(store: Store, user_id: str, conversation: Conversation, now: datetime, tools: CloseTools) -> Preview:
    """Compute the preview of closing ``conversation`` (reads only; the caller persists it)."""
    started = time.perf_counter()
    assist = tools.assist if tools.assist is not None else None
    messages = store.list_messages(user_id, conversation_id=conversation.id)
    entities = gather_entities(store, user_id, conversation.id, messages, tools.extractor)
    if assist is not None and messages:
        merge_entities(entities, assist.entities(transcript(messages)) or [])
    resolutions = _resolutions(store, user_id, conversation.id, messages, entities, tools)
    exchanges = store.list_memories(
        user_id, MemoryFilter(conversation_ids=[conversation.id], streams=[Stream.CONVERSATION])
    )
    your_story = store.your_story(user_id)
    assert your_story is not None
    suggestion = suggest_destination(store, user_id, messages, entities, resolutions, your_story)
    narrative = None
    if assist is not None and messages:
        when = f"{conversation.started_at:%Y-%m-%d}"
        narrative = assist.narrative(extracted_summary(entities), suggestion.name, when, duration_text(messages))
    narrative = narrative or compose_narrative(messages, entities, resolutions, exchanges)
    if assist is not None and messages:
        suggestion = assist.route(narrative, extracted_summary(entities), store.list_storylines(user_id)) or suggestion
    felt = [x for m in exchanges if user_said(m) for x in m.emotions]
    return Preview(
        conversation_id=conversation.id,
        title=conversation.title,
        narrative=narrative,
        entities=entities,
        deltas=compute_deltas(store, user_id, conversation.id, entities, resolutions),
        destination=suggestion,
        suggestion=suggestion,
        message_ids=[m.id for m in messages],
        computed_at=now,
        model=assist.identity if assist is not None and assist.calls else "heuristic",
        passes=1 + (assist.calls if assist is not None else 0),
        duration_ms=int((time.perf_counter() - started) * 1000),
        importance=importance_of(entities, resolutions, exchanges),
        emotions=list(dict.fromkeys(felt))[:4],
    )


def _resolutions(
    store: Store,
    user_id: str,
    conversation_id: int,
    messages: Sequence[Message],
    entities: Sequence[PreviewEntity],
    tools: CloseTools,
) -> list[resolve.Resolution]:
    """Open items this conversation settles: earlier ones, and its own when a later turn settles them."""
    own = [
        e
        for e in store.list_entities(user_id, conversation_id=conversation_id, active=True, limit=100_000)
        if e.entity_type in OPEN_ENTITY_TYPES
    ]
    earlier = [
        e
        for e in store.list_entities(user_id, entity_types=list(OPEN_ENTITY_TYPES), active=True, limit=500)
        if e.conversation_id != conversation_id
    ]
    earlier.sort(key=lambda e: (e.created_at, e.id))
    tagged = [
        (
            e.entity_type,
            e.entity_ids[0] if e.entity_ids else None,
            None if e.entity_ids else e.key,
            e.message_id or -1,
            str(e.data.get("sentence", "")),
        )
        for e in entities
    ]
    evidence = resolve.evidence_from(messages, tagged)
    judge = None if tools.assist is None else tools.assist.resolves
    return resolve.find_resolutions([*earlier, *own], evidence, judge=judge, similarity=tools.similarity)


# --- review ------------------------------------------------------------------------------------


def load_preview(store: Store, user_id: str, conversation: Conversation) -> Preview:
    """The stored preview of a ready_to_close conversation; refused in any other state."""
    if conversation.status is not ConversationStatus.READY_TO_CLOSE:
        raise InvalidTransition(
            f"conversation {conversation.id} is {conversation.status.value}: only a conversation that is"
            " ready_to_close has a preview (close it first)"
        )
    data = store.get_preview(user_id, conversation.id)
    if data is None:
        raise InvalidTransition(f"conversation {conversation.id} has no preview: resume it and close it again")
    return Preview.from_dict(data)


def recompose(store: Store, user_id: str, conversation: Conversation, preview: Preview, tools: CloseTools) -> Preview:
    """After extracted items were removed: the changes and (unless you wrote it) the narrative, without them.

    The resolutions are found again from the kept items, a resolution of a removed item is dropped, and the
    narrative is composed again the way :func:`build_preview` composes it (the LLM's wording when one helps).
    """
    messages = store.list_messages(user_id, conversation_id=conversation.id)
    kept = preview.kept
    gone = {i for e in preview.entities if e.key in preview.removed for i in e.entity_ids}
    resolutions = [
        r for r in _resolutions(store, user_id, conversation.id, messages, kept, tools) if r.entity.id not in gone
    ]
    preview.deltas = compute_deltas(store, user_id, conversation.id, kept, resolutions)
    if preview.user_edited:
        return preview
    exchanges = store.list_memories(
        user_id, MemoryFilter(conversation_ids=[conversation.id], streams=[Stream.CONVERSATION])
    )
    text = None
    if tools.assist is not None and messages:
        when = f"{conversation.started_at:%Y-%m-%d}"
        text = tools.assist.narrative(extracted_summary(kept), preview.destination.name, when, duration_text(messages))
    preview.narrative = text or compose_narrative(messages, kept, resolutions, exchanges)
    return preview


def edit(preview: Preview, narrative: str | None, remove: Sequence[str] = ()) -> Preview:
    """Change the narrative (the original is kept) and/or drop over-extracted entities by key."""
    keys = {e.key for e in preview.entities}
    unknown = [k for k in remove if k not in keys]
    if unknown:
        raise ValidationError(f"no such entity in the preview: {', '.join(unknown)}", field="remove_entities")
    if narrative is not None:
        text = require_text(narrative, "narrative", 5000).strip()
        if text != preview.narrative:
            if preview.original_narrative is None:
                preview.original_narrative = preview.narrative
            preview.narrative, preview.user_edited = text, True
    preview.removed = list(dict.fromkeys([*preview.removed, *remove]))
    return preview


def edits_of(preview: Preview) -> list[str]:
    """Your changes to a preview, one line each (what resuming the conversation discards)."""
    edits = []
    if preview.user_edited:
        edits.append("the memory's wording")
    if preview.removed:
        edits.append("removed extracted items: " + ", ".join(preview.removed))
    if preview.destination != preview.suggestion:
        edits.append(f"storyline: {preview.destination.name} (#{preview.destination.storyline_id})")
    return edits


# --- confirm -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """One memory to store: its text, its storyline, the preview entities it should carry."""

    narrative: str
    storyline_id: int
    entity_keys: tuple[str, ...] = ()


@dataclass
class ConfirmResult:
    conversation: Conversation
    memories: list[MemoryItem]
    entities: list[Entity]
    deltas: list[StateDelta]
    resolved: list[Entity]
    end: ConversationEnd | None = None

    def to_dict(self) -> dict[str, Any]:
        end = self.end
        return {
            "conversation_id": self.conversation.id,
            "status": self.conversation.status.value,
            "memories": [
                {"id": m.id, "storyline_id": m.storyline_id, "content": m.content, "user_edited": m.user_edited}
                for m in self.memories
            ],
            "entity_ids": [e.id for e in self.entities],
            "deltas": [{"id": d.id, "type": d.delta_type.value, "applied": d.applied} for d in self.deltas],
            "resolved_entity_ids": [e.id for e in self.resolved],
            "sealed_narrative_ids": [] if end is None else [n.id for n in end.sealed],
            "reflection_ids": [] if end is None else [m.id for m in end.reflections],
            "compression": {
                "model": self.conversation.compression_model,
                "passes": self.conversation.compression_passes,
                "duration_ms": self.conversation.compression_duration_ms,
            },
        }

    def text(self) -> str:
        lines = [f"conversation #{self.conversation.id} archived"]
        lines += [f"  memory #{m.id} (storyline {m.storyline_id}): {m.content}" for m in self.memories]
        lines += [f"  resolved: #{e.id} {e.name}" for e in self.resolved]
        lines.append(f"  {len(self.entities)} entities attached, {len(self.deltas)} changes applied")
        return "\n".join(lines)


def commit(
    store: Store,
    user_id: str,
    preview: Preview,
    parts: Sequence[Part],
    now: datetime,
    store_memories: Callable[[list[MemoryItem]], list[MemoryItem]],
    finish: Callable[[], ConversationEnd],
    stamp: Callable[[int], int | None],
) -> ConfirmResult:
    """ready_to_close → compressing → archived, storing ``parts`` (one memory each) atomically."""
    started = time.perf_counter()
    cid = preview.conversation_id
    with store.transaction():
        store.lock_user(user_id)  # the running links it seals are no other writer's to extend meanwhile
        lifecycle.begin_compressing(store, user_id, cid)
        messages = store.list_messages(user_id, conversation_id=cid)
        memories: list[MemoryItem] = []
        if messages and parts:
            owners = [_owner(e, parts) for e in preview.kept]
            memories = store_memories(
                [
                    _memory(
                        user_id,
                        preview,
                        p,
                        [e for e, o in zip(preview.kept, owners, strict=True) if o == i],
                        messages,
                        now,
                        stamp(p.storyline_id),
                    )
                    for i, p in enumerate(parts)
                ]
            )
            history.confirmed(store, memories, cid, now)
        entities, key_ids = attach_entities(store, user_id, preview, parts, memories, now)
        deltas, resolved = apply_deltas(store, user_id, preview, memories, key_ids, now)
        end = finish()
        store.set_preview(user_id, cid, None)
        spent = preview.duration_ms + int((time.perf_counter() - started) * 1000)
        conversation = lifecycle.archive(
            store, user_id, cid, now, model=preview.model, passes=preview.passes, duration_ms=spent
        )
    return ConfirmResult(conversation, memories, entities, deltas, resolved, end)


def _memory(
    user_id: str,
    preview: Preview,
    part: Part,
    carried: Sequence[PreviewEntity],
    messages: Sequence[Message],
    now: datetime,
    narrative_id: int | None,
) -> MemoryItem:
    """One part's memory; its key points are the extracted items it carries (see :func:`_owner`)."""
    text = require_text(part.narrative, "narrative", 5000).strip()
    edited = text != preview.narrative or preview.user_edited
    original = preview.original_narrative or preview.narrative
    points = "; ".join(f"{LABELS[e.entity_type]}: {e.label}" for e in carried if e.entity_type is not EntityType.PERSON)
    return MemoryItem(
        id=0,
        user_id=user_id,
        stream=Stream.NARRATIVE,
        source=Source.NARRATIVE,
        content=text,
        importance=preview.importance,
        emotions=tuple(preview.emotions),
        conversation_id=preview.conversation_id,
        storyline_id=part.storyline_id,
        narrative_id=narrative_id,
        message_ids=tuple(m.id for m in messages),
        key_points=points[:2000],
        user_reviewed=True,
        user_edited=edited,
        original_content=original if edited else None,
        extraction_model=preview.model,
        created_at=now,
        event_at=messages[-1].created_at,
    )


def _owner(e: PreviewEntity, parts: Sequence[Part]) -> int:
    """The index of the part that carries an extracted item: the part it was assigned to, else the first
    part filed under the item's storyline, else the first part."""
    for index, part in enumerate(parts):
        if e.key in part.entity_keys:
            return index
    for index, part in enumerate(parts):
        if e.storyline_id is not None and part.storyline_id == e.storyline_id:
            return index
    return 0


def attach_entities(
    store: Store, user_id: str, preview: Preview, parts: Sequence[Part], memories: Sequence[MemoryItem], now: datetime
) -> tuple[list[Entity], dict[str, int]]:
    """Point the kept entities at their memory (and its storyline); store new ones; drop removed ones."""
    existing = {e.id for e in store.list_entities(user_id, conversation_id=preview.conversation_id, limit=100_000)}
    removed = [i for e in preview.entities if e.key in preview.removed for i in e.entity_ids if i in existing]
    store.delete_entities(user_id, removed)
    attached: list[Entity] = []
    key_ids: dict[str, int] = {}
    if not memories:
        return attached, key_ids
    for e in preview.kept:
        memory = memories[_owner(e, parts)]
        rows = [
            store.update_entity(user_id, eid, memory_id=memory.id, storyline_id=memory.storyline_id)
            for eid in e.entity_ids
            if eid in existing
        ]
        if not e.entity_ids:
            active = str(e.data.get("status", "")).lower() != "completed"
            rows = [
                store.insert_entity(
                    user_id,
                    e.entity_type,
                    e.name,
                    now,
                    data=e.data,
                    memory_id=memory.id,
                    conversation_id=preview.conversation_id,
                    storyline_id=memory.storyline_id,
                    is_active=active,
                )
            ]
        attached += rows
        if rows:
            key_ids[e.key] = rows[0].id
    return attached, key_ids


def apply_deltas(
    store: Store, user_id: str, preview: Preview, memories: Sequence[MemoryItem], key_ids: dict[str, int], now: datetime
) -> tuple[list[StateDelta], list[Entity]]:
    """Store each delta (applied) and resolve what it settles."""
    stored: list[StateDelta] = []
    resolved: list[Entity] = []
    first = memories[0].id if memories else None
    for d in preview.deltas:
        data = dict(d.data)
        if d.delta_type in (DeltaType.RESOLVED_WAITING_ON, DeltaType.RESOLVED_THREAD):
            by_entity = data.get("resolved_by_entity_id") or key_ids.get(str(data.get("resolved_by_key")))
            data["resolved_by_entity_id"] = by_entity
            try:
                target = store.get_entity(user_id, int(data["entity_id"]))
            except NotFound:  # deleted since the preview: nothing to resolve
                continue
            if target.is_active:
                resolved.append(
                    store.resolve_entity(
                        user_id, target.id, now, resolved_by_memory_id=first, resolved_by_entity_id=by_entity
                    )
                )
            else:
                data["already_resolved"] = True
        elif data.get("key") in preview.removed:
            continue
        stored.append(
            store.insert_state_delta(
                user_id, d.delta_type, data, now, memory_id=first, conversation_id=preview.conversation_id, applied=True
            )
        )
    return stored, resolved
