"""The heuristic extractor: one turn analysed (cached), assembled into a :class:`TurnExtraction`; key points and
session themes of a text on their own."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import NamedTuple

from narrative.model import IMPORTANCE_MAX, IMPORTANCE_MIN, EntityType
from narrative.text import patterns as P
from narrative.text.people import find_people
from narrative.write.extract.about import self_descriptions
from narrative.write.extract.cues import HINTS, caseless, clip, hint
from narrative.write.extract.decisions import find_decision_form
from narrative.write.extract.items import (
    OPEN_CUE,
    URGENT,
    entity_of,
    find_deadlines,
    find_state_changes,
    find_tasks,
    find_waiting,
)
from narrative.write.extract.research import find_research
from narrative.write.extract.results import ExtractedDecision, ExtractedEntity, ExtractedResearch, TurnExtraction
from narrative.write.extract.salience import compress, score_sentence

_LIFE_EVENT = caseless(
    r"\b(?:(?:got|get|getting|just|am|are|is|was|were|be|been|'m|'re)\s+(?:\w+\s+)?(?:married|engaged|divorced|hired|"
    r"promoted|fired|laid\s+off|pregnant|diagnosed)|wedding|engagement|divorce|pregnan\w+|funeral|miscarriage|"
    r"graduat(?:ed|ing|ion)|retire[ds]?|retirement|promotion|new\s+(?:job|position|house|home|apartment|baby)|"
    r"(?:started|starting|landed|got|accepted)\s+(?:a|my|the)\s+(?:new\s+)?(?:job|position)|"
    r"mov(?:ed|ing)\s+(?:to|into|in\s+with|out|abroad|back|house|across)|passed\s+away|died|death\s+of|"
    r"lost\s+(?:my|his|her|our|their)\s+(?:mom|mother|dad|father|grand\w+|husband|wife|son|daughter|brother|sister|"
    r"friend|job|baby|dog|cat|pet)|adopt(?:ed|ing)?\s+(?:a|an|my|our|two|three)?\s*(?:\w+\s+)?(?:child|children|"
    r"baby|kid|kids|son|daughter|dog|cat|puppy|kitten|pet|pup)|adoption|(?:was|were|got|been|be|is|are)\s+born|"
    r"gave\s+birth|newborn|(?<!by\s)accident|surgery|hospitali[sz]ed|cancer|broke\s+up|proposed|"
    r"(?:first|new)\s+(?:grandchild|grandson|granddaughter))\b"
)


def _life_event(lower: str) -> bool:
    return any(not P.negated_before(lower, m.start()) for m in _LIFE_EVENT.finditer(lower))


# --- the extractor -----------------------------------------------------------------------------


class HeuristicExtractor:
    """The deterministic, model-free :class:`Extractor` (see the module docstring for the rules)."""

    identity = "heuristic"

    def __init__(self, *, max_tags: int = 5, key_point_words: int = 30) -> None:
        self.max_tags = max_tags
        self.key_point_words = key_point_words

    def extract_turn(
        self, text: str, *, speaker: str = "", role: str = "user", previous: str | None = None
    ) -> TurnExtraction:
        return _analyse(text, speaker.strip(), role, previous).finish(self.max_tags, self.key_point_words)


class _Analysis(NamedTuple):
    """What a turn yields before the tag limit and the key-point budget are applied."""

    turn: _Turn
    question_type: str | None
    is_clarification: bool
    importance: int
    emotions: tuple[str, ...]
    entities: tuple[ExtractedEntity, ...]
    decisions: tuple[ExtractedDecision, ...]
    research: tuple[ExtractedResearch, ...]
    people: tuple[str, ...]
    signal: dict[str, bool]
    works: tuple[str, ...]
    ranked_tags: tuple[str, ...]  # every candidate tag, best first (works not included)
    about_you: tuple[str, ...] = ()

    def tags(self, limit: int) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.works + self.ranked_tags[:limit]))[:limit]

    def finish(self, max_tags: int, key_point_words: int) -> TurnExtraction:
        if not self.turn.lower:  # nothing but punctuation
            return TurnExtraction(importance=IMPORTANCE_MIN, people=self.people)
        tags = self.tags(max_tags)
        scored = [(score_sentence(s, small, self.signal.get(s, False), tags), s) for s, _, small in self.turn.flags]
        return TurnExtraction(
            question_type=self.question_type,
            is_clarification=self.is_clarification,
            topic_tags=tags,
            importance=self.importance,
            emotions=self.emotions,
            entities=self.entities,
            decisions=self.decisions,
            research=self.research,
            people=self.people,
            key_points=compress(scored, key_point_words, self.people),
            about_you=self.about_you,
        )


@lru_cache(maxsize=1024)
def _analyse_alone(text: str) -> _Analysis:
    """A text read on its own (no speaker, no previous turn): retention reads each exchange twice, once for
    its key points and later for its session theme, so the reading is kept."""
    return _analyse(text, "", "user", None)


def _analyse(text: str, speaker: str, role: str, previous: str | None) -> _Analysis:
    norm = P.normalize(text)
    if not any(ch.isalnum() for ch in norm):
        return _Analysis(
            _Turn("", []), None, False, IMPORTANCE_MIN, (), (), (), (), (speaker,) if speaker else (), {}, (), ()
        )
    sentences = P.split_sentences(norm)
    lower = norm.lower()
    prev_last = P.split_sentences(P.normalize(previous))[-1:] if previous and previous.strip() else []
    previous_q = prev_last[0] if prev_last and P.is_question(prev_last[0]) else None
    turn = _Turn(lower, [(s, P.is_question(s), P.is_small_talk(s)) for s in sentences])
    real_questions = [s for s, q, small in turn.flags if q and not small]
    kinds = {P.question_kind(q) for q in real_questions}
    emotions, strong = P.find_emotions(lower)
    found = find_people(sentences)
    entities = [
        entity_of(EntityType.PERSON, name, sentence, relation=rel, context=clip(sentence, 20))
        for name, rel, sentence in found
        if rel != "addressee" and name.lower() != speaker.lower()
    ]
    on = {family: hint(lower, family) for family in HINTS}
    decisions, research, signal = _statements(turn, on, speaker or role, previous_q, entities)
    known = {name.lower() for name, _, _ in found}
    for content, details in research:
        author = details.author
        if author and author.lower() not in known and not author.lower().startswith(tuple(known)):
            known.add(author.lower())
            found.append((author, "author", content))
            entities.insert(
                len([e for e in entities if e.entity_type is EntityType.PERSON]),
                entity_of(EntityType.PERSON, author, content, relation="author"),
            )
    if role == "user":
        entities += [entity_of(EntityType.QUESTION_OPENED, clip(q, 25), q) for q in real_questions]
    titles = " ".join(d.work_title or "" for _, d in research).split()
    if titles:  # "Truth and Method" names a book, not two people
        found = [f for f in found if f[0] not in titles]
        entities = [e for e in entities if e.entity_type is not EntityType.PERSON or e.name not in titles]
    people = tuple(dict.fromkeys(([speaker] if speaker else []) + [name for name, _, _ in found]))
    works = tuple(dict.fromkeys(d.work_title.lower() for _, d in research if d.work_title))
    return _Analysis(
        turn=turn,
        question_type=next((k for k in ("methodological", "interpretive", "factual") if k in kinds), None),
        is_clarification=P.is_clarification(lower, previous_q is not None),
        importance=_importance(turn, on, entities, decisions, research, strong),
        emotions=emotions,
        entities=tuple(entities),
        decisions=tuple(decisions),
        research=tuple(research),
        people=people,
        signal=signal,
        works=works,
        ranked_tags=P.topic_tags(sentences, exclude=people + works, limit=None),
        about_you=self_descriptions(text) if role == "user" else (),
    )


class _Turn(NamedTuple):
    lower: str
    flags: list[tuple[str, bool, bool]]  # (sentence, is_question, is_small_talk)


_BY_CAP = re.compile(r"\bby [A-Z]")


def _statements(
    turn: _Turn, on: dict[str, bool], owner: str, previous_q: str | None, entities: list[ExtractedEntity]
) -> tuple[list[ExtractedDecision], list[ExtractedResearch], dict[str, bool]]:
    """Decisions, research items and statement-level entities; also which sentences carry one."""
    decisions: list[ExtractedDecision] = []
    research: list[ExtractedResearch] = []
    signal: dict[str, bool] = {}
    for i, (sentence, is_q, small) in enumerate(turn.flags):
        before = len(entities)
        item = find_research(sentence, is_q) if on["research"] or _BY_CAP.search(sentence) else None
        if item is not None:
            research.append(ExtractedResearch(sentence, item))
        if on["open"] and OPEN_CUE.search(sentence):
            entities.append(entity_of(EntityType.QUESTION_OPENED, clip(sentence, 25), sentence))
        if not (is_q or small):
            following = turn.flags[i + 1][0] if i + 1 < len(turn.flags) else None
            found = find_decision_form(sentence, following) if on["decision"] else None
            if found is not None:
                decision, form = found
                decisions.append(ExtractedDecision(sentence, decision))
                entities.append(
                    entity_of(
                        EntityType.DECISION,
                        decision.decision,
                        sentence,
                        what=decision.decision,
                        why=decision.rationale,
                        alternatives=list(decision.alternatives_considered),
                        form=form,
                    )
                )
            tasks = find_tasks(sentence, owner) if on["task"] else []
            entities.extend(tasks or (find_deadlines(sentence, owner) if on["deadline"] else ()))
            entities.extend(find_waiting(sentence) if on["waiting"] else ())
            entities.extend(find_state_changes(sentence, previous_q) if on["state"] else ())
        life = on["life"] and bool(_LIFE_EVENT.search(sentence))
        signal[sentence] = item is not None or len(entities) > before or life
    return decisions, research, signal


def _importance(
    turn: _Turn,
    on: dict[str, bool],
    entities: Sequence[ExtractedEntity],
    decisions: Sequence[ExtractedDecision],
    research: Sequence[ExtractedResearch],
    strong_emotion: bool,
) -> int:
    """Base 2, +2 life event, +1 decision/state change, +1 strong emotion, +1 urgency, +1 citation."""
    kinds = {e.entity_type for e in entities if e.entity_type is not EntityType.PERSON}
    if all(small for _, _, small in turn.flags) and not kinds:
        return IMPORTANCE_MIN
    lower = turn.lower
    score = 2
    if on["life"] and any(_life_event(s.lower()) for s, q, _ in turn.flags if not q):
        score += 2
    if decisions or kinds & _STATE_TYPES:
        score += 1
    if strong_emotion:
        score += 1
    urgent = URGENT.search(lower) if on["urgent"] else None
    if urgent and not P.negated_before(lower, urgent.start()):
        score += 1
    if any(r.details.source_type != "note" for r in research):
        score += 1
    tokens = P.words(lower)
    if score == 2 and not kinds and len(tokens) <= 5 and sum(P.tag_key(w) is not None for w in tokens) <= 1:
        score = 1
    return max(IMPORTANCE_MIN, min(IMPORTANCE_MAX, score))


_STATE_TYPES = frozenset(
    {EntityType.INSIGHT, EntityType.QUESTION_RESOLVED, EntityType.BLOCKER_CLEARED, EntityType.PRIORITY_CHANGE}
)


# --- key points and themes ---------------------------------------------------------------------


def key_points(text: str, max_words: int = 30) -> str:
    """A ≤ ``max_words``-word compression of a turn for the "11–50 exchanges" retention tier.

    Keeps, in order, the sentences that carry an entity, decision, research item, life event or
    emotion-laden statement, numbers or names; drops greetings, thanks and bare reactions.  Returns
    "" when the turn is only small talk.
    """
    return _analyse_alone(text).finish(5, max_words).key_points


def session_theme(texts: Iterable[str], *, speakers: Iterable[str] = (), max_tags: int = 4) -> str:
    """One line naming what many turns were about, for the "older: session themes" tier.

    Tags are ranked by how many turns carry them (ties: first seen), people by mentions;
    e.g. ``"adoption, pottery, painting and camping — with Caroline and Melanie"``.
    """
    tag_counts: Counter[str] = Counter()
    people_counts: Counter[str] = Counter()
    order: dict[str, int] = {}
    for i, text in enumerate(texts):
        if not text or not text.strip():
            continue
        analysis = _analyse_alone(text)
        for tag in analysis.tags(8):
            tag_counts[tag] += 1
            order.setdefault(tag, i)
        people_counts.update(analysis.people)
    for speaker in speakers:
        people_counts[speaker] += 0  # participants, listed after the people talked about
    lowered = {n.lower() for n in people_counts}
    names = [n for n, _ in sorted(people_counts.items(), key=lambda kv: -kv[1]) if n][:3]
    tags = [t for t in sorted(tag_counts, key=lambda t: (-tag_counts[t], order[t])) if t not in lowered][:max_tags]
    about = _join(tags)
    with_ = f"with {_join(names)}" if names else ""
    if about and with_:
        return f"{about} \u2014 {with_}"
    return about or (f"conversation {with_}" if with_ else "")


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1] if items else ""
