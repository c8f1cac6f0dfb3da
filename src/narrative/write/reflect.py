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
    Entity,
    EntityType,
    LinkKind,
    MemoryItem,
    ReflectionDetails,
    Retention,
    Source,
    Stream,
)
from narrative.store.filters import MemoryFilter
from narrative.store.protocol import Store
from narrative.text import patterns as P
from narrative.text.sources import research_details, work_key
from narrative.text.words import restated_in

FULL_WINDOW = 10
KEY_POINTS_WINDOW = 50
THEME_BLOCK = 10
RETENTION_SLACK = 3  # exchanges that may cross a boundary in one turn (batches, retries)


def _join(items: Sequence[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1] if items else ""


def _unique(items: Sequence[str], limit: int) -> list[str]:
    return list(dict.fromkeys(i.strip().rstrip(".") for i in items if i.strip()))[:limit]


def _who(entity: Entity) -> str:
    name = str(entity.data.get("speaker") or "").strip() or "You"
    return name[:1].upper() + name[1:]


def _quoted(question: str) -> str:
    question = question.strip()
    return f"“{question}”" if question.endswith("?") else f"“{question.rstrip('.')}”"


def heuristic_reflections(store: Store, user_id: str, exchanges: Sequence[MemoryItem]) -> dict[str, str]:
    """reflection type → text, from the entities and streams of the covered exchanges.

    Each is one to three sentences built from what the speakers said (retold in the third person), never a
    list of keywords: ``questions`` — who asked what and what was answered (or, when nobody asked anything,
    the most salient points); ``positions`` — who decided what and why, who realized what; ``sources``.
    """
    from narrative.write.retell import as_sentence, decision_clause, retold

    if not exchanges:
        return {}
    memory_ids = [m.id for m in exchanges]
    entities = [e for mid in memory_ids for e in store.list_entities(user_id, memory_id=mid)]
    of = {kind: [e for e in entities if e.entity_type is kind] for kind in EntityType}
    result: dict[str, str] = {}
    questions = _question_sentences(of[EntityType.QUESTION_OPENED], of[EntityType.QUESTION_RESOLVED])
    if not questions:  # nobody asked anything: what was said, apart from what the positions will tell
        told = {e.data.get("message_id") for kind in (EntityType.DECISION, EntityType.INSIGHT) for e in of[kind]}
        rest = [m for m in exchanges if m.message_ids and m.message_ids[-1] not in told]
        questions = _salient_points(store, user_id, rest, as_sentence, retold)
    if questions:
        result["questions"] = " ".join(_distinct(questions))
    positions = [
        as_sentence(
            f"{_who(e)} "
            + decision_clause(
                str(e.data.get("what") or e.name),
                str(e.data.get("why") or ""),
                [str(a) for a in e.data.get("alternatives") or [] if a],
                _who(e),
                str(e.data.get("form") or ""),
            )
        )
        for e in _first_of_each(of[EntityType.DECISION])[:2]
    ] + [
        as_sentence(f"{_who(e)} realized that {retold(str(e.data.get('what') or e.name), _who(e))}")
        for e in _first_of_each(of[EntityType.INSIGHT])[:1]
    ]
    if positions:
        result["positions"] = " ".join(_distinct(positions))
    sources = _sources(store, user_id, exchanges)
    if sources:
        result["sources"] = f"The sources in play were {_join(sources)}."
    return result


def _first_of_each(entities: Sequence[Entity]) -> list[Entity]:
    seen: dict[str, Entity] = {}
    for e in entities:
        seen.setdefault(e.name.casefold().strip().rstrip("."), e)
    return list(seen.values())


def _question_sentences(asked: Sequence[Entity], resolved: Sequence[Entity]) -> list[str]:
    sentences = []
    by_who: dict[str, list[str]] = {}
    for e in _first_of_each(asked):
        by_who.setdefault(_who(e), []).append(_quoted(e.name))
    for who, quoted in list(by_who.items())[:2]:
        more = f", and {len(quoted) - 2} more" if len(quoted) > 2 else ""
        sentences.append(f"{who} asked {_join(quoted[:2])}{more}.".replace("?”.", "?”"))
    answered = [_quoted(e.name) for e in _first_of_each(resolved)][:2]
    if answered:
        sentences.append(f"{_join(answered)} {'was' if len(answered) == 1 else 'were'} answered.")
    return sentences


def _salient_points(
    store: Store,
    user_id: str,
    exchanges: Sequence[MemoryItem],
    as_sentence: Callable[[str], str],
    retold: Callable[[str, str], str],
) -> list[str]:
    """The first and the most important salient turns of the stretch, retold (at most two); when the first is the
    most important, the first and the last: a stretch is summarised, not one of its sentences repeated."""
    from narrative.write.extract import key_points
    from narrative.write.routing import strip_topic_cue

    turns = [m for m in exchanges if m.message_ids]
    salient = [m for m in turns if m.importance >= 3] or turns  # nothing stands out: what was said still counts
    if not salient:
        return []
    top = max(salient, key=lambda m: (m.importance, -m.id))
    chosen = [salient[0], top if top is not salient[0] else salient[-1]]
    said = {m.id: m for m in store.get_messages(user_id, [m.message_ids[-1] for m in chosen])}
    points = []
    for memory in dict.fromkeys(chosen):
        message = said.get(memory.message_ids[-1])
        point = key_points(strip_topic_cue(message.content)) if message is not None else ""
        if message is not None and point:
            name = message.speaker.strip() or "You"
            points.append(as_sentence(retold(point, name[:1].upper() + name[1:])))
    return points


def _distinct(sentences: Sequence[str]) -> list[str]:
    """Sentences in order, without one that repeats an earlier one."""
    kept: list[str] = []
    for sentence in sentences:
        if sentence.casefold() not in {k.casefold() for k in kept}:
            kept.append(sentence)
    return kept


def _sources(store: Store, user_id: str, exchanges: Sequence[MemoryItem]) -> list[str]:
    """The sources of the research memories made from the covered messages, the most used first (ITSERR "source
    popularity tracking"): items of one work together (same title or reference, or a ``same_work`` link), ranked by
    ``2·items + recalls`` in the covered period, each named with what was done with it ("cited, annotated, recalled
    twice").  Ties: the newest first."""
    conversation_id = exchanges[0].conversation_id
    covered = list(dict.fromkeys(i for e in exchanges for i in e.message_ids))
    briefs = store.memory_briefs(user_id, store.memories_from_messages(user_id, covered))
    research = [
        m
        for m in store.get_memories(user_id, [i for i, b in briefs.items() if b[0] is Stream.RESEARCH])
        if conversation_id in (None, m.conversation_id)
    ]
    if not research:
        return []
    times = [e.event_at or e.created_at for e in exchanges]
    recalls = store.use_counts(user_id, [m.id for m in research], min(times), None)
    groups = _works(store, user_id, research)
    ranked = sorted(
        groups,
        key=lambda g: (
            -(2 * len(g) + sum(recalls.get(m.id, 0) for m in g)),
            -max((m.event_at or m.created_at).timestamp() for m in g),
        ),
    )
    return [_used(group, sum(recalls.get(m.id, 0) for m in group)) for group in ranked[:4]]


def _works(store: Store, user_id: str, research: Sequence[MemoryItem]) -> list[list[MemoryItem]]:
    """Research items grouped by the work they are about (same key, or joined by a ``same_work`` link)."""
    ids = {m.id for m in research}
    owner: dict[int, int] = {}
    by_key: dict[str, int] = {}
    for memory in sorted(research, key=lambda m: m.id):
        details = research_details(memory)
        key = work_key(details) if details is not None else None
        owner[memory.id] = by_key.setdefault(key, memory.id) if key else memory.id
    for link in store.memory_links(user_id, ids, kinds=[LinkKind.SAME_WORK]):
        if link.memory_id in ids and link.linked_id in ids:
            old, new = owner[link.memory_id], owner[link.linked_id]
            owner = {i: (new if o == old else o) for i, o in owner.items()}
    grouped: dict[int, list[MemoryItem]] = {}
    for memory in sorted(research, key=lambda m: m.id):
        grouped.setdefault(owner[memory.id], []).append(memory)
    return list(grouped.values())


_DONE = {"citation": "cited", "annotation": "annotated", "quote": "quoted", "note": "noted"}


def _used(group: Sequence[MemoryItem], recalled: int) -> str:
    """ "Thinking in Systems (cited, annotated, recalled twice)"."""
    named = next((m for m in group if getattr(m.details, "work_title", None)), None) or next(
        (m for m in group if getattr(m.details, "source_reference", None)), group[0]
    )
    details = research_details(named)
    label = (details.work_title or details.source_reference) if details is not None else None
    label = (label or named.content).strip()
    done = list(dict.fromkeys(_DONE.get(getattr(m.details, "source_type", "note"), "noted") for m in group))
    if recalled:
        done.append(
            "recalled once" if recalled == 1 else "recalled twice" if recalled == 2 else f"recalled {recalled} times"
        )
    return f"{label} ({', '.join(done)})"


def by_storyline(exchanges: Sequence[MemoryItem]) -> list[tuple[int | None, list[MemoryItem]]]:
    """The exchanges grouped by the storyline they belong to, in order (a reflection reflects one topic)."""
    groups: dict[int | None, list[MemoryItem]] = {}
    for memory in exchanges:
        groups.setdefault(memory.storyline_id, []).append(memory)
    return list(groups.items())


def without_restatements(
    store: Store, user_id: str, exchanges: Sequence[MemoryItem], texts: dict[str, str]
) -> dict[str, str]:
    """The reflections that say more than one sentence of the exchanges they cover.

    A reflection that only retells one sentence ("Sam will send the bed measurements on Friday." → "Maya said
    Sam will send …") would store that fact a second time; the sentence is stored already, so the reflection is
    not (docs/decisions.md, "One fact once").
    """
    covered = list(dict.fromkeys(i for m in exchanges for i in m.message_ids))
    said = store.get_messages(user_id, covered)
    sentences = [s for m in said for s in P.split_sentences(P.normalize(m.content))]
    names = {m.speaker for m in said if m.speaker} | {"you", "the assistant", "someone"}
    return {kind: text for kind, text in texts.items() if restated_in(text, sentences, names=names) is None}


def reflection_memories(
    user_id: str,
    exchanges: Sequence[MemoryItem],
    texts: dict[str, str],
    now: datetime,
    storyline_id: int | None,
) -> list[MemoryItem]:
    """Reflection memories (stream ``reflection``) covering ``exchanges``, with provenance."""
    if not exchanges:
        return []
    times = [m.event_at or m.created_at for m in exchanges]
    message_ids = tuple(dict.fromkeys(i for m in exchanges for i in m.message_ids))
    return [
        MemoryItem(
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
) -> list[MemoryItem]:
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
    themes: list[MemoryItem] = []
    while len(old) >= THEME_BLOCK:
        block_ids, old = old[:THEME_BLOCK], old[THEME_BLOCK:]
        block = store.get_memories(user_id, block_ids)
        store.update_memories(user_id, block_ids, retention=Retention.THEME)
        texts = {"theme": "Session theme: " + theme([m.content for m in block])}
        themes += reflection_memories(user_id, block, texts, now, block[-1].storyline_id)
    return themes
