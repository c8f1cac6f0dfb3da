"""What a result puts in front of a reader: which messages each ranked candidate shows.

A memory of one message shows it; an exchange its own turn, and the turn it answers when that holds the query's
words (or an assistant's reply: always with the person's turn it answers); a summary none.  A passage of a long
message shows that message (an assistant's, with the question it answers).  A message a later statement
superseded is not shown unless asked for.  :mod:`narrative.read.search` calls :func:`shown_by` after ranking."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from narrative.model import SUMMARY_STREAMS, MemoryBrief, MemoryItem, Message, Role
from narrative.read.candidates import Candidates, Key
from narrative.read.current import stale_messages
from narrative.store.keyword_index import query_terms, terms
from narrative.store.protocol import Store
from narrative.text.lines import turn_line


def shown_by(
    store: Store,
    user_id: str,
    query: str,
    order: Sequence[Key],
    found: Candidates,
    k: int,
    include_superseded: bool = False,
    as_of: datetime | None = None,
) -> tuple[dict[Key, frozenset[int]], dict[int, Message], set[Key]]:
    """Which messages each ranked candidate puts in front of a reader (a passage: its message; a memory: see
    :func:`shown_messages`), and the messages read to decide.  A message a later statement superseded is not
    shown (unless asked for): an exchange that holds it shows its other turn only."""
    memory_order = [ident for kind, ident in order if kind == "m"]
    briefs = {
        ident: MemoryBrief(
            found.units[("m", ident)].stream, found.units[("m", ident)].when, found.units[("m", ident)].sources
        )
        for ident in memory_order
    }
    by_memory, messages = shown_messages(store, user_id, query, memory_order, briefs, k)
    asked = _asked_turns(store, user_id, order[: 4 * k + 20], found, messages)
    shows: dict[Key, frozenset[int]] = {}
    for key in order:
        unit = found.units[key]
        shows[key] = frozenset((*asked.get(key, ()), *unit.sources)) if unit.passage is not None else by_memory[key[1]]
    heads = {m for key in order[: 4 * k + 20] for m in shows[key]}
    stale = (
        set()
        if include_superseded and as_of is None
        else stale_messages(store, user_id, heads, as_of, lambda ids: found.passages_of(store, user_id, ids))
    )
    emptied = set()
    if stale:
        for key, value in shows.items():
            if found.units[key].passage is not None and key in asked and value & stale:
                shows[key] = value - (stale - set(found.units[key].sources))  # the asking turn was superseded
            elif found.units[key].passage is None and value & stale:
                shows[key] = value - stale
                if not shows[key] and found.units[key].stream not in SUMMARY_STREAMS:
                    emptied.add(key)  # everything it would show was superseded
    return shows, messages, emptied


def _asked_turns(
    store: Store, user_id: str, head: Sequence[Key], found: Candidates, messages: dict[int, Message]
) -> dict[Key, tuple[int]]:
    """For a hit on a passage of an assistant's reply: the turn it answers (the exchange's other turn, when a
    person said it).  An assistant's reply is read with the question it answers: what the person said is what
    a memory of the conversation is for, and the reply's passage alone would show the answer without the fact it
    answers.  A person's own turn is shown alone (its passage is what they said)."""
    pairs: dict[Key, tuple[int, int]] = {}
    for key in head:
        unit = found.units[key]
        held = sorted(found.holds.get(unit.memory_id, ()))
        if unit.passage is not None and len(held) == 2 and held[1] == unit.passage.message_id:
            pairs[key] = (held[0], held[1])
    wanted = sorted({m for pair in pairs.values() for m in pair} - messages.keys())
    messages.update({m.id: m for m in store.get_messages(user_id, wanted)} if wanted else {})
    asked: dict[Key, tuple[int]] = {}
    for key, (earlier, later) in pairs.items():
        question, reply = messages.get(earlier), messages.get(later)
        if question is not None and reply is not None and (question.role, reply.role) == (Role.USER, Role.ASSISTANT):
            asked[key] = (earlier,)
    return asked


def shown_messages(
    store: Store,
    user_id: str,
    query: str,
    order: Sequence[int],
    briefs: Mapping[int, MemoryBrief],
    k: int,
) -> tuple[dict[int, frozenset[int]], dict[int, Message]]:
    """Which source messages each ranked memory puts in front of a reader, and the messages read to decide.

    A summary (reflection, narrative link, closing memory) shows none: it quotes no single message.  A memory made
    from one message shows it.  An exchange shows its own turn, and the turn it answers only when that turn holds
    some of the query's words — the reply belongs with the question that found it; a reply found by its own words
    does not need the turn before it.  When neither turn holds a query word (a match by meaning), both are shown.
    A turn's words include its speaker's name, as the exchange's text does: "what does Melanie do to de-stress"
    holds a word of Melanie's own turn, not only of the reply that thanks her by name.  An assistant's reply is
    always shown with the person's turn it answers (see :func:`_asked_turns`).
    """
    head = order[: 4 * k + 20]  # enough for the collapse to fill k results
    pairs = [i for i in head if briefs[i][0] not in SUMMARY_STREAMS and len(briefs[i][2]) == 2]
    wanted = sorted({m for i in pairs for m in briefs[i][2]})
    messages = {m.id: m for m in store.get_messages(user_id, wanted)} if wanted else {}
    words = set(query_terms(query))
    shows: dict[int, frozenset[int]] = {}
    for memory_id in order:
        stream, _, sources, _ = briefs[memory_id]
        if stream in SUMMARY_STREAMS:
            shows[memory_id] = frozenset()
        elif memory_id in pairs and all(m in messages for m in sources):
            earlier, later = sorted(sources)
            matched = [bool(words & set(terms(turn_line(messages[m])))) for m in (earlier, later)]
            asked = (messages[earlier].role, messages[later].role) == (Role.USER, Role.ASSISTANT)
            shows[memory_id] = frozenset((later,) if matched == [False, True] and not asked else (earlier, later))
        else:
            shows[memory_id] = frozenset(sources)
    return shows, messages


def shown_text(memory: MemoryItem, shown: Sequence[int], messages: Mapping[int, Message]) -> str:
    """The memory's text, or, for an exchange that shows fewer turns than it holds, those turns alone."""
    if not shown or len(shown) == len(memory.message_ids) or not all(m in messages for m in shown):
        return memory.content
    return "\n".join(turn_line(messages[m]) for m in shown)
