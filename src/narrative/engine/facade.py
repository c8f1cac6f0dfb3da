"""The facade: :class:`Memory`, the one object users hold.

It builds one :class:`~narrative.engine.core.Runtime` (settings, store, clock, providers, caches) and the
services, each a plain class in its own module that receives the runtime and the peer services it needs:

    Conversations  conversations.py   conversations and their messages
    Keys           keys.py            API keys
    Storylines     storylines.py      storylines by hand, routing decisions
    Memories       memories.py        memories, the narrative chain
    Search         searching.py       search and recall
    Turns          turns.py           the write path (remember)
    Maintenance    maintenance.py     embedder identity, reindex, compact
    Sovereignty    sovereignty.py     export, import, delete
    Context        context.py         context blocks, uses, explanations (uses Conversations, Search)
    Closing        closing.py         close, review, open threads, greeting (uses Turns, Memories)
    Bindings       bindings.py        what is bound to storylines; stale goals
    Decisions      decisions.py       decision chains, the decision audit
    Research       research.py        consolidation, linked items, source popularity
    Followups      followups.py       what follows a write (Turns, Memories, Closing hand it their work)
    Imports        imports.py         chat logs into a user (uses Conversations, Turns, Closing)

Every public method below only hands the call to its service; the domain work is in ``write/`` and
``read/``.  ``@validated`` checks every public call's arguments first (``narrative.validate``): their types against
the annotations below (so the names those use are imported at run time), then their values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from narrative import model
from narrative.config import Settings
from narrative.engine.bindings import Bindings
from narrative.engine.closing import Closing
from narrative.engine.context import Context
from narrative.engine.conversations import Conversations
from narrative.engine.core import Runtime
from narrative.engine.decisions import Decisions
from narrative.engine.followups import Followups
from narrative.engine.imports import Imports
from narrative.engine.keys import Keys
from narrative.engine.maintenance import Maintenance
from narrative.engine.memories import Memories
from narrative.engine.research import Research
from narrative.engine.searching import Search
from narrative.engine.sovereignty import Sovereignty
from narrative.engine.storylines import Storylines
from narrative.engine.turns import Turn, Turns
from narrative.errors import ValidationError
from narrative.store.protocol import Store
from narrative.validate import validated

if TYPE_CHECKING:
    from narrative.model import (
        Binding,
        Conversation,
        DecisionReview,
        Entity,
        MemoryLink,
        Message,
        Narrative,
        RoutingDecision,
        Storyline,
        Use,
    )
    from narrative.providers.embed import Embedder
    from narrative.providers.llm import LLM
    from narrative.providers.tokens import TokenCounter
    from narrative.read import chain
    from narrative.read.agenda import GoalReminder
    from narrative.read.audit import DueDecision
    from narrative.read.context import ContextBlock
    from narrative.read.decision_chain import DecisionChain
    from narrative.read.full_text import WholeMemory
    from narrative.read.greeting import Greeting
    from narrative.read.linked import LinkedMemory
    from narrative.read.listing import Listed
    from narrative.read.popularity import SourceUse
    from narrative.read.reasoning import ReasoningContext
    from narrative.read.search import SearchHit
    from narrative.write.close import ConfirmResult
    from narrative.write.preview import Preview
    from narrative.write.turn_types import TurnResult


@validated
class Memory:
    """A user's narrative memory in one SQLite file (or any :class:`~narrative.store.protocol.Store`).

    >>> mem = Memory("notes.db", user="alice")          # doctest: +SKIP
    >>> mem.add_message("We decided to ship on Friday because QA signed off.")  # doctest: +SKIP
    """

    def __init__(
        self,
        db: str | Path | None = None,
        *,
        user: str | None = None,
        settings: Settings | None = None,
        store: Store | None = None,
        embedder: Embedder | str | None = None,
        llm: LLM | str | None = None,
        clock: Callable[[], datetime] | None = None,
        env: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> None:
        rt = Runtime(
            db, user=user, settings=settings, store=store, embedder=embedder, llm=llm, clock=clock, env=env, **overrides
        )
        self._runtime = rt
        self._conversations = Conversations(rt)
        self._keys = Keys(rt)
        self._storylines = Storylines(rt)
        self._bindings = Bindings(rt)
        self._decisions = Decisions(rt)
        self._research = Research(rt)
        followups = Followups(self._bindings, self._decisions, self._research)
        self._memories = Memories(rt, followups)
        self._search = Search(rt)
        self._turns = Turns(rt, followups)
        self._maintenance = Maintenance(rt)
        self._sovereignty = Sovereignty(rt)
        self._context = Context(rt, self._conversations, self._search)
        self._closing = Closing(rt, self._turns, self._memories)
        self._imports = Imports(rt, self._conversations, self._turns, self._closing)

    # --- the runtime --------------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self._runtime.settings

    @property
    def store(self) -> Store:
        return self._runtime.store

    @property
    def clock(self) -> Callable[[], datetime]:
        return self._runtime.clock

    @property
    def user(self) -> str:
        """The default user of this memory (``settings.user``)."""
        return self._runtime.settings.user

    @property
    def embedder(self) -> Embedder | None:
        """The embedder, or None when settings say ``embedder="none"`` (keyword-only mode)."""
        return self._runtime.embedder

    @property
    def llm(self) -> LLM:
        """The LLM provider (built on first use)."""
        return self._runtime.llm

    @property
    def token_counter(self) -> TokenCounter:
        """What budgets are measured with (``ApproxTokenCounter``, line-memoised, unless one was set)."""
        return self._context.token_counter

    @token_counter.setter
    def token_counter(self, counter: TokenCounter) -> None:
        self._context.token_counter = counter

    def close(self) -> None:
        """Close the database connection."""
        self._runtime.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- Conversations (conversations.py) ----------------------------------------------------------
    def start_conversation(
        self, title: str = "", *, user: str | None = None, at: datetime | None = None
    ) -> Conversation:
        """Start a conversation; raises ConversationAlreadyActive while one is active."""
        return self._conversations.start_conversation(title, user=user, at=at)

    def active_conversation(self, *, user: str | None = None) -> Conversation | None:
        return self._conversations.active_conversation(user=user)

    def get_conversation(self, conversation_id: int, *, user: str | None = None) -> Conversation:
        return self._conversations.get_conversation(conversation_id, user=user)

    def list_conversations(
        self, status: str | None = None, *, limit: int = 50, offset: int = 0, user: str | None = None
    ) -> list[Conversation]:
        return self._conversations.list_conversations(status, limit=limit, offset=offset, user=user)

    def add_message(
        self,
        content: str,
        role: str = "user",
        *,
        speaker: str = "",
        conversation_id: int | None = None,
        at: datetime | None = None,
        meta: dict[str, Any] | None = None,
        user: str | None = None,
    ) -> Message:
        """Store one message in the active conversation (started if none) without derived work."""
        return self._conversations.add_message(
            content, role, speaker=speaker, conversation_id=conversation_id, at=at, meta=meta, user=user
        )

    def messages(
        self, conversation_id: int | None = None, *, limit: int | None = None, user: str | None = None
    ) -> list[Message]:
        """Messages in order: of one conversation, or the user's latest ``limit`` across all."""
        return self._conversations.messages(conversation_id, limit=limit, user=user)

    def pause_conversation(self, conversation_id: int | None = None, *, user: str | None = None) -> Conversation:
        return self._conversations.pause_conversation(conversation_id, user=user)

    def unpause_conversation(self, conversation_id: int | None = None, *, user: str | None = None) -> Conversation:
        return self._conversations.unpause_conversation(conversation_id, user=user)

    def resume_conversation(self, conversation_id: int | None = None, *, user: str | None = None) -> Conversation:
        """ready_to_close → active: cancel the closure, nothing is stored."""
        return self._conversations.resume_conversation(conversation_id, user=user)

    def describe(self, *, user: str | None = None) -> dict[str, Any]:
        """Where the memory lives and what it holds (for ``narrative init`` and status pages)."""
        return self._conversations.describe(user=user)

    def users(self) -> dict[str, dict[str, int]]:
        """Every user of this file with what they hold beyond a fresh start (rows per table; empty for a user"""
        return self._conversations.users()

    # --- Keys (keys.py) ----------------------------------------------------------------------------
    def create_api_key(self, *, label: str = "", user: str | None = None) -> str:
        """Mint a key for ``user``; the plaintext is returned now and cannot be recovered later."""
        return self._keys.create_api_key(label=label, user=user)

    def list_api_keys(self, *, user: str | None = None) -> list[dict[str, Any]]:
        """``user``'s keys (never the keys themselves): id, label, created_at, and a fingerprint (the"""
        return self._keys.list_api_keys(user=user)

    def revoke_api_key(self, key_id: int, *, user: str | None = None) -> dict[str, Any]:
        """Revoke one of ``user``'s keys; its next request is refused.  Another user's key id is not found."""
        return self._keys.revoke_api_key(key_id, user=user)

    def user_for_api_key(self, key: str) -> str | None:
        """Whose key this is, or None for an unknown, revoked or malformed key."""
        return self._keys.user_for_api_key(key)

    # --- Storylines (storylines.py) ----------------------------------------------------------------
    def list_storylines(self, *, include_archived: bool = False, user: str | None = None) -> list[Storyline]:
        """Your Story, the defaults and every topic storyline, most recently active first."""
        return self._storylines.list_storylines(include_archived=include_archived, user=user)

    def get_storyline(self, storyline_id: int, *, user: str | None = None) -> Storyline:
        return self._storylines.get_storyline(storyline_id, user=user)

    def your_story(self, *, user: str | None = None) -> Storyline:
        return self._storylines.your_story(user=user)

    def create_storyline(
        self, name: str, *, description: str = "", keywords: tuple[str, ...] = (), user: str | None = None
    ) -> Storyline:
        """A storyline made by the user (NarraNexus: also detected automatically from conversation)."""
        return self._storylines.create_storyline(name, description=description, keywords=keywords, user=user)

    def rename_storyline(self, storyline_id: int, name: str, *, user: str | None = None) -> Storyline:
        return self._storylines.rename_storyline(storyline_id, name, user=user)

    def archive_storyline(self, storyline_id: int, *, user: str | None = None) -> Storyline:
        return self._storylines.archive_storyline(storyline_id, user=user)

    def routing_decisions(
        self, message_id: int | None = None, *, limit: int = 50, user: str | None = None
    ) -> list[RoutingDecision]:
        """Why messages went to their storylines: decision, candidates and scores."""
        return self._storylines.routing_decisions(message_id, limit=limit, user=user)

    # --- Memories (memories.py) --------------------------------------------------------------------
    def add_memory(
        self,
        content: str,
        *,
        stream: str = "fact",
        source: str = "agent",
        importance: int = 2,
        emotions: Sequence[str] = (),
        message_ids: Sequence[int] = (),
        details: model.Details | None = None,
        storyline_id: int | None = None,
        conversation_id: int | None = None,
        event_at: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
        user: str | None = None,
    ) -> model.MemoryItem:
        """Store one memory, stamped with the narrative active now, embedded when an embedder is set;
        ``metadata``: your own keys and JSON values (at most 64 keys, 16 KiB), for filters."""
        return self._memories.add_memory(
            content,
            stream=stream,
            source=source,
            importance=importance,
            emotions=emotions,
            message_ids=message_ids,
            details=details,
            storyline_id=storyline_id,
            conversation_id=conversation_id,
            event_at=event_at,
            metadata=metadata,
            user=user,
        )

    def add_memories(
        self,
        items: Sequence[Mapping[str, Any]],
        *,
        vectors: np.ndarray | None = None,
        user: str | None = None,
    ) -> list[model.MemoryItem]:
        """Bulk insert for importers and benchmarks: one transaction, embeddings in batches."""
        return self._memories.add_memories(items, vectors=vectors, user=user)

    def get_memory(self, memory_id: int, *, user: str | None = None) -> model.MemoryItem:
        return self._memories.get_memory(memory_id, user=user)

    def memory_text(self, memory_id: int, *, user: str | None = None) -> str:
        """The whole text a memory stands for: its ``content``, except that a memory of a long message (which
        quotes only the message's first passage, ending " …") gives the whole message.  NotFound if none."""
        return self._memories.memory_text(memory_id, user=user)

    def whole_memory(self, memory_id: int, *, user: str | None = None) -> WholeMemory:
        """The memory as :meth:`get_memory` gives it, with ``text`` beside ``content``: the whole text it stands
        for, as :meth:`memory_text` gives it (in one read of the memory).  NotFound if none."""
        return self._memories.whole_memory(memory_id, user=user)

    def list_memories(
        self,
        *,
        stream: str | None = None,
        storyline_id: int | None = None,
        conversation_id: int | None = None,
        limit: int = 50,
        offset: int = 0,
        filters: Mapping[str, Any] | None = None,
        current_only: bool = False,
        user: str | None = None,
    ) -> list[model.MemoryItem]:
        """Memories newest first, optionally of one stream, storyline or conversation, matching ``filters``
        (AND/OR/NOT over fields and metadata: docs/http.md, Filters); ``current_only``: not superseded."""
        return self._memories.list_memories(
            stream=stream,
            storyline_id=storyline_id,
            conversation_id=conversation_id,
            limit=limit,
            offset=offset,
            filters=filters,
            current_only=current_only,
            user=user,
        )

    def one_fact_once(self, memory_ids: Sequence[int], *, user: str | None = None) -> list[Listed]:
        """These memories, in this order, as a list shows them: each fact once (``read.listing``)."""
        return self._memories.one_fact_once(memory_ids, user=user)

    def count_memories(self, *, filters: Mapping[str, Any] | None = None, user: str | None = None) -> int:
        """How many memories match ``filters`` (every memory of the user without)."""
        return self._memories.count_memories(filters=filters, user=user)

    def restore_memory(self, memory_id: int, *, user: str | None = None) -> model.MemoryItem:
        """Make a memory a later statement superseded current again (undo a correction); returns it."""
        return self._memories.restore_memory(memory_id, user=user)

    def edit_memory(
        self,
        memory_id: int,
        *,
        content: str | None = None,
        importance: int | None = None,
        emotions: Sequence[str] | None = None,
        entities_to_remove: Iterable[int] = (),
        entities_to_add: Iterable[dict[str, Any]] = (),
        metadata: Mapping[str, Any] | None = None,
        user: str | None = None,
    ) -> model.MemoryItem:
        """Change a memory after the fact: text (the first edit keeps the original and marks it user_edited),
        importance, emotions, metadata (replaced whole), entities; the history records the edit."""
        return self._memories.edit_memory(
            memory_id,
            content=content,
            importance=importance,
            emotions=emotions,
            entities_to_remove=entities_to_remove,
            entities_to_add=entities_to_add,
            metadata=metadata,
            user=user,
        )

    def update_memories(
        self, updates: Sequence[Mapping[str, Any]], *, user: str | None = None
    ) -> list[model.MemoryItem]:
        """Edit several memories at once (``[{"id": N, "content"?, "importance"?, "emotions"?, "metadata"?}]``),
        in one transaction: all of them, or none when one is refused."""
        return self._memories.update_memories(updates, user=user)

    def history(self, memory_id: int, *, user: str | None = None) -> list[model.MemoryEvent]:
        """Every change to a memory, oldest first: created, edited, confirmed, superseded, restored, deleted (each
        with its time, the text before and after, a detail); after a delete, its tombstone without text."""
        return self._memories.history(memory_id, user=user)

    def narrative_update(
        self,
        summary: str,
        memory_ids: Sequence[int] = (),
        previous_narrative_id: int | None = None,
        topic: str = "",
        *,
        storyline_id: int | None = None,
        user: str | None = None,
    ) -> Narrative:
        """Append a sealed link: one-sentence summary, the memories it connects, the previous link."""
        return self._memories.narrative_update(
            summary, memory_ids, previous_narrative_id, topic, storyline_id=storyline_id, user=user
        )

    def narrative_search(
        self, narrative_id: int | None = None, query: str | None = None, *, limit: int = 10, user: str | None = None
    ) -> list[Narrative]:
        """By id, by keyword, or (no arguments) the latest link: "where was I?"."""
        return self._memories.narrative_search(narrative_id, query, limit=limit, user=user)

    def narratives_after(self, narrative_id: int, *, user: str | None = None) -> list[Narrative]:
        """Forward traversal: the links whose previous link is this one."""
        return self._memories.narratives_after(narrative_id, user=user)

    def walk_back(self, narrative_id: int, depth: int | None = None, *, user: str | None = None) -> list[Narrative]:
        return self._memories.walk_back(narrative_id, depth, user=user)

    def walk_forward(self, narrative_id: int, depth: int | None = None, *, user: str | None = None) -> list[Narrative]:
        return self._memories.walk_forward(narrative_id, depth, user=user)

    def recall_chain(self, memory_id: int, depth: int = 3, *, user: str | None = None) -> chain.RecallChain:
        """memory → narrative → sibling memories → earlier links."""
        return self._memories.recall_chain(memory_id, depth, user=user)

    def list_narratives(
        self, *, storyline_id: int | None = None, limit: int = 50, offset: int = 0, user: str | None = None
    ) -> list[Narrative]:
        return self._memories.list_narratives(storyline_id=storyline_id, limit=limit, offset=offset, user=user)

    # --- Search (searching.py) ---------------------------------------------------------------------
    def search(
        self,
        query: str,
        k: int | None = None,
        *,
        limit: int | None = None,
        mode: str = "hybrid",
        conversation_id: int | None = None,
        conversation_ids: Sequence[int] | None = None,
        storyline_id: int | None = None,
        streams: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        entity_types: Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        record: bool | None = None,
        min_score: float = 0.0,
        include_superseded: bool = False,
        as_of: datetime | None = None,
        filters: Mapping[str, Any] | None = None,
        user: str | None = None,
    ) -> list[SearchHit]:
        """Hybrid search over this user's memories (what is current, unless ``include_superseded`` or ``as_of``
        a past time); every hit carries ``why()``.  ``filters``: AND/OR/NOT over fields and metadata.  ``limit``:
        how many hits (10 by default; ``k`` is its older name, as over HTTP and MCP)."""
        return self._search.search(
            query,
            _count(k, limit),
            mode=mode,
            conversation_id=conversation_id,
            conversation_ids=conversation_ids,
            storyline_id=storyline_id,
            streams=streams,
            sources=sources,
            entity_types=entity_types,
            since=since,
            until=until,
            record=record,
            min_score=min_score,
            include_superseded=include_superseded,
            as_of=as_of,
            filters=filters,
            user=user,
        )

    def recall(
        self,
        query: str,
        k: int | None = None,
        *,
        limit: int | None = None,
        depth: int = 1,
        user: str | None = None,
        **filters: object,
    ) -> list[tuple[SearchHit, chain.RecallChain]]:
        """Search, then open each hit into its recall chain (narrative, siblings, earlier links); ``limit`` (or
        ``k``) hits, 10 by default."""
        Memory.search.check_keywords(filters, taken=("query", "k", "limit", "user"))  # type: ignore[attr-defined]
        return self._search.recall(query, _count(k, limit), depth=depth, user=user, **filters)

    # --- Turns (turns.py) --------------------------------------------------------------------------
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
        return self._turns.remember(content, role, speaker=speaker, at=at, meta=meta, user=user)

    def remember_many(
        self, turns: Iterable[Turn], *, user: str | None = None, progress: Callable[[int, int], None] | None = None
    ) -> list[TurnResult]:
        """Remember turns in order, embedding them in batches (the fast path for imports)."""
        return self._turns.remember_many(turns, user=user, progress=progress)

    def pending_messages(self, *, user: str | None = None) -> list[Message]:
        """Messages whose derived work failed (stored, never routed): retry with process_pending."""
        return self._turns.pending_messages(user=user)

    def process_pending(self, *, user: str | None = None) -> list[TurnResult]:
        """Run the write path again for messages whose derived work did not complete."""
        return self._turns.process_pending(user=user)

    # --- Maintenance (maintenance.py) --------------------------------------------------------------
    def embedding_status(self, *, user: str | None = None) -> dict[str, Any]:
        """The embedder identity, stored vector identities with counts, and whether a reindex is needed."""
        return self._maintenance.embedding_status(user=user)

    def reindex(
        self,
        *,
        user: str | None = None,
        batch_size: int | None = None,
        force: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Re-embed memories and storyline routing embeddings with the current embedder."""
        return self._maintenance.reindex(user=user, batch_size=batch_size, force=force, progress=progress)

    def compact(self, *, keep_changes: int = 1_000) -> dict[str, int]:
        """Prune the memory change log to its newest ``keep_changes`` entries, merge the full-text"""
        return self._maintenance.compact(keep_changes=keep_changes)

    def check(self) -> dict[str, Any]:
        """Is the database whole (after a crash, say)?  Schema, pages, full-text, vectors, references, pending"""
        return self._maintenance.check()

    # --- Sovereignty (sovereignty.py) --------------------------------------------------------------
    def export(self, format: str = "json", *, user: str | None = None) -> str:
        """Everything of one user: ``json`` (lossless, re-importable) or ``markdown`` (readable); the memories
        one a line: ``jsonl`` or ``csv`` (for spreadsheets and pipelines; docs/export-format.md)."""
        return self._sovereignty.export(format, user=user)

    def import_data(
        self, text: str, *, user: str | None = None, progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Any]:
        """Restore a JSON export into an empty user (refused otherwise), under fresh ids."""
        return self._sovereignty.import_data(text, user=user, progress=progress)

    def import_chat(
        self,
        text: str,
        format: str = "auto",
        *,
        user: str | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Import a chat log (``jsonl`` of messages, ChatGPT's or Claude's ``conversations.json``; ``auto`` tells
        them apart) into this user, existing data kept: each conversation remembered turn by turn, then closed
        and confirmed.  Checked whole first: a bad line is named and nothing is stored (docs/ingest.md)."""
        return self._imports.import_chat(text, format, user=user, progress=progress)

    def delete_memory(self, memory_id: int, *, user: str | None = None) -> dict[str, int]:
        """Delete one memory with its entities, deltas, sources, vector and full-text entry."""
        return self._sovereignty.delete_memory(memory_id, user=user)

    def delete_memories(
        self,
        memory_ids: Sequence[int] | None = None,
        *,
        filters: Mapping[str, Any] | None = None,
        user: str | None = None,
    ) -> dict[str, Any]:
        """Delete several memories at once, by id or by ``filters`` (one of the two), all or none; returns the
        counts and the ``ids`` deleted."""
        return self._sovereignty.delete_memories(memory_ids, filters=filters, user=user)

    def delete_conversation(self, conversation_id: int, *, user: str | None = None) -> dict[str, int]:
        """Delete a conversation and what came only from it: messages, memories, links, entities, uses."""
        return self._sovereignty.delete_conversation(conversation_id, user=user)

    def delete_storyline(
        self, storyline_id: int, *, move_to_your_story: bool = True, user: str | None = None
    ) -> dict[str, int]:
        """Delete a storyline; its memories move to Your Story, or (``move_to_your_story=False``) go with it."""
        return self._sovereignty.delete_storyline(storyline_id, move_to_your_story=move_to_your_story, user=user)

    def delete_user(self, user: str) -> dict[str, Any]:
        """Delete a user and every row they own (the next use of the name starts afresh)."""
        return self._sovereignty.delete_user(user)

    # --- Context (context.py) ----------------------------------------------------------------------
    def context(
        self, query: str, budget: int = 2000, *, record: bool | None = None, user: str | None = None
    ) -> ContextBlock:
        """The context an agent should see for ``query`` within ``budget`` tokens (see read/context.py)."""
        return self._context.context(query, budget, record=record, user=user)

    def reasoning_context(
        self,
        request: str,
        kind: str = "classification",
        top_k: int = 5,
        *,
        include_active_entities: bool = True,
        record: bool | None = None,
        user: str | None = None,
    ) -> ReasoningContext:
        """Memories, open threads and a prompt section for classifying, decomposing or verifying ``request``."""
        return self._context.reasoning_context(
            request, kind, top_k, include_active_entities=include_active_entities, record=record, user=user
        )

    def record_use(self, kind: str, query: str, references: Iterable[object] = (), *, user: str | None = None) -> Use:
        """Store which memories influenced a decision."""
        return self._context.record_use(kind, query, references, user=user)

    def list_uses(self, limit: int = 50, *, offset: int = 0, user: str | None = None) -> list[Use]:
        """Uses, newest first."""
        return self._context.list_uses(limit, offset=offset, user=user)

    def get_use(self, use_id: int, *, user: str | None = None) -> Use:
        return self._context.get_use(use_id, user=user)

    def explain(self, use_id: int, *, user: str | None = None) -> dict[str, Any]:
        """Which memories a use drew on, why, and from which messages (provenance), plus its outcomes."""
        return self._context.explain(use_id, user=user)

    def influence_chain(self, memory_id: int, limit: int = 20, *, user: str | None = None) -> list[Use]:
        """Every use of a memory since it was made, newest first."""
        return self._context.influence_chain(memory_id, limit, user=user)

    def learn_from_outcome(
        self, use_id: int, outcome: str, correction: str | None = None, *, user: str | None = None
    ) -> Use:
        """Record how a use turned out: ``approved``, ``corrected`` (needs ``correction``) or ``rejected``."""
        return self._context.learn_from_outcome(use_id, outcome, correction, user=user)

    # --- Closing (closing.py) ----------------------------------------------------------------------
    def close_conversation(
        self, conversation_id: int | None = None, *, at: datetime | None = None, user: str | None = None
    ) -> Preview:
        """active → ready_to_close, with a preview of what confirming would remember (nothing final yet)."""
        return self._closing.close_conversation(conversation_id, at=at, user=user)

    def get_memory_preview(self, conversation_id: int | None = None, *, user: str | None = None) -> Preview:
        """The preview of a ready_to_close conversation (recomputed if it was closed without one)."""
        return self._closing.get_memory_preview(conversation_id, user=user)

    def edit_preview(
        self,
        conversation_id: int | None,
        narrative: str | None = None,
        *,
        remove_entities: Sequence[str] = (),
        user: str | None = None,
    ) -> Preview:
        """Rewrite the narrative (the proposal is kept as the original) and/or drop entities by key."""
        return self._closing.edit_preview(conversation_id, narrative, remove_entities=remove_entities, user=user)

    def preview_edits(self, conversation_id: int | None = None, *, user: str | None = None) -> list[str]:
        """What you changed in the waiting preview (reworded, items removed, another storyline): what"""
        return self._closing.preview_edits(conversation_id, user=user)

    def redirect_preview(self, conversation_id: int | None, storyline_id: int, *, user: str | None = None) -> Preview:
        """Send the memory to another storyline (Your Story included)."""
        return self._closing.redirect_preview(conversation_id, storyline_id, user=user)

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
        return self._closing.confirm_memory(
            conversation_id,
            destination_storyline_id=destination_storyline_id,
            edited_narrative=edited_narrative,
            at=at,
            user=user,
        )

    def split_memory(
        self,
        conversation_id: int | None,
        parts: Sequence[dict[str, Any]],
        *,
        at: datetime | None = None,
        user: str | None = None,
    ) -> ConfirmResult:
        """Confirm as several memories, each to its storyline, all linking back to the one archive."""
        return self._closing.split_memory(conversation_id, parts, at=at, user=user)

    def open_threads(
        self, entity_type: str | None = None, storyline_id: int | None = None, *, user: str | None = None
    ) -> list[Entity]:
        """Unresolved items (open questions, tasks, waiting-ons; or one given type), oldest first."""
        return self._closing.open_threads(entity_type, storyline_id, user=user)

    def stale_threads(self, days: int | None = None, *, user: str | None = None) -> list[Entity]:
        """Open items nothing has moved for ``days`` days (default ``Settings.stale_after_days``)."""
        return self._closing.stale_threads(days, user=user)

    def resolve_thread(self, entity_id: int, *, by_memory_id: int | None = None, user: str | None = None) -> Entity:
        """Mark an open item resolved by hand (optionally naming the memory that settled it)."""
        return self._closing.resolve_thread(entity_id, by_memory_id=by_memory_id, user=user)

    def greet(self, *, user: str | None = None) -> Greeting:
        """Resume the active conversation, or say what is open, waiting, decided and stale."""
        return self._closing.greet(user=user)

    def idle_check(self, *, user: str | None = None) -> str | None:
        """An invitation after a long quiet in the active conversation; once per quiet spell."""
        return self._closing.idle_check(user=user)

    def get_conversation_archive(self, conversation_id: int, *, user: str | None = None) -> dict[str, Any]:
        """The conversation, its full transcript, the memories made from it, its entities and changes."""
        return self._closing.get_conversation_archive(conversation_id, user=user)

    # --- Bindings (bindings.py) --------------------------------------------------------------------
    def bind(
        self,
        storyline_id: int,
        kind: str,
        name: str,
        *,
        status: str | None = None,
        payload: dict[str, Any] | None = None,
        at: datetime | None = None,
        user: str | None = None,
    ) -> Binding:
        """Bind a tool set, a job, a goal or a module instance to a storyline (NarraNexus); binding the same kind
        and name there again updates the live one.  ``status``: the kind's (docs/bindings.md); final → history."""
        return self._bindings.bind(storyline_id, kind, name, status=status, payload=payload, at=at, user=user)

    def update_binding(
        self,
        binding_id: int,
        *,
        status: str | None = None,
        payload: dict[str, Any] | None = None,
        name: str | None = None,
        at: datetime | None = None,
        user: str | None = None,
    ) -> Binding:
        """Change a binding's status, payload (replaced whole) or name; it counts as touched."""
        return self._bindings.update_binding(binding_id, status=status, payload=payload, name=name, at=at, user=user)

    def complete_binding(
        self, binding_id: int, *, status: str | None = None, at: datetime | None = None, user: str | None = None
    ) -> Binding:
        """Move a binding to history (a job done, a goal achieved, or the final ``status`` given)."""
        return self._bindings.complete_binding(binding_id, status=status, at=at, user=user)

    def delete_binding(self, binding_id: int, *, user: str | None = None) -> dict[str, int]:
        """Delete a binding for good (completing it keeps it as history instead)."""
        return self._bindings.delete_binding(binding_id, user=user)

    def list_bindings(
        self,
        storyline_id: int | None = None,
        *,
        kind: str | None = None,
        history: bool = False,
        user: str | None = None,
    ) -> list[Binding]:
        """Live bindings (``history=True``: completed ones), of one storyline or all, most recently touched first."""
        return self._bindings.list_bindings(storyline_id, kind=kind, history=history, user=user)

    def stale_goals(self, days: int | None = None, *, user: str | None = None) -> list[GoalReminder]:
        """Ongoing goals nothing touched for ``days`` days (default ``Settings.goal_stale_days``), each with why."""
        return self._bindings.stale_goals(days, user=user)

    # --- Decisions (decisions.py) ------------------------------------------------------------------
    def link_decision(
        self, memory_id: int, earlier_id: int, kind: str = "builds_on", *, reason: str = "", user: str | None = None
    ) -> MemoryLink:
        """Record that decision ``memory_id`` builds on (or ``kind="reverses"``) the earlier ``earlier_id``."""
        return self._decisions.link_decision(memory_id, earlier_id, kind, reason=reason, user=user)

    def decision_chain(self, memory_id: int, *, user: str | None = None) -> DecisionChain:
        """From any decision: what it builds on or reverses, and what builds on or reverses it, both ways."""
        return self._decisions.decision_chain(memory_id, user=user)

    def decisions_to_review(self, *, limit: int = 10, user: str | None = None) -> list[DueDecision]:
        """Decisions due for an audit (old, or reversible and never revisited), with rationale and alternatives."""
        return self._decisions.decisions_to_review(limit=limit, user=user)

    def review_decision(
        self, memory_id: int, outcome: str = "kept", *, note: str = "", user: str | None = None
    ) -> DecisionReview:
        """Answer an audit prompt: ``kept`` (the clock starts again) or ``reversed`` (never offered again)."""
        return self._decisions.review_decision(memory_id, outcome, note=note, user=user)

    # --- Research (research.py) --------------------------------------------------------------------
    def consolidate(self, *, since: datetime | None = None, user: str | None = None) -> dict[str, Any]:
        """Link research items about the same work, author or idea (never merged); returns what it linked."""
        return self._research.consolidate(since=since, user=user)

    def linked_memories(
        self, memory_id: int, *, kinds: Sequence[str] | None = None, user: str | None = None
    ) -> list[LinkedMemory]:
        """Open a memory's links: related research items, the decisions it builds on, reverses, or is built on by."""
        return self._research.linked_memories(memory_id, kinds=kinds, user=user)

    def source_popularity(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        days: int | None = None,
        limit: int = 10,
        user: str | None = None,
    ) -> list[SourceUse]:
        """The sources most used (cited, annotated, quoted, noted, recalled) over a period, best first."""
        return self._research.source_popularity(since=since, until=until, days=days, limit=limit, user=user)


def _count(k: int | None, limit: int | None) -> int:
    """How many hits a search returns: ``limit``, or ``k`` (its older name), else 10; both must agree."""
    if k is not None and limit is not None and k != limit:
        raise ValidationError(f"give limit or k (the same count), not both (got limit={limit}, k={k})", field="limit")
    return limit if limit is not None else k if k is not None else 10
