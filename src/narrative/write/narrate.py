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
