"""One turn through the write path, in order, in one transaction.

    message (already stored) → route to a storyline → extract memories
      → update the running narrative → update the storyline → maybe reflect

The message itself is committed before this runs, so a failure here rolls back
only the derived work; the message stays, unrouted, and is picked up again by
``Memory.process_pending()``.

A batch of turns may run inside one outer write transaction (each turn then a
savepoint in it) with a :class:`TurnContext`: rows the batch has already read
or written are not read again, since nobody else can change them while the
batch holds the write lock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from narrative.checks import carried_metadata
from narrative.errors import NotFound
from narrative.model import (
    ConversationDetails,
    Entity,
    EntityType,
    MemoryItem,
    Message,
    Narrative,
    Role,
    Source,
    Storyline,
    StorylineKind,
    Stream,
)
from narrative.store.filters import MemoryFilter
from narrative.store.protocol import Store
from narrative.text.lines import exchange_text, turn_line
from narrative.text.passages import Span, excerpt
from narrative.write import embedding, narrate, reflect, routing, storylines, supersede
from narrative.write.passages import store_passages
from narrative.write.turn_types import ConversationEnd, TurnAssist, TurnContext, TurnResult, WriteSettings

if TYPE_CHECKING:
    from narrative.write.extract import TurnExtraction


#: Who the person is matters beyond the turn that said it (a life event scores 4 too: extract/__init__).
ABOUT_YOU_IMPORTANCE = 4
EVERYTHING = 1_000_000


def about_you_note(message: Message, extraction: TurnExtraction) -> str | None:
    """The Your Story note a person's turn makes: what they said about who they are ("I'm a nurse; I live in
    Leeds"), as their turn line (with the speaker, in a chat of several people), or None."""
    if message.role is not Role.USER or not extraction.about_you:
        return None
    return turn_line(replace(message, content="; ".join(extraction.about_you)))


class TurnWriter:
    """Runs the derived work of one stored message.  Holds no state between turns."""

    def __init__(
        self,
        store: Store,
        embed: Callable[[Sequence[str]], np.ndarray] | None,
        model: str | None,
        settings: WriteSettings,
        key_points: Callable[[str], str],
        theme: Callable[[Sequence[str]], str],
        assist: TurnAssist | None = None,
    ) -> None:
        self.store = store
        self.embed = embed
        self.model = model
        self.settings = settings
        self.key_points = key_points
        self.theme = theme
        self.assist = assist
        self.deferred: list[MemoryItem] | None = None  # memories waiting for one batched embedding (closing)

    # --- the turn ---------------------------------------------------------------------

    def process(
        self,
        message: Message,
        vector: np.ndarray | None,
        extraction: TurnExtraction,
        derived_vectors: list[np.ndarray] | None,
        defaults: dict[str, int],
        your_story_id: int,
        *,
        routing_vector: np.ndarray | None = None,
        previous: Message | None = None,
        context: TurnContext | None = None,
        spans: Sequence[Span] | None = None,
        passage_vectors: Sequence[np.ndarray] | None = None,
        savepoint: bool = True,
    ) -> TurnResult:
        """``vector`` embeds the exchange (the memory); ``routing_vector`` the message alone (routing and the
        storyline's routing embedding), defaulting to ``vector`` (a turn that :meth:`stays_without_vector`).
        In a batch (``context``), ``previous`` is the message just before this one when the caller knows it.
        ``spans`` and ``passage_vectors``: the message's passages and their vectors (made here when missing).
        ``savepoint=False``: the turn is written in the caller's transaction without a block of its own (a caller
        that undoes everything on a failure: a savepoint per turn only slows a long transaction down)."""
        user_id = message.user_id
        exchange_only = routing_vector is None and vector is not None
        alone = vector if routing_vector is None else routing_vector
        topic, routed = self._without_cue(message, extraction, alone)  # what the storyline may learn from
        with self.store.transaction() if savepoint else nullcontext():
            self.store.lock_user(user_id)  # one writer per user at a time (other processes' too)
            previous = self._previous_message(message, previous, context)
            route = self._route(message, routed, topic, previous, defaults, your_story_id, context)
            storyline = self._apply_route(message, route, routed, topic, context)
            result = TurnResult(message, storyline, route.decision, route.scores)
            if route.decision in ("switch", "create"):  # a topic shift seals the running link(s) left behind
                left = self._left_behind(message, storyline.id)
                result.sealed = narrate.seal_open_links(
                    self.store, user_id, left, message.created_at, retell=self.assist is None
                )
            link = None
            if storyline.kind is not StorylineKind.DEFAULT:
                link = narrate.running_link(
                    self.store, user_id, storyline.id, storyline.name, message.created_at, message.conversation_id
                )
            answered = previous if self.settings.exchange_turns >= 2 else None
            if answered is not None and answered.storyline_id != storyline.id:  # never pair across a switch
                answered, vector = None, self._alone(message) if exchange_only else alone
            result.memories = self._store_memories(
                message, vector, extraction, storyline, link, derived_vectors, answered, your_story_id
            )
            own = result.memories[0]
            vectors = passage_vectors
            if vectors is None and self.embed is not None:
                vectors = self._embed_passages(message, spans)
            passages = store_passages(self.store, self.model, message, own.id, spans, vectors)
            judge = None if self.assist is None else self.assist.judge_statement
            result.settled = supersede.settle(self.store, message, passages, judge)
            for changed in result.settled.storylines.values():  # a correction rewrote a storyline's summary
                if context is not None:
                    context.remember(changed)
                if changed.id == storyline.id:
                    storyline = changed
            result.entities = self._store_entities(message, extraction, storyline, own)
            if link is not None:
                corrected = bool(result.settled.superseded)
                result.narrative = self._extend(link, storyline, message, topic, result.memories, corrected)
            result.storyline = self._update_storyline(storyline, message, topic, routed, context)
            result.reflections = self.maybe_reflect(message)
        if context is not None:
            context.routed[message.id] = storyline.id
        return result

    @staticmethod
    def stays_without_vector(
        message: Message, previous: Message | None, extraction: TurnExtraction, defaults: dict[str, int], routed: bool
    ) -> bool:
        """Whether the turn's route is settled before any vector and keeps it with the turn it answers, so its
        message alone need not be embedded: an assistant's reply (``previous`` has a storyline, or is ``routed``
        before it) that is neither small talk nor a change of subject (either may leave for another storyline)."""
        if message.role is not Role.ASSISTANT or previous is None or not (routed or previous.storyline_id is not None):
            return False
        if not routing.is_reply(message.role.value, message.speaker, previous.role.value, previous.speaker):
            return False
        if routing.TOPIC_CUE.search(message.content):
            return False
        entities = [(e.entity_type.value, e.name) for e in extraction.entities]
        substantive = routing.has_substance(message.content, extraction.topic_tags, entities)
        return routing.small_talk_default(message.content, defaults, substantive) is None

    def _embed_passages(self, message: Message, spans: Sequence[Span] | None) -> list[np.ndarray] | None:
        """The passages' vectors, made now (a turn processed without its plan's vectors)."""
        if self.embed is None:
            return None
        from narrative.text.passages import split_passages

        cut = list(spans) if spans is not None else split_passages(message.content)
        texts = embedding.passage_texts(message, cut)
        return list(np.asarray(self.embed(list(texts)), dtype=np.float32))

    def _alone(self, message: Message) -> np.ndarray | None:
        """The message alone, embedded now: a turn expected to stay that left after all (one text)."""
        if self.embed is None:
            return None
        return np.asarray(self.embed([turn_line(message)])[0], dtype=np.float32)

    def _without_cue(
        self, message: Message, extraction: TurnExtraction, vector: np.ndarray | None
    ) -> tuple[TurnExtraction, np.ndarray | None]:
        """The extraction and routing vector without the phrases that announce a change of subject
        ("Completely different topic: …"): they never become a storyline's keywords, summary or embedding."""
        if not routing.TOPIC_CUE.search(message.content):
            return extraction, vector
        cue = routing.cue_words(message.content)
        tags = tuple(t for t in extraction.topic_tags if set(t.lower().split()) - cue)
        cleaned = replace(extraction, topic_tags=tags, key_points=routing.strip_topic_cue(extraction.key_points))
        text = routing.strip_topic_cue(message.content)
        if text and vector is not None and self.embed is not None:
            vector = self.embed([turn_line(replace(message, content=text))])[0]
        return cleaned, vector

    def _left_behind(self, message: Message, target_id: int) -> list[int]:
        """Storylines of this conversation with a running link, other than ``target_id`` (even when small
        talk came between them and the message)."""
        links = self.store.list_narratives(message.user_id, limit=50)
        return [
            n.storyline_id
            for n in links
            if not n.sealed
            and n.conversation_id == message.conversation_id
            and n.storyline_id is not None
            and n.storyline_id != target_id
        ]

    def _previous_message(
        self, message: Message, known: Message | None = None, context: TurnContext | None = None
    ) -> Message | None:
        """The message before ``message`` as stored now (with the storyline it was routed to)."""
        if context is not None and known is not None and known.id in context.routed:
            return replace(known, storyline_id=context.routed[known.id])
        return self.store.previous_message(message.user_id, message.conversation_id, message.position)

    def _storyline(self, user_id: str, storyline_id: int, context: TurnContext | None) -> Storyline:
        if context is not None and storyline_id in context.storylines:
            return context.storylines[storyline_id]
        storyline = self.store.get_storyline(user_id, storyline_id)
        return storyline if context is None else context.remember(storyline)

    def _route(
        self,
        message: Message,
        vector: np.ndarray | None,
        extraction: TurnExtraction,
        previous: Message | None,
        defaults: dict[str, int],
        your_story_id: int,
        context: TurnContext | None = None,
    ) -> routing.Route:
        user_id = message.user_id
        substantive = routing.has_substance(
            message.content, extraction.topic_tags, [(e.entity_type.value, e.name) for e in extraction.entities]
        )
        reply = previous is not None and routing.is_reply(
            message.role.value, message.speaker, previous.role.value, previous.speaker
        )
        settled = self._settled_route(message, previous, defaults, substantive, reply)
        if settled is not None:
            return settled
        current = None
        if previous is not None and previous.storyline_id is not None:
            current = self._storyline(user_id, previous.storyline_id, context)
        similarities: dict[int, float] = {}
        if vector is not None and self.model is not None:
            for sid, routing_vector in self.store.storyline_vectors(user_id, self.model).items():
                similarities[sid] = float(np.dot(routing_vector, vector))
        others = self._other_peoples(message, previous, context)
        excluded = {*defaults.values(), your_story_id, *others}
        keyword = [
            (sid, s)
            for sid, s in self.store.keyword_search_storylines(user_id, message.content, limit=10)
            if sid not in excluded
        ]
        for sid in excluded:
            similarities.pop(sid, None)
        candidates = routing.fuse_candidates(keyword, similarities, self.settings.thresholds.rrf_k)
        llm_verdict = None
        if self.assist is not None and current is not None and previous is not None and substantive:
            llm_verdict = self.assist.continuity(current, previous.content, message.content)
        given = routing.RoutingInput(
            text=message.content,
            vector=vector,
            topic_tags=extraction.topic_tags,
            substantive=substantive,
            now=message.created_at,
            current=current,
            previous_at=None if previous is None else previous.created_at,
            llm_continuity=llm_verdict,
            cue=bool(routing.TOPIC_CUE.search(message.content)),
            reply=reply,
            answers_question=reply and previous is not None and previous.content.rstrip().endswith("?"),
            may_create=message.role is not Role.ASSISTANT,
        )
        current_similarity = None if current is None else similarities.get(current.id)
        route = routing.decide(given, candidates, current_similarity, your_story_id, self.settings.thresholds)
        if route.decision == "create" and others and message.speaker.strip():
            clash = self.store.find_storyline(user_id, route.new_name)
            if clash is not None and clash.id in others:  # other people's thread of the same name
                route.new_name = f"{route.new_name} · {message.speaker.strip()}"
        return route

    @staticmethod
    def _settled_route(
        message: Message, previous: Message | None, defaults: dict[str, int], substantive: bool, reply: bool
    ) -> routing.Route | None:
        """Routes that need no search: small talk to its default storyline (inside a topic too; an
        acknowledgement inside a topic stays there), an assistant's reply to the storyline of the turn it answers."""
        default = routing.small_talk_default(message.content, defaults, substantive)
        in_topic = previous is not None and previous.storyline_id not in (None, *defaults.values())
        if default is not None and not (in_topic and default[0] == routing.ACKNOWLEDGEMENTS):
            name, sid = default
            return routing.Route("default", sid, {"reason": f"small talk ({name})"})
        if message.role is Role.ASSISTANT and reply and previous is not None and previous.storyline_id is not None:
            reason = "an assistant reply stays in the storyline of the turn it answers"
            return routing.Route("continue", previous.storyline_id, {"reason": reason})
        return None

    def _other_peoples(
        self, message: Message, previous: Message | None, context: TurnContext | None = None
    ) -> set[int]:
        """Topic storylines none of whose participants speaks in this exchange: other people's threads,
        which a turn never joins by similarity alone (none when the speakers are not named)."""
        speakers = {s.strip().casefold() for s in (message.speaker, previous.speaker if previous else "") if s.strip()}
        if not speakers:
            return set()
        pool = (
            self.store.list_storylines(message.user_id)
            if context is None
            else context.all_storylines(self.store, message.user_id)
        )
        return {
            s.id for s in pool if s.participants and not {p.name.strip().casefold() for p in s.participants} & speakers
        }

    def _apply_route(
        self,
        message: Message,
        route: routing.Route,
        vector: np.ndarray | None,
        extraction: TurnExtraction,
        context: TurnContext | None = None,
    ) -> Storyline:
        user_id = message.user_id
        if route.decision == "create":
            name = route.new_name
            existing = self.store.find_storyline(user_id, name)
            if existing is not None:
                storyline = existing
                route.decision = "switch"
            else:
                storyline = self.store.insert_storyline(
                    user_id,
                    name,
                    StorylineKind.DETECTED,
                    message.created_at,
                    description=storylines.description_of(message.content),
                    keywords=tuple(routing.topical(extraction.topic_tags)),
                )
                if vector is not None and self.model is not None:
                    self.store.put_storyline_vector(user_id, storyline.id, self.model, vector)
            route.storyline_id = storyline.id
        assert route.storyline_id is not None
        storyline = self._storyline(user_id, route.storyline_id, context)
        self.store.set_message_storyline(user_id, message.id, storyline.id)
        self.store.insert_routing_decision(
            user_id, message.id, storyline.id, route.decision, route.scores, message.created_at
        )
        return storyline

    # --- memories and entities ------------------------------------------------------------

    def _store_memories(
        self,
        message: Message,
        vector: np.ndarray | None,
        extraction: TurnExtraction,
        storyline: Storyline,
        link: Narrative | None,
        derived_vectors: list[np.ndarray] | None = None,
        answered: Message | None = None,
        your_story_id: int | None = None,
    ) -> list[MemoryItem]:
        def memory(
            stream: Stream,
            source: Source,
            content: str,
            importance: int,
            details: Any,
            message_ids: tuple[int, ...] = (message.id,),
            emotions: tuple[str, ...] = (),
        ) -> MemoryItem:
            return MemoryItem(
                id=0,
                user_id=message.user_id,
                stream=stream,
                source=source,
                content=content,
                importance=importance,
                emotions=emotions,
                details=details,
                created_at=message.created_at,
                event_at=message.created_at,
                conversation_id=message.conversation_id,
                storyline_id=storyline.id,
                narrative_id=None if link is None else link.id,
                message_ids=message_ids,
                metadata=metadata,
            )

        metadata = carried_metadata(message.meta)  # the turn's meta, where it is valid metadata: for filters
        said = excerpt(message.content)  # a long message is quoted by its first passage: its passages hold it all
        user_input, response = (said, "") if message.role is Role.USER else ("", said)
        if answered is not None and message.role is not Role.USER:
            user_input = excerpt(answered.content)
        exchange = memory(
            Stream.CONVERSATION,
            Source.CONVERSATION,
            exchange_text(
                None if answered is None else replace(answered, content=excerpt(answered.content)),
                replace(message, content=said),
            ),
            extraction.importance,
            ConversationDetails(
                user_input=user_input,
                agent_response=response,
                question_type=extraction.question_type,
                clarification_count=int(extraction.is_clarification),
                topic_tags=extraction.topic_tags,
            ),
            message_ids=(message.id,) if answered is None else (answered.id, message.id),
            emotions=extraction.emotions,
        )
        importance = max(3, extraction.importance)
        derived = [
            memory(Stream.DECISION, Source.EXTRACTION, content, importance, details)
            for content, details in extraction.decisions
        ] + [
            memory(Stream.RESEARCH, Source.EXTRACTION, content, importance, details)
            for content, details in extraction.research
        ]
        known = [vector, *(derived_vectors or [])] if vector is not None else []
        note = about_you_note(message, extraction)
        if note is not None and your_story_id is not None:
            if self._noted(message.user_id, your_story_id, note):  # said before: Your Story holds it once
                known = known[: len(derived) + 1]
            else:
                derived.append(
                    replace(
                        memory(Stream.FACT, Source.EXTRACTION, note, ABOUT_YOU_IMPORTANCE, None),
                        storyline_id=your_story_id,
                        narrative_id=None,
                    )
                )
        stored = [self.store.insert_memory(m) for m in [exchange, *derived]]
        self._put_vectors(message.user_id, stored, known)
        return stored

    def _noted(self, user_id: str, your_story_id: int, note: str) -> bool:
        """Whether Your Story already holds this note, current (the same words, any case)."""
        held = self.store.list_memories(
            user_id,
            MemoryFilter(
                storyline_ids=[your_story_id],
                streams=[Stream.FACT],
                sources=[Source.EXTRACTION],
                current_only=True,
                limit=EVERYTHING,
            ),
        )
        return any(m.content.casefold() == note.casefold() for m in held)

    def _put_vectors(self, user_id: str, memories: Sequence[MemoryItem], known: Sequence[np.ndarray | None]) -> None:
        """Store vectors: the ones already made (in order), embedding the rest in one batch (or, while
        ``deferred`` is a list, leaving the rest there for the caller's one batch)."""
        if self.model is None or not memories:
            return
        vectors: dict[int, np.ndarray] = {}
        for memory, vector in zip(memories, known, strict=False):
            if vector is not None:
                vectors[memory.id] = vector
        vectors.update(embedding.summary_vectors(self.store, user_id, self.model, memories))
        rest = [m for m in memories if m.id not in vectors]
        if rest and self.deferred is not None:
            self.deferred += rest
        elif rest and self.embed is not None:
            for memory, row in zip(rest, self.embed([m.content for m in rest]), strict=True):
                vectors[memory.id] = row
        self.store.put_memory_vectors(user_id, self.model, vectors)

    def _store_entities(
        self, message: Message, extraction: TurnExtraction, storyline: Storyline, memory: MemoryItem
    ) -> list[Entity]:
        stored: list[Entity] = []
        seen: set[tuple[EntityType, str]] = set()
        for entity in extraction.entities:
            key = (entity.entity_type, entity.name.casefold())
            if key in seen or (entity.entity_type is EntityType.PERSON and entity.name == message.speaker):
                continue  # speakers are participants, not news; one row per thing per turn
            seen.add(key)
            if entity.entity_type is EntityType.QUESTION_OPENED and message.role is not Role.USER:
                continue  # the assistant's own questions are not the user's open threads
            stored.append(
                self.store.insert_entity(
                    message.user_id,
                    entity.entity_type,
                    entity.name,
                    message.created_at,
                    data={**entity.data, "message_id": message.id, "speaker": message.speaker},
                    memory_id=memory.id,
                    conversation_id=message.conversation_id,
                    storyline_id=storyline.id,
                )
            )
        return stored

    # --- narrative, storyline, reflection ---------------------------------------------------

    def _extend(
        self,
        link: Narrative,
        storyline: Storyline,
        message: Message,
        extraction: TurnExtraction,
        memories: Sequence[MemoryItem],
        corrected: bool = False,
    ) -> Narrative:
        """Add the turn to the running link; a salient turn (or a correction: the link must not go on saying
        what is no longer true) gives it a new sentence, and a correction its storyline's current name."""
        sentence = None
        if self.assist is not None:
            sentence = self.assist.narrative_sentence(storyline.name, link.summary, message.content)
        salient = extraction.importance >= 3 or bool(extraction.decisions) or corrected
        if sentence is None and (salient or not link.memory_ids):
            sentence = narrate.narrative_sentence(storyline.name, message.speaker, extraction.key_points)
        link = narrate.extend_link(self.store, link, [m.id for m in memories], sentence)
        if corrected and link.topic != storyline.name:
            link = self.store.update_narrative(link.user_id, link.id, topic=storyline.name)
        if len(link.memory_ids) >= narrate.MAX_LINK_MEMORIES:  # a long arc: seal and let the next link follow
            link = narrate.seal(self.store, link, message.created_at, retell=self.assist is None)
        return link

    def _update_storyline(
        self,
        storyline: Storyline,
        message: Message,
        extraction: TurnExtraction,
        vector: np.ndarray | None,
        context: TurnContext | None = None,
    ) -> Storyline:
        summary = None
        if self.assist is not None and storyline.kind is not StorylineKind.DEFAULT:
            refreshed = self.assist.storyline_summary(storyline, message.content)
            summary = None if refreshed is None else str(refreshed.get("summary") or "") or None
        role = "participant" if message.role is Role.USER else "agent"
        updated = storylines.update_after_turn(
            self.store,
            storyline,
            message.created_at,
            extraction.topic_tags,
            extraction.key_points,
            message.speaker,
            role,
            summary=summary,
        )
        if context is not None:
            context.remember(updated)
        if self.model is None or updated.kind is StorylineKind.DEFAULT:
            return updated
        routing_vector = self.store.storyline_vector(updated.user_id, updated.id, self.model)
        if vector is not None:
            routing_vector = embedding.drift(routing_vector, vector)
        if self.embed is not None and storylines.needs_embedding_refresh(updated, self.settings.refresh_every):
            updated = storylines.maybe_rename(self.store, updated)
            if context is not None:
                context.remember(updated)
            text_vector = self.embed([embedding.routing_text(updated)])[0]
            routing_vector = embedding.blend(routing_vector, text_vector)
        if routing_vector is not None:
            self.store.put_storyline_vector(updated.user_id, updated.id, self.model, routing_vector)
        return updated

    def maybe_reflect(self, message: Message) -> list[MemoryItem]:
        """Reflect every N exchanges of the conversation, or past the stream size.

        The exchanges reflected on are taken storyline by storyline: each reflection belongs to the storyline of
        what it reflects (a garden plan is not filed under the tax return that came up after it), and one that
        would only restate a single sentence is not stored (:func:`reflect.without_restatements`).
        """
        every = self.settings.reflect_every
        count = self.store.count_memories(
            message.user_id, MemoryFilter(streams=[Stream.CONVERSATION], conversation_ids=[message.conversation_id])
        )
        by_count = count > 0 and count % every == 0
        by_size = message.position % self.settings.stream_threshold == 0
        themes = reflect.apply_retention(
            self.store,
            message.user_id,
            message.conversation_id,
            self.key_points,
            self.theme,
            message.created_at,
            exchanges=count,
        )
        if not (by_count or by_size):
            return self._store_reflections(message.user_id, themes)
        where = MemoryFilter(streams=[Stream.CONVERSATION], conversation_ids=[message.conversation_id], limit=every)
        if by_size and not by_count:
            where = MemoryFilter(streams=[Stream.CONVERSATION], limit=self.settings.stream_threshold)
        exchanges = list(reversed(self.store.list_memories(message.user_id, where)))
        created: list[MemoryItem] = []
        for storyline_id, group in reflect.by_storyline(exchanges):
            texts = reflect.heuristic_reflections(self.store, message.user_id, group)
            texts = reflect.without_restatements(self.store, message.user_id, group, texts)
            target = self._reflection_storyline(message.user_id, storyline_id)
            created += reflect.reflection_memories(message.user_id, group, texts, message.created_at, target)
        return self._store_reflections(message.user_id, [*themes, *created])

    def _reflection_storyline(self, user_id: str, storyline_id: int | None) -> int | None:
        """Where a reflection on exchanges of ``storyline_id`` is filed: there, unless it is a default storyline
        (small talk is nobody's topic) or gone."""
        if storyline_id is None:
            return None
        try:
            storyline = self.store.get_storyline(user_id, storyline_id)
        except NotFound:
            return None
        return None if storyline.kind is StorylineKind.DEFAULT else storyline.id

    def _store_reflections(self, user_id: str, memories: Sequence[MemoryItem]) -> list[MemoryItem]:
        stored = [self.store.insert_memory(m) for m in memories]
        self._put_vectors(user_id, stored, [])
        return stored

    # --- the end of a conversation --------------------------------------------------------------

    def embed_deferred(self, user_id: str, extra: Sequence[MemoryItem] = ()) -> None:
        """Store the deferred memories' (and ``extra``'s) vectors, stop deferring: the engine's summaries from the
        memories they summarise, the rest in one model call."""
        waiting, self.deferred = [*extra, *(self.deferred or [])], None
        if waiting and self.model is not None and self.embed is not None:
            vectors = embedding.summary_vectors(self.store, user_id, self.model, waiting)
            rest = [m for m in waiting if m.id not in vectors]
            if rest:
                vectors.update(zip([m.id for m in rest], self.embed([m.content for m in rest]), strict=True))
            self.store.put_memory_vectors(user_id, self.model, vectors)

    def finish_conversation(self, user_id: str, conversation_id: int, now: datetime) -> ConversationEnd:
        """Seal the conversation's running links (the chain keeps them).  Nothing else is stored: the memory a
        person confirmed is the conversation's closing summary, so neither the links' summaries nor a closing
        reflection are copied into memories beside it (docs/decisions.md, "What a close stores")."""
        messages = self.store.list_messages(user_id, conversation_id=conversation_id)
        end = ConversationEnd()
        if not messages:
            return end
        with self.store.transaction():
            self.store.lock_user(user_id)
            touched = list(dict.fromkeys(m.storyline_id for m in messages if m.storyline_id is not None))
            end.sealed = narrate.seal_open_links(self.store, user_id, touched, now, retell=self.assist is None)
        return end
