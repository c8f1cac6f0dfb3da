"""Keeping storylines alive: default set, rolling summary, keywords, participants, routing embedding."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from narrative.model import Participant, Storyline, StorylineKind, StorylineStatus
from narrative.store.protocol import Store
from narrative.write.routing import DEFAULT_STORYLINES, strip_topic_cue

SUMMARY_POINTS = 4
MAX_KEYWORDS = 8
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def ensure_defaults(store: Store, user_id: str, now: datetime) -> dict[str, int]:
    """Create the default storylines once; return name → id."""
    ids: dict[str, int] = {}
    for name, (description, _pattern) in DEFAULT_STORYLINES.items():
        found = store.find_storyline(user_id, name)
        if found is None:
            found = store.insert_storyline(
                user_id, name, StorylineKind.DEFAULT, now, description=description, status=StorylineStatus.ACTIVE
            )
        ids[name] = found.id
    return ids


def first_sentence(text: str, max_words: int = 25) -> str:
    sentence = _SENTENCE.split(text.strip(), maxsplit=1)[0]
    words = sentence.split()
    return " ".join(words[:max_words]) + ("…" if len(words) > max_words else "")


def description_of(text: str) -> str:
    """A new storyline's description: the first sentence of the message that is neither a change-of-subject
    phrase nor small talk ("Morning! I want to start the garden app." → "I want to start the garden app.")."""
    stripped = strip_topic_cue(text) or text
    for sentence in _SENTENCE.split(stripped.strip()):
        small = any(p.search(sentence) for _d, p in DEFAULT_STORYLINES.values()) and len(sentence.split()) <= 6
        if sentence.strip() and not small:
            return first_sentence(sentence)
    return first_sentence(stripped)


def merge_keywords(current: Sequence[str], tags: Sequence[str], weights: Counter[str] | None = None) -> tuple[str, ...]:
    """Keep the storyline's keywords current: recent tags join, the list stays short."""
    counts: Counter[str] = Counter(weights or {})
    for rank, keyword in enumerate(current):
        counts[keyword] += 2 * (MAX_KEYWORDS - rank)  # persistent keywords hold their place
    from narrative.write.routing import topical

    for tag in topical(tags):
        counts[tag] += MAX_KEYWORDS // 2 + (2 if tag in counts else 0)
    return tuple(k for k, _ in counts.most_common(MAX_KEYWORDS))


def rolling_summary(current: str, key_point: str, speaker: str) -> str:
    """Extractive rolling summary: the latest few salient points, one per line."""
    if not key_point:
        return current
    line = f"- {speaker}: {key_point}" if speaker else f"- {key_point}"
    lines = [x for x in current.splitlines() if x.strip() and x != line]
    return "\n".join([*lines[-(SUMMARY_POINTS - 1):], line])


def with_participant(participants: Sequence[Participant], name: str, role: str) -> tuple[Participant, ...]:
    if not name or any(p.name == name for p in participants):
        return tuple(participants)
    role = "creator" if not participants else role
    return (*participants, Participant(name=name, role=role))


def update_after_turn(
    store: Store,
    storyline: Storyline,
    now: datetime,
    tags: Sequence[str],
    key_point: str,
    speaker: str,
    participant_role: str,
    summary: str | None = None,
) -> Storyline:
    """NarraNexus step 4: count the interaction, refresh keywords, summary, participants."""
    if storyline.kind is StorylineKind.DEFAULT:  # minimal updates for defaults
        return store.update_storyline(
            storyline.user_id, storyline.id, interaction_count=storyline.interaction_count + 1,
            last_message_at=now, updated_at=now,
        )
    return store.update_storyline(
        storyline.user_id,
        storyline.id,
        interaction_count=storyline.interaction_count + 1,
        keywords=merge_keywords(storyline.keywords, tags),
        summary=summary if summary is not None else rolling_summary(storyline.summary, key_point, speaker),
        participants=with_participant(storyline.participants, speaker, participant_role),
        last_message_at=now,
        updated_at=now,
    )


def needs_embedding_refresh(storyline: Storyline, every: int) -> bool:
    """Every ``every`` interactions (and at creation) the routing embedding is regenerated."""
    if storyline.kind is StorylineKind.DEFAULT:
        return False
    return storyline.interaction_count <= 1 or storyline.interaction_count % every == 0


def maybe_rename(store: Store, storyline: Storyline) -> Storyline:
    """A detected storyline takes its name from its current keywords (it evolves with the topic)."""
    if storyline.kind is not StorylineKind.DETECTED or len(storyline.keywords) < 2:
        return storyline
    from narrative.write.routing import storyline_name

    name = storyline_name(storyline.keywords[:3])
    if name == storyline.name or store.find_storyline(storyline.user_id, name) is not None:
        return storyline
    return store.update_storyline(storyline.user_id, storyline.id, name=name)
