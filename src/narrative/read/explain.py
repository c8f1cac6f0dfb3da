"""Uses and their explanations: "why did you think that?".

A **use** is one time memories were used — a recall, a context build, a classification … — with a
reference per memory (influence type, score, reasoning, rank). Here:

* ``check_references`` validates what a caller wants to record (nothing is stored when one is bad);
* ``explain_use`` turns a use into which memories, why, and from which messages (provenance down to
  the message: id, position, speaker, conversation, a text snippet), plus the outcomes recorded for it;
* ``outcome_record`` builds what ``learn_from_outcome`` stores.

Outcomes (Talking Rock stage 4). Judging a use never edits it (uses are an audit trail): it adds a new
use of kind ``outcome`` with ``outcome`` set, ``meta = {"use_id": <judged use>, "kind": …, "correction": …,
"message_id": …}`` and the judged use's references copied (reasoning prefixed with the outcome), so
``influence_chain(memory)`` shows the verdict beside the use it judged, and later reasoning over those
memories sees the correction. When a conversation is active the engine also appends a system message
describing the outcome to it, so it stays in the transcript and is compressed with the conversation.
Memory deletion removes its references (``ON DELETE CASCADE``); an explanation lists what is left.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Any

from narrative.checks import require_choice, require_positive
from narrative.errors import NotFound, ValidationError
from narrative.model import InfluenceType, MemoryItem, Message, Use, UseKind, UseReference
from narrative.store.protocol import Store

__all__ = [
    "Outcome",
    "check_references",
    "explain_use",
    "format_explanation",
    "influence_chain",
    "linked_outcomes",
    "outcome_record",
    "use_dict",
]

SNIPPET = 160  # characters of each source message shown
MESSAGES_PER_MEMORY = 12
OUTCOME_SCAN = 200  # how many uses are read to find the outcomes recorded for a use
MAX_REASONING = 4000


class Outcome(StrEnum):
    APPROVED = "approved"
    CORRECTED = "corrected"
    REJECTED = "rejected"


# --- recording ---------------------------------------------------------------------------------------------


def _reference(raw: object, rank: int) -> UseReference:
    if isinstance(raw, UseReference):
        memory_id, influence, score, reasoning = raw.memory_id, raw.influence_type, raw.score, raw.reasoning
    elif isinstance(raw, dict):
        if "memory_id" not in raw or "influence_type" not in raw:
            raise ValidationError("a reference needs memory_id and influence_type", "references")
        memory_id, influence = raw["memory_id"], raw["influence_type"]
        score, reasoning = raw.get("score", 0.0), raw.get("reasoning", "")
    elif isinstance(raw, list | tuple) and 2 <= len(raw) <= 4:
        memory_id, influence, score, reasoning = (*raw, 0.0, "")[:4] if len(raw) == 2 else (*raw, "")[:4]
    else:
        raise ValidationError(
            "a reference is (memory_id, influence_type[, score[, reasoning]]), a dict or a UseReference", "references"
        )
    if isinstance(memory_id, bool) or not isinstance(memory_id, int):
        raise ValidationError(f"memory_id must be an integer, got {memory_id!r}", "references")
    kind = require_choice(InfluenceType, influence, "influence_type")
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
        raise ValidationError(f"score must be a finite number, got {score!r}", "references")
    if not isinstance(reasoning, str) or len(reasoning) > MAX_REASONING:
        raise ValidationError(f"reasoning must be text of at most {MAX_REASONING} characters", "references")
    return UseReference(memory_id, kind, float(score), reasoning.strip(), rank)


def check_references(store: Store, user_id: str, references: Iterable[object]) -> list[UseReference]:
    """Validated references, ranked in the given order; unknown memories raise NotFound."""
    if isinstance(references, str | bytes | dict):
        raise ValidationError("references must be a list", "references")
    refs = [_reference(raw, rank) for rank, raw in enumerate(references, start=1)]
    ids = [r.memory_id for r in refs]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValidationError(f"each memory may be referenced once per use; repeated: {duplicates}", "references")
    found = {m.id for m in store.get_memories(user_id, ids)}
    missing = [i for i in ids if i not in found]
    if missing:
        raise NotFound(f"memories not found: {missing}")
    return refs


def outcome_record(
    use: Use, outcome: Outcome, correction: str | None
) -> tuple[str, list[UseReference], dict[str, Any]]:
    """(system message text, references, meta) for an outcome of ``use``."""
    ids = ", ".join(f"#{r.memory_id}" for r in use.references) or "none"
    text = f"Outcome of {use.kind.value} #{use.id} ({use.query!r}): {outcome.value}."
    if correction:
        text += f" Correction: {correction}"
    text += f" Memories that informed it: {ids}."
    references = [
        UseReference(
            r.memory_id,
            r.influence_type,
            r.score,
            f"{outcome.value} (use #{use.id}): {r.reasoning}"[:MAX_REASONING],
            r.rank,
        )
        for r in use.references
    ]
    meta: dict[str, Any] = {"use_id": use.id, "kind": use.kind.value, "correction": correction}
    return text, references, meta


# --- reading -----------------------------------------------------------------------------------------------


def use_dict(use: Use) -> dict[str, Any]:
    return {
        "id": use.id,
        "kind": use.kind.value,
        "query": use.query,
        "created_at": use.created_at.isoformat(),
        "conversation_id": use.conversation_id,
        "outcome": use.outcome,
        "meta": dict(use.meta),
        "references": [
            {
                "memory_id": r.memory_id,
                "influence_type": r.influence_type.value,
                "score": r.score,
                "reasoning": r.reasoning,
                "rank": r.rank,
            }
            for r in use.references
        ],
    }


def influence_chain(store: Store, user_id: str, memory_id: int, limit: int = 20) -> list[Use]:
    """Every use of a memory, newest first (NotFound for an unknown memory)."""
    require_positive(limit, "limit")
    store.get_memory(user_id, memory_id)
    return store.uses_of_memory(user_id, memory_id, limit=limit)


def linked_outcomes(store: Store, user_id: str, use: Use) -> list[Use]:
    """The outcome uses recorded for ``use``, oldest first (searched among the newest uses of its memories)."""
    if use.references:
        candidates = store.uses_of_memory(user_id, use.references[0].memory_id, limit=OUTCOME_SCAN)
    else:
        candidates = store.list_uses(user_id, limit=OUTCOME_SCAN)
    found = [u for u in candidates if u.kind is UseKind.OUTCOME and u.meta.get("use_id") == use.id]
    return sorted(found, key=lambda u: u.id)


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SNIPPET else flat[: SNIPPET - 1].rstrip() + "…"


def _message_dict(m: Message) -> dict[str, Any]:
    return {
        "message_id": m.id,
        "position": m.position,
        "role": m.role.value,
        "speaker": m.speaker,
        "conversation_id": m.conversation_id,
        "created_at": m.created_at.isoformat(),
        "text": _snippet(m.content),
    }


def _memory_entry(
    ref: UseReference, memory: MemoryItem, messages: dict[int, Message], storylines: dict[int, str]
) -> dict[str, Any]:
    sources = [messages[i] for i in memory.message_ids if i in messages]
    shown = sources[-MESSAGES_PER_MEMORY:]
    return {
        "memory_id": memory.id,
        "rank": ref.rank,
        "influence_type": ref.influence_type.value,
        "score": ref.score,
        "why": ref.reasoning,
        "content": memory.content,
        "stream": memory.stream.value,
        "source": memory.source.value,
        "importance": memory.importance,
        "created_at": (memory.event_at or memory.created_at).isoformat(),
        "storyline": None
        if memory.storyline_id is None
        else {"id": memory.storyline_id, "name": storylines.get(memory.storyline_id, "")},
        "narrative_id": memory.narrative_id,
        "conversation_id": memory.conversation_id,
        "message_ids": list(memory.message_ids),
        "messages": [_message_dict(m) for m in shown],
        "messages_not_shown": len(sources) - len(shown),
    }


def explain_use(store: Store, user_id: str, use_id: int) -> dict[str, Any]:
    """Which memories a use drew on, why, and from which messages; its outcomes; its original if an outcome."""
    use = store.get_use(user_id, use_id)
    memories = {m.id: m for m in store.get_memories(user_id, [r.memory_id for r in use.references])}
    message_ids = [i for m in memories.values() for i in m.message_ids[-MESSAGES_PER_MEMORY:]]
    messages = {m.id: m for m in store.get_messages(user_id, message_ids)} if message_ids else {}
    storylines = {s.id: s.name for s in store.list_storylines(user_id, include_archived=True)}
    entries = [
        _memory_entry(r, memories[r.memory_id], messages, storylines) for r in use.references if r.memory_id in memories
    ]
    result: dict[str, Any] = {
        "use": use_dict(use),
        "memories": entries,
        "outcomes": [
            {
                "use_id": u.id,
                "outcome": u.outcome,
                "correction": u.meta.get("correction"),
                "message_id": u.meta.get("message_id"),
                "created_at": u.created_at.isoformat(),
            }
            for u in linked_outcomes(store, user_id, use)
        ],
        "original": None,
    }
    original_id = use.meta.get("use_id") if use.kind is UseKind.OUTCOME else None
    if isinstance(original_id, int):
        try:
            result["original"] = use_dict(store.get_use(user_id, original_id))
        except NotFound:
            result["original"] = None
    result["summary"] = _summary(use, entries)
    return result


def _summary(use: Use, entries: Sequence[dict[str, Any]]) -> str:
    what = f"{use.kind.value} #{use.id} of {use.query!r}"
    if use.outcome:
        what += f" ({use.outcome})"
    if not entries:
        return f"{what} drew on no memories that still exist."
    kinds: dict[str, int] = {}
    for e in entries:
        kinds[e["influence_type"]] = kinds.get(e["influence_type"], 0) + 1
    parts = ", ".join(f"{n} {k}" for k, n in kinds.items())
    conversations = sorted({e["conversation_id"] for e in entries if e["conversation_id"] is not None})
    source = f" from conversation(s) {', '.join(map(str, conversations))}" if conversations else ""
    return f"{what} drew on {len(entries)} memories ({parts}){source}."


def format_explanation(explanation: dict[str, Any]) -> str:
    """The explanation as text for a person."""
    use = explanation["use"]
    lines = [explanation["summary"], f"  at {use['created_at']}"]
    if explanation.get("original"):
        o = explanation["original"]
        lines.append(f"  judges {o['kind']} #{o['id']} of {o['query']!r}")
    for e in explanation["memories"]:
        lines.append(f"#{e['memory_id']} [{e['influence_type']}, score {e['score']:.3f}] {_snippet(e['content'])}")
        if e["why"]:
            lines.append(f"    why: {e['why']}")
        where = f"storyline {e['storyline']['name']!r}" if e["storyline"] else "no storyline"
        lines.append(f"    {e['stream']} memory, {where}, conversation {e['conversation_id']}")
        for m in e["messages"]:
            who = m["speaker"] or m["role"]
            lines.append(
                f"    from message #{m['message_id']} (position {m['position']}, conversation "
                f"{m['conversation_id']}) {who}: {m['text']}"
            )
        if e["messages_not_shown"]:
            lines.append(f"    … and {e['messages_not_shown']} earlier message(s)")
    for o in explanation["outcomes"]:
        note = f": {o['correction']}" if o["correction"] else ""
        lines.append(f"outcome #{o['use_id']}: {o['outcome']}{note}")
    return "\n".join(lines)
