"""The facade's close path (Talking Rock): preview, review, confirm, open threads, greeting."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from narrative import model
from narrative.checks import require_choice, require_text
from narrative.engine.core import Runtime
from narrative.engine.memories import Memories
from narrative.engine.turns import Turns
from narrative.errors import InvalidTransition, NotFound, ValidationError
from narrative.model import Conversation, ConversationStatus, Entity, EntityType
from narrative.read import agenda, greeting
from narrative.read.greeting import Greeting
from narrative.read.open_items import open_entities, stale_entities
from narrative.store.filters import MemoryFilter
from narrative.write import close, lifecycle, resolve
from narrative.write.close import ConfirmResult, Part
from narrative.write.compress import CloseTools, LLMCloseAssist, destination_for
from narrative.write.embedding import TextVectors
from narrative.write.preview import Preview
from narrative.write.turn_types import ConversationEnd


class Closing:
    """Closing a conversation and its review; open threads, the greeting, the archive."""

    def __init__(self, runtime: Runtime, turns: Turns, memories: Memories) -> None:
        self.rt = runtime
        self.turns = turns
        self.memories = memories

    # --- plumbing ------------------------------------------------------------------------

    def _close_tools(self) -> CloseTools:
        enabled = self.rt.llm_enabled()
        assist = LLMCloseAssist(self.rt.llm) if enabled else None
        embedder = self.rt.embedder_for_writes()
        if embedder is None:
            return CloseTools(self.turns.extractor(), assist)

        if self.rt.close_vectors is None or self.rt.close_vectors.embed != embedder.embed_batch:
            self.rt.close_vectors = TextVectors(embedder.embed_batch)
        kept = self.rt.close_vectors

        def similarity(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
            both = kept.vectors([*a, *b])  # one model call, for the texts no earlier close embedded
            va, vb = both[: len(a)], both[len(a) :]
            va = va / np.maximum(np.linalg.norm(va, axis=1, keepdims=True), 1e-12)
            vb = vb / np.maximum(np.linalg.norm(vb, axis=1, keepdims=True), 1e-12)
            return np.asarray(va @ vb.T)

        return CloseTools(self.turns.extractor(), assist, similarity)

    def _ready(self, user_id: str, conversation_id: int | None) -> Conversation:
        """The given conversation, or the newest one waiting in ready_to_close."""
        if conversation_id is not None:
            return self.rt.store.get_conversation(user_id, conversation_id)
        waiting = self.rt.store.list_conversations(user_id, status=ConversationStatus.READY_TO_CLOSE, limit=1)
        if not waiting:
            raise InvalidTransition("no conversation is ready_to_close: close one first")
        return waiting[0]

    def _save(self, user_id: str, preview: Preview) -> Preview:
        self.rt.store.set_preview(user_id, preview.conversation_id, preview.to_dict())
        return preview

    def _stamp(self, user_id: str, conversation_id: int, storyline_id: int) -> int | None:
        """The link a closing memory is stamped with: the link of its own storyline (the running one, else the
        newest this conversation wrote there, else the storyline's newest); for a storyline without links,
        this conversation's newest link, else the user's latest."""
        running = self.rt.store.open_narrative(user_id, storyline_id)
        if running is not None:
            return running.id
        mine = self.rt.store.list_narratives(user_id, storyline_id=storyline_id, limit=200)
        for links in ([n for n in mine if n.conversation_id == conversation_id], mine):
            if links:
                return links[0].id
        ours = [n for n in self.rt.store.list_narratives(user_id, limit=200) if n.conversation_id == conversation_id]
        if ours:
            return ours[0].id
        latest = self.rt.store.latest_narrative(user_id)
        return None if latest is None else latest.id

    def _commit(self, user_id: str, preview: Preview, parts: Sequence[Part], now: datetime) -> ConfirmResult:
        """Confirm: every memory it makes (the reviewed one, sealed links, reflections) is embedded in one call."""
        writer = self.turns.writer()
        cid = preview.conversation_id
        reviewed: list[model.MemoryItem] = []

        def store_memories(memories: list[model.MemoryItem]) -> list[model.MemoryItem]:
            reviewed.extend(self.memories.store_memories(user_id, memories, embed=False))
            return reviewed

        def finish() -> ConversationEnd:
            writer.deferred = []
            try:
                end = writer.finish_conversation(user_id, cid, now)
                writer.embed_deferred(user_id, reviewed)
            finally:
                writer.deferred = None
            return end

        result = close.commit(
            self.rt.store,
            user_id,
            preview,
            parts,
            now,
            store_memories=store_memories,
            finish=finish,
            stamp=lambda storyline_id: self._stamp(user_id, cid, storyline_id),
        )
        if self.turns.followups is not None:  # with an LLM: the goals the conversation moved
            self.turns.followups.after_close(user_id, cid)
        return result

    # --- close and review ------------------------------------------------------------------------

    def close_conversation(
        self, conversation_id: int | None = None, *, at: datetime | None = None, user: str | None = None
    ) -> Preview:
        """active → ready_to_close, with a preview of what confirming would remember (nothing final yet)."""
        user_id = self.rt.owner_id(user)
        now = at or self.rt.clock()
        if conversation_id is None:
            conversation = self.rt.store.active_conversation(user_id)
            if conversation is None:
                raise InvalidTransition("there is no active conversation to close")
        else:
            conversation = self.rt.store.get_conversation(user_id, conversation_id)
        if conversation.status is not ConversationStatus.ACTIVE:
            raise InvalidTransition(f"cannot close conversation {conversation.id}: it is {conversation.status.value}")
        preview = close.build_preview(self.rt.store, user_id, conversation, now, self._close_tools())
        with self.rt.store.transaction():
            lifecycle.close(self.rt.store, user_id, conversation.id, now)
            self._save(user_id, preview)
        return preview

    def get_memory_preview(self, conversation_id: int | None = None, *, user: str | None = None) -> Preview:
        """The preview of a ready_to_close conversation (recomputed if it was closed without one)."""
        user_id = self.rt.reader_id(user)
        conversation = self._ready(user_id, conversation_id)
        if (
            conversation.status is ConversationStatus.READY_TO_CLOSE
            and self.rt.store.get_preview(user_id, conversation.id) is None
        ):
            preview = close.build_preview(self.rt.store, user_id, conversation, self.rt.clock(), self._close_tools())
            return self._save(user_id, preview)
        return close.load_preview(self.rt.store, user_id, conversation)

    def edit_preview(
        self,
        conversation_id: int | None,
        narrative: str | None = None,
        *,
        remove_entities: Sequence[str] = (),
        user: str | None = None,
    ) -> Preview:
        """Rewrite the narrative (the proposal is kept as the original) and/or drop entities by key."""
        user_id = self.rt.owner_id(user)
        conversation = self._ready(user_id, conversation_id)
        preview = close.load_preview(self.rt.store, user_id, conversation)
        removed_before = set(preview.removed)
        close.edit(preview, narrative, list(remove_entities))
        if set(preview.removed) != removed_before:
            close.recompose(self.rt.store, user_id, conversation, preview, self._close_tools())
        return self._save(user_id, preview)

    def preview_edits(self, conversation_id: int | None = None, *, user: str | None = None) -> list[str]:
        """What you changed in the waiting preview (reworded, items removed, another storyline): what
        ``resume_conversation`` would throw away.  Empty when nothing was changed or nothing waits."""
        user_id = self.rt.reader_id(user)
        try:
            conversation = self._ready(user_id, conversation_id)
            preview = close.load_preview(self.rt.store, user_id, conversation)
        except (InvalidTransition, NotFound):
            return []
        return close.edits_of(preview)

    def redirect_preview(self, conversation_id: int | None, storyline_id: int, *, user: str | None = None) -> Preview:
        """Send the memory to another storyline (Your Story included)."""
        user_id = self.rt.owner_id(user)
        preview = close.load_preview(self.rt.store, user_id, self._ready(user_id, conversation_id))
        preview.destination = destination_for(self.rt.store, user_id, storyline_id, "chosen by you")
        return self._save(user_id, preview)

    def confirm_memory(
        self,
        conversation_id: int | None = None,
        *,
        destination_storyline_id: int | None = None,
        edited_narrative: str | None = None,
        at: datetime | None = None,
        user: str | None = None,
    ) -> ConfirmResult:
        """Accept the preview (optionally edited or redirected): ready_to_close → compressing → archived."""
        user_id = self.rt.owner_id(user)
        now = at or self.rt.clock()
        preview = close.load_preview(self.rt.store, user_id, self._ready(user_id, conversation_id))
        if edited_narrative is not None:
            close.edit(preview, edited_narrative)
        if destination_storyline_id is not None:
            preview.destination = destination_for(self.rt.store, user_id, destination_storyline_id, "chosen by you")
        else:  # it may have been deleted or archived since the preview
            destination_for(self.rt.store, user_id, preview.destination.storyline_id, "")
        parts = self._proposed(user_id, preview) or [
            Part(preview.narrative, preview.destination.storyline_id, tuple(e.key for e in preview.kept))
        ]
        return self._commit(user_id, preview, parts, now)

    def _proposed(self, user_id: str, preview: Preview) -> list[Part]:
        """The preview's one memory per topic, when it proposes them and every topic's storyline still takes
        memories; else [] (one memory)."""
        if not preview.proposes_parts:
            return []
        try:
            for part in preview.parts:
                destination_for(self.rt.store, user_id, int(part["storyline_id"]), "")
        except (NotFound, InvalidTransition):
            return []
        return [
            Part(str(x["narrative"]), int(x["storyline_id"]), tuple(x.get("entity_keys") or ())) for x in preview.parts
        ]

    def split_memory(
        self,
        conversation_id: int | None,
        parts: Sequence[dict[str, Any]],
        *,
        at: datetime | None = None,
        user: str | None = None,
    ) -> ConfirmResult:
        """Confirm as several memories, each to its storyline, all linking back to the one archive.

        ``parts``: ``[{"narrative": str, "storyline_id": int | None (Your Story), "entity_ids": [...]}]``;
        entity ids are stored entity ids or preview keys ("e3"); unassigned entities follow their
        storyline, else go to the first part.
        """
        user_id = self.rt.owner_id(user)
        preview = close.load_preview(self.rt.store, user_id, self._ready(user_id, conversation_id))
        if not isinstance(parts, Sequence) or isinstance(parts, str | bytes) or len(parts) < 2:
            raise ValidationError("a split needs at least two parts (use confirm_memory for one)", field="parts")
        resolved = [self._part(user_id, preview, p, i) for i, p in enumerate(parts)]
        return self._commit(user_id, preview, resolved, at or self.rt.clock())

    def _part(self, user_id: str, preview: Preview, raw: object, index: int) -> Part:
        if not isinstance(raw, dict):
            raise ValidationError(f"part {index} must be an object", field="parts")
        text = require_text(raw.get("narrative"), f"parts[{index}].narrative", 5000).strip()
        sid = raw.get("storyline_id")
        if sid is None:
            sid = self.rt.your_story_id(user_id)
        if isinstance(sid, bool) or not isinstance(sid, int):
            raise ValidationError(f"parts[{index}].storyline_id must be an integer or null", field="parts")
        destination_for(self.rt.store, user_id, sid, "")
        by_id = {i: e.key for e in preview.entities for i in e.entity_ids}
        keys = {e.key for e in preview.kept}
        chosen: list[str] = []
        for ref in raw.get("entity_ids") or []:
            key = ref if isinstance(ref, str) else by_id.get(ref) if isinstance(ref, int) else None
            if key is None or key not in keys:
                raise ValidationError(f"parts[{index}]: {ref!r} is not an entity of this preview", field="parts")
            chosen.append(key)
        return Part(text, sid, tuple(chosen))

    # --- open state ----------------------------------------------------------------------------

    def open_threads(
        self, entity_type: str | None = None, storyline_id: int | None = None, *, user: str | None = None
    ) -> list[Entity]:
        """Unresolved items (open questions, tasks, waiting-ons; or one given type), oldest first."""
        user_id = self.rt.reader_id(user)
        kind = None if entity_type is None else require_choice(EntityType, entity_type, "entity_type")
        return open_entities(self.rt.store, user_id, kind, storyline_id)

    def stale_threads(self, days: int | None = None, *, user: str | None = None) -> list[Entity]:
        """Open items nothing has moved for ``days`` days (default ``Settings.stale_after_days``)."""
        user_id = self.rt.reader_id(user)
        wait = self.rt.settings.stale_after_days if days is None else days
        return stale_entities(self.rt.store, user_id, self.rt.clock(), wait)

    def resolve_thread(self, entity_id: int, *, by_memory_id: int | None = None, user: str | None = None) -> Entity:
        """Mark an open item resolved by hand (optionally naming the memory that settled it)."""
        user_id = self.rt.owner_id(user)
        return resolve.resolve_entity(self.rt.store, user_id, entity_id, self.rt.clock(), by_memory_id=by_memory_id)

    # --- greeting and idle awareness -------------------------------------------------------------

    def greet(self, *, user: str | None = None) -> Greeting:
        """Resume the active conversation, or say what is open, waiting, decided and stale."""
        user_id = self.rt.reader_id(user)
        now = self.rt.clock()
        rules = agenda.AgendaRules.from_settings(self.rt.settings)
        return greeting.build_greeting(
            self.rt.store,
            user_id,
            now,
            stale_after_days=self.rt.settings.stale_after_days,
            agenda=agenda.gather(self.rt.store, user_id, now, rules),
        )

    def idle_check(self, *, user: str | None = None) -> str | None:
        """An invitation after a long quiet in the active conversation; once per quiet spell."""
        user_id = self.rt.reader_id(user)
        now = self.rt.clock()
        active = self.rt.store.active_conversation(user_id)
        if active is None or not greeting.idle_due(active, now, self.rt.settings.idle_after_minutes):
            return None
        self.rt.store.update_conversation(user_id, active.id, idle_notified_at=now)
        return greeting.IDLE_INVITATION

    # --- the archive and editing after the fact --------------------------------------------------

    def get_conversation_archive(self, conversation_id: int, *, user: str | None = None) -> dict[str, Any]:
        """The conversation, its full transcript, the memories made from it, its entities and changes."""
        user_id = self.rt.reader_id(user)
        conversation = self.rt.store.get_conversation(user_id, conversation_id)
        made = self.rt.store.list_memories(user_id, MemoryFilter(conversation_ids=[conversation_id]))
        return {
            "conversation": conversation,
            "messages": self.rt.store.list_messages(user_id, conversation_id=conversation_id),
            "memories": [m for m in made if m.user_reviewed],
            "derived": [m for m in made if not m.user_reviewed],
            "entities": self.rt.store.list_entities(user_id, conversation_id=conversation_id, limit=100_000),
            "deltas": self.rt.store.list_state_deltas(user_id, conversation_id=conversation_id),
        }
