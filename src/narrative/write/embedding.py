"""What the write path embeds, and how: the one home for a turn's vectors.

A turn needs three kinds of vector:

* its **message alone** (``turn_line`` of text/lines.py): routing compares it with the
  storylines' routing embeddings, and it drifts the chosen storyline's one;
* its **exchange** (the conversation memory: the turn and the one it answers);
* its **derived memories** (decisions, research), one per text.

:func:`plan_turns` lists the distinct texts a batch of turns needs and :func:`embed_plans` makes them in ONE
model call, before any routing work (no text depends on routing).  With ``exchange_vector="compose"`` an
exchange is not embedded: its vector is composed from its two messages' vectors (:func:`compose`),
so a turn costs one text; the answered message's vector comes from the same batch, else from
:class:`MessageVectors` (the last message of each recent conversation), else it is embedded again.
``exchange_vector="embed"`` (the default: composing costs recall) embeds the exchange's own text (two texts a
turn).  An assistant's reply needs no vector to be routed (it stays with the turn it answers), so its message
alone is not embedded: its exchange is, and drifts the storyline (one text for such a turn).

The engine's **summaries** (reflections, narrative links, closing memories) are not embedded either: a summary is
about what it summarises, so its vector is the mean of the vectors of the conversation memories made from the
messages it cites (:func:`summary_vectors`).  A summary a person wrote or edited is embedded from its text.

A storyline's **routing embedding** follows one recipe: each routed message pulls it a little
(:func:`drift`); at its creation, after a few turns, and then each time its turn count doubles it is blended
half-and-half with the embedding of the storyline's own text (:func:`routing_text`, :func:`blend`); made from
scratch (reindex, import, after a delete) it is the same walk replayed over the storyline's recent exchanges
(:func:`routing_vectors`).  Any other memory is embedded from its text (:func:`memory_text`,
:func:`memory_vectors`; :func:`remade_vectors` for reindex and import).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from narrative.errors import EmbeddingMismatch
from narrative.model import SUMMARY_STREAMS, MemoryItem, Message, Storyline, Stream
from narrative.store.filters import MemoryFilter
from narrative.store.protocol import Store
from narrative.text.lines import exchange_text
from narrative.text.lines import turn_line as message_text
from narrative.text.passages import Span, excerpt, split_passages

Embed = Callable[[Sequence[str]], np.ndarray]

KEPT_CONVERSATIONS = 256  # MessageVectors keeps the last message vector of this many conversations
DRIFT = 0.1  # how far each new message pulls the routing embedding
ROUTING_HISTORY = 10  # recent conversation memories replayed into a routing embedding made from scratch


def compose(first_text: str, first: np.ndarray, second_text: str, second: np.ndarray) -> np.ndarray:
    """An exchange's vector from its two messages' (normalised) vectors, without running the model.

    The model mean-pools token vectors, so a longer message weighs more in the embedding of the joined
    text; weighting each message by the square root of its length came closest to the real embedding of
    the exchange on LoCoMo turns (mean cosine 0.961, against 0.955 for a plain sum).
    """
    mixed = math.sqrt(len(first_text)) * first + math.sqrt(len(second_text)) * second
    return unit(mixed)


def unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return np.asarray(vector if norm == 0 else vector / norm, dtype=np.float32)


@dataclass
class TurnVectors:
    """One turn's vectors (all None without an embedder)."""

    exchange: np.ndarray | None = None  # the conversation memory
    derived: list[np.ndarray] | None = None  # the decision and research memories, in order
    routing: np.ndarray | None = None  # the message alone
    spans: list[Span] | None = None  # the message's passages
    passages: list[np.ndarray] | None = None  # their vectors, in order


@dataclass(frozen=True)
class TurnPlan:
    """The texts one turn needs embedded."""

    message: Message
    alone: str  # the message alone: routing, and half of a composed exchange
    derived: tuple[str, ...]  # derived memories' texts
    answered: str | None  # the answered message's text when the exchange is composed from two messages
    answered_message: Message | None  # the message it is, then
    exchange: str  # the exchange's own text, embedded when it is not composed (may equal ``alone``)
    embed_alone: bool = True  # False: routing needs no vector (the route is settled) and the exchange pairs
    spans: tuple[Span, ...] = ()  # the message's passages
    passages: tuple[str, ...] = ()  # what each passage's vector is made from (``alone`` for a one-passage message)

    @property
    def long(self) -> bool:
        """Several passages: the message alone is the mean of its passages' vectors, not a truncated text."""
        return len(self.spans) > 1


class MessageVectors:
    """The last message vector of each recent conversation, so a composed exchange in the next call does not
    embed the answered message again.  Checked by message id and text; bounded to ``size`` conversations."""

    def __init__(self, size: int = KEPT_CONVERSATIONS) -> None:
        self.size = size
        self._kept: OrderedDict[int, tuple[int, str, np.ndarray]] = OrderedDict()

    def get(self, message: Message, text: str) -> np.ndarray | None:
        kept = self._kept.get(message.conversation_id)
        return kept[2] if kept is not None and kept[:2] == (message.id, text) else None

    def keep(self, message: Message, text: str, vector: np.ndarray) -> None:
        self._kept.pop(message.conversation_id, None)
        if len(self._kept) >= self.size:
            self._kept.popitem(last=False)
        self._kept[message.conversation_id] = (message.id, text, vector)


def exchange_line(before: Message | None, message: Message) -> str:
    """An exchange's text as its conversation memory stores it: a long turn quoted by its first passage
    (``text.passages.excerpt``), so the vector is of what the memory says, not of a long reply's first 256 word
    pieces crowding out the turn that answers it."""
    quoted = None if before is None else replace(before, content=excerpt(before.content))
    return exchange_text(quoted, replace(message, content=excerpt(message.content)))


def passage_text(message: Message, start: int, end: int) -> str:
    """What a passage's vector is made from: the speaker and the passage, as a turn reads (the whole turn's
    line when the passage is the whole message)."""
    piece = message.content[start:end]
    if piece == message.content.strip():
        return message_text(message)
    return f"{message.speaker}: {piece}" if message.speaker else piece


def passage_texts(message: Message, spans: Sequence[Span]) -> tuple[str, ...]:
    if len(spans) <= 1:
        return (message_text(message),)
    return tuple(passage_text(message, s.start, s.end) for s in spans)


def plan_turns(
    messages: Sequence[Message],
    answered: Sequence[Message | None],
    derived: Sequence[Sequence[str]],
    composed: bool,
    settled: Sequence[bool] | None = None,
) -> list[TurnPlan]:
    """Each turn's texts; ``answered[i]`` is the message turn i answers (None: the exchange is the turn alone).

    Every message's passages are embedded (a message the model reads whole is one passage: the message alone).
    A long message (several passages) is the mean of its passages wherever the message alone is wanted
    (routing, half of its exchange), and its exchange is composed from the turn it answers and that mean, so
    nothing of it is cut at the model's window.  ``settled`` is kept for the callers' plans: a settled reply
    needs no vector for routing, but its passage is embedded all the same (it is what finds the reply)."""
    del settled
    plans = []
    for message, before, texts in zip(messages, answered, derived, strict=True):
        alone = message_text(message)
        spans = tuple(split_passages(message.content))
        compose_it = (composed or len(spans) > 1) and before is not None
        plans.append(
            TurnPlan(
                message,
                alone,
                tuple(texts),
                message_text(before) if compose_it and before is not None else None,
                before if compose_it else None,
                alone if compose_it else exchange_line(before, message),
                True,
                spans,
                passage_texts(message, spans),
            )
        )
    return plans


def needed_texts(plans: Sequence[TurnPlan], kept: MessageVectors | None) -> tuple[list[str], dict[str, np.ndarray]]:
    """The distinct texts to embed, in order, and the vectors already known (kept answered messages)."""
    known: dict[str, np.ndarray] = {}
    wanted: dict[str, None] = {}
    for plan in plans:
        before = plan.answered_message
        if plan.answered is not None and before is not None and kept is not None and plan.answered not in known:
            vector = kept.get(before, plan.answered)
            if vector is not None:
                known[plan.answered] = vector
        alone = plan.alone if plan.embed_alone and not plan.long else None
        exchange = None if plan.long else plan.exchange
        for text in (alone, *plan.passages, *plan.derived, exchange, plan.answered):
            if text is not None and text not in known:
                wanted.setdefault(text)
    return [text for text in wanted if text not in known], known


def embed_plans(embed: Embed, plans: Sequence[TurnPlan], kept: MessageVectors | None = None) -> list[TurnVectors]:
    """Every vector the turns need, from one embedding call over their distinct, not yet known texts."""
    missing, found = needed_texts(plans, kept)
    if missing:
        found.update(zip(missing, np.asarray(embed(missing), dtype=np.float32), strict=True))
    out = []
    for plan in plans:
        passages = [found[t] for t in plan.passages]
        alone_vector = unit(np.mean(passages, axis=0)) if plan.long else found[plan.alone]
        alone = alone_vector if plan.embed_alone else None
        if plan.answered is not None:
            exchange = compose(plan.answered, found[plan.answered], plan.alone, alone_vector)
        else:
            exchange = alone_vector if plan.long else found[plan.exchange]
        out.append(TurnVectors(exchange, [found[t] for t in plan.derived], alone, list(plan.spans), passages))
        if kept is not None and alone is not None:
            kept.keep(plan.message, plan.alone, alone)
    return out


class TextVectors:
    """A bounded cache of text → vector for texts that come back (the open items a close compares with new
    sentences are the same close after close); :meth:`vectors` embeds the missing texts in one call."""

    def __init__(self, embed: Embed, size: int = 4096) -> None:
        self.embed = embed
        self.size = size
        self._kept: OrderedDict[str, np.ndarray] = OrderedDict()

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text, in order; only the distinct texts not kept are embedded (one model call)."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        missing = [text for text in dict.fromkeys(texts) if text not in self._kept]
        made = np.asarray(self.embed(missing), dtype=np.float32) if missing else np.zeros((0, 0), np.float32)
        for text, vector in zip(missing, made, strict=True):
            self._kept[text] = vector
        rows = [self._kept[text] for text in texts]
        for text in dict.fromkeys(texts):
            self._kept.move_to_end(text)
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)
        return np.array(rows, dtype=np.float32)


# --- memories and routing embeddings -----------------------------------------------------------


def composed_summary(memory: MemoryItem) -> bool:
    """A summary the engine wrote (reflection, narrative link, closing memory) of the messages it cites: its vector
    is made from theirs (:func:`summary_vectors`), not from its text.  A summary a person wrote or edited is
    embedded like any other memory."""
    return memory.stream in SUMMARY_STREAMS and bool(memory.message_ids) and not memory.user_edited


def summary_vectors(store: Store, user_id: str, model: str, memories: Sequence[MemoryItem]) -> dict[int, np.ndarray]:
    """Vectors for the engine's summaries among ``memories``, without the model: the mean of the stored vectors
    of the conversation memories made from the messages each one cites (a summary is about what it summarises).
    A summary none of whose messages has a conversation memory with a vector is left out (embed its text)."""
    summaries = [m for m in memories if composed_summary(m)]
    if not summaries:
        return {}
    cited = {message_id for m in summaries for message_id in m.message_ids}
    briefs = store.memory_briefs(user_id, store.memories_from_messages(user_id, cited))
    exchanges = {i: b.sources for i, b in briefs.items() if b.stream is Stream.CONVERSATION}
    vectors = store.vectors_by_id(user_id, model, exchanges)
    by_message: dict[int, set[int]] = {}
    for memory_id, sources in exchanges.items():
        if memory_id in vectors:
            for message_id in sources:
                by_message.setdefault(message_id, set()).add(memory_id)
    made: dict[int, np.ndarray] = {}
    for summary in summaries:
        rows = sorted({i for message_id in summary.message_ids for i in by_message.get(message_id, ())})
        if rows:
            made[summary.id] = unit(np.mean([vectors[i] for i in rows], axis=0))
    return made


def memory_text(memory: MemoryItem) -> str:
    """What a memory's vector is made from: its text."""
    return memory.content


def remade_vectors(
    store: Store, user_id: str, identity: str, embed: Embed, memories: Sequence[MemoryItem]
) -> dict[int, np.ndarray]:
    """Make and store the vectors of ``memories`` of ``user_id`` (reindex, import): every memory but the engine's
    summaries from its text in one model call, stored first; then the summaries from those stored vectors
    (:func:`summary_vectors`; one whose messages have none is embedded from its text after all)."""
    texts = [m for m in memories if not composed_summary(m)]
    made = memory_vectors(embed, texts)
    with store.transaction():
        store.put_memory_vectors(user_id, identity, made)
    summaries = [m for m in memories if composed_summary(m)]
    composed = summary_vectors(store, user_id, identity, summaries)
    composed.update(memory_vectors(embed, [m for m in summaries if m.id not in composed]))
    with store.transaction():
        store.put_memory_vectors(user_id, identity, composed)
    return made | composed


def memory_vectors(embed: Embed, memories: Sequence[MemoryItem]) -> dict[int, np.ndarray]:
    """The memories' vectors by id, from one model call (none for no memories)."""
    if not memories:
        return {}
    vectors = embed([memory_text(m) for m in memories])
    return {m.id: vectors[i] for i, m in enumerate(memories)}


def routing_text(storyline: Storyline) -> str:
    """What the routing embedding is made from: name, description, keywords, summary."""
    parts = [storyline.name, storyline.description, ", ".join(storyline.keywords), storyline.summary]
    return ". ".join(p for p in parts if p)


def drift(routing_vector: np.ndarray | None, message_vector: np.ndarray) -> np.ndarray:
    """Move the routing embedding a little toward each message routed to the storyline."""
    if routing_vector is None:
        return unit(np.asarray(message_vector, dtype=np.float32))
    return unit((1 - DRIFT) * routing_vector + DRIFT * message_vector)


def blend(routing_vector: np.ndarray | None, text_vector: np.ndarray) -> np.ndarray:
    """The periodic refresh: half the running embedding, half the embedding of the storyline's text."""
    if routing_vector is None:
        return unit(np.asarray(text_vector, dtype=np.float32))
    return unit(0.5 * routing_vector + 0.5 * text_vector)


def routing_vectors(store: Store, embed: Embed, storylines: Sequence[Storyline]) -> dict[int, np.ndarray]:
    """Routing embeddings made from scratch, by storyline id: what the write path would hold.

    The write path drifts the embedding toward each routed message and blends it with the storyline's
    text every few turns; replaying the last ``ROUTING_HISTORY`` exchanges (oldest first) and one final
    blend gives the same kind of vector.
    """
    made: dict[int, np.ndarray] = {}
    for storyline in storylines:
        recent = store.list_memories(
            storyline.user_id,
            MemoryFilter(storyline_ids=[storyline.id], streams=[Stream.CONVERSATION], limit=ROUTING_HISTORY),
        )
        texts = [routing_text(storyline) or storyline.name, *(memory_text(m) for m in reversed(recent))]
        vectors = embed(texts)
        routing: np.ndarray | None = None
        for row in vectors[1:]:
            routing = drift(routing, row)
        made[storyline.id] = blend(routing, vectors[0])
    return made


EMBEDDER_KEY = "embedder"  # store_meta: the identity of the embedder whose vectors the file holds


def refuse_foreign_embedder(store: Store, identity: str) -> None:
    """Raise before a write with ``identity`` when the file holds another embedder's vectors (the key, else, in a
    file from before it, the vectors themselves: read once); an unrecorded file takes ``identity``.  A file holds
    one embedder's vectors: search refuses a file with two."""
    recorded = store.get_meta(EMBEDDER_KEY)
    others = {recorded} - {identity} if recorded is not None else set(store.vector_models()) - {identity}
    if others:
        raise EmbeddingMismatch(
            f"this file's vectors were made by {', '.join(sorted(others))}, and this memory embeds with {identity}:"
            " writing would leave vectors of two embedders, which search refuses. Use the embedder that made them"
            " (--embedder / NARRATIVE_EMBEDDER), or run `narrative reindex` with this one first"
        )
    if recorded is None:
        store.set_meta(EMBEDDER_KEY, identity)


def keyword_only(store: Store) -> bool:
    """True for a file written without an embedder (embedder 'none'): memories, no vectors, no embedder recorded."""
    return store.get_meta(EMBEDDER_KEY) is None and not store.vector_models() and bool(store.count_rows("memories"))


def record_file_embedder(store: Store, identity: str) -> None:
    """After a reindex: when every vector of the file is ``identity``'s, it is the file's embedder from now on."""
    if set(store.vector_models()) <= {identity}:
        store.set_meta(EMBEDDER_KEY, identity)
