"""Open state: what is still open, what a later conversation settled, what has gone stale.

The open state is the set of *active* entities of the open types — tasks,
waiting-ons and opened questions (``model.OPEN_ENTITY_TYPES``).  An entity stays
active until something resolves it; resolution records which memory (and, when
there is one, which entity) settled it and when.

Thread resolution across conversations is conservative: an open item is
resolved only by an *explicit* statement of the user that

1. talks about the same thing — at least two shared content words, or half of
   the item's words (a waiting-on must also share a word of *what* is awaited,
   not only *who*), or an embedding similarity of at least ``SIMILAR`` when an
   embedder is available; and
2. carries a resolution cue of the item's family:

   ============== =================================================================
   open item      resolution cue in the same (non-question, non-negated) sentence
   ============== =================================================================
   waiting_on     a blocker_cleared / question_resolved entity, or "sent", "arrived",
                  "got back", "replied", "delivered", "received", "heard back", …
   task           "done", "finished", "completed", "took care of", … or the past
                  tense of the task's own verb ("call Mum" → "called Mum")
   question       a question_resolved / decision entity, or "figured out", "the
                  answer is", "decided", "settled on", "solved", "going with", …
   ============== =================================================================

With an LLM configured, each candidate pair that passes (1) is put to the
``thread_resolution`` prompt instead of the cue test; the model must say it
resolves with confidence above ``LLM_CONFIDENCE``.  A failed call falls back to
the cue test.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from narrative.errors import InvalidTransition
from narrative.model import OPEN_ENTITY_TYPES, Entity, EntityType, Message, Role
from narrative.store.protocol import Store
from narrative.text import patterns as P
from narrative.text.lines import entity_label
from narrative.text.words import past_forms, word_keys

__all__ = [
    "LLM_CONFIDENCE",
    "SIMILAR",
    "Evidence",
    "Judge",
    "Resolution",
    "Similarity",
    "evidence_from",
    "find_resolutions",
    "resolve_entity",
]

SIMILAR = 0.6
LLM_CONFIDENCE = 0.7

#: (thread label, evidence sentence) → (resolves, confidence), or None when the model could not answer.
Judge = Callable[[str, str], "tuple[bool, float] | None"]
#: (texts a, texts b) → cosine similarity matrix of shape (len(a), len(b)).
Similarity = Callable[[Sequence[str], Sequence[str]], np.ndarray]

_I = re.IGNORECASE
_DELIVERED = re.compile(
    r"\b(?:sent|arrived|came\s+(?:in|back|through)|got\s+back|replied|responded|answered|delivered|received|"
    r"heard\s+back|confirmed|signed(?:\s+off)?|approved|handed\s+(?:it\s+|them\s+)?(?:over|in)|dropped\s+off|"
    r"got\s+(?:it|them|the|their|his|her))\b",
    _I,
)
_DONE = re.compile(
    r"\b(?:done|finished|completed|sorted|wrapped\s+up|took\s+care\s+of|taken\s+care\s+of|crossed\s+off|"
    r"ticked\s+off|did\s+it|got\s+it\s+done)\b",
    _I,
)
_ANSWERED = re.compile(
    r"\b(?:figured\s+(?:it\s+)?out|the\s+answer\s+(?:is|was)|decided|settled\s+(?:on|it)|resolved|solved|"
    r"answered|worked\s+out|(?:we're|i'm|we\s+are|i\s+am)\s+going\s+with|(?:we'll|i'll|let's)\s+go\s+with)\b",
    _I,
)
_SKIP_LEAD = frozenset({"to", "also", "finally", "still", "then", "just", "really", "first"})


# --- resolving by hand ----------------------------------------------------------------------


def resolve_entity(
    store: Store,
    user_id: str,
    entity_id: int,
    now: datetime,
    by_memory_id: int | None = None,
    by_entity_id: int | None = None,
) -> Entity:
    """Mark one entity resolved (by a memory, an entity, or by hand); refused when already resolved."""
    entity = store.get_entity(user_id, entity_id)
    if not entity.is_active:
        raise InvalidTransition(f"entity {entity_id} is already resolved")
    if by_memory_id is not None:
        store.get_memory(user_id, by_memory_id)
    return store.resolve_entity(
        user_id, entity_id, now, resolved_by_memory_id=by_memory_id, resolved_by_entity_id=by_entity_id
    )


def _lead_verb(text: str) -> str | None:
    for word in P.words(text):
        low = word.lower()
        if low not in _SKIP_LEAD:
            return low
    return None


# --- evidence and resolution -------------------------------------------------------------------


@dataclass(frozen=True)
class Evidence:
    """One statement sentence of the user, with the entity extracted from it (if any)."""

    message: Message
    sentence: str
    entity_type: EntityType | None = None
    entity_id: int | None = None  # a stored entity found in this sentence
    entity_key: str | None = None  # or a preview entity not stored yet


@dataclass(frozen=True)
class Resolution:
    """An open item settled by one sentence of a later (or the same, later) conversation turn."""

    entity: Entity
    evidence: Evidence
    confidence: float
    method: str  # heuristic | llm

    @property
    def label(self) -> str:
        return entity_label(self.entity.entity_type, self.entity.name, self.entity.data)


def evidence_from(
    messages: Sequence[Message], tagged: Sequence[tuple[EntityType, int | None, str | None, int, str]] = ()
) -> list[Evidence]:
    """Statement sentences of the user's messages, each tagged with an entity found in it.

    ``tagged`` holds (type, stored entity id, preview key, message id, sentence) of the conversation's
    entities; a sentence takes the first resolution-bearing one (question_resolved, blocker_cleared,
    decision) whose sentence it is.
    """
    bearing = {EntityType.QUESTION_RESOLVED, EntityType.BLOCKER_CLEARED, EntityType.DECISION}
    out: list[Evidence] = []
    for message in messages:
        if message.role is not Role.USER:
            continue
        for sentence in P.split_sentences(P.normalize(message.content)):
            if P.is_question(sentence) or P.is_small_talk(sentence):
                continue
            tag = next(
                (t for t in tagged if t[0] in bearing and t[3] == message.id and _same_sentence(t[4], sentence)),
                None,
            )
            if tag is None:
                out.append(Evidence(message, sentence))
            else:
                out.append(Evidence(message, sentence, tag[0], tag[1], tag[2]))
    return out


def _same_sentence(a: str, b: str) -> bool:
    wa, wb = [w.lower() for w in P.words(a)][:40], [w.lower() for w in P.words(b)][:40]
    n = min(len(wa), len(wb))
    return n > 0 and wa[:n] == wb[:n]


def _candidate_pairs(
    items: Sequence[Entity], evidence: Sequence[Evidence], *, cue_required: bool
) -> dict[int, list[int]]:
    """For each item, the evidence that may settle it, in order: written after it and, without a judge,
    carrying an explicit settling cue (the only way the heuristic accepts a resolution)."""
    pairs: dict[int, list[int]] = {}
    for i, entity in enumerate(items):
        origin = entity.data.get("message_id")
        pairs[i] = [
            j
            for j, ev in enumerate(evidence)
            if not (isinstance(origin, int) and ev.message.id <= origin) and (not cue_required or _cue(entity, ev))
        ]
    return pairs


def _pair_similarities(
    items: Sequence[Entity],
    evidence: Sequence[Evidence],
    pairs: dict[int, list[int]],
    similarity: Similarity | None,
) -> dict[tuple[int, int], float]:
    """Similarities of the candidate pairs whose verdict depends on one (shared words do not settle it
    either way), from one call over the labels and sentences involved."""
    if similarity is None:
        return {}
    needed = {
        i: [j for j in found if _similarity_decides(items[i], evidence[j].sentence)] for i, found in pairs.items()
    }
    rows = sorted(i for i, found in needed.items() if found)
    columns = sorted({j for found in needed.values() for j in found})
    if not rows or not columns:
        return {}
    labels = [entity_label(items[i].entity_type, items[i].name, items[i].data) for i in rows]
    matrix = np.asarray(similarity(labels, [evidence[j].sentence for j in columns]), dtype=np.float32)
    row_of = {i: r for r, i in enumerate(rows)}
    column_of = {j: c for c, j in enumerate(columns)}
    return {(i, j): float(matrix[row_of[i], column_of[j]]) for i in rows for j in needed[i]}


def _similarity_decides(entity: Entity, sentence: str) -> bool:
    """Whether the embedding similarity can change ``_related``'s answer for this pair."""
    return _related(entity, sentence, None) == 0 and _related(entity, sentence, 1.0) > 0


def _related(entity: Entity, sentence: str, similarity: float | None) -> int:
    """How strongly a sentence talks about an item: shared words (0 = unrelated)."""
    label = entity_label(entity.entity_type, entity.name, entity.data)
    keys = word_keys(label)
    words = word_keys(sentence)
    shared = keys & words
    if entity.entity_type is EntityType.WAITING_ON:
        what = word_keys(str(entity.data.get("what") or entity.name))
        if not what & words:
            shared = set()
    enough = len(shared) >= 2 or (bool(shared) and len(shared) * 2 >= len(keys))
    if enough:
        return len(shared)
    if similarity is not None and similarity >= SIMILAR and (entity.entity_type is not EntityType.WAITING_ON or shared):
        return 1
    return 0


@functools.lru_cache(maxsize=1024)
def _past_pattern(task: str) -> re.Pattern[str] | None:
    """The past forms of a task's lead verb ("call Sam" → called), compiled once per task name."""
    verb = _lead_verb(task)
    forms = past_forms(verb) if verb else ()
    return re.compile(r"\b(?:" + "|".join(map(re.escape, forms)) + r")\b", _I) if forms else None


def _cue(entity: Entity, evidence: Evidence) -> bool:
    """Does the sentence explicitly settle an item of this family (see the module table)?"""
    sentence = evidence.sentence
    kind = entity.entity_type
    if kind is EntityType.WAITING_ON:
        if evidence.entity_type in (EntityType.BLOCKER_CLEARED, EntityType.QUESTION_RESOLVED):
            return True
        patterns = [_DELIVERED, _DONE]
    elif kind is EntityType.TASK:
        past = _past_pattern(entity.name)
        patterns = [_DONE, *([past] if past is not None else [])]
    elif kind is EntityType.QUESTION_OPENED:
        if evidence.entity_type in (EntityType.QUESTION_RESOLVED, EntityType.DECISION):
            return True
        patterns = [_ANSWERED]
    else:
        return False
    return any(_says(rx, sentence) for rx in patterns)


@functools.lru_cache(maxsize=4096)
def _says(rx: re.Pattern[str], sentence: str) -> bool:
    """Does the sentence hold an un-negated match of the cue?  Cached: a close checks every open item against
    every sentence, and the open items come back close after close, so the same pairs recur."""
    lower = sentence.lower()
    return any(not P.negated_before(lower, match.start()) for match in rx.finditer(sentence))


def find_resolutions(
    open_items: Sequence[Entity],
    evidence: Sequence[Evidence],
    *,
    judge: Judge | None = None,
    similarity: Similarity | None = None,
    max_judged: int = 8,
) -> list[Resolution]:
    """Which open items the evidence settles: at most one resolution per item, best first by message.

    An item is only settled by a sentence written after it (a later message position).
    """
    items = [e for e in open_items if e.is_active and e.entity_type in OPEN_ENTITY_TYPES]
    if not items or not evidence:
        return []
    pairs = _candidate_pairs(items, evidence, cue_required=judge is None)
    sims = _pair_similarities(items, evidence, pairs, similarity)
    judged = 0
    out: list[Resolution] = []
    for i, entity in enumerate(items):
        for j in pairs.get(i, ()):
            ev = evidence[j]
            related = _related(entity, ev.sentence, sims.get((i, j)))
            if not related:
                continue
            verdict = None
            if judge is not None and judged < max_judged:
                judged += 1
                verdict = judge(entity_label(entity.entity_type, entity.name, entity.data), ev.sentence)
            if verdict is not None:
                resolves, confidence = verdict
                if resolves and confidence > LLM_CONFIDENCE:
                    out.append(Resolution(entity, ev, round(confidence, 3), "llm"))
                    break
                continue
            if _cue(entity, ev):
                out.append(Resolution(entity, ev, round(min(0.95, 0.7 + 0.05 * related), 3), "heuristic"))
                break
    return out
