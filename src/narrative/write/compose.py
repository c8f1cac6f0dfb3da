"""The narrative memory of a closed conversation, by rule: what it came to, in sentences a person would write.

:func:`compose_narrative` tells one stretch of conversation in 2–4 sentences, most significant first; when a
conversation held two topics (each in its own storyline), :func:`topic_parts` tells each apart, so the preview
proposes one memory per topic instead of merging them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from narrative.model import ConversationDetails, EntityType, MemoryItem, Message, Role
from narrative.text import patterns as P
from narrative.text.words import new_words, word_keys
from narrative.write import resolve
from narrative.write.compress import PreviewEntity
from narrative.write.extract.decisions import rationale_of
from narrative.write.retell import as_sentence, decision_clause, retold
from narrative.write.retell import listing as _listing


def _decision_clause(e: PreviewEntity, name: str, messages: Sequence[Message] = ()) -> str:
    alternatives = [str(a) for a in e.data.get("alternatives") or [] if a]
    why = str(e.data.get("why") or "") or _reason_given_later(e, messages)
    form = str(e.data.get("form") or "")
    return decision_clause(str(e.data.get("what") or e.name), why, alternatives, name, form)


def _reason_given_later(e: PreviewEntity, messages: Sequence[Message]) -> str:
    """The reason for a decision its speaker gave in one of the next two turns, answering "why?" ("Because the
    team already knows it.")."""
    said_in = _said_in(e)
    at = next((i for i, m in enumerate(messages) if m.id == said_in), None)
    if at is None:
        return ""
    for later in messages[at + 1 : at + 3]:
        if later.role is Role.USER and later.speaker == messages[at].speaker:
            first = P.split_sentences(P.normalize(later.content))[:1]
            return rationale_of(first[0]) if first else ""
    return ""


def _thread_phrase(r: resolve.Resolution) -> str:
    if r.entity.entity_type is EntityType.TASK:
        return f"the task to {r.label}"
    if r.entity.entity_type is EntityType.QUESTION_OPENED:
        return f"the question “{r.label}”"
    who, what = str(r.entity.data.get("who") or "").strip(), str(r.entity.data.get("what") or "").strip()
    return f"the wait for {who} to {what}" if who and what else f"the {r.label}"


def _open_phrase(e: PreviewEntity, name: str, messages: Sequence[Message] = ()) -> str:
    """An open item as the memory tells it: a question quoted as asked, anything else retold ("ask Maya's
    accountant for the P60", not "ask my accountant …"); a task someone else took on says who ("weather_bot to
    send the refund request")."""
    if e.entity_type is EntityType.QUESTION_OPENED:
        return f"“{e.label}”"
    sayer = _sayer(e, messages, name)
    if sayer == name or e.entity_type is not EntityType.TASK:
        return retold(e.label, name)
    return f"{sayer} to {retold(e.label, sayer)}"


def _sayer(e: PreviewEntity, messages: Sequence[Message], name: str) -> str:
    """Who said what ``e`` was drawn from: its speaker's name, the person (``name``) for a turn of theirs without
    one, else "The assistant", "The system prompt" or "A tool" (never the person for words that were not theirs)."""
    said_in = _said_in(e)
    message = next((m for m in messages if m.id == said_in), None)
    if message is None:
        return name
    speaker = message.speaker.strip()
    if message.role is Role.USER:
        return name if not speaker or speaker.casefold() == name.casefold() else speaker[:1].upper() + speaker[1:]
    return speaker or {Role.ASSISTANT: "The assistant", Role.SYSTEM: "The system prompt"}.get(message.role, "A tool")


def _still_open(still: Sequence[PreviewEntity], name: str, messages: Sequence[Message] = ()) -> str:
    more = f"; and {len(still) - 3} more" if len(still) > 3 else ""
    return as_sentence("Still open: " + "; ".join(_open_phrase(e, name, messages) for e in still[:3]) + more)


def compose_narrative(
    messages: Sequence[Message],
    entities: Sequence[PreviewEntity],
    resolutions: Sequence[resolve.Resolution],
    exchanges: Sequence[MemoryItem],
    avoid: Sequence[str] = (),
) -> str:
    """2–4 sentences of meaning, most significant first: decisions (and why), insights, what was
    settled, what stays open, the feeling, who was involved; a key moment stands in for decisions.  Nothing is
    retold from a sentence in ``avoid`` (what an item the person removed was extracted from)."""
    if not messages:
        return "Nothing was said in this conversation, so there is nothing to remember."
    speakers = Counter(m.speaker for m in messages if m.role is Role.USER and m.speaker)
    name = speakers.most_common(1)[0][0] if speakers else "You"
    name = name[:1].upper() + name[1:] if name.islower() else name
    others = {m.speaker for m in messages if m.speaker}
    by_type: dict[EntityType, list[PreviewEntity]] = {}
    for e in entities:
        by_type.setdefault(e.entity_type, []).append(e)
    sentences: list[str] = []
    decisions = by_type.get(EntityType.DECISION, [])
    if decisions:
        by: dict[str, list[str]] = {}  # who said it → what they decided (a tool's "we decided" is not the person's)
        for e in decisions[:2]:
            sayer = _sayer(e, messages, name)
            by.setdefault(sayer, []).append(_decision_clause(e, sayer, messages))
        sentences.append(as_sentence("; and ".join(f"{who} " + "; and ".join(told) for who, told in by.items())))
    else:
        moment = max(
            (m for m in exchanges if m.importance >= 4 and user_said(m)),
            key=lambda m: (m.importance, -m.id),
            default=None,
        )
        if moment is not None:
            from narrative.write.routing import strip_topic_cue  # (as in _filler: routing is heavier to import)

            said = _strip_aside(strip_topic_cue(moment.key_points or user_said(moment)))  # not "Also, … topic:"
            sentences.append(as_sentence(retold(said, name)))
    for e in by_type.get(EntityType.INSIGHT, [])[:1]:
        sentences.append(as_sentence(f"{name} realized that {retold(str(e.data.get('what') or e.name), name)}"))
    settled_by = {r.evidence.sentence for r in resolutions}
    for e in by_type.get(EntityType.BLOCKER_CLEARED, [])[:1]:
        said = str(e.data.get("sentence") or e.name)
        if not any(_same(said, s) for s in settled_by):
            sentences.append(as_sentence(retold(said, name)))
    if resolutions:
        lead = retold(resolutions[0].evidence.sentence, name).rstrip(".!")
        rest = [_thread_phrase(r) for r in resolutions]
        sentences.append(as_sentence(f"{lead} — that settled {_listing(rest)}"))
    settled_ids = {r.entity.id for r in resolutions}
    still = [
        e
        for t in (EntityType.TASK, EntityType.WAITING_ON, EntityType.QUESTION_OPENED)
        for e in by_type.get(t, [])
        if not set(e.entity_ids) & settled_ids
    ]
    if still:
        sentences.append(_still_open(still, name, messages))
    feelings = list(dict.fromkeys(x for m in exchanges if user_said(m) for x in m.emotions))
    if feelings:
        sentences.append(as_sentence(f"It carried {_listing(feelings[:3])}"))
    people = [e.name for e in by_type.get(EntityType.PERSON, []) if e.name not in others]
    if people:
        sentences.append(as_sentence(f"People involved: {_listing(people, 4)}"))
    if len(sentences) < 2:
        sentences += _filler(name, exchanges, sentences, decided=bool(decisions), open_left=bool(still), avoid=avoid)
    return " ".join(_distinct(sentences, [name, *others])[:4])


def _distinct(sentences: Sequence[str], names: Sequence[str] = ()) -> list[str]:
    """Sentences in order, without one that says nothing the sentences before it did not (the same fact
    retold: "Still open: waiting on Sam to send …" then "Sam will send …")."""
    kept: list[str] = []
    for sentence in sentences:
        adds = not kept or new_words(sentence, kept, names=names) or not new_words(sentence, [], names=names)
        if adds and all(not _same(sentence, k) for k in kept):
            kept.append(sentence)
    return kept


def _filler(
    name: str,
    exchanges: Sequence[MemoryItem],
    said: Sequence[str],
    *,
    decided: bool,
    open_left: bool,
    avoid: Sequence[str] = (),
) -> list[str]:
    """Sentences that round a thin memory up to two: the most salient things the user said that it does not
    tell yet (retold, in the order they were said), else what the conversation did not do."""
    from narrative.write.extract import key_points
    from narrative.write.routing import strip_topic_cue

    out: list[tuple[int, str]] = []
    for memory in sorted(exchanges, key=lambda m: (-m.importance, m.id)):
        if len(said) + len(out) >= 2:
            break
        if any(sentence and sentence in user_said(memory) for sentence in avoid):
            continue  # a removed item was said here: retelling the turn would bring it back
        point = key_points(strip_topic_cue(user_said(memory))) if user_said(memory) else ""
        sentence = as_sentence(retold(point, name)) if point else ""
        if sentence and new_words(sentence, [*said, *(s for _, s in out)], names=[name]):  # not told yet
            out.append((memory.id, sentence))
    told = [s for _, s in sorted(out)]
    if not told and not said:
        told.append(as_sentence(f"{name} only exchanged a few words"))
    if len(said) + len(told) < 2:
        told.append(NOTHING_DECIDED if open_left and not decided else NOTHING_OPEN if decided else NOTHING_AT_ALL)
    return told


# what a thin memory says the conversation did not do: true of its own turns, not of a conversation told in parts
NOTHING_DECIDED = "Nothing was decided."
NOTHING_OPEN = "Nothing was left open."
NOTHING_AT_ALL = "Nothing was decided and nothing was left open."


def joined(parts: Sequence[Mapping[str, Any]]) -> str:
    """One narrative from the parts of a conversation of two topics (what an edit or a redirect starts from, and
    what confirming stores after a redirect): their texts in order.  A part's closing "Nothing was decided." (or
    "… left open.") held for that topic alone: it is kept, once, only when every part ends with it, since beside
    another part it would deny what that part tells ("You decided to paint the kitchen blue. … Still open: book
    the dentist. Nothing was decided.")."""
    said = [str(p["narrative"]) for p in parts]
    endings = [next((f for f in (NOTHING_DECIDED, NOTHING_OPEN, NOTHING_AT_ALL) if t.endswith(f)), "") for t in said]
    cut = [t.removesuffix(f).rstrip() or t if f else t for t, f in zip(said, endings, strict=True)]
    common = endings[0] if endings and all(e == endings[0] for e in endings) else ""
    return " ".join([*cut, common] if common else cut)


def user_said(memory: MemoryItem) -> str:
    """What the user said in a conversation-stream memory of a user's turn ("" for the assistant's)."""
    details = memory.details
    if not isinstance(details, ConversationDetails) or details.agent_response:
        return ""
    return details.user_input


def _strip_aside(text: str) -> str:
    """Drop a leading topic-change aside ("Completely different topic.")."""
    parts = P.split_sentences(text)
    while len(parts) > 1 and re.match(r"^(?:completely\s+)?(?:different|new|other)\s+topic\b", parts[0], re.I):
        parts = parts[1:]
    return " ".join(parts)


def _same(a: str, b: str) -> bool:
    return word_keys(a) == word_keys(b)


def topic_parts(
    messages: Sequence[Message],
    entities: Sequence[PreviewEntity],
    resolutions: Sequence[resolve.Resolution],
    exchanges: Sequence[MemoryItem],
    storylines: Mapping[int, str],
    avoid: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """One proposed memory per topic, when the conversation held two or more; else [].

    A topic is a storyline of ``storylines`` (id → name: the user's own and detected ones) that holds a turn of
    the user and either two turns or an extracted item: people change the subject ("Also, completely different
    topic: …") and each subject belongs to its own storyline, so two are told apart instead of merged into one
    memory filed under one of them.  Each part is told from its own turns and items (:func:`compose_narrative`).
    When there are parts, every other storyline holding a turn of the user is a part as well: no turn the person
    said is left out of what they review.
    """
    groups: dict[int, list[Message]] = {}
    for m in messages:
        if m.storyline_id is not None and m.storyline_id in storylines:
            groups.setdefault(m.storyline_id, []).append(m)

    def items_of(sid: int) -> list[PreviewEntity]:
        ids = {m.id for m in groups[sid]}
        return [e for e in entities if _said_in(e) in ids or (_said_in(e) is None and e.storyline_id == sid)]

    def is_topic(sid: int) -> bool:
        said = groups[sid]
        found = [e for e in items_of(sid) if e.entity_type is not EntityType.PERSON]
        return any(m.role is Role.USER for m in said) and (len(said) >= 2 or bool(found))

    topics = [sid for sid in groups if is_topic(sid)]
    if len(topics) < 2:
        return []
    # once the conversation is told in parts, a storyline with one turn of the user is a part too: it was left
    # out of every part, so the person never reviewed it ("Also, completely different topic: my sister's
    # wedding is on June 14 in Porto.")
    topics = [sid for sid in groups if sid in topics or any(m.role is Role.USER for m in groups[sid])]
    parts = []
    for sid in topics:
        ids = {m.id for m in groups[sid]}
        mine = items_of(sid)
        settled = [r for r in resolutions if r.evidence.message.id in ids]
        told = [m for m in exchanges if m.storyline_id == sid]
        text = compose_narrative(groups[sid], mine, settled, told, avoid)
        parts.append(
            {"storyline_id": sid, "name": storylines[sid], "narrative": text, "entity_keys": [e.key for e in mine]}
        )
    return parts


def _said_in(e: PreviewEntity) -> int | None:
    mid = e.message_id if e.message_id is not None else e.data.get("message_id")
    return mid if isinstance(mid, int) else None
