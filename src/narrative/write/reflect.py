"""ITSERR reflections and retention tiers.

Reflections are written every ``reflect_every`` exchanges of a conversation, when
it closes, and when the user's conversation stream passes a size threshold.
Three kinds: ``questions`` (what was being asked, what stays open), ``positions``
(decisions and insights), ``sources`` (research items).  Without an LLM each is
assembled from what the extractor already found.

Retention is non-destructive: a conversation memory 11–50 exchanges old gets
``key_points`` and tier ``key_points``; older ones tier ``theme``, and each block
of them is summarised into a session-theme reflection.  The original text and
its provenance never change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from narrative.model import (
    EntityType,
    Memory,
    ReflectionDetails,
    Retention,
    Source,
    Stream,
)
from narrative.store.filters import MemoryFilter
from narrative.store.protocol import Store

FULL_WINDOW = 10
KEY_POINTS_WINDOW = 50
THEME_BLOCK = 10
RETENTION_SLACK = 3  # exchanges that may cross a boundary in one turn (batches, retries)


def _listing(items: Sequence[str], limit: int = 4) -> str:
    unique = list(dict.fromkeys(i.strip().rstrip(".") for i in items if i.strip()))
    shown = unique[:limit]
    more = f" (+{len(unique) - limit} more)" if len(unique) > limit else ""
    return "; ".join(shown) + more


def heuristic_reflections(
    store: Store, user_id: str, exchanges: Sequence[Memory]
) -> dict[str, str]:
    """reflection type → text, from the entities and streams of the covered exchanges."""
    if not exchanges:
        return {}
    memory_ids = [m.id for m in exchanges]
    entities = [e for mid in memory_ids for e in store.list_entities(user_id, memory_id=mid)]
    asked = [e.name for e in entities if e.entity_type is EntityType.QUESTION_OPENED]
    resolved = [e.name for e in entities if e.entity_type is EntityType.QUESTION_RESOLVED]
    decided = [e.name for e in entities if e.entity_type is EntityType.DECISION]
    insights = [e.name for e in entities if e.entity_type is EntityType.INSIGHT]
    tags = [t for m in exchanges if m.details is not None for t in getattr(m.details, "topic_tags", ())]
    result: dict[str, str] = {}
    topics = _listing(tags, 5)
    if asked or topics:
        text = f"Explored {topics or 'several topics'}."
        if asked:
            text += f" Questions raised: {_listing(asked)}."
        if resolved:
            text += f" Resolved: {_listing(resolved)}."
        result["questions"] = text
    if decided or insights:
        parts = []
        if decided:
            parts.append(f"Decided: {_listing(decided)}.")
        if insights:
            parts.append(f"Realised: {_listing(insights)}.")
        result["positions"] = " ".join(parts)
    conversation_id = exchanges[0].conversation_id
    covered = list(dict.fromkeys(i for e in exchanges for i in e.message_ids))
    briefs = store.memory_briefs(user_id, store.memories_from_messages(user_id, covered))
    research = sorted(  # the research memories made from the covered messages, newest first
        (
            m for m in store.get_memories(user_id, [i for i, b in briefs.items() if b[0] is Stream.RESEARCH])
            if conversation_id in (None, m.conversation_id)
        ),
        key=lambda m: (m.event_at or m.created_at, m.id),
        reverse=True,
    )
    sources = [
        getattr(m.details, "work_title", None) or getattr(m.details, "source_reference", None) or m.content
        for m in research
    ]
    if sources:
        result["sources"] = f"Sources in play: {_listing([s for s in sources if s])}."
    return result


def reflection_memories(
    user_id: str,
    exchanges: Sequence[Memory],
    texts: dict[str, str],
    now: datetime,
    storyline_id: int | None,
) -> list[Memory]:
    """Reflection memories (stream ``reflection``) covering ``exchanges``, with provenance."""
    if not exchanges:
        return []
    times = [m.event_at or m.created_at for m in exchanges]
    message_ids = tuple(dict.fromkeys(i for m in exchanges for i in m.message_ids))
    return [
        Memory(
            id=0,
            user_id=user_id,
            stream=Stream.REFLECTION,
            source=Source.REFLECTION,
            content=text,
            importance=3,
            created_at=now,
            event_at=max(times),
            conversation_id=exchanges[-1].conversation_id,
            storyline_id=storyline_id,
            message_ids=message_ids,
            details=ReflectionDetails(
                reflection_type=kind, covered_from=min(times), covered_to=max(times), exchange_count=len(exchanges)
            ),
        )
        for kind, text in texts.items()
    ]


def apply_retention(
    store: Store,
    user_id: str,
    conversation_id: int,
    key_points: Callable[[str], str],
    theme: Callable[[Sequence[str]], str],
    now: datetime,
    exchanges: int | None = None,
) -> list[Memory]:
    """Move conversation memories down the tiers; return new session-theme memories to store.

    Runs every turn, so it reads only what can have crossed a boundary since the
    last turn: the tiers of the exchanges just past the newest 10, and of the block
    of 10 just past the newest 50; whole memories are loaded only for a session theme.
    ``exchanges`` (the conversation's exchange count, when the caller knows it)
    skips the reads a shorter conversation cannot need.
    """

    def window(offset: int, limit: int) -> list[tuple[int, Retention, str]]:
        if exchanges is not None and exchanges <= offset:
            return []
        where = MemoryFilter(
            streams=[Stream.CONVERSATION], conversation_ids=[conversation_id], limit=limit, offset=offset
        )
        return store.memory_tiers(user_id, where)  # newest first

    for memory_id, tier, content in window(FULL_WINDOW, RETENTION_SLACK):
        if tier is Retention.FULL:
            points = key_points(content)
            store.update_memories(user_id, [memory_id], retention=Retention.KEY_POINTS, key_points=points)
    block_window = window(KEY_POINTS_WINDOW, THEME_BLOCK + RETENTION_SLACK)
    old = [mid for mid, tier, _ in block_window if tier is not Retention.THEME]
    if len(old) < THEME_BLOCK:
        return []
    old.reverse()  # oldest first
    themes: list[Memory] = []
    while len(old) >= THEME_BLOCK:
        block_ids, old = old[:THEME_BLOCK], old[THEME_BLOCK:]
        block = store.get_memories(user_id, block_ids)
        store.update_memories(user_id, block_ids, retention=Retention.THEME)
        texts = {"theme": "Session theme: " + theme([m.content for m in block])}
        themes += reflection_memories(user_id, block, texts, now, block[-1].storyline_id)
    return themes
