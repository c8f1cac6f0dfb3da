"""Consolidation of the research stream (ITSERR): "Periodic consolidation (linking related items)".

Research items (memories of the ``research`` stream: citations, annotations, quotes, notes) about the same work,
author or idea are **linked, never merged**: each keeps its text and provenance, and a search hit can open the
items linked to it (``Memory.linked_memories``, ``recall``).  Without an LLM the rules are, for a newer item and
an earlier one (each link's ``reason`` names its rule):

* **same_work** — both name the same work (title, else reference without pages: ``narrative.text.sources``);
  or the newer one names no work or author of its own (an annotation "On p. 45 she says …") and the earlier one
  is the last item naming a work in the same conversation, at most :data:`NEARBY` messages before it;
* **same_author** — both name the same (first) author, and not the same work;
* **same_idea** — their texts share at least :data:`IDEA_WORDS` content words, and at least
  :data:`IDEA_OVERLAP` of the smaller one's.

With an LLM the model is also shown the earlier items no rule linked (those sharing the most words, then the
newest) and may link them as the same work (under another name), author or idea (:class:`ResearchJudge`).
Consolidation runs when research items arrive (each batch of turns, each research memory added by hand) and in
full on demand (``Memory.consolidate()``, ``narrative consolidate``): running it again adds nothing twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from narrative.errors import ValidationError
from narrative.model import LinkKind, LinkOrigin, MemoryItem, MemoryLink, ResearchDetails, Stream
from narrative.store.filters import MemoryFilter
from narrative.store.protocol import Store
from narrative.text.sources import author_key, research_details, source_label, work_key
from narrative.text.words import word_keys

if TYPE_CHECKING:
    from narrative.providers.llm import LLM, LLMSettings

__all__ = [
    "IDEA_OVERLAP",
    "IDEA_WORDS",
    "NEARBY",
    "ResearchJudge",
    "consolidate",
    "rejoin_around",
    "research_items",
    "rule_links",
]

NEARBY = 4  # messages between an untitled annotation and the citation it belongs to
IDEA_WORDS = 3
IDEA_OVERLAP = 0.5
MAX_CANDIDATES = 8
EVERYTHING = 100_000


POOL = 2_000  # earlier research items a new one is compared with (the newest), so an import stays linear


def research_items(store: Store, user_id: str, limit: int = EVERYTHING) -> list[MemoryItem]:
    """The user's research items (the newest ``limit``), oldest first."""
    found = store.list_memories(user_id, MemoryFilter(streams=[Stream.RESEARCH], limit=limit))
    return sorted(found, key=lambda m: m.id)


def _idea_words(memory: MemoryItem, details: ResearchDetails | None) -> set[str]:
    """The item's content words, without the words of its title and author (those are the work rules')."""
    text = " ".join([memory.content, (details.user_annotation or "") if details else ""])
    own = word_keys(
        " ".join([(details.work_title or "") if details else "", (details.author or "") if details else ""])
    )
    return word_keys(text) - own


def _pair(new: MemoryItem, old: MemoryItem) -> tuple[LinkKind, str, float] | None:
    a, b = research_details(new), research_details(old)
    if a is not None and b is not None:
        work_a, work_b = work_key(a), work_key(b)
        if work_a and work_a == work_b:
            return LinkKind.SAME_WORK, f"both name the work “{source_label(b)}”", 1.0
        author_a, author_b = author_key(a), author_key(b)
        if author_a and author_a == author_b:
            return LinkKind.SAME_AUTHOR, f"both are by {b.author}", 0.8
    mine, theirs = _idea_words(new, a), _idea_words(old, b)
    shared = sorted(mine & theirs)
    smaller = min(len(mine), len(theirs))
    if len(shared) >= IDEA_WORDS and smaller and len(shared) / smaller >= IDEA_OVERLAP:
        return LinkKind.SAME_IDEA, f"they share the words {', '.join(shared[:6])}", round(len(shared) / smaller, 3)
    return None


def _untitled(memory: MemoryItem) -> bool:
    details = research_details(memory)
    return details is not None and not work_key(details) and not author_key(details)


def _cited_before(new: MemoryItem, earlier: Sequence[MemoryItem]) -> MemoryItem | None:
    """The last earlier item of the same conversation that names a work, close enough before ``new``."""
    if new.conversation_id is None or not new.positions:
        return None
    for old in reversed(earlier):
        details = research_details(old)
        if old.conversation_id != new.conversation_id or details is None or not work_key(details):
            continue
        gap = new.positions[0] - (old.positions[-1] if old.positions else -NEARBY - 1)
        return old if 0 <= gap <= NEARBY else None
    return None


def rule_links(new: MemoryItem, earlier: Sequence[MemoryItem], now: datetime) -> list[MemoryLink]:
    """The rules' links from ``new`` to items made before it (module docstring)."""
    links = []
    for old in earlier:
        found = _pair(new, old)
        if found is not None:
            kind, reason, score = found
            links.append(MemoryLink(new.user_id, new.id, old.id, kind, LinkOrigin.RULE, now, reason, score))
    cited = _cited_before(new, earlier) if _untitled(new) else None
    if cited is not None and all(k.linked_id != cited.id or k.kind is not LinkKind.SAME_WORK for k in links):
        details = research_details(cited)
        label = source_label(details, cited.content)
        reason = f"an item without a title of its own, right after “{label}” in the same conversation"
        links.append(MemoryLink(new.user_id, new.id, cited.id, LinkKind.SAME_WORK, LinkOrigin.RULE, now, reason, 0.7))
    return links


def consolidate(
    store: Store,
    user_id: str,
    new: Sequence[MemoryItem],
    now: datetime,
    judge: ResearchJudge | None = None,
    pool: Sequence[MemoryItem] | None = None,
) -> list[MemoryLink]:
    """Link each research item of ``new`` to the earlier research items (``pool``, default: the user's newest
    :data:`POOL`); returns the links not stored before (they are stored)."""
    items = sorted((m for m in new if m.stream is Stream.RESEARCH), key=lambda m: m.id)
    if not items:
        return []
    everything = list(pool) if pool is not None else research_items(store, user_id, POOL)
    known = {(k.memory_id, k.linked_id, k.kind) for k in store.memory_links(user_id, [m.id for m in items])}
    made: list[MemoryLink] = []
    for item in items:
        earlier = [m for m in everything if m.id < item.id]
        links = rule_links(item, earlier, now)
        if judge is not None:
            linked = {k.linked_id for k in links} | {k.linked_id for k in made if k.memory_id == item.id}
            linked |= {k[1] for k in known if k[0] == item.id} | {k[0] for k in known if k[1] == item.id}
            judged = judge.links(item, _candidates(item, [m for m in earlier if m.id not in linked]), now)
            links += judged or []
        fresh = [k for k in links if (k.memory_id, k.linked_id, k.kind) not in known]
        known |= {(k.memory_id, k.linked_id, k.kind) for k in fresh}
        made += fresh
    store.insert_memory_links(made)
    return made


def rejoin_around(store: Store, user_id: str, gone: Sequence[int], now: datetime) -> list[MemoryLink]:
    """Keep joined what ``gone`` (memories about to be deleted) joined as one work: the surviving items that
    reached each other through them by ``same_work`` links are linked to the earliest of them (its ``reason``
    names a surviving title, never a deleted item's words).  Returns the links stored.

    Without this, deleting a citation would leave the annotation made right after it ("On p. 45 she says …") a
    source of its own, cut from the later items naming the same work."""
    deleted = set(gone)
    if not deleted:
        return []
    links = store.memory_links(user_id, sorted(deleted), kinds=[LinkKind.SAME_WORK])
    neighbours: dict[int, set[int]] = {}
    for link in links:
        neighbours.setdefault(link.memory_id, set()).add(link.linked_id)
        neighbours.setdefault(link.linked_id, set()).add(link.memory_id)
    seen: set[int] = set()
    made: list[MemoryLink] = []
    for start in sorted(deleted & neighbours.keys()):
        if start in seen:
            continue
        survivors: set[int] = set()
        todo = [start]
        while todo:  # walk through deleted items only; a survivor ends the walk (its own links stay)
            here = todo.pop()
            if here in seen:
                continue
            seen.add(here)
            for other in neighbours.get(here, ()):
                if other in deleted:
                    todo.append(other)
                else:
                    survivors.add(other)
        made += _joined(store, user_id, sorted(survivors), now)
    store.insert_memory_links(made)
    return made


def _joined(store: Store, user_id: str, survivors: list[int], now: datetime) -> list[MemoryLink]:
    if len(survivors) < 2:
        return []
    items = store.get_memories(user_id, survivors)
    titled = [d for m in sorted(items, key=lambda m: m.id) if (d := research_details(m)) is not None and work_key(d)]
    said = f"both belong to “{source_label(titled[0])}”" if titled else "both belong to one work"
    reason = f"{said}: an item since deleted joined them"
    known = {(k.memory_id, k.linked_id) for k in store.memory_links(user_id, survivors, kinds=[LinkKind.SAME_WORK])}
    first = survivors[0]
    return [
        MemoryLink(user_id, later, first, LinkKind.SAME_WORK, LinkOrigin.RULE, now, reason, 0.7)
        for later in survivors[1:]
        if (later, first) not in known and (first, later) not in known
    ]


def _candidates(item: MemoryItem, earlier: Sequence[MemoryItem]) -> list[MemoryItem]:
    mine = word_keys(item.content)
    ranked = sorted(earlier, key=lambda m: (-len(mine & word_keys(m.content)), -m.id))
    return ranked[:MAX_CANDIDATES]


def _item_line(memory: MemoryItem) -> dict[str, Any]:
    details = research_details(memory)
    return {
        "id": memory.id,
        "text": memory.content,
        "kind": details.source_type if details else "note",
        "work": details.work_title if details else None,
        "author": details.author if details else None,
        "reference": details.source_reference if details else None,
    }


_KINDS = frozenset({LinkKind.SAME_WORK.value, LinkKind.SAME_AUTHOR.value, LinkKind.SAME_IDEA.value})


class ResearchJudge:
    """Asks a model which earlier research items a new one is about the same work, author or idea as."""

    def __init__(self, llm: LLM, limits: LLMSettings) -> None:
        self.llm, self.limits = llm, limits

    def links(self, item: MemoryItem, candidates: Sequence[MemoryItem], now: datetime) -> list[MemoryLink] | None:
        """The model's links, or None (logged) when it failed or answered out of shape: the rules' links stand."""
        if not candidates:
            return []
        allowed = {c.id for c in candidates}

        def valid(obj: dict[str, Any]) -> dict[str, Any]:
            from narrative.providers.llm import check_fields

            items = check_fields(obj, {"links": list})["links"]
            seen: set[tuple[int, str]] = set()
            for entry in items:
                checked = check_fields(entry, {"id": int, "kind": str, "reason": str})
                if checked["id"] not in allowed or (checked["id"], checked["kind"]) in seen:
                    raise ValidationError(f"item {checked['id']} was not among the candidates", field="id")
                if checked["kind"] not in _KINDS:
                    raise ValidationError(f"unknown link kind {checked['kind']!r}", field="kind")
                if not checked["reason"].strip() or len(checked["reason"]) > 300:
                    raise ValidationError("each link needs a short reason", field="reason")
                seen.add((checked["id"], checked["kind"]))
            return {"links": items}

        from narrative.providers.llm import TurnBudget, ask_json

        reply = ask_json(
            self.llm,
            TurnBudget.from_settings(self.limits),
            "research_links",
            {"item": _item_line(item), "candidates": [_item_line(c) for c in candidates]},
            valid,
        )
        if reply is None:
            return None
        return [
            MemoryLink(
                item.user_id,
                item.id,
                int(entry["id"]),
                LinkKind(entry["kind"]),
                LinkOrigin.LLM,
                now,
                " ".join(str(entry["reason"]).split()),
                1.0,
            )
            for entry in reply["links"]
        ]
