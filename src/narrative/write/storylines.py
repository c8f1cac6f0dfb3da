"""Keeping storylines alive: default set, rolling summary, keywords, participants, routing embedding."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from narrative.errors import InvalidTransition, ValidationError
from narrative.model import MemoryItem, Message, Participant, Storyline, StorylineKind, StorylineStatus
from narrative.store.protocol import Store
from narrative.text import patterns as P
from narrative.write.routing import DEFAULT_STORYLINES, strip_topic_cue

SUMMARY_POINTS = 4
MAX_KEYWORDS = 8
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


YOUR_STORY = "Your Story"
YOUR_STORY_DESCRIPTION = "The ongoing narrative of who you are, across all storylines and all time."


def ensure_user(store: Store, user_id: str, now: datetime) -> None:
    """A user's first sight: the user row, Your Story (permanent) and the default storylines, made once."""
    with store.transaction():
        store.ensure_user(user_id, now)
        if store.your_story(user_id) is None:
            store.insert_storyline(
                user_id,
                YOUR_STORY,
                StorylineKind.YOUR_STORY,
                now,
                description=YOUR_STORY_DESCRIPTION,
                status=StorylineStatus.PERMANENT,
            )
        ensure_defaults(store, user_id, now)


def your_story(store: Store, user_id: str, now: datetime) -> Storyline:
    """The user's Your Story (made, with the user, when it is missing: e.g. after the user was deleted)."""
    story = store.your_story(user_id)
    if story is None:
        ensure_user(store, user_id, now)
        story = store.your_story(user_id)
    assert story is not None
    return story


def create_by_hand(
    store: Store, user_id: str, name: str, description: str, keywords: Sequence[str], now: datetime
) -> Storyline:
    """A storyline the user made (kind ``user``); keywords lower-cased, empty ones dropped."""
    _name_free(store, user_id, name, None)
    return store.insert_storyline(
        user_id,
        name,
        StorylineKind.USER,
        now,
        description=description,
        keywords=tuple(k.strip().lower() for k in keywords if k.strip()),
    )


def rename(store: Store, user_id: str, storyline_id: int, name: str, now: datetime) -> Storyline:
    """Rename a storyline; a detected one becomes the user's (it keeps the name they gave it)."""
    storyline = _changeable(store, user_id, storyline_id, "rename")
    _name_free(store, user_id, name, storyline_id)
    kind = StorylineKind.USER if storyline.kind is StorylineKind.DETECTED else storyline.kind
    return store.update_storyline(user_id, storyline_id, name=name, kind=kind, updated_at=now)


def _name_free(store: Store, user_id: str, name: str, storyline_id: int | None) -> None:
    """A name no other storyline of the user has, compared without case as routing finds storylines by name."""
    held = store.find_storyline(user_id, name)
    if held is not None and held.id != storyline_id:
        raise ValidationError(f"a storyline named {held.name!r} already exists (#{held.id})", field="name")


def archive(store: Store, user_id: str, storyline_id: int, now: datetime) -> Storyline:
    _changeable(store, user_id, storyline_id, "archive")
    return store.update_storyline(user_id, storyline_id, status=StorylineStatus.ARCHIVED, updated_at=now)


def _changeable(store: Store, user_id: str, storyline_id: int, step: str) -> Storyline:
    storyline = store.get_storyline(user_id, storyline_id)
    if storyline.kind is StorylineKind.YOUR_STORY:
        raise InvalidTransition(f"Your Story is permanent: it cannot be {step}d")
    return storyline


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
    return "\n".join([*lines[-(SUMMARY_POINTS - 1) :], line])


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
            storyline.user_id,
            storyline.id,
            interaction_count=storyline.interaction_count + 1,
            last_message_at=now,
            updated_at=now,
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
    """Whether the routing embedding is blended with the storyline's text now: at creation, after ``every``
    interactions, then each time the count doubles (``every``, 2×, 4×, …).  A young storyline's name, keywords
    and summary change with each turn; an old one's text hardly moves per turn, and every routed turn drifts
    its embedding anyway, so the refreshes of a storyline grow with the log of its length, not its length."""
    if storyline.kind is StorylineKind.DEFAULT:
        return False
    count = storyline.interaction_count
    if count <= 1:
        return True
    if count % every:
        return False
    times = count // every
    return times & (times - 1) == 0


#: A detected storyline keeps its name while one of the name's words is among this many of its leading keywords.
NAME_KEYWORDS = 6


def maybe_rename(store: Store, storyline: Storyline) -> Storyline:
    """A detected storyline keeps its name while the topic it names is still among its leading keywords; when the
    topic has really moved, it is named again: the noun phrase of its description and summary that holds the
    most of its keywords ("Bed measurements"), else its leading keywords."""
    if storyline.kind is not StorylineKind.DETECTED or len(storyline.keywords) < 2:
        return storyline
    from narrative.write.routing import storyline_name

    leading = {k for kw in storyline.keywords[:NAME_KEYWORDS] for w in P.words(kw) if (k := P.tag_key(w.lower()))}
    named = {k for w in P.words(storyline.name) if (k := P.tag_key(w.lower()))}
    if named & leading:
        return storyline
    text = "\n".join([storyline.description, *storyline.summary.splitlines()])
    name = storyline_name(storyline.keywords[:3], text)
    if name == storyline.name or store.find_storyline(storyline.user_id, name) is not None:
        return storyline
    return store.update_storyline(storyline.user_id, storyline.id, name=name)


def forget_superseded(store: Store, user_id: str, old: Message, gone: Sequence[str], new: Message) -> Storyline | None:
    """After a correction: the storyline of the corrected message no longer says what is not true — its summary
    points taken from that message go, a description taken from it is taken from the correction instead,
    keywords naming the old value go, and a detected storyline is named from what is left ("Favourite · colour
    · blue" stops saying blue)."""
    if old.storyline_id is None:
        return None
    storyline = store.get_storyline(user_id, old.storyline_id)
    if storyline.kind is StorylineKind.DEFAULT:
        return storyline
    words = {w.lower() for w in gone}
    said = " ".join(old.content.split())
    points = [line for line in storyline.summary.splitlines() if line.strip() and _point(line) not in said]
    keywords = tuple(k for k in storyline.keywords if not words & set(k.lower().split()))
    description = storyline.description
    if description and " ".join(description.rstrip("…").split()) in said:
        description = description_of(new.content)
    if (points, keywords, description) == (storyline.summary.splitlines(), storyline.keywords, storyline.description):
        return storyline
    updated = store.update_storyline(
        user_id, storyline.id, summary="\n".join(points), keywords=keywords, description=description
    )
    if storyline.kind is StorylineKind.DETECTED and words & set(re.findall(r"[\w'-]+", storyline.name.lower())):
        updated = maybe_rename(store, updated)
    return updated


def restate_edited(store: Store, user_id: str, before: MemoryItem, after: MemoryItem) -> None:
    """After a person edits a memory's text: the storyline cards and the open narrative link that quoted what it
    said before (its old text, or its messages') quote the edit instead, so the context does not go on saying
    "April 1" beside the edited "April 8".  Sealed links are history and stay as they were."""
    new = " ".join(after.content.split())
    messages = store.get_messages(user_id, list(before.message_ids)) if before.message_ids else []
    said = [" ".join(text.split()) for text in (before.content, *(m.content for m in messages))]
    if not new or new in said:
        return
    for storyline_id in sorted(
        {i for i in (before.storyline_id, *(m.storyline_id for m in messages)) if i is not None}
    ):
        storyline = store.get_storyline(user_id, storyline_id)
        lines = storyline.summary.splitlines()
        points = [f"- {new}" if line.strip() and any(_point(line) in text for text in said) else line for line in lines]
        points = list(dict.fromkeys(points))  # the edit once, where the first quote was
        if points != lines:
            store.update_storyline(user_id, storyline_id, summary="\n".join(points))
    if before.narrative_id is not None:
        narrative = store.get_narrative(user_id, before.narrative_id)
        summary = narrative.summary
        for text in sorted(said, key=len, reverse=True):
            if text and text in summary:
                summary = summary.replace(text, new)
        if not narrative.sealed and summary != narrative.summary:
            store.update_narrative(user_id, narrative.id, summary=summary)


def _point(line: str) -> str:
    """A summary line's point, without its bullet and speaker ("- Maya: …")."""
    text = line.strip().removeprefix("- ").strip()
    head, _, rest = text.partition(": ")
    return " ".join((rest if rest and len(head.split()) <= 3 else text).split())
