"""Memory-augmented reasoning context (Talking Rock, stages 1–3): memories, open threads, a prompt section.

Which memories:

* **search** — the best ``top_k`` hybrid-search hits for the request; a decomposition also gets the
  best 3 decision-stream memories and the best 3 memories tied to task entities (the seed's "similar
  tasks" and "relevant decisions");
* **entity match** — entities (active or resolved) whose names overlap the request's content words
  (stopwords dropped, simple plural folding) — two shared words, every word of the name, or one shared
  word that is capitalised in the name (a proper name such as "Sam") — lead to the memories they were
  extracted from, best overlap first, at most ``top_k``;
* **active entities** (with ``include_active_entities``) — open threads: question_opened, waiting_on, task.

Influence type of each memory (the first rule that applies):

1. ``entity_reference`` — it came from an entity the request names;
2. ``intent_verification`` — the kind is verification (every memory is evidence for or against a reading);
3. ``disambiguation`` — it is the best search match (what the request most likely refers to);
4. ``pattern_match`` — it shares the best match's storyline (how this topic went before);
5. ``disambiguation`` — otherwise (another reading the request might have).

The score is the hybrid-search score for a search hit, the name-overlap fraction (0–1) for a memory
found only through an entity. The reasoning says why, in words.

Earlier outcomes feed back (the compounding loop): when a recent use was ``corrected`` or ``rejected``,
the memories that informed it carry that note into the prompt section.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from narrative.checks import require_choice, require_positive, require_text
from narrative.errors import ValidationError
from narrative.model import (
    OPEN_ENTITY_TYPES,
    Entity,
    EntityType,
    InfluenceType,
    MemoryItem,
    Stream,
    UseKind,
    UseReference,
)
from narrative.providers.prompts import render_prompt
from narrative.read.search import SearchHit
from narrative.store.filters import MemoryFilter
from narrative.store.protocol import Store
from narrative.text.patterns import STOPWORDS

__all__ = [
    "KINDS",
    "ReasoningContext",
    "ReasoningMemory",
    "build_reasoning",
    "content_words",
    "match_entities",
]

KINDS = (UseKind.CLASSIFICATION, UseKind.DECOMPOSITION, UseKind.VERIFICATION)
ENTITY_SCAN = 500  # how many entities (newest first) are matched against the request
EXTRA_SEARCH = 3  # decision / task memories added to a decomposition
CORRECTION_SCAN = 50  # how many recent uses are read for corrections
LINE_WORDS = 50


class Search(Protocol):
    """Hybrid search for the reasoning context; ``listing`` drops the similarity floor for a named category."""

    def __call__(
        self, query: str, k: int, where: MemoryFilter | None = None, listing: bool = False
    ) -> list[SearchHit]: ...


_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")
_HEADINGS: dict[UseKind, tuple[tuple[str, str], ...]] = {
    UseKind.CLASSIFICATION: (("memories", "Relevant memories (id: text):"), ("threads", "Open threads:")),
    UseKind.DECOMPOSITION: (
        ("similar_tasks", "Similar past tasks (id: text):"),
        ("decisions", "Relevant decisions (id: text):"),
        ("blockers", "Open blockers:"),
    ),
    UseKind.VERIFICATION: (
        ("memories", "Memories where the user asked something similar (id: text):"),
        ("entity_memories", "Memories about the same people, tasks or projects (id: text):"),
    ),
}


@dataclass(frozen=True)
class ReasoningMemory:
    """One memory in a reasoning context and its part: influence type, score, reasoning, how it was found."""

    memory: MemoryItem
    influence: InfluenceType
    score: float
    reasoning: str
    found_by: tuple[str, ...]  # "search", "entity", "decisions", "tasks"
    entities: tuple[Entity, ...] = ()
    corrections: tuple[str, ...] = ()

    def line(self) -> str:
        m = self.memory
        when = (m.event_at or m.created_at).date().isoformat()
        text = " ".join(m.content.split()[:LINE_WORDS]) + ("…" if len(m.content.split()) > LINE_WORDS else "")
        note = "".join(f' [earlier correction: "{c}"]' for c in self.corrections)
        return f"{m.id}: {text} ({m.stream.value}, {when}, importance {m.importance}){note}"

    def reference(self, rank: int) -> UseReference:
        return UseReference(self.memory.id, self.influence, round(self.score, 6), self.reasoning, rank)

    def to_dict(self) -> dict[str, Any]:
        m = self.memory
        return {
            "memory_id": m.id,
            "content": m.content,
            "stream": m.stream.value,
            "importance": m.importance,
            "storyline_id": m.storyline_id,
            "conversation_id": m.conversation_id,
            "created_at": (m.event_at or m.created_at).isoformat(),
            "influence_type": self.influence.value,
            "score": round(self.score, 6),
            "reasoning": self.reasoning,
            "found_by": list(self.found_by),
            "entities": [{"id": e.id, "type": e.entity_type.value, "name": e.name} for e in self.entities],
            "corrections": list(self.corrections),
        }


@dataclass(frozen=True)
class ReasoningContext:
    """What a model needs to classify, decompose or verify ``request`` with memory.

    ``prompt`` is a ready section to paste into a prompt; ``variables`` fill the memory parts of the
    bundled ``reasoning_<kind>`` template, and ``render(**extra)`` renders it whole (a decomposition
    needs ``classification=…``, a verification ``classification=…`` and ``proposed_action=…``).
    """

    request: str
    kind: UseKind
    memories: tuple[ReasoningMemory, ...]
    entities: tuple[Entity, ...]
    matched_entities: tuple[Entity, ...]
    variables: dict[str, str]
    prompt: str
    use_id: int | None = None

    def references(self) -> list[UseReference]:
        return [m.reference(rank) for rank, m in enumerate(self.memories, start=1)]

    def render(self, **extra: Any) -> tuple[str, str]:
        """``(system, user)`` of the ``reasoning_<kind>`` prompt with these memories filled in."""
        return render_prompt(f"reasoning_{self.kind.value}", {"request": self.request, **self.variables, **extra})

    def to_dict(self) -> dict[str, Any]:
        return {
            "request": self.request,
            "kind": self.kind.value,
            "use_id": self.use_id,
            "memories": [m.to_dict() for m in self.memories],
            "entities": [_entity_dict(e) for e in self.entities],
            "matched_entities": [_entity_dict(e) for e in self.matched_entities],
            "variables": dict(self.variables),
            "prompt": self.prompt,
        }


def _entity_dict(e: Entity) -> dict[str, Any]:
    return {
        "id": e.id,
        "type": e.entity_type.value,
        "name": e.name,
        "active": e.is_active,
        "memory_id": e.memory_id,
        "storyline_id": e.storyline_id,
        "created_at": e.created_at.isoformat(),
    }


# --- entity matching ------------------------------------------------------------------------------------------


def _fold(word: str) -> str:
    word = word.lower().strip("'-")
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    return word


def content_words(text: str) -> dict[str, bool]:
    """Folded content words of ``text`` → whether one of its spellings was capitalised."""
    words: dict[str, bool] = {}
    for raw in _WORD.findall(text):
        if raw.lower() in STOPWORDS or len(raw) < 3:
            continue
        folded = _fold(raw)
        if folded and folded not in STOPWORDS:
            words[folded] = words.get(folded, False) or raw[0].isupper()
    return words


def match_entities(entities: Sequence[Entity], request: str) -> list[tuple[Entity, float, tuple[str, ...]]]:
    """Entities the request names: (entity, overlap fraction, shared words), best overlap first."""
    asked = content_words(request)
    found = []
    for entity in entities:
        named = content_words(entity.name)
        shared = tuple(sorted(set(named) & set(asked)))
        if not shared:
            continue
        proper = any(named[w] for w in shared)
        if len(shared) >= 2 or len(shared) == len(named) or proper:
            found.append((entity, len(shared) / len(named), shared))
    found.sort(key=lambda f: (-f[1], -f[0].id))
    return found


# --- selection -----------------------------------------------------------------------------------------------


@dataclass
class _Pick:
    memory: MemoryItem
    hit: SearchHit | None = None
    found_by: list[str] = field(default_factory=list)
    entities: list[tuple[Entity, float, tuple[str, ...]]] = field(default_factory=list)


def _influence(pick: _Pick, kind: UseKind, best: _Pick | None) -> tuple[InfluenceType, float, str]:
    why = "" if pick.hit is None else str(pick.hit.why()["summary"])
    score = pick.hit.score if pick.hit is not None else max((e[1] for e in pick.entities), default=0.0)
    if pick.entities:
        named = "; ".join(f"names {e.entity_type.value} {e.name!r} ({', '.join(w)})" for e, _, w in pick.entities)
        return InfluenceType.ENTITY_REFERENCE, score, named + (f"; also a search match: {why}" if why else "")
    if kind is UseKind.VERIFICATION:
        return InfluenceType.INTENT_VERIFICATION, score, f"evidence for how the user means it: {why}"
    if pick is best:
        return InfluenceType.DISAMBIGUATION, score, f"best match for the request: {why}"
    storyline = None if best is None else best.memory.storyline_id
    if storyline is not None and pick.memory.storyline_id == storyline:
        return InfluenceType.PATTERN_MATCH, score, f"same storyline as the best match: {why}"
    return InfluenceType.DISAMBIGUATION, score, f"another possible reading: {why}"


def _picks(
    store: Store, user_id: str, request: str, kind: UseKind, top_k: int, search: Search
) -> tuple[list[_Pick], list[Entity]]:
    picks: dict[int, _Pick] = {}

    def add(hits: Sequence[SearchHit], label: str) -> None:
        for hit in hits:
            pick = picks.setdefault(hit.memory.id, _Pick(hit.memory, hit))
            pick.found_by.append(label)

    add(search(request, top_k, None), "search")
    if kind is UseKind.DECOMPOSITION:
        add(search(request, EXTRA_SEARCH, MemoryFilter(streams=[Stream.DECISION]), listing=True), "decisions")
        add(search(request, EXTRA_SEARCH, MemoryFilter(entity_types=[EntityType.TASK]), listing=True), "tasks")
    matches = match_entities(store.list_entities(user_id, limit=ENTITY_SCAN), request)
    by_memory: dict[int, list[tuple[Entity, float, tuple[str, ...]]]] = {}
    for match in matches:
        if match[0].memory_id is not None:
            by_memory.setdefault(match[0].memory_id, []).append(match)
    wanted = list(by_memory)[:top_k]
    for memory in store.get_memories(user_id, wanted):
        pick = picks.setdefault(memory.id, _Pick(memory))
        pick.found_by.append("entity")
        pick.entities = by_memory[memory.id]
    return list(picks.values()), [m[0] for m in matches if m[0].memory_id in set(wanted)]


def _corrections(store: Store, user_id: str, memory_ids: set[int]) -> dict[int, list[str]]:
    notes: dict[int, list[str]] = {}
    for use in store.list_uses(user_id, limit=CORRECTION_SCAN):
        if use.kind is not UseKind.OUTCOME or use.outcome not in ("corrected", "rejected"):
            continue
        note = str(use.meta.get("correction") or f"{use.outcome} (use #{use.meta.get('use_id', '?')})")
        for ref in use.references:
            if ref.memory_id in memory_ids and note not in notes.get(ref.memory_id, []):
                notes.setdefault(ref.memory_id, []).append(note)
    return notes


# --- the prompt section -------------------------------------------------------------------------------------


def _thread_line(entity: Entity) -> str:
    return f"- {entity.entity_type.value} #{entity.id}: {entity.name} (since {entity.created_at.date().isoformat()})"


def _listing(lines: Sequence[str]) -> str:
    return "\n".join(lines) if lines else "(none)"


def _variables(kind: UseKind, memories: Sequence[ReasoningMemory], active: Sequence[Entity]) -> dict[str, str]:
    lines = [m.line() for m in memories]
    if kind is UseKind.CLASSIFICATION:
        return {"memories": _listing(lines), "threads": _listing([_thread_line(e) for e in active])}
    if kind is UseKind.DECOMPOSITION:
        decisions = [m.line() for m in memories if m.memory.stream is Stream.DECISION]
        tasks = [m.line() for m in memories if m.memory.stream is not Stream.DECISION]
        blockers = [_thread_line(e) for e in active if e.entity_type is EntityType.WAITING_ON]
        return {"similar_tasks": _listing(tasks), "decisions": _listing(decisions), "blockers": _listing(blockers)}
    similar = [m.line() for m in memories if "entity" not in m.found_by]
    about = [m.line() for m in memories if "entity" in m.found_by]
    return {"memories": _listing(similar), "entity_memories": _listing(about)}


def prompt_section(kind: UseKind, variables: dict[str, str]) -> str:
    """The memory part of the kind's prompt, headed like the bundled template."""
    return "\n\n".join(f"{heading}\n{variables[name]}" for name, heading in _HEADINGS[kind])


# --- entry point -------------------------------------------------------------------------------------------


def check_kind(kind: object) -> UseKind:
    chosen = require_choice(UseKind, kind, "kind")
    if chosen not in KINDS:
        raise ValidationError(f"kind must be one of {', '.join(k.value for k in KINDS)}; got {kind!r}", "kind")
    return chosen


def build_reasoning(
    store: Store,
    user_id: str,
    request: str,
    kind: str = "classification",
    top_k: int = 5,
    *,
    search: Search,
    include_active_entities: bool = True,
) -> ReasoningContext:
    """The memories, open threads and prompt section for reasoning about ``request`` (rules above)."""
    require_text(request, "request", max_length=10_000)
    chosen_kind = check_kind(kind)
    top_k = require_positive(top_k, "top_k")
    if top_k > 50:
        raise ValidationError("top_k must be at most 50", "top_k")
    picks, matched = _picks(store, user_id, request, chosen_kind, top_k, search)
    best = next((p for p in picks if p.hit is not None and "search" in p.found_by), None)
    notes = _corrections(store, user_id, {p.memory.id for p in picks}) if picks else {}
    memories = []
    for pick in picks:
        influence, score, reasoning = _influence(pick, chosen_kind, best)
        memories.append(
            ReasoningMemory(
                pick.memory,
                influence,
                score,
                reasoning,
                tuple(pick.found_by),
                tuple(e for e, _, _ in pick.entities),
                tuple(notes.get(pick.memory.id, ())),
            )
        )
    active: list[Entity] = []
    if include_active_entities:
        active = store.list_entities(user_id, entity_types=sorted(OPEN_ENTITY_TYPES), active=True, limit=50)
    variables = _variables(chosen_kind, memories, active)
    return ReasoningContext(
        request=request,
        kind=chosen_kind,
        memories=tuple(memories),
        entities=tuple(active),
        matched_entities=tuple(matched),
        variables=variables,
        prompt=prompt_section(chosen_kind, variables),
    )
