"""Routing a message to its storyline (NarraNexus), in three stages, every decision explained.

1. **Continuity** — does the message continue the current storyline?  With an LLM
   the model judges business intent; without one, the heuristic compares the
   message vector with the storyline's routing embedding and looks at the time
   since the previous message (short replies within the window continue).
2. **Search** — BM25 over storylines' names, keywords and summaries, and cosine
   similarity against their routing embeddings, fused by reciprocal rank.
3. **Decision** — ``continue`` | ``switch`` | ``create`` | ``default``, by thresholds.

Default storylines catch small talk under strict boundaries: a message goes
there only when it matches their patterns *and* names no specific object.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from narrative.model import Storyline, StorylineKind
from narrative.text.phrases import naming_phrase

#: The default storylines every user gets (besides Your Story), with their boundaries.
DEFAULT_STORYLINES: dict[str, tuple[str, re.Pattern[str]]] = {
    "Small talk": (
        "Greetings, farewells and how-are-you exchanges that name nothing specific.",
        re.compile(
            r"^\W*(hi|hey|hello|hiya|yo|good (morning|afternoon|evening|night)|morning|evening|bye|goodbye|"
            r"see (you|ya)|take care|talk (to you )?(soon|later)|how are (you|things)|how('s| is) it going|"
            r"what'?s up|nice to (see|meet|hear from) you|good to (see|hear from) you|long time no see)\b",
            re.IGNORECASE,
        ),
    ),
    "Thanks and acknowledgements": (
        "Thanks, okays and short agreements that carry no new content.",
        re.compile(
            r"^\W*(thanks?|thank you|thx|ok(ay)?|cool|great|nice|sure|got it|sounds good|perfect|awesome|"
            r"yes|yeah|yep|no|nope|lol|haha|exactly|right|agreed|of course|you'?re welcome|np)\b",
            re.IGNORECASE,
        ),
    ),
    "About the assistant": (
        "Questions about the assistant itself: what it can do, who it is, how it works.",
        re.compile(
            r"\b(what can you do|who are you|are you (a|an) (bot|ai|robot)|how do you work|your name)\b",
            re.IGNORECASE,
        ),
    ),
}

SMALL_TALK_MAX_WORDS = 14
#: Acknowledgements inside a topic continue it instead of leaving for the default.
ACKNOWLEDGEMENTS = "Thanks and acknowledgements"


#: Explicit cues that the speaker is changing the subject ("Anyway, …" only where it opens a sentence).
_CUES = (
    r"\b(?:completely different|different (?:topic|subject|note)|change (?:of|the) subject|changing the subject|"
    r"on another note|unrelated|by the way|btw|speaking of|new topic|switching gears|quick question)\b"
    r"|(?:^|(?<=[.!?])\s)anyway\b(?=\s*[,.!:;-])"
)
TOPIC_CUE = re.compile(_CUES, re.IGNORECASE)

#: A cue with the words around it that only announce the change ("On a completely different topic, …",
#: "Completely different topic.", "By the way, …"): removed before a storyline's keywords, description and
#: routing text are taken from the message.
_CUE_SPAN = re.compile(
    r"(?:\b(?:so|oh|and|but|also|ok(?:ay)?|well)\s*,?\s*)?(?:\b(?:on|in)\s+(?:a|an|the)?\s*)?(?:totally\s+)?"
    r"(?:" + _CUES + r")"
    r"(?:\s+(?:topic|subject|note|question|thing))?(?:\s+(?:here|now|for you|for a (?:sec(?:ond)?|moment)))?"
    r"\s*(?:[-:;,.!—–]+\s*)?",
    re.IGNORECASE,
)
_WORD = re.compile(r"\w[\w'-]*")


def strip_topic_cue(text: str) -> str:
    """The message without the phrases that announce a change of subject (what the new topic is about)."""
    marked = _CUE_SPAN.sub("\0", text)
    # a sentence that now opens where a cue was starts with a capital letter
    marked = re.sub(r"(^|[.!?]\s*)\0+\s*([a-z])", lambda m: m.group(1) + "\0" + m.group(2).upper(), marked)
    stripped = re.sub(r"\s{2,}", " ", marked.replace("\0", " ")).strip()
    stripped = re.sub(r"^[-:;,.!—–\s]+", "", stripped)
    return stripped[:1].upper() + stripped[1:] if stripped else ""


def cue_words(text: str) -> frozenset[str]:
    """The lowercase words of ``text`` that belong only to its change-of-subject phrases."""
    kept = set(_WORD.findall(strip_topic_cue(text).lower()))
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in kept)


@dataclass(frozen=True)
class RoutingThresholds:
    """The heuristic's thresholds (cosine similarities of MiniLM vectors)."""

    continuity_window: timedelta = timedelta(minutes=45)
    stay_similarity: float = 0.20  # within the window, stay unless the message is this far away
    switch_similarity: float = 0.42  # a storyline this similar is the same topic
    switch_margin: float = 0.10  # ... and must beat the current one by this much mid-conversation
    weak_switch_similarity: float = 0.36  # enough when BM25 also ranks it first
    min_tags_to_create: int = 2
    rrf_k: int = 60


@dataclass(frozen=True)
class Candidate:
    storyline_id: int
    bm25_rank: int | None
    vector_rank: int | None
    similarity: float
    fused: float


@dataclass
class RoutingInput:
    text: str
    vector: np.ndarray | None
    topic_tags: Sequence[str]
    substantive: bool
    now: datetime
    current: Storyline | None
    previous_at: datetime | None
    llm_continuity: bool | None = None
    cue: bool = False
    reply: bool = False  # answers the turn before it (see :func:`is_reply`)
    answers_question: bool = False  # ... and that turn asked a question
    may_create: bool = True  # False for an assistant: its turns never open a storyline


@dataclass
class Route:
    decision: str  # continue | switch | create | default
    storyline_id: int | None  # None with decision "create": the caller makes it
    scores: dict[str, Any] = field(default_factory=dict)
    new_name: str = ""


def small_talk_default(text: str, defaults: dict[str, int], substantive: bool) -> tuple[str, int] | None:
    """The default storyline a message belongs to, if any (strict: short and objectless)."""
    words = len(text.split())
    if substantive or words > SMALL_TALK_MAX_WORDS:
        return None
    for name, (_description, pattern) in DEFAULT_STORYLINES.items():
        if name in defaults and pattern.search(text):
            return name, defaults[name]
    return None


def small_talk_words(text: str) -> frozenset[str]:
    """The lowercase words inside the greeting, thanks or about-the-assistant phrases of ``text``."""
    found: set[str] = set()
    for _description, pattern in DEFAULT_STORYLINES.values():
        for match in pattern.finditer(text):
            found.update(_WORD.findall(match.group(0).lower()))
    return frozenset(found)


def has_substance(text: str, tags: Sequence[str], entities: Sequence[tuple[str, str]]) -> bool:
    """Whether a message names something beyond small talk: a topic tag that is not a word of its greeting,
    thanks or question about the assistant ("Good morning!" is not about mornings), or an entity other than
    an opened question that is itself small talk ("Are you an AI?").  ``entities`` are (type, name) pairs."""
    greeting = small_talk_words(text)
    if any(set(_WORD.findall(tag.lower())) - greeting for tag in tags):
        return True
    return any(not (kind == "question_opened" and small_talk_words(name)) for kind, name in entities)


def is_reply(role: str, speaker: str, previous_role: str, previous_speaker: str) -> bool:
    """A turn answers the one before it when the other side said that one: the user after the assistant or
    the assistant after the user, or — two people talking, both with the same role — another speaker."""
    if role != previous_role:
        return True
    return bool(speaker and previous_speaker and speaker.strip().casefold() != previous_speaker.strip().casefold())


def fuse_candidates(
    keyword: Sequence[tuple[int, float]], similarities: dict[int, float], rrf_k: int
) -> list[Candidate]:
    """RRF over the BM25 list and the cosine list; best first."""
    vector_order = sorted(similarities.items(), key=lambda item: -item[1])
    bm25_rank = {sid: rank for rank, (sid, _) in enumerate(keyword, start=1)}
    vector_rank = {sid: rank for rank, (sid, _) in enumerate(vector_order, start=1)}
    ids = set(bm25_rank) | set(vector_rank)
    candidates = []
    for sid in ids:
        fused = sum(1.0 / (rrf_k + r[sid]) for r in (bm25_rank, vector_rank) if sid in r)
        candidates.append(Candidate(sid, bm25_rank.get(sid), vector_rank.get(sid), similarities.get(sid, 0.0), fused))
    candidates.sort(key=lambda c: (-c.fused, -c.similarity, c.storyline_id))
    return candidates


def continuity(
    given: RoutingInput, current_similarity: float | None, best_other: Candidate | None, t: RoutingThresholds
) -> tuple[bool, str]:
    """Stage 1: stay in the current storyline?  Returns (verdict, reason)."""
    current = given.current
    if current is None or (current.kind is not StorylineKind.DETECTED and current.kind is not StorylineKind.USER):
        return False, "no current topic storyline"
    if given.llm_continuity is not None:
        return given.llm_continuity, "llm continuity check"
    if given.cue:
        return False, "explicit change of subject"
    recent = given.previous_at is not None and given.now - given.previous_at <= t.continuity_window
    similarity = current_similarity if current_similarity is not None else 0.0
    fits_better = (
        best_other is not None
        and best_other.similarity >= t.switch_similarity
        and (best_other.similarity >= similarity + t.switch_margin)
    )
    if given.reply and not fits_better:
        # a reply stays unless it announces a topic of its own: named (enough topical tags to make a storyline)
        # and as far from the current storyline as a message that leaves it within the window; an answer to a
        # question always stays with the question
        own_topic = given.substantive and len(topical(given.topic_tags)) >= t.min_tags_to_create
        drifted = current_similarity is not None and similarity < t.stay_similarity
        if own_topic and drifted and not given.answers_question:
            return False, f"a reply that moved to a topic of its own ({similarity:.2f})"
        return True, "a reply stays with the turn it answers"
    if not recent:
        return False, "too long since the previous message"
    if not given.substantive:
        return True, "short follow-up within the continuity window"
    if fits_better and best_other is not None:
        better = f"{best_other.similarity:.2f} vs {similarity:.2f}"
        return False, f"storyline {best_other.storyline_id} fits better ({better})"
    if current_similarity is None or similarity >= t.stay_similarity:
        return True, f"same thread within the window (similarity {similarity:.2f})"
    return False, f"moved away from the current storyline ({similarity:.2f})"


def decide(
    given: RoutingInput,
    candidates: Sequence[Candidate],
    current_similarity: float | None,
    fallback_id: int,
    t: RoutingThresholds,
) -> Route:
    """Stages 1 and 3, given the stage-2 candidates."""
    scores: dict[str, Any] = {
        "current_storyline_id": None if given.current is None else given.current.id,
        "current_similarity": None if current_similarity is None else round(current_similarity, 4),
        "candidates": [
            {
                "storyline_id": c.storyline_id,
                "bm25_rank": c.bm25_rank,
                "vector_rank": c.vector_rank,
                "similarity": round(c.similarity, 4),
                "fused": round(c.fused, 6),
            }
            for c in candidates[:5]
        ],
    }
    current_id = None if given.current is None else given.current.id
    others = [c for c in candidates if c.storyline_id != current_id]
    stay, reason = continuity(given, current_similarity, others[0] if others else None, t)
    scores["continuity"] = reason
    if stay and given.current is not None:
        return Route("continue", given.current.id, scores)
    # a change of subject — cued by the speaker or judged by the model — leaves the current thread
    pool = others if given.cue or given.llm_continuity is False else list(candidates)
    best = pool[0] if pool else None
    if best is not None and (
        best.similarity >= t.switch_similarity
        or (not given.cue and best.bm25_rank == 1 and best.similarity >= t.weak_switch_similarity)
    ):
        scores["reason"] = f"matches storyline {best.storyline_id} (similarity {best.similarity:.2f})"
        return Route("continue" if best.storyline_id == current_id else "switch", best.storyline_id, scores)
    if given.may_create and given.substantive and len(topical(given.topic_tags)) >= t.min_tags_to_create:
        top = 0.0 if best is None else best.similarity
        scores["reason"] = f"new topic: no storyline is similar enough (best {top:.2f})"
        return Route("create", None, scores, new_name=storyline_name(given.topic_tags, given.text))
    if given.current is not None and given.current.kind in (StorylineKind.DETECTED, StorylineKind.USER):
        scores["reason"] = "no clear match: stay with the current storyline"
        return Route("continue", given.current.id, scores)
    if best is not None and best.similarity >= t.weak_switch_similarity:
        scores["reason"] = f"weak match {best.similarity:.2f}: the closest storyline"
        return Route("switch", best.storyline_id, scores)
    scores["reason"] = "nothing specific: Your Story"
    return Route("default", fallback_id, scores)


#: Tags too generic to name or describe a storyline.
GENERIC_TAGS = frozenset(
    "photo photos picture pictures pic pics image images share shares thing things stuff lot lots time times day days "
    "way today yesterday tomorrow week weekend month year morning evening night people guy guys topic subject "
    "note question".split()
)


def topical(tags: Sequence[str]) -> list[str]:
    return [t for t in tags if t and t.lower() not in GENERIC_TAGS]


def storyline_name(tags: Sequence[str], text: str = "") -> str:
    """A name as a person would give it: the noun phrase of ``text`` that holds the most topic tags ("Bed
    measurements", "Sister's wedding"), else the leading tags joined ("garden app · plot map")."""
    words = topical(tags)
    phrase = naming_phrase(text, words) if text else None
    if phrase is not None:
        return phrase
    if not words:
        return "Untitled thread"
    name = " · ".join(words[:3])
    return name[:1].upper() + name[1:]
