"""The facade's write path: ``remember`` a turn, or many at once (batched embeddings)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from narrative.checks import require_choice, require_message
from narrative.engine.core import Runtime
from narrative.errors import ValidationError
from narrative.model import Message, Role
from narrative.write import embedding, lifecycle
from narrative.write.embedding import TurnVectors
from narrative.write.turn import TurnWriter, about_you_note
from narrative.write.turn_types import TurnContext, TurnResult, WriteSettings

if TYPE_CHECKING:
    from narrative.engine.followups import Followups
    from narrative.write.assist import LLMTurnAssist
    from narrative.write.extract import Extractor

log = logging.getLogger("narrative.write")


@dataclass(frozen=True)
class Turn:
    """One message to remember: text, role, speaker, optional time and metadata."""

    content: str
    role: str = "user"
    speaker: str = ""
    at: datetime | None = None
    meta: dict[str, Any] = field(default_factory=dict)


class Turns:
    """The write path: remember a turn, or many at once (one embedding call), and retry pending ones."""

    def __init__(self, runtime: Runtime, followups: Followups | None = None) -> None:
        self.rt = runtime
        self.followups = followups  # bindings, decision chains and research links after each batch

    def writer(self) -> TurnWriter:
        """The write path's turn writer (built once, on first use)."""
        if self.rt.writer is None:
            embedder = self.rt.embedder_for_writes()
            from narrative.write.extract import key_points as key_points_of
            from narrative.write.extract import session_theme

            s = self.rt.settings
            self.rt.writer = TurnWriter(
                self.rt.store,
                None if embedder is None else embedder.embed_batch,
                None if embedder is None else embedder.identity,
                WriteSettings(
                    reflect_every=s.reflect_every,
                    refresh_every=s.routing_refresh_every,
                    stream_threshold=s.reflection_stream_threshold,
                    exchange_turns=s.exchange_turns,
                ),
                key_points=key_points_of,
                theme=session_theme,
                assist=self._turn_assist(),
            )
        return self.rt.writer

    def _turn_assist(self) -> LLMTurnAssist | None:
        """The LLM's help for turns, or None when no LLM is configured."""
        if not self.rt.llm_enabled():
            return None
        from narrative.write.assist import LLMTurnAssist

        return LLMTurnAssist(self.rt.llm, self.rt.settings)

    def extractor(self) -> Extractor:
        """The extractor of turns (the heuristic one unless one was set on the runtime)."""
        if self.rt.extractor is None:
            from narrative.write.extract import HeuristicExtractor

            self.rt.extractor = HeuristicExtractor()
        return self.rt.extractor

    # --- public ---------------------------------------------------------------------------

    def remember(
        self,
        content: str,
        role: str = "user",
        *,
        speaker: str = "",
        at: datetime | None = None,
        meta: dict[str, Any] | None = None,
        user: str | None = None,
    ) -> TurnResult:
        """Store one turn and build memory from it: route, extract, narrate, update, reflect."""
        return self.remember_many([Turn(content, role, speaker, at, meta or {})], user=user)[0]

    def remember_many(
        self, turns: Iterable[Turn], *, user: str | None = None, progress: Callable[[int, int], None] | None = None
    ) -> list[TurnResult]:
        """Remember turns in order, embedding them in batches (the fast path for imports).

        Each batch's messages are stored (committed) first; all the vectors its turns need are made in one
        model call; then its turns run in one write transaction, each turn a savepoint in it.  A failing turn
        rolls back its own derived work and ends the call: the turns before it stay stored, it and the rest
        stay pending (``process_pending``).  ``progress(done, total)`` is called after each batch.
        """
        self.rt.reader_id(user)  # every turn is checked before the user is made: a refused call makes none
        if isinstance(turns, str | bytes | Mapping) or not isinstance(turns, Iterable):
            raise ValidationError(f"turns must be a list of Turn, not {type(turns).__name__}", field="turns")
        items = list(turns)
        for turn in items:
            if not isinstance(turn, Turn):
                raise ValidationError(
                    f"turns must hold Turn items (content, role, speaker, at, meta), not {type(turn).__name__}",
                    field="turns",
                )
            require_message(turn.content, "content")
            require_choice(Role, turn.role, "role")
        results: list[TurnResult] = []
        batch = max(1, getattr(self.rt.embedder_for_writes(), "batch_size", 64))  # a foreign embedder: refused here
        user_id = self.rt.user_id(user)
        for start in range(0, len(items), batch):
            chunk = items[start : start + batch]
            messages = lifecycle.add_messages(
                self.rt.store,
                user_id,
                [(t.content, t.at or self.rt.clock(), Role(t.role), t.speaker, t.meta) for t in chunk],
            )
            results += self._followed(user_id, self._process(user_id, messages))
            if progress is not None:
                progress(len(results), len(items))
        return results

    def _followed(self, user_id: str, results: list[TurnResult]) -> list[TurnResult]:
        """The batch's results after the follow-up work (their bindings; new decisions and research linked)."""
        if self.followups is not None:
            self.followups.after_turns(user_id, results)
        return results

    def _process(self, user_id: str, messages: Sequence[Message]) -> list[TurnResult]:
        """Derived work for stored messages.  Without an LLM every vector of the chunk is made in one batch.

        Each turn is read with the stored turn it follows (also for a single ``remember``): the extractor sees
        it, the conversation memory holds both, and routing embeds the message alone so the previous turn's
        topic does not pull the message into it.
        """
        writer = self.writer()
        defaults = self.rt.default_ids(user_id)
        your_story = self.rt.your_story_id(user_id)
        befores = self._befores(user_id, messages)
        assist = writer.assist
        if assist is not None:  # the model works turn by turn, each with its own budget and transaction
            results = []
            for message, before in zip(messages, befores, strict=True):
                assist.begin_turn()
                extraction = assist.extract_turn(
                    message.content,
                    speaker=message.speaker,
                    role=message.role.value,
                    previous=None if before is None else before.content,
                )
                [made] = self._turn_vectors([message], [before], [extraction], defaults)
                results.append(
                    writer.process(
                        message,
                        made.exchange,
                        extraction,
                        made.derived,
                        defaults,
                        your_story,
                        routing_vector=made.routing,
                        spans=made.spans,
                        passage_vectors=made.passages,
                    )
                )
            return results
        extractor = self.extractor()
        extractions = [
            extractor.extract_turn(
                m.content, speaker=m.speaker, role=m.role.value, previous=None if before is None else before.content
            )
            for m, before in zip(messages, befores, strict=True)
        ]
        vectors = self._turn_vectors(messages, befores, extractions, defaults)
        results, failure = [], None
        context = TurnContext()
        # a caller's transaction (an import: one per conversation) is undone whole when a turn fails, so its turns
        # take no savepoint each: past 64 in one transaction PostgreSQL slows every statement down
        whole = self.rt.store.in_transaction
        with self.rt.store.transaction():  # one write transaction for the batch; each turn is a savepoint in it
            for message, before, extraction, made in zip(messages, befores, extractions, vectors, strict=True):
                try:
                    results.append(
                        writer.process(
                            message,
                            made.exchange,
                            extraction,
                            made.derived,
                            defaults,
                            your_story,
                            routing_vector=made.routing,
                            previous=before,
                            context=context,
                            spans=made.spans,
                            passage_vectors=made.passages,
                            savepoint=not whole,
                        )
                    )
                except Exception as error:  # rolled back to the turn's savepoint: commit the turns before it
                    if whole:
                        raise  # no savepoint of its own: the batch's block and the caller's transaction undo it
                    failure = error
                    break
        if failure is not None:
            raise failure
        return results

    def _befores(self, user_id: str, messages: Sequence[Message]) -> list[Message | None]:
        """The stored message just before each one (its predecessor in ``messages`` when positions follow)."""
        befores: list[Message | None] = []
        for i, message in enumerate(messages):
            last = messages[i - 1] if i else None
            if last is not None and (last.conversation_id, last.position + 1) == (
                message.conversation_id,
                message.position,
            ):
                befores.append(last)
            else:
                befores.append(self.rt.store.previous_message(user_id, message.conversation_id, message.position))
        return befores

    def _turn_vectors(
        self,
        messages: Sequence[Message],
        befores: Sequence[Message | None],
        extractions: Sequence[Any],
        defaults: dict[str, int],
    ) -> list[TurnVectors]:
        """Every vector the turns need, from one embedding call over their distinct texts (``write.embedding``)."""
        embedder = self.rt.embedder_for_writes()
        if embedder is None:
            return [TurnVectors() for _ in messages]
        answered = [before if self.rt.settings.exchange_turns >= 2 else None for before in befores]
        composed = self.rt.settings.exchange_vector == "compose"
        batch = {m.id for m in messages}
        settled = [
            TurnWriter.stays_without_vector(m, before, x, defaults, before is not None and before.id in batch)
            for m, before, x in zip(messages, befores, extractions, strict=True)
        ]
        plans = embedding.plan_turns(
            messages,
            answered,
            [_derived_texts(m, x) for m, x in zip(messages, extractions, strict=True)],
            composed,
            settled,
        )
        if composed and self.rt.message_vectors is None:
            self.rt.message_vectors = embedding.MessageVectors()
        return embedding.embed_plans(embedder.embed_batch, plans, self.rt.message_vectors if composed else None)

    def pending_messages(self, *, user: str | None = None) -> list[Message]:
        """Messages whose derived work failed (stored, never routed): retry with process_pending."""
        user_id = self.rt.reader_id(user)
        return [m for m in self.rt.store.list_messages(user_id) if m.storyline_id is None and m.role is not Role.SYSTEM]

    def process_pending(self, *, user: str | None = None) -> list[TurnResult]:
        """Run the write path again for messages whose derived work did not complete."""
        user_id = self.rt.owner_id(user)
        pending = self.pending_messages(user=user_id)
        return self._followed(user_id, self._process(user_id, pending)) if pending else []


def _derived_texts(message: Message, extraction: Any) -> list[str]:
    """Texts of the decision, research and Your Story memories a turn will make (embedded with the turn)."""
    note = about_you_note(message, extraction)
    texts = [content for content, _ in extraction.decisions] + [content for content, _ in extraction.research]
    return texts + ([note] if note is not None else [])
