"""The facade's write path: ``remember`` a turn, or many at once (batched embeddings)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from narrative.checks import require_choice, require_text
from narrative.engine.core import EngineBase
from narrative.model import Message, Role
from narrative.write import lifecycle, storylines
from narrative.write.turn import TurnResult, TurnWriter, WriteSettings, conversation_text, exchange_text

if TYPE_CHECKING:
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


class TurnsAPI(EngineBase):
    _writer: TurnWriter | None = None
    _extractor: Extractor | None = None
    _defaults: dict[str, dict[str, int]] | None = None

    def _bootstrap_storylines(self, user_id: str, now: datetime) -> None:
        storylines.ensure_defaults(self.store, user_id, now)

    def _turn_writer(self) -> TurnWriter:
        if self._writer is None:
            embedder = self.embedder
            from narrative.write.extract import key_points as key_points_of
            from narrative.write.extract import session_theme

            s = self.settings
            self._writer = TurnWriter(
                self.store,
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
        return self._writer

    def _turn_assist(self) -> LLMTurnAssist | None:
        """The LLM's help for turns, or None when no LLM is configured."""
        if self.settings.llm_provider == "none" and self._llm is None:
            return None
        from narrative.write.assist import LLMTurnAssist

        return LLMTurnAssist(self.llm, self.settings)

    def _extract(self) -> Extractor:
        if self._extractor is None:
            from narrative.write.extract import HeuristicExtractor

            self._extractor = HeuristicExtractor()
        return self._extractor

    def _default_ids(self, user_id: str) -> dict[str, int]:
        if self._defaults is None:
            self._defaults = {}
        if user_id not in self._defaults:
            self._defaults[user_id] = storylines.ensure_defaults(self.store, user_id, self.clock())
        return self._defaults[user_id]

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

    def remember_many(self, turns: Iterable[Turn], *, user: str | None = None) -> list[TurnResult]:
        """Remember turns in order, embedding them in batches (the fast path for imports)."""
        user_id = self._user(user)
        items = list(turns)
        for turn in items:
            require_text(turn.content, "content")
            require_choice(Role, turn.role, "role")
        results: list[TurnResult] = []
        batch = max(1, getattr(self.embedder, "batch_size", 64))
        for start in range(0, len(items), batch):
            chunk = items[start : start + batch]
            messages = [
                lifecycle.add_message(
                    self.store, user_id, t.content, t.at or self.clock(), role=Role(t.role), speaker=t.speaker,
                    meta=t.meta,
                )
                for t in chunk
            ]
            results += self._process(user_id, messages)
        return results

    def _process(self, user_id: str, messages: Sequence[Message]) -> list[TurnResult]:
        """Derived work for stored messages.  Without an LLM every vector of the chunk is made in one batch.

        Each turn is read with the stored turn it follows (also for a single ``remember``): the extractor sees
        it, the conversation memory holds both, and routing embeds the message alone so the previous turn's
        topic does not pull the message into it.
        """
        writer = self._turn_writer()
        defaults = self._default_ids(user_id)
        your_story = self._your_story_id(user_id)
        befores = [self.store.previous_message(user_id, m.conversation_id, m.position) for m in messages]
        assist = writer.assist
        if assist is not None:  # the model works turn by turn, each with its own budget
            results = []
            for message, before in zip(messages, befores, strict=True):
                assist.begin_turn()
                extraction = assist.extract_turn(
                    message.content, speaker=message.speaker, role=message.role.value,
                    previous=None if before is None else before.content,
                )
                vectors = self._embed_texts(self._turn_texts(message, before, extraction))
                vector, derived, routing_vector = _split(vectors, extraction)
                results.append(writer.process(
                    message, vector, extraction, derived, defaults, your_story, routing_vector=routing_vector
                ))
            return results
        extractor = self._extract()
        extractions = [
            extractor.extract_turn(
                m.content, speaker=m.speaker, role=m.role.value, previous=None if before is None else before.content
            )
            for m, before in zip(messages, befores, strict=True)
        ]
        blocks = [self._turn_texts(m, b, x) for m, b, x in zip(messages, befores, extractions, strict=True)]
        vectors = self._embed_texts([text for block in blocks for text in block])
        results, start = [], 0
        for message, extraction, block in zip(messages, extractions, blocks, strict=True):
            rows = None if vectors is None else vectors[start : start + len(block)]
            start += len(block)
            vector, derived, routing_vector = _split(rows, extraction)
            results.append(writer.process(
                message, vector, extraction, derived, defaults, your_story, routing_vector=routing_vector
            ))
        return results

    def _turn_texts(self, message: Message, before: Message | None, extraction: Any) -> list[str]:
        """What one turn embeds: its exchange (the conversation memory), its derived memories, and — when
        the exchange holds more than the message — the message alone, for routing."""
        exchange = exchange_text(before if self.settings.exchange_turns >= 2 else None, message)
        alone = conversation_text(message)
        return [exchange, *_derived_texts(extraction), *([alone] if alone != exchange else [])]

    def _embed_texts(self, texts: list[str]) -> np.ndarray | None:
        embedder = self.embedder
        if embedder is None or not texts:
            return None
        return embedder.embed_batch(texts)

    def pending_messages(self, *, user: str | None = None) -> list[Message]:
        """Messages whose derived work failed (stored, never routed): retry with process_pending."""
        user_id = self._user(user)
        return [m for m in self.store.list_messages(user_id) if m.storyline_id is None and m.role is not Role.SYSTEM]

    def process_pending(self, *, user: str | None = None) -> list[TurnResult]:
        """Run the write path again for messages whose derived work did not complete."""
        user_id = self._user(user)
        return self._process(user_id, self.pending_messages(user=user_id))


def _derived_texts(extraction: Any) -> list[str]:
    """Texts of the decision and research memories a turn will make (embedded with the turn)."""
    return [content for content, _ in extraction.decisions] + [content for content, _ in extraction.research]


def _split(
    rows: np.ndarray | None, extraction: Any
) -> tuple[np.ndarray | None, list[np.ndarray] | None, np.ndarray | None]:
    """One turn's rows (see ``_turn_texts``) → (exchange vector, derived vectors, routing vector)."""
    if rows is None:
        return None, None, None
    count = len(_derived_texts(extraction))
    routing_vector = rows[count + 1] if len(rows) > count + 1 else rows[0]
    return rows[0], list(rows[1 : count + 1]), routing_vector
