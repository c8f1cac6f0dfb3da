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
from narrative.write.turn import TurnResult, TurnWriter, WriteSettings, exchange_text

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
        """Derived work for stored messages.  Without an LLM every vector of the chunk is made in one batch."""
        writer = self._turn_writer()
        defaults = self._default_ids(user_id)
        your_story = self._your_story_id(user_id)
        assist = writer.assist
        if assist is not None:  # the model works turn by turn, each with its own budget
            results = []
            previous_text: str | None = None
            for message in messages:
                assist.begin_turn()
                extraction = assist.extract_turn(
                    message.content, speaker=message.speaker, role=message.role.value, previous=previous_text
                )
                previous_text = message.content
                text = self._exchange_texts(user_id, [message])[0]
                vectors = self._embed_texts([text, *_derived_texts(extraction)])
                results.append(writer.process(message, *_split(vectors, 0, extraction), defaults, your_story))
            return results
        extractor = self._extract()
        extractions = []
        previous_text = None
        for message in messages:
            extractions.append(extractor.extract_turn(
                message.content, speaker=message.speaker, role=message.role.value, previous=previous_text
            ))
            previous_text = message.content
        texts = self._exchange_texts(user_id, messages)
        offsets = []
        for extraction in extractions:
            offsets.append(len(texts))
            texts += _derived_texts(extraction)
        vectors = self._embed_texts(texts)
        return [
            writer.process(message, *_split(vectors, i, extraction, offsets[i]), defaults, your_story)
            for i, (message, extraction) in enumerate(zip(messages, extractions, strict=True))
        ]

    def _exchange_texts(self, user_id: str, messages: Sequence[Message]) -> list[str]:
        """What each turn's conversation memory says (and is embedded from)."""
        texts = []
        previous: Message | None = None
        for message in messages:
            if self.settings.exchange_turns < 2:
                previous = None
            elif previous is None or previous.conversation_id != message.conversation_id:
                previous = self.store.previous_message(user_id, message.conversation_id, message.position)
            texts.append(exchange_text(previous, message))
            previous = message
        return texts

    def _embed_texts(self, texts: list[str]) -> np.ndarray | None:
        embedder = self.embedder
        if embedder is None or not texts:
            return None
        return embedder.embed_batch(texts)

    def pending_messages(self, *, user: str | None = None) -> list[Message]:
        """Messages whose derived work failed (stored, never routed): retry with process_pending."""
        user_id = self._user(user)
        return [m for m in self.store.list_messages(user_id) if m.storyline_id is None]

    def process_pending(self, *, user: str | None = None) -> list[TurnResult]:
        """Run the write path again for messages whose derived work did not complete."""
        user_id = self._user(user)
        return self._process(user_id, self.pending_messages(user=user_id))


def _derived_texts(extraction: Any) -> list[str]:
    """Texts of the decision and research memories a turn will make (embedded with the turn)."""
    return [content for content, _ in extraction.decisions] + [content for content, _ in extraction.research]


def _split(
    vectors: np.ndarray | None, index: int, extraction: Any, offset: int | None = None
) -> tuple[np.ndarray | None, Any, list[np.ndarray] | None]:
    """(the turn's vector, its extraction, the vectors of its derived memories)."""
    if vectors is None:
        return None, extraction, None
    start = index + 1 if offset is None else offset
    count = len(_derived_texts(extraction))
    return vectors[index], extraction, list(vectors[start : start + count])
