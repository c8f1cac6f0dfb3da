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
from narrative.model import Narrative
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


def extend_link(
    store: Store, link: Narrative, memory_ids: Sequence[int], sentence: str | None
) -> Narrative:
    """Add this turn's memories (and a new summary sentence) to an open link."""
    ids = list(dict.fromkeys([*link.memory_ids, *memory_ids]))
    return store.update_narrative(link.user_id, link.id, summary=sentence or link.summary, memory_ids=ids)


def seal_open_links(
    store: Store, user_id: str, storyline_ids: Sequence[int], now: datetime
) -> list[Narrative]:
    """Seal the running link of each storyline (a topic shift or the end of a conversation)."""
    sealed = []
    for storyline_id in dict.fromkeys(storyline_ids):
        link = store.open_narrative(user_id, storyline_id)
        if link is not None:
            sealed.append(store.seal_narrative(user_id, link.id, now))
    return sealed
