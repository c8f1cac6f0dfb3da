"""Writing the Koshi narrative chain.

``narrative_update`` is the tool a model calls: a one-sentence summary, the
memory ids it connects, the previous link (or ``None`` for a new thread) and a
topic.  A link written this way is sealed at once: narratives are immutable
facts about what happened.  The running (unsealed) link of a storyline is kept
up to date turn by turn by the write path and sealed at a topic shift.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from narrative.checks import require_text
from narrative.errors import NotFound, ValidationError
from narrative.model import DecisionDetails, MemoryItem, Message, Narrative, Role, Stream
from narrative.store.protocol import Store


def narrative_update(
    store: Store,
    user_id: str,
    summary: str,
    memory_ids: Sequence[int],
    previous_narrative_id: int | None,
    topic: str,
    now: datetime,
    storyline_id: int | None = None,
    conversation_id: int | None = None,
    sealed: bool = True,
) -> Narrative:
    """Append one link to the chain; every referenced id must exist for this user."""
    require_text(summary, "summary", max_length=2000)
    if not isinstance(topic, str):
        raise ValidationError("topic must be text", field="topic")
    ids = list(dict.fromkeys(memory_ids))
    if any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
        raise ValidationError("memory_ids must be integers", field="memory_ids")
    found = {m.id for m in store.get_memories(user_id, ids)}
    missing = [i for i in ids if i not in found]
    if missing:
        raise NotFound(f"memories not found: {missing}")
    with store.transaction():
        store.lock_user(user_id)
        if storyline_id is not None:
            store.get_storyline(user_id, storyline_id)  # NotFound for another user's storyline
        if previous_narrative_id is not None:
            previous = store.get_narrative(user_id, previous_narrative_id)
            if storyline_id is None:
                storyline_id = previous.storyline_id
        return store.insert_narrative(
            user_id,
            summary.strip(),
            ids,
            previous_narrative_id,
            topic.strip(),
            now,
            storyline_id=storyline_id,
            conversation_id=conversation_id,
            sealed=sealed,
        )


# --- the running narrative (Koshi incremental compaction) ---------------------------

MAX_LINK_MEMORIES = 40


def running_link(
    store: Store,
    user_id: str,
    storyline_id: int,
    storyline_name: str,
    now: datetime,
    conversation_id: int | None,
) -> Narrative:
    """The storyline's open link, or a new one pointing back to where the thread was.

    A new link continues the storyline's own chain when it has one (same topic
    across sessions continues), else links back to the user's latest link.
    """
    current = store.open_narrative(user_id, storyline_id)
    if current is not None:
        return current
    previous = store.latest_narrative(user_id, storyline_id) or store.latest_narrative(user_id)
    return store.insert_narrative(
        user_id,
        f"{storyline_name} begins.",
        [],
        None if previous is None else previous.id,
        storyline_name,
        now,
        storyline_id=storyline_id,
        conversation_id=conversation_id,
    )


def narrative_sentence(topic: str, speaker: str, key_point: str) -> str:
    """One sentence for the running link (the heuristic stand-in for the model's summary).

    The link's topic is its own field, so the sentence carries only who moved
    the thread and the salient point.
    """
    point = key_point.strip().rstrip(".!?")
    if not point:
        return f"{topic} continues."
    sentence = f"{speaker}: {point}." if speaker else f"{point}."
    return sentence if len(sentence) <= 300 else sentence[:297].rstrip() + "…"


def extend_link(store: Store, link: Narrative, memory_ids: Sequence[int], sentence: str | None) -> Narrative:
    """Add this turn's memories (and a new summary sentence) to an open link."""
    ids = list(dict.fromkeys([*link.memory_ids, *memory_ids]))
    return store.update_narrative(link.user_id, link.id, summary=sentence or link.summary, memory_ids=ids)


def seal_open_links(
    store: Store, user_id: str, storyline_ids: Sequence[int], now: datetime, *, retell: bool = False
) -> list[Narrative]:
    """Seal the running link of each storyline (a topic shift or the end of a conversation); with ``retell``
    (no model wrote the link), its summary becomes the arc first (:func:`arc_summary`)."""
    sealed = []
    for storyline_id in dict.fromkeys(storyline_ids):
        link = store.open_narrative(user_id, storyline_id)
        if link is not None:
            sealed.append(seal(store, link, now, retell=retell))
    return sealed


def seal(store: Store, link: Narrative, now: datetime, *, retell: bool = False) -> Narrative:
    """Seal one link, its summary retold as the arc first when ``retell``."""
    if retell:
        summary = arc_summary(store, link)
        if summary and summary != link.summary:
            link = store.update_narrative(link.user_id, link.id, summary=summary)
    return store.seal_narrative(link.user_id, link.id, now)


# --- the arc of a link, told without a model ---------------------------------------------------

MAX_ARC_CHARS = 600


def arc_summary(store: Store, link: Narrative) -> str:
    """What the link's stretch of conversation came to, in one to three sentences a person would write.

    When the arc holds a decision: who decided what, instead of what, and why — then the point that led
    there when it came earlier.  Otherwise: the first salient point, and the last one when it differs.
    Sentences are the speakers' own, retold in the third person; none repeats another.  "" when the link
    covers nothing salient (the caller keeps the running summary).
    """
    from narrative.write.extract import key_points
    from narrative.write.retell import as_sentence, decision_clause, retold
    from narrative.write.routing import strip_topic_cue

    memories = sorted(store.get_memories(link.user_id, link.memory_ids), key=lambda m: m.id)
    if not memories:
        return ""
    turn_ids = list(dict.fromkeys(m.message_ids[-1] for m in memories if m.message_ids))
    said = {m.id: m for m in store.get_messages(link.user_id, turn_ids)}

    def speaker(memory: MemoryItem) -> str:
        message = said.get(memory.message_ids[-1]) if memory.message_ids else None
        return _name(message)

    sentences: list[str] = []
    decided_in: set[int] = set()
    for memory in memories:
        details = memory.details
        if memory.stream is Stream.DECISION and isinstance(details, DecisionDetails) and details.decision:
            name = speaker(memory)
            clause = decision_clause(details.decision, details.rationale, details.alternatives_considered, name)
            sentences.append(as_sentence(f"{name} {clause}"))
            decided_in.add(memory.message_ids[-1] if memory.message_ids else 0)
            if len(sentences) == 2:
                break
    points: list[tuple[int, str]] = []
    minor: list[tuple[int, str]] = []
    for memory in memories:
        message = said.get(memory.message_ids[-1]) if memory.message_ids else None
        if memory.stream is not Stream.CONVERSATION or message is None or message.id in decided_in:
            continue
        point = key_points(strip_topic_cue(message.content))
        if point:
            told = as_sentence(retold(point, _name(message)))
            (points if memory.importance >= 3 else minor).append((message.id, told))
    points = points or minor  # nothing salient: what was said still beats "… continues."
    if sentences:
        earlier = [p for mid, p in points if mid < min(decided_in)]
        chosen = sentences + earlier[:1]
    else:
        chosen = [p for _, p in points[:1]] + [p for _, p in points[-1:]]
    return _fit(_distinct(chosen))


def _name(message: Message | None) -> str:
    if message is None:
        return "Someone"
    name = message.speaker.strip() or ("The assistant" if message.role is Role.ASSISTANT else "You")
    return name[:1].upper() + name[1:]


def _distinct(sentences: Sequence[str]) -> list[str]:
    """Sentences in order, without one that repeats (or is contained in) an earlier one."""
    kept: list[str] = []
    for sentence in sentences:
        words = set(sentence.lower().split())
        if all(not words <= set(k.lower().split()) for k in kept):
            kept.append(sentence)
    return kept


def _fit(sentences: Sequence[str]) -> str:
    text = ""
    for sentence in sentences:
        candidate = f"{text} {sentence}".strip()
        if len(candidate) > MAX_ARC_CHARS:
            break
        text = candidate
    return text or (sentences[0][: MAX_ARC_CHARS - 1].rstrip() + "…" if sentences else "")
