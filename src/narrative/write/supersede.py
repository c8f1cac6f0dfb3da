"""Memory that stays true: a correction supersedes what it corrects; a contradiction is linked, not resolved.

The one place in the write path that decides one statement supersedes another.  When a turn is stored, each
of its sentences that carries a change cue or a denial (``text.statements``) is compared with the earlier
statements of the same speaker that share its words (a keyword search over passages, so a long message is
compared passage by passage):

* an **update** — a change cue, the same subject, a changed value ("I live in Lisbon now, not Berlin";
  "coverage has recently improved to 78 %" after "reached 65 %") — marks the earlier passage superseded
  (``valid_to``, ``superseded_by``); when that leaves its message nothing current, the memories that state
  only that message (its own conversation memory, a decision or note drawn from it) are superseded by the
  new turn's memory.  Nothing is deleted; ``restore`` undoes it.
* a **contradiction** — a denial of what the speaker affirmed before ("the homepage route returns static HTML" /
  later "I've never written Flask routes") — links the two as conflicting, so search and context show both and
  say so.  The other order is progress, not a contradiction ("I've never written Flask routes" / later "I wrote
  the homepage route"): the two are linked as an update that leaves the denial current ("updates: since done").
  A question ("how do I write a Flask route?"), an instruction ("Always show the code when I ask about Flask
  routes") and a wish or plan that reports nothing done ("I want to write the login route") affirm nothing.

Only the same speaker (and role) corrects a statement: one person's news does not make another's stale.  Only a
person's turns (role ``user``) are settled: an assistant's reply explains and works examples ("the probability is
now 1/3", "your new total is 12") rather than stating what is true of the person's world, so its sentences neither
supersede nor are superseded; when a fact changes, the person says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from narrative.model import Conflict, EventKind, MemoryItem, Message, Passage, Role, Storyline, Stream
from narrative.store.filters import MemoryFilter
from narrative.store.protocol import Store
from narrative.text import statements as S
from narrative.write import history, storylines

__all__ = ["Settled", "Superseded", "restore", "settle", "undo_superseding"]

CANDIDATES = 8  # earlier passages read per cue sentence (the best keyword matches)
SAID = 24  # the speaker's own earlier messages read per value or denial (the best keyword matches)
AFFIRMATIONS = 12  # plain first-person sentences of a turn compared with earlier denials ("I've never …")
DISAGREEMENTS = 3  # earlier messages a statement is linked to as contradicting it: those sharing most of the denial


@dataclass(frozen=True)
class Superseded:
    """One earlier passage the turn superseded, why, and the memories that went with it."""

    passage: Passage
    by: Passage
    reason: str
    memories: tuple[int, ...] = ()
    gone: tuple[str, ...] = ()  # words of the old value that are no longer true


@dataclass
class Settled:
    """What a turn changed in what is true: passages (and memories) superseded, conflicts linked."""

    superseded: list[Superseded] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    storylines: dict[int, Storyline] = field(default_factory=dict)  # storylines changed (as stored now)


def settle(store: Store, message: Message, passages: Sequence[Passage], judge: Judge | None = None) -> Settled:
    """Compare ``message``'s cue and denial sentences with the speaker's earlier statements; record what they
    supersede or contradict.  Runs inside the turn's transaction.

    With an LLM (``judge``), the model decides each pair that shares a subject (its answer validated; no answer
    or a malformed one: the rules decide); without one, the rules of :mod:`narrative.text.statements`."""
    settled = Settled()
    if message.role != Role.USER:
        return settled
    everything = S.statements(message.content)
    said = [s for s in everything if s.cue or s.denied]
    affirms = [s for s in everything if not (s.cue or s.denied or s.instructs or s.asks or s.intends)]
    said += [s for s in affirms if s.personal][:AFFIRMATIONS]
    if not said or not passages:
        return settled
    earlier: dict[int, Message] = {}
    asks = list(range(JUDGED))  # the model is asked about this many pairs at most
    for statement in said:
        mine = _passage_at(passages, statement.start)
        disagreeing: list[tuple[int, int, Passage, str]] = []  # (-strength, rank, earlier passage, reason)
        for rank, candidate in enumerate(_candidates(store, message, statement, earlier)):
            before = earlier[candidate.message_id]
            for old in _statements_of(before, candidate):
                change, reason = _relation(judge, asks, message, before, candidate, statement, old)
                if change is not None and _says_more(before, candidate, old):
                    reason = f"{S.UPDATES}{change} (the rest of message #{candidate.message_id} still stands)"
                elif change is not None:
                    settled.superseded.append(_supersede(store, message, candidate, mine, change, settled))
                    break
                if reason is not None and reason.startswith(S.DISAGREES):
                    if not statement.denied:  # done since it was denied: progress, not a contradiction
                        reason = S.SINCE_DONE + ", ".join(sorted(S.denied_shared(statement, old))[:4])
                    disagreeing.append((-S.disagreement(statement, old), rank, candidate, reason))
                    break
                if reason is not None:
                    _link(store, message, mine, candidate, reason, settled)
                    break
        linked: set[int] = set()
        for _, _, candidate, reason in sorted(disagreeing, key=lambda d: d[:2]):
            if len(linked) < DISAGREEMENTS and candidate.message_id not in linked:
                linked.add(candidate.message_id)
                _link(store, message, mine, candidate, reason, settled)
    return settled


def _link(store: Store, message: Message, mine: Passage, other: Passage, reason: str, settled: Settled) -> None:
    conflict = store.insert_conflict(
        message.user_id,
        mine.memory_id,
        other.memory_id,
        message.created_at,
        passage_id=mine.id,
        other_passage_id=other.id,
        reason=reason,
    )
    if conflict is not None:
        settled.conflicts.append(conflict)


#: How an LLM judges two statements: (speaker, earlier, earlier's time, new, new's time) → relation or None.
Judge = Callable[[str, str, str, str, str], "str | None"]
JUDGED = 4  # pairs a turn asks the model about, at most (the per-turn budget may stop it sooner)


def _judged(
    judge: Judge | None,
    asks: list[int],
    message: Message,
    before: Message,
    passage: Passage,
    new: S.Statement,
    old: S.Statement,
) -> str | None:
    """The model's verdict on a pair that shares a subject, or None (no model, nothing shared, no answer)."""
    if judge is None or len(new.keys & old.keys) < 2 or not asks:
        return None
    asks.pop()
    earlier = before.content[passage.start : passage.end][old.start : old.end]
    return judge(
        message.speaker,
        earlier,
        before.created_at.date().isoformat(),
        message.content[new.start : new.end],
        message.created_at.date().isoformat(),
    )


def _relation(
    judge: Judge | None,
    asks: list[int],
    message: Message,
    before: Message,
    passage: Passage,
    new: S.Statement,
    old: S.Statement,
) -> tuple[S.Change | None, str | None]:
    """(the update, or the contradiction's reason) between two statements: the model's verdict when it gives a
    valid one, else the rules (a plain statement only meets an earlier denial)."""
    verdict = _judged(judge, asks, message, before, passage, new, old)
    if verdict == "update":
        return S.Change("the model judged it an update" + (f" ({new.cue})" if new.cue else "")), None
    if verdict == "contradiction":
        return None, "the model judged they disagree"
    if verdict == "none" or not (new.cue or new.denied or old.denied):
        return None, None
    return S.update(new, old), S.contradiction(new, old)


def _passage_at(passages: Sequence[Passage], offset: int) -> Passage:
    for passage in passages:
        if passage.start <= offset < passage.end:
            return passage
    return passages[0]


def _candidates(store: Store, message: Message, statement: S.Statement, seen: dict[int, Message]) -> list[Passage]:
    """Current passages of the same speaker's earlier messages that share the sentence's words, best first: whole
    messages through their conversation memories' keyword entries, parts of long ones through their own."""
    if not statement.keys:
        return []
    user_id = message.user_id
    queries = [" ".join(sorted(statement.keys | set(statement.not_values)))]
    # what each value is of ("commits merged main branch") and what a denial denies ("coin toss problems"): a long
    # sentence's many words find other things; these are looked up in the speaker's own messages as well, where
    # an exchange's long reply does not outweigh the short turn that said it
    of = [" ".join(sorted(v.near | ({v.unit, v.noun} - {""}))) for v in statement.values if v.near]
    of += [" ".join(sorted(statement.denied_keys))] if statement.denied_keys else []
    said = [p for q in dict.fromkeys(of) for p in _said_before(store, message, q)]
    queries += of
    where = MemoryFilter(streams=[Stream.CONVERSATION], current_only=True)
    exchanges = [
        i for q in dict.fromkeys(queries) for i, _ in store.keyword_search_memories(user_id, q, where, limit=CANDIDATES)
    ]
    sources = [m for memory in store.get_memories(user_id, dict.fromkeys(exchanges)) for m in memory.message_ids]
    whole = [p for ps in store.passages_of_messages(user_id, sources).values() for p in ps if p.parts == 1]
    cut = [i for q in dict.fromkeys(queries) for i, _ in store.keyword_search_passages(user_id, q, limit=CANDIDATES)]
    hit = store.get_passages(user_id, dict.fromkeys(cut))
    # a long message found by one of its parts is read whole: the statement updated may be in another part
    siblings = store.passages_of_messages(user_id, {p.message_id for p in hit})
    parts = [q for p in hit for q in siblings.get(p.message_id, [p])]
    found = [p for p in dict.fromkeys([*said, *whole, *parts]) if p.is_current and p.message_id != message.id]
    missing = sorted({p.message_id for p in found} - seen.keys())
    seen.update({m.id: m for m in store.get_messages(user_id, missing)} if missing else {})
    kept = [
        p
        for p in found
        if p.message_id in seen
        and seen[p.message_id].position < message.position
        and seen[p.message_id].created_at <= message.created_at  # a turn dated before it corrects nothing said later
        and seen[p.message_id].role is message.role
        and seen[p.message_id].speaker.strip().casefold() == message.speaker.strip().casefold()
    ]
    wanted = list(dict.fromkeys(p.message_id for p in kept))[: 2 * CANDIDATES * len(queries)]
    return [p for p in kept if p.message_id in set(wanted)]


def _said_before(store: Store, message: Message, query: str) -> list[Passage]:
    """The passages of the speaker's own earlier messages that best match ``query`` (a keyword search over
    messages: an exchange's long reply would outweigh the short turn that said it)."""
    said = [
        m.id
        for m, _ in store.search_messages(message.user_id, query, limit=8 * CANDIDATES)
        if m.position < message.position
        and m.role is message.role
        and m.speaker.strip().casefold() == message.speaker.strip().casefold()
    ][:SAID]
    passages = store.passages_of_messages(message.user_id, said)
    return [p for m in said for p in passages.get(m, [])]


def _says_more(before: Message, passage: Passage, old: S.Statement) -> bool:
    """True when the earlier passage states something besides the statement updated (another sentence with a
    value or two content words of its own): it stays current, linked to its update, instead of going stale
    with everything else it says ("the first sprint ends on March 29" is updated; "the project takes 6 weeks"
    in the same message is still true)."""
    return any(
        (s.start, s.end) != (old.start, old.end) and (s.values or len(s.keys - old.keys) >= 2)
        for s in _statements_of(before, passage)
    )


def _statements_of(message: Message, passage: Passage) -> list[S.Statement]:
    return S.statements(message.content[passage.start : passage.end])


def _supersede(
    store: Store, message: Message, old: Passage, by: Passage, change: S.Change, settled: Settled
) -> Superseded:
    user_id = message.user_id
    store.supersede_passages(user_id, [old.id], by.id, message.created_at)
    left = [p for p in store.passages_of_messages(user_id, [old.message_id]).get(old.message_id, []) if p.is_current]
    memories: list[int] = []
    earlier = earlier_message(store, user_id, old)
    reply: Message | None = None
    if not left:  # nothing of the old message is current: the memories stating only it go too
        holding = store.get_memories(user_id, store.memories_from_messages(user_id, [old.message_id]))
        stating = [
            m.id
            for m in holding
            if m.id == old.memory_id or (m.message_ids == (old.message_id,) and m.id != by.memory_id)
        ]
        news = _said(message.content[by.start : by.end]) - _said(earlier.content[old.start : old.end])  # new here
        answered = _short_reply(store, user_id, old.message_id, holding, news)
        if answered is not None:  # the assistant's short answer restates what was said: it goes with it
            reply, passage = answered
            store.supersede_passages(user_id, [passage.id], by.id, message.created_at)
            stating += [passage.memory_id] if passage.memory_id != by.memory_id else []
        memories = store.supersede_memories(user_id, stating, by.memory_id, message.created_at)
        for memory in store.get_memories(user_id, memories):
            history.record(
                store,
                user_id,
                memory.id,
                EventKind.SUPERSEDED,
                memory.content,
                memory.content,
                message.created_at,
                {"superseded_by": by.memory_id, "reason": change.reason},
            )
    for stated in (earlier, *([reply] if reply is not None else [])):
        storyline = storylines.forget_superseded(store, user_id, stated, change.gone, message)
        if storyline is not None:
            settled.storylines[storyline.id] = storyline
    return Superseded(old, by, change.reason, tuple(memories), change.gone)


def _said(text: str) -> frozenset[str]:
    """What a text states, to compare: its sentences' content keys and values."""
    return frozenset(
        word for statement in S.statements(text) for word in (*statement.keys, *(v.text for v in statement.values))
    )


def _short_reply(
    store: Store, user_id: str, message_id: int, holding: Sequence[MemoryItem], news: frozenset[str]
) -> tuple[Message, Passage] | None:
    """The assistant's reply right after this message (the later turn of the exchange that begins with it) and
    its one current passage, when the reply is that short and says nothing of what the correction says anew:
    "Nice, Berlin is a great city to live in." answers "I live in Berlin." and would go on saying it after "I live
    in Lisbon now".  A reply that already says the new value ("the launch moved to April 5") stays current, and
    so does one cut into several passages: it explains more than it restates."""
    for memory in holding:
        if memory.stream is not Stream.CONVERSATION or len(memory.message_ids) != 2:
            continue
        if memory.message_ids[0] != message_id:
            continue
        reply = store.get_message(user_id, memory.message_ids[1])
        if reply.role is not Role.ASSISTANT or reply.conversation_id is None:
            continue
        passages = store.passages_of_messages(user_id, [reply.id]).get(reply.id, [])
        if len(passages) == 1 and passages[0].is_current and not news & _said(reply.content):
            return reply, passages[0]
    return None


def earlier_message(store: Store, user_id: str, passage: Passage) -> Message:
    return store.get_message(user_id, passage.message_id)


def restore(store: Store, user_id: str, memory_id: int, now: datetime, why: str = "") -> list[int]:
    """Make a superseded memory current again, with the passages of its messages that its superseder took;
    returns the memories restored.  An event in its history says so (and ``why``, when it was not asked for)."""
    memory = store.get_memory(user_id, memory_id)
    if memory.superseded_by is None:
        return []
    by = memory.superseded_by
    own = [p for p in store.passages_of_memories(user_id, [memory_id]) if not p.is_current]
    taken = [p.id for p in own if p.superseded_by is not None and _belongs(store, user_id, p.superseded_by, by)]
    store.restore_passages(user_id, taken)
    restored = store.restore_memories(user_id, [memory_id])
    detail: dict[str, Any] = {"superseded_by": by, **({"why": why} if why else {})}
    for ident in restored:
        history.record(store, user_id, ident, EventKind.RESTORED, memory.content, memory.content, now, detail)
    if restored:  # the short reply that went with it comes back with it, and the notes drawn from its turn
        later = store.get_memories(user_id, store.memories_from_messages(user_id, list(memory.message_ids)))
        for pair in later:
            if pair.superseded_by != by or pair.id == memory_id:
                continue
            reply = len(pair.message_ids) == 2 and pair.message_ids[0] in memory.message_ids
            note = pair.stream is Stream.FACT and set(pair.message_ids) <= set(memory.message_ids)
            if reply or (note and memory.stream is not Stream.FACT):
                restored += restore(store, user_id, pair.id, now, why)
    return restored


def undo_superseding(store: Store, user_id: str, memory_ids: Iterable[int], now: datetime, why: str) -> list[int]:
    """Before memories are deleted: what they superseded is current again (a deleted correction no longer says
    what is true), memories with an event saying ``why``, and passages of messages whose memory stayed current
    (a message that said more); returns the memories restored.  Memories deleted with them are left alone."""
    gone = set(memory_ids)
    restored: list[int] = []
    for by, earlier in sorted(store.superseded_by_memories(user_id, gone).items()):
        for memory in earlier:
            if memory.id not in gone and memory.superseded_by == by:
                restored += restore(store, user_id, memory.id, now, why)
    theirs = [p.id for p in store.passages_of_memories(user_id, gone)]
    taken = [p.id for p in store.passages_superseded_by(user_id, theirs) if p.memory_id not in gone]
    store.restore_passages(user_id, taken)
    return [i for i in restored if i not in gone]


def _belongs(store: Store, user_id: str, passage_id: int, memory_id: int) -> bool:
    found = store.get_passages(user_id, [passage_id])
    return bool(found) and found[0].memory_id == memory_id


def describe(settled: Settled, when: datetime | None = None) -> list[str]:
    """Lines for a turn's report: what it superseded and what it contradicts."""
    lines = []
    for item in settled.superseded:
        memories = ", ".join(f"#{i}" for i in item.memories)
        lines.append(
            f"  supersedes message #{item.passage.message_id}"
            + (f" (memory {memories})" if memories else "")
            + f": {item.reason}"
        )
    lines += [f"  conflicts with memory #{c.other_memory_id}: {c.reason}" for c in settled.conflicts]
    return lines


def settle_memory(store: Store, memory: MemoryItem, now: datetime) -> Settled:
    """A memory written by hand (a fact, a decision an agent noted): the same reading as for a turn, against the
    earlier current memories of its stream.  An update supersedes the earlier memory; a denial is a conflict."""
    settled = Settled()
    said = [s for s in S.statements(memory.content) if s.cue or s.denied or s.personal]
    for statement in said:
        if not statement.keys:
            continue
        query = " ".join(sorted(statement.keys | set(statement.not_values)))
        where = MemoryFilter(streams=[memory.stream], current_only=True)
        hits = store.keyword_search_memories(memory.user_id, query, where, limit=CANDIDATES)
        for old in store.get_memories(memory.user_id, [i for i, _ in hits if i != memory.id]):
            if old.created_at > memory.created_at or old.valid_to is not None:
                continue
            for before in S.statements(old.content):
                if not (statement.cue or statement.denied or before.denied):
                    continue
                change = S.update(statement, before)
                if change is not None:
                    for ident in store.supersede_memories(memory.user_id, [old.id], memory.id, now):
                        history.record(
                            store,
                            memory.user_id,
                            ident,
                            EventKind.SUPERSEDED,
                            old.content,
                            old.content,
                            now,
                            {"superseded_by": memory.id, "reason": change.reason},
                        )
                    break
                reason = S.contradiction(statement, before)
                if reason is not None:
                    conflict = store.insert_conflict(memory.user_id, memory.id, old.id, now, reason=reason)
                    if conflict is not None:
                        settled.conflicts.append(conflict)
                    break
    return settled
