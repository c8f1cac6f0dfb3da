"""Contradictions are shown, not resolved by guess: what a search's results bring in with them.

A result whose memory conflicts with a current memory not among the results brings it in; an earlier statement
that an update left current brings its update in above it; :func:`conflicts_of` reads each memory's conflicts
once a search (:mod:`narrative.read.search` calls these after ranking and folding)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from narrative.model import Conflict
from narrative.read.candidates import Candidates, Key, Unit
from narrative.store.protocol import Store
from narrative.text.statements import SINCE_DONE, UPDATES

S = TypeVar("S")  # what a search scored each result with (passed through untouched)


def with_conflicting(
    store: Store,
    user_id: str,
    chosen: list[Key],
    shows: dict[Key, frozenset[int]],
    found: Candidates,
    scored: dict[Key, S],
    k: int,
    include_superseded: bool = False,
) -> list[Key]:
    """Contradictions are shown, not resolved by guess: a hit whose memory conflicts with a current memory not
    among the results brings that memory in right after it (the weakest other hit makes room); an earlier
    statement that an update left current brings the update in above it (not the other way round; of the things done
    since a denial, only the newest: it says where things stand, and a denial followed by ten reports of progress
    would otherwise bring ten).  A hit stands for the messages it shows as well: an exchange showing a turn whose own
    memory conflicts counts as that memory."""
    listed = standing_for(store, user_id, chosen, shows, found)
    conflicts = conflicts_of(store, user_id, listed, found)
    partners: dict[Key, list[tuple[int, int | None]]] = {}
    newer: set[int] = set()  # memories that update a partner which still says more (shown before it)
    latest: dict[int, Conflict] = {}  # a denial → what was done since, the newest (conflicts by age)

    def shown_with(mine: int, part: int | None) -> Key | None:
        """The result standing for ``mine``, unless it shows another part of the message than the one named."""
        key = listed.get(mine)
        return None if key is None or another_part(found, key, mine, part) else key

    for c in conflicts:
        if c.reason.startswith(UPDATES):
            newer.add(c.memory_id)
            if c.reason.startswith(SINCE_DONE):
                latest[c.other_memory_id] = c
            elif c.memory_id not in listed and (key := shown_with(c.other_memory_id, c.other_passage_id)):
                partners.setdefault(key, []).append((c.memory_id, c.passage_id))
            continue  # an update is read without what it updated; the older statement brings its update in
        for mine, part, other, other_passage in (
            (c.memory_id, c.passage_id, c.other_memory_id, c.other_passage_id),
            (c.other_memory_id, c.other_passage_id, c.memory_id, c.passage_id),
        ):
            if other not in listed and (key := shown_with(mine, part)):
                partners.setdefault(key, []).append((other, other_passage))
    for older, c in latest.items():  # the newest progress says where things stand now
        if c.memory_id not in listed and (key := shown_with(older, c.other_passage_id)):
            partners.setdefault(key, []).append((c.memory_id, c.passage_id))
    if not partners:
        return updates_first(chosen, conflicts, listed, found)
    wanted = {m for pairs in partners.values() for m, _ in pairs}
    current = {m.id: m for m in store.get_memories(user_id, wanted) if m.is_current or include_superseded}
    passages = {p.id: p for p in store.get_passages(user_id, [p for ps in partners.values() for _, p in ps if p])}
    result: list[Key] = []
    added: list[Key] = []
    for key in chosen:
        result.append(key)
        for other, passage_id in partners.get(key, []):
            memory, passage = current.get(other), passages.get(passage_id) if passage_id else None
            extra = ("m", other)
            if memory is None or extra in result or extra in added:
                continue
            shown = {m for k in result for m in shows.get(k, ())}
            if set(memory.message_ids) <= shown:
                continue  # a reader already has every message of it
            if passage is not None and passage.is_current:
                found.units[extra] = Unit(
                    other, memory.stream, memory.event_at or memory.created_at, (passage.message_id,), passage
                )
            elif extra not in found.units:
                found.units[extra] = Unit(
                    other, memory.stream, memory.event_at or memory.created_at, memory.message_ids
                )
            found.fused.setdefault(extra, found.fused[key])
            scored[extra] = scored.get(extra, scored[key])
            shows[extra] = frozenset(found.units[extra].sources)
            result.insert(result.index(key) if other in newer else len(result), extra)
            added.append(extra)
    # the weakest other hits make room; a hit that brought a partner in stays with it
    while len(result) > k and (room := [key for key in result if key not in added and key not in partners]):
        result.remove(room[-1])
    listed.update({found.units[key].memory_id: key for key in added})
    return updates_first(result, conflicts, listed, found)


def another_part(found: Candidates, key: Key, memory_id: int, passage_id: int | None) -> bool:
    """True when the result shows one passage of a long message (its own match) and the conflict names another
    current passage of it: a long reply says many things, and a later figure for one of them is not about the part
    the search found, which the reader sees alone."""
    shown = found.units[key].passage
    if passage_id is None or shown is None or shown.memory_id != memory_id or shown.id == passage_id:
        return False
    return any(p.id == passage_id for p in found.of_message.get(shown.message_id, ()))


def conflicts_of(store: Store, user_id: str, memory_ids: Iterable[int], found: Candidates) -> list[Conflict]:
    """The conflicts naming these memories, in the order they were made; each memory's are read once a search
    (asked again, only the memories not asked before are read: one round trip fewer on PostgreSQL)."""
    wanted = set(memory_ids)
    if missing := wanted - found.asked:
        found.conflicts.update((c.id, c) for c in store.conflicts_of(user_id, missing))
        found.asked |= missing
    return [c for _, c in sorted(found.conflicts.items()) if c.memory_id in wanted or c.other_memory_id in wanted]


def standing_for(
    store: Store, user_id: str, chosen: Sequence[Key], shows: dict[Key, frozenset[int]], found: Candidates
) -> dict[int, Key]:
    """Memory id → the result that stands for it: each result's own memory, and the own memory of each message
    it shows (the memory its passages belong to), the better-ranked result first."""
    listed: dict[int, Key] = {}
    messages = {m for key in chosen for m in shows.get(key, ())}
    owners = {m: {p.memory_id for p in ps} for m, ps in found.passages_of(store, user_id, messages).items()}
    for key in chosen:  # in rank order: a lower hit whose own memory it is does not outrank one showing its message
        listed.setdefault(found.units[key].memory_id, key)
        for message in sorted(shows.get(key, ())):
            for memory_id in sorted(owners.get(message, ())):
                listed.setdefault(memory_id, key)
    return listed


def updates_first(
    order: list[Key], conflicts: Sequence[Conflict], listed: dict[int, Key], found: Candidates
) -> list[Key]:
    """An earlier statement that an update left current (its message says more) is shown after its update:
    when both are results, the update moves up to just above it.  Of the things done since a denial only the
    newest moves up (as only the newest is brought in): the others keep the rank their own match gave them.  A
    result showing another part of the earlier message than the updated one keeps its place (:func:`another_part`)."""
    result = list(order)
    newest = {c.other_memory_id: c.id for c in conflicts if c.reason.startswith(SINCE_DONE)}
    for c in conflicts:
        if not c.reason.startswith(UPDATES) or (c.reason.startswith(SINCE_DONE) and newest[c.other_memory_id] != c.id):
            continue
        at = {ident: result.index(key) for ident, key in listed.items() if key in result}
        old, new = at.get(c.other_memory_id), at.get(c.memory_id)
        if old is not None and another_part(found, result[old], c.other_memory_id, c.other_passage_id):
            continue
        if old is not None and new is not None and new > old:
            result.insert(old, result.pop(new))
    return result
