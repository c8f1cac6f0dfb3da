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
    StorylineKind,
    Stream,
)
from narrative.store.filters import MemoryFilter
from narrative.store.protocol import Store
from narrative.validate import MAX_TEXT
from narrative.write import forget, history, lifecycle, resolve, review
from narrative.write.compose import compose_narrative, joined, topic_parts, user_said
from narrative.write.compress import (
    LABELS,
    CloseTools,
    PreviewEntity,
    compute_deltas,
    duration_text,
    extracted_summary,
    gather_entities,
    importance_of,
    merge_entities,
    suggest_destination,
    transcript,
)
from narrative.write.preview import Preview

if TYPE_CHECKING:
    from narrative.write.turn_types import ConversationEnd

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
    parts: list[dict[str, Any]] = []
    if narrative is None:
        narrative, parts = _by_rule(store, user_id, messages, entities, resolutions, exchanges)
    if assist is not None and messages:
        suggestion = assist.route(narrative, extracted_summary(entities), store.list_storylines(user_id)) or suggestion
    felt = [x for m in exchanges if user_said(m) for x in m.emotions]
    preview = Preview(
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
        parts=parts,
    )
    return _note_restated(store, user_id, preview, messages)


def _by_rule(
    store: Store,
    user_id: str,
    messages: Sequence[Message],
    entities: Sequence[PreviewEntity],
    resolutions: Sequence[resolve.Resolution],
    exchanges: Sequence[MemoryItem],
    removed: Sequence[PreviewEntity] = (),
) -> tuple[str, list[dict[str, Any]]]:
    """The narrative by rule, and one part per topic when the conversation held two (their texts joined);
    nothing is retold from the sentence a ``removed`` item came from."""
    kinds = (StorylineKind.YOUR_STORY, StorylineKind.DEFAULT)
    own = {s.id: s.name for s in store.list_storylines(user_id) if s.kind not in kinds}
    avoid = [str(e.data.get("sentence") or "") for e in removed]
    parts = topic_parts(messages, entities, resolutions, exchanges, own, avoid)
    if parts:
        return joined(parts), parts
    return compose_narrative(messages, entities, resolutions, exchanges, avoid), []


def _note_restated(store: Store, user_id: str, preview: Preview, messages: Sequence[Message]) -> Preview:
    """Which memory already says all the narrative (and each proposed part) says: confirming points to it."""
    cid = preview.conversation_id
    held = review.restated_memory(store, user_id, cid, preview.narrative, messages)
    preview.restates = None if held is None or preview.user_edited else held.id
    for part in preview.parts:
        held = review.restated_memory(store, user_id, cid, str(part["narrative"]), messages)
        part["restates"] = None if held is None else held.id
    return preview


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
    removed = [e for e in preview.entities if e.key in preview.removed]
    preview.narrative, preview.parts = (
        (text, []) if text else _by_rule(store, user_id, messages, kept, resolutions, exchanges, removed)
    )
    return _note_restated(store, user_id, preview, messages)


NARRATIVE_MAX = 5000  # characters of a closing narrative (a person's edit beyond it is refused)


def _bounded(text: str) -> str:
    """A narrative within :data:`NARRATIVE_MAX`: a machine-made one (rules over a long conversation can
    exceed it) ends at the last sentence that fits, never failing the confirm; a person's edit is refused
    before it gets here."""
    if len(text) <= NARRATIVE_MAX:
        return text
    cut = text[: NARRATIVE_MAX - 1]
    end = max(cut.rfind(". "), cut.rfind("; "))
    return (cut[: end + 1] if end > NARRATIVE_MAX // 2 else cut.rstrip()) + "…"


def edit(preview: Preview, narrative: str | None, remove: Sequence[str] = ()) -> Preview:
    """Change the narrative (the original is kept) and/or drop over-extracted entities by key."""
    keys = {e.key for e in preview.entities}
    unknown = [k for k in remove if k not in keys]
    if unknown:
        raise ValidationError(f"no such entity in the preview: {', '.join(unknown)}", field="remove_entities")
    if narrative is not None:
        text = require_text(narrative, "narrative", NARRATIVE_MAX).strip()
        if text != preview.narrative:
            if preview.original_narrative is None:
                preview.original_narrative = preview.narrative
            preview.narrative, preview.user_edited, preview.restates = text, True, None
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
    existing: list[int] = field(default_factory=list)  # memories already stored that the confirmation points to

    def to_dict(self) -> dict[str, Any]:
        end = self.end
        return {
            "conversation_id": self.conversation.id,
            "status": self.conversation.status.value,
            "memories": [
                {
                    "id": m.id,
                    "storyline_id": m.storyline_id,
                    "content": m.content,
                    "user_edited": m.user_edited,
                    "existing": m.id in self.existing,
                }
                for m in self.memories
            ],
            "entity_ids": [e.id for e in self.entities],
            "deltas": [{"id": d.id, "type": d.delta_type.value, "applied": d.applied} for d in self.deltas],
            "resolved_entity_ids": [e.id for e in self.resolved],
            "sealed_narrative_ids": [] if end is None else [n.id for n in end.sealed],
            "compression": {
                "model": self.conversation.compression_model,
                "passes": self.conversation.compression_passes,
                "duration_ms": self.conversation.compression_duration_ms,
            },
        }

    def text(self) -> str:
        lines = [f"conversation #{self.conversation.id} archived"]
        lines += [
            f"  memory #{m.id} (storyline {m.storyline_id}"
            + (", kept as it was said: the preview said no more" if m.id in self.existing else "")
            + f"): {m.content}"
            for m in self.memories
        ]
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
    """ready_to_close → compressing → archived, storing ``parts`` (one memory each) atomically.

    What is stored is what the person confirmed (:mod:`narrative.write.review`): the parts, a part the machine
    wrote that only restates one sentence as the memory already holding it, and none of the items removed.
    """
    started = time.perf_counter()
    cid = preview.conversation_id
    with store.transaction():
        store.lock_user(user_id)  # the running links it seals are no other writer's to extend meanwhile
        lifecycle.begin_compressing(store, user_id, cid)
        messages = store.list_messages(user_id, conversation_id=cid)
        memories: list[MemoryItem] = []
        existing: list[int] = []
        if messages and parts:
            owners = [_owner(e, parts) for e in preview.kept]
            made = [
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
            machine = (
                {preview.narrative, *(str(x["narrative"]) for x in preview.parts)} if not preview.user_edited else set()
            )
            held = [
                review.restated_memory(store, user_id, cid, p.narrative, messages) if p.narrative in machine else None
                for p in parts
            ]
            new = iter(store_memories([m for m, h in zip(made, held, strict=True) if h is None]))
            memories = [
                next(new) if h is None else review.adopt(store, user_id, h, m) for m, h in zip(made, held, strict=True)
            ]
            existing = [h.id for h in held if h is not None]
            history.confirmed(store, memories, cid, now)
        notes = review.removed_turn_notes(store, user_id, preview)  # a removed decision takes its turn note
        forget.forget_memories(store, user_id, notes, now=now, with_="memory")
        entities, key_ids = attach_entities(store, user_id, preview, parts, memories, now)
        deltas, resolved = apply_deltas(store, user_id, preview, memories, key_ids, now)
        end = finish()
        store.set_preview(user_id, cid, None)
        spent = preview.duration_ms + int((time.perf_counter() - started) * 1000)
        conversation = lifecycle.archive(
            store, user_id, cid, now, model=preview.model, passes=preview.passes, duration_ms=spent
        )
    return ConfirmResult(conversation, memories, entities, deltas, resolved, end, existing)


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
    text = _bounded(require_text(part.narrative, "narrative", MAX_TEXT).strip())
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
    """Point the kept entities at their memory (and its storyline); store new ones; drop removed ones, and the
    people the preview left out as things ("we picked Postgres": a product, not a person)."""
    rows = store.list_entities(user_id, conversation_id=preview.conversation_id, limit=100_000)
    existing = {e.id for e in rows}
    held = {i for e in preview.entities for i in e.entity_ids}
    removed = [i for e in preview.entities if e.key in preview.removed for i in e.entity_ids if i in existing]
    removed += [e.id for e in rows if e.entity_type is EntityType.PERSON and e.id not in held]
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
