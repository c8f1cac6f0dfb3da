"""Deletes that leave nothing behind: what goes with a memory, a conversation or a storyline.

Each ``delete_*`` checks that the thing exists, deletes it and what goes with it in one transaction, then
scrubs the file (``store.scrub_deleted``: full-text merge, zeroed pages, pruned change log, WAL checkpoint),
so a deleted word is nowhere in the file's bytes.  What a delete takes with it:

* memories take their entities, deltas, sources, vectors and full-text entries (the store's cascade), a turn's
  own memory the Your Story notes drawn from that turn alone (who the person said they are), the
  texts of their history (its events stay, with kind and time only, plus a ``deleted`` one: a tombstone), the
  uses that drew on them (their recorded queries name what is deleted), and the resolutions they made
  (those entities are reopened); narrative links left without memories are spliced out of the chain, sealed
  links that keep other memories stay (they are immutable), a running link that quotes a deleted memory says
  what its newest memory left says instead; the storyline cards (theirs and their messages') lose the summary
  lines and description that quote any text the memories held — now, before an edit, in any edit of their
  history — unless a memory left in the storyline says it too; what they superseded is current again (a deleted
  correction no longer says what is true), with a ``restored`` event saying why; research items they joined as
  one work stay joined (:func:`narrative.write.consolidate.rejoin_around`);
* a conversation takes its messages, memories, links, entities and uses, and its storylines are scrubbed:
  detected storylines left empty go, the others lose the summary lines, description and keywords that
  quoted the deleted messages, count only the messages left, and their routing embedding is made again
  from what is left;
* a storyline either hands its rows to Your Story (which then counts its messages) or takes its memories,
  links, entities and messages along, and the conversations left without a message go as a deleted
  conversation goes (title and all) — except the active one, which stays, empty, with its title.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from narrative.errors import InvalidTransition, NotFound
from narrative.model import (
    ConversationStatus,
    MemoryItem,
    Message,
    Narrative,
    Source,
    Storyline,
    StorylineKind,
    Stream,
)
from narrative.store.filters import MemoryFilter
from narrative.store.protocol import Store
from narrative.write import history
from narrative.write.consolidate import rejoin_around
from narrative.write.embedding import Embed, routing_vectors
from narrative.write.narrate import narrative_sentence
from narrative.write.storylines import your_story
from narrative.write.supersede import undo_superseding

__all__ = [
    "delete_conversation",
    "delete_memories",
    "delete_memory",
    "delete_storyline",
    "delete_user",
    "forget_conversation",
    "forget_memories",
    "forget_storyline",
    "scrub_storylines",
]

EVERYTHING = 1_000_000  # a limit no user reaches: list every row


USER_TABLES = ("conversations", "messages", "memories", "narratives", "storylines", "entities")  # counted on delete


def delete_memory(store: Store, user_id: str, memory_id: int, now: datetime) -> dict[str, int]:
    """Delete one memory with its entities, deltas, sources, vector and full-text entry (its history stays, as a
    tombstone without text)."""
    store.get_memory(user_id, memory_id)
    with store.transaction():
        counts = _forget_chosen(store, user_id, [memory_id], now)
    store.scrub_deleted()
    return counts


def delete_memories(store: Store, user_id: str, memory_ids: Iterable[int], now: datetime) -> dict[str, int]:
    """Delete several memories in one transaction, as :func:`delete_memory` deletes one: all of them, or none
    when any id is not one of the user's memories (NotFound names them)."""
    ids = sorted(set(memory_ids))
    found = {m.id for m in store.get_memories(user_id, ids)}
    missing = [i for i in ids if i not in found]
    if missing:
        raise NotFound(f"no memory {', '.join(map(str, missing))}: nothing was deleted")
    if not ids:
        return {"memories": 0, "narratives": 0, "reopened_entities": 0, "uses": 0}
    with store.transaction():
        counts = _forget_chosen(store, user_id, ids, now)
    store.scrub_deleted()
    return counts


def _forget_chosen(store: Store, user_id: str, memory_ids: list[int], now: datetime) -> dict[str, int]:
    """Memories a person chose to delete; the messages left without their own memory (whose memory it was) are
    no longer shown (:mod:`narrative.read.current`), and the storyline cards stop quoting them."""
    sources = sorted({m for memory in store.get_memories(user_id, memory_ids) for m in memory.message_ids})
    owned = store.own_memories(user_id, sources) if sources else {}
    chosen = set(memory_ids)
    bare = {m for m in sources if m not in owned or owned[m] in chosen}  # messages losing their own memory
    notes = _notes_of(store, user_id, bare) - chosen
    counts = forget_memories(store, user_id, sorted(chosen | notes), now=now, with_="memory")  # notes counted
    owned = store.own_memories(user_id, sources) if sources else {}
    left = [m for m in store.get_messages(user_id, [i for i in sources if i not in owned]) if m.storyline_id]
    if left:
        scrub_storylines(store, user_id, left, None, None)
    return counts


def _notes_of(store: Store, user_id: str, message_ids: set[int]) -> set[int]:
    """Your Story's notes of who the person is drawn from these messages alone (the write path's ``fact`` notes):
    a person who deletes what they said deletes what was noted from it too."""
    if not message_ids:
        return set()
    notes = store.list_memories(
        user_id, MemoryFilter(streams=[Stream.FACT], sources=[Source.EXTRACTION], limit=EVERYTHING)
    )
    return {n.id for n in notes if n.message_ids and set(n.message_ids) <= message_ids}


def delete_conversation(
    store: Store, user_id: str, conversation_id: int, embed: Embed | None, model: str | None, now: datetime
) -> dict[str, int]:
    """Delete a conversation and what came only from it (see :func:`forget_conversation`)."""
    store.get_conversation(user_id, conversation_id)
    with store.transaction():
        counts = forget_conversation(store, user_id, conversation_id, embed, model, now)
    store.scrub_deleted()
    return counts


def delete_storyline(
    store: Store, user_id: str, storyline_id: int, *, move_to_your_story: bool, now: datetime
) -> tuple[Storyline, dict[str, int]]:
    """Delete a storyline (never Your Story); returns it (as it was) with the counts."""
    storyline = store.get_storyline(user_id, storyline_id)
    if storyline.kind is StorylineKind.YOUR_STORY:
        raise InvalidTransition("Your Story is permanent: it cannot be deleted")
    with store.transaction():
        target = your_story(store, user_id, now).id if move_to_your_story else None
        counts = forget_storyline(store, user_id, storyline_id, target, now)
    store.scrub_deleted()
    return storyline, counts


def delete_user(store: Store, user_id: str) -> dict[str, int]:
    """Delete a user and every row they own; returns how many rows of each kind there were."""
    store.get_user(user_id)
    counts = {table: store.count_rows(table, user_id) for table in USER_TABLES}
    store.delete_user(user_id)
    store.scrub_deleted()
    return counts


def forget_memories(
    store: Store,
    user_id: str,
    memory_ids: Iterable[int],
    conversation_id: int | None = None,
    *,
    now: datetime,
    with_: str,
) -> dict[str, int]:
    """Delete memories and what only they held: resolutions they made, links left empty, uses of them.

    Their histories stay as tombstones (``deleted`` at ``now``, ``with_`` what the delete was of: memory,
    conversation or storyline), their events' texts blanked (:func:`narrative.write.history.tombstone`)."""
    ids = sorted(set(memory_ids))
    gone = set(ids)
    said, cards = _said_by(store, user_id, ids)  # before the tombstone blanks the history's texts
    why = "the memory that superseded it was deleted" + ("" if with_ == "memory" else f" with its {with_}")
    restored = undo_superseding(store, user_id, ids, now, why)
    reopened = store.reopen_resolved_by(user_id, ids)
    emptied: list[int] = []
    for nid in store.narratives_with_memories(user_id, ids):
        link = store.get_narrative(user_id, nid)
        alive = [m for m in store.get_memories(user_id, link.memory_ids) if m.id not in gone]
        if not alive:
            emptied.append(nid)
        elif not link.sealed:
            store.update_narrative(
                user_id, nid, summary=_restated_link(link, alive, said), memory_ids=[m.id for m in alive]
            )
    if conversation_id is not None:  # the conversation's own links that never held a memory
        emptied += [
            n.id
            for n in store.list_narratives(user_id, limit=EVERYTHING)
            if n.conversation_id == conversation_id
            and n.id not in emptied
            and not [m for m in store.get_memories(user_id, n.memory_ids) if m.id not in gone]
        ]
    links = store.splice_out_narratives(user_id, emptied)
    uses = store.delete_uses_of_memories(user_id, ids)
    rejoin_around(store, user_id, ids, now)
    history.tombstone(store, user_id, ids, now, with_)
    deleted = store.delete_memories(user_id, ids)
    _scrub_cards(store, user_id, cards, said, None, None, said_keywords_only=True)
    counts = {"memories": deleted, "narratives": links, "reopened_entities": reopened, "uses": uses}
    return counts | ({"restored": len(restored)} if restored else {})


def forget_conversation(
    store: Store, user_id: str, conversation_id: int, embed: Embed | None, model: str | None, now: datetime
) -> dict[str, int]:
    """Delete a conversation and what came only from it; scrub its storylines (``embed``/``model``: the
    current embedder, to make their routing embeddings again; None without one)."""
    messages = store.list_messages(user_id, conversation_id=conversation_id)
    ids = store.conversation_memory_ids(user_id, conversation_id)
    counts = forget_memories(store, user_id, ids, conversation_id, now=now, with_="conversation")
    counts["uses"] += store.delete_conversation_uses(user_id, conversation_id)
    counts["entities"] = len(store.list_entities(user_id, conversation_id=conversation_id, limit=EVERYTHING))
    store.delete_conversation(user_id, conversation_id)
    counts["messages"] = len(messages)
    counts["storylines"] = scrub_storylines(store, user_id, messages, embed, model)
    return counts


def scrub_storylines(
    store: Store, user_id: str, messages: list[Message], embed: Embed | None, model: str | None
) -> int:
    """Drop detected storylines left empty; in the others, scrub what quoted the deleted messages:
    summary lines, the description, keywords no remaining message supports, the routing embedding.
    Returns how many storylines were dropped."""
    unused = store.unused_storylines(user_id)
    for sid in unused:
        store.delete_storyline(user_id, sid)
    said = [_plain(m.content) for m in messages]
    sids = {m.storyline_id for m in messages if m.storyline_id is not None} - set(unused)
    _scrub_cards(store, user_id, sids, said, embed, model)
    return len(unused)


def _scrub_cards(
    store: Store,
    user_id: str,
    storyline_ids: set[int],
    said: list[str],
    embed: Embed | None,
    model: str | None,
    *,
    said_keywords_only: bool = False,
) -> None:
    """In these storylines, drop the summary lines and the description that quote what was ``said`` (lowercased,
    one space between words) unless a memory left in the storyline says it too, and the keywords neither a
    message routed there nor such a memory holds (``said_keywords_only``: only those the deleted texts hold, so a
    keyword given by hand stays); count only the messages left."""
    for sid in sorted(storyline_ids):
        try:
            storyline = store.get_storyline(user_id, sid)
        except NotFound:
            continue
        routed = store.list_messages(user_id, storyline_id=sid)
        kept = [
            _plain(m.content) for m in store.list_memories(user_id, MemoryFilter(storyline_ids=[sid], limit=EVERYTHING))
        ]
        remaining = " ".join([*(m.content.lower() for m in routed), *kept])
        summary = "\n".join(line for line in storyline.summary.splitlines() if not _unsaid(line, said, kept))
        description = "" if _unsaid(storyline.description, said, kept) else storyline.description
        keywords = tuple(
            k
            for k in storyline.keywords
            if k.lower() in remaining or (said_keywords_only and not any(k.lower() in t for t in said))
        )
        if (summary, description, keywords, len(routed)) != (
            storyline.summary,
            storyline.description,
            storyline.keywords,
            storyline.interaction_count,
        ):  # the count of its messages too: a deleted message is no longer one of them
            storyline = store.update_storyline(
                user_id,
                sid,
                summary=summary,
                description=description,
                keywords=keywords,
                interaction_count=len(routed),
            )
        if embed is not None and model is not None and store.storyline_vector(user_id, sid, model) is not None:
            store.put_storyline_vector(user_id, sid, model, routing_vectors(store, embed, [storyline])[sid])


def _said_by(store: Store, user_id: str, memory_ids: list[int]) -> tuple[list[str], set[int]]:
    """Every text these memories held (lowercased, one space between words): what they say now, what they said
    before an edit (``original_content``, each edit's old and new text in their history), and the storylines
    whose cards may quote them (their own and their messages')."""
    memories = store.get_memories(user_id, memory_ids)
    texts = [t for m in memories for t in (m.content, m.original_content or "")]
    texts += [t for m in memories for e in store.memory_events(user_id, m.id) for t in (e.old_text, e.new_text)]
    sources = sorted({i for m in memories for i in m.message_ids})
    cards = {m.storyline_id for m in memories if m.storyline_id is not None}
    cards |= {m.storyline_id for m in store.get_messages(user_id, sources) if m.storyline_id is not None}
    return list(dict.fromkeys(t for t in map(_plain, texts) if t)), cards


def _restated_link(link: Narrative, alive: list[MemoryItem], said: list[str]) -> str:
    """An open link's sentence once some of its memories are deleted: the same unless it quotes one of them (and
    no memory left says it); then what the newest memory left says."""
    text = _plain(link.summary)
    quoted = _quotes(link.summary, said) or any(len(t) >= 12 and t in text for t in said)
    kept = [_plain(m.content) for m in alive]
    if not quoted or _quotes(link.summary, kept) or any(text and text in t for t in kept):
        return link.summary
    newest = max(alive, key=lambda m: (m.created_at, m.id))
    return narrative_sentence(link.topic, "", " ".join(newest.content.split()))


def forget_storyline(
    store: Store, user_id: str, storyline_id: int, move_to: int | None, now: datetime
) -> dict[str, int]:
    """Delete a storyline; its rows move to ``move_to`` (Your Story), or (None) its memories, links, entities
    and the messages routed to it are deleted with it."""
    counts: dict[str, int] = {}
    if move_to is not None:
        counts["moved_memories"] = store.count_memories(user_id, MemoryFilter(storyline_ids=[storyline_id]))
        store.move_storyline_rows(user_id, storyline_id, move_to)
        held = len(store.list_messages(user_id, storyline_id=move_to))  # its messages are counted there now
        store.update_storyline(user_id, move_to, interaction_count=held)
    else:
        ids = store.memory_ids_matching(user_id, MemoryFilter(storyline_ids=[storyline_id]))
        counts.update(forget_memories(store, user_id, ids, now=now, with_="storyline"))
        links = [n.id for n in store.list_narratives(user_id, storyline_id=storyline_id, limit=EVERYTHING)]
        counts["narratives"] += store.splice_out_narratives(user_id, links)
        entities = store.list_entities(user_id, storyline_id=storyline_id, limit=EVERYTHING)
        store.delete_entities(user_id, [e.id for e in entities])
        routed = store.list_messages(user_id, storyline_id=storyline_id)
        counts["entities"] = len(entities)
        counts["messages"] = store.delete_messages(user_id, [m.id for m in routed])
    store.delete_storyline(user_id, storyline_id)
    counts["storylines"] = 1
    if move_to is None:
        counts["conversations"] = _forget_emptied(store, user_id, {m.conversation_id for m in routed}, counts, now)
    return counts


def _forget_emptied(
    store: Store, user_id: str, conversation_ids: set[int], counts: dict[str, int], now: datetime
) -> int:
    """Delete the conversations a storyline delete left without a message (their title, preview, what was made of
    them), except the active one: the agent is still talking in it.  Adds what went to ``counts``."""
    emptied = [
        c.id
        for c in (store.get_conversation(user_id, cid) for cid in sorted(conversation_ids))
        if c.message_count == 0 and c.status is not ConversationStatus.ACTIVE
    ]
    for cid in emptied:
        gone = forget_conversation(store, user_id, cid, None, None, now)
        for key in ("memories", "narratives", "uses", "entities", "storylines"):
            counts[key] = counts.get(key, 0) + gone.get(key, 0)
    return len(emptied)


def _unsaid(text: str, said: list[str], kept: list[str]) -> bool:
    """Does a card's line (or description) quote what was deleted and nothing left?"""
    return _quotes(text, said) and not _quotes(text, kept)


def _plain(text: str) -> str:
    """Lowercased, with one space between words (as a card's lines are written)."""
    return " ".join(text.split()).lower()


def _quotes(text: str, said: list[str]) -> bool:
    """Does a summary line (or description) repeat one of these (lowercased) messages?"""
    body = text.strip().lstrip("-• ").strip()
    if ": " in body:
        body = body.split(": ", 1)[1]
    probe = _plain(body.rstrip("…"))[:40]
    return len(probe) >= 12 and any(probe in s for s in said)
