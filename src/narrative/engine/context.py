"""The facade's context for the model: scene_memory context, reasoning context, uses and explanations.

Every ``context`` and ``reasoning_context`` call records a use (opt out with ``record=False``, or for
the whole engine with ``Settings(record_uses=False)``), just as ``search``/``recall`` do; ``explain``
reads a use back with its provenance, and ``learn_from_outcome`` closes the loop (design in
:mod:`narrative.read.explain`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from narrative.checks import require_choice, require_positive, require_text
from narrative.engine.conversations import Conversations
from narrative.engine.core import Runtime
from narrative.engine.searching import Search
from narrative.errors import ValidationError
from narrative.model import InfluenceType, Role, Storyline, Use, UseKind, UseReference
from narrative.providers.tokens import ApproxTokenCounter, TokenCounter
from narrative.read import explain
from narrative.read.agenda import Agenda, AgendaRules, gather
from narrative.read.context import ContextBlock, LineCachedCounter, build_context
from narrative.read.reasoning import ReasoningContext, build_reasoning
from narrative.read.search import SearchHit, hybrid_search
from narrative.store.filters import MemoryFilter

OUTCOME_SPEAKER = "narrative"
POOL_MIN = 20


class _Searcher:
    """``search(query, k, where=None)`` for the read pipelines; records nothing (the caller records one use)."""

    def __init__(self, engine: Search, user_id: str) -> None:
        self.engine = engine
        self.user_id = user_id

    def __call__(self, query: str, k: int, where: MemoryFilter | None = None, listing: bool = False) -> list[SearchHit]:
        engine = self.engine
        embed = engine.embed_query if engine.rt.embedder is not None else None  # the embedder caches queries
        # A smaller candidate pool than search()'s: every candidate is hydrated before fusion, and a
        # context wants its top k fast (each list's best 2k still feed the fusion).
        params = replace(engine.search_params(k, "hybrid"), pool=max(2 * k, POOL_MIN))
        if listing:  # a category asked for by name (decisions, tasks): the category is the relevance
            params = replace(params, similarity_floor=0.0)
        return hybrid_search(engine.rt.store, self.user_id, query, engine.rt.clock(), params, where, embed)


class Context:
    """Context for the model (scene and reasoning), uses, explanations and outcomes."""

    def __init__(self, runtime: Runtime, conversations: Conversations, search: Search) -> None:
        self.rt = runtime
        self.conversations = conversations
        self.search = search

    @property
    def token_counter(self) -> TokenCounter:
        """What budgets are measured with (``ApproxTokenCounter``, line-memoised, unless one was set)."""
        if self.rt.token_counter is None:
            self.rt.token_counter = LineCachedCounter(ApproxTokenCounter())
        return self.rt.token_counter

    @token_counter.setter
    def token_counter(self, counter: TokenCounter) -> None:
        self.rt.token_counter = counter

    def _searcher(self, user_id: str) -> _Searcher:
        """Hybrid search over this user's memories that records nothing (the caller records one use)."""
        return _Searcher(self.search, user_id)

    def _agenda(self, user_id: str) -> Callable[[Storyline | None], Agenda]:
        """The agenda (bindings of the current storyline, stale goals, decisions due) for the context block."""
        rules = AgendaRules.from_settings(self.rt.settings)

        def of(current: Storyline | None) -> Agenda:
            return gather(self.rt.store, user_id, self.rt.clock(), rules, None if current is None else current.id)

        return of

    def _recording(self, record: bool | None, user_id: str, used: bool) -> bool:
        """Whether this read records a use: as asked (or as settings say), and only for a user with a row (a use
        naming memories proves one) so that a read for a user nobody wrote for stores nothing."""
        wanted = self.rt.settings.record_uses if record is None else record
        return wanted and (used or self.rt.holds(user_id))

    # --- context ---------------------------------------------------------------------------------------

    def context(
        self, query: str, budget: int = 2000, *, record: bool | None = None, user: str | None = None
    ) -> ContextBlock:
        """The context an agent should see for ``query`` within ``budget`` tokens (see read/context.py).

        Records a use of kind ``context`` naming every memory shown (``record=False`` to skip).
        """
        user_id = self.rt.reader_id(user)
        block = build_context(
            self.rt.store,
            user_id,
            query,
            budget,
            search=self._searcher(user_id),
            counter=self.token_counter,
            agenda=self._agenda(user_id),
        )
        if not self._recording(record, user_id, bool(block.memories)):
            return block
        references = [
            UseReference(r.memory.id, InfluenceType.RETRIEVAL, round(r.score, 6), r.why, rank)
            for rank, r in enumerate(block.memories, start=1)
        ]
        meta = {
            "budget": block.budget,
            "tokens": block.tokens,
            "storyline_id": None if block.storyline is None else block.storyline.id,
        }
        use = self._insert_use(user_id, UseKind.CONTEXT, query, references, meta)
        return replace(block, use_id=use.id)

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
        """Memories, open threads and a prompt section for classifying, decomposing or verifying ``request``.

        Records a use of that kind; each reference carries its influence type (rule in read/reasoning.py).
        """
        user_id = self.rt.reader_id(user)
        found = build_reasoning(
            self.rt.store,
            user_id,
            request,
            kind,
            top_k,
            search=self._searcher(user_id),
            include_active_entities=include_active_entities,
        )
        if not self._recording(record, user_id, bool(found.memories)):
            return found
        meta = {"top_k": top_k, "include_active_entities": include_active_entities}
        use = self._insert_use(user_id, found.kind, request, found.references(), meta)
        return replace(found, use_id=use.id)

    # --- uses --------------------------------------------------------------------------------------------

    def _insert_use(
        self,
        user_id: str,
        kind: UseKind,
        query: str,
        references: Sequence[UseReference],
        meta: dict[str, Any],
        outcome: str | None = None,
    ) -> Use:
        active = self.rt.store.active_conversation(user_id)
        return self.rt.store.insert_use(
            user_id,
            kind,
            query,
            references,
            self.rt.clock(),
            conversation_id=None if active is None else active.id,
            outcome=outcome,
            meta=meta,
        )

    def record_use(self, kind: str, query: str, references: Iterable[object] = (), *, user: str | None = None) -> Use:
        """Store which memories influenced a decision.

        ``references``: items ``(memory_id, influence_type, score, reasoning)`` (score and reasoning
        optional), dicts with those keys, or ``UseReference``s. Unknown memories raise NotFound, a bad
        influence type or score ValidationError; nothing is stored then.
        """
        user_id = self.rt.reader_id(user)
        chosen = require_choice(UseKind, kind, "kind")
        require_text(query, "query", max_length=10_000)
        with self.rt.store.transaction():
            refs = explain.check_references(self.rt.store, user_id, references)
            self.rt.user_id(user_id)  # the use is stored: its user is made now that what it names was found
            return self._insert_use(user_id, chosen, query, refs, {})

    def list_uses(self, limit: int = 50, *, offset: int = 0, user: str | None = None) -> list[Use]:
        """Uses, newest first."""
        require_positive(limit, "limit")
        require_positive(offset, "offset", allow_zero=True)
        return self.rt.store.list_uses(self.rt.reader_id(user), limit=limit, offset=offset)

    def get_use(self, use_id: int, *, user: str | None = None) -> Use:
        return self.rt.store.get_use(self.rt.reader_id(user), use_id)

    def explain(self, use_id: int, *, user: str | None = None) -> dict[str, Any]:
        """Which memories a use drew on, why, and from which messages (provenance), plus its outcomes."""
        return explain.explain_use(self.rt.store, self.rt.reader_id(user), use_id)

    def influence_chain(self, memory_id: int, limit: int = 20, *, user: str | None = None) -> list[Use]:
        """Every use of a memory since it was made, newest first."""
        return explain.influence_chain(self.rt.store, self.rt.reader_id(user), memory_id, limit)

    def learn_from_outcome(
        self, use_id: int, outcome: str, correction: str | None = None, *, user: str | None = None
    ) -> Use:
        """Record how a use turned out: ``approved``, ``corrected`` (needs ``correction``) or ``rejected``.

        Stores a new use of kind ``outcome`` linked to the judged one (``meta["use_id"]``) with its
        references; when a conversation is active, also appends a system message describing the outcome
        to it (so the transcript keeps it and the close path compresses it with the rest).
        """
        user_id = self.rt.owner_id(user)
        verdict = require_choice(explain.Outcome, outcome, "outcome")
        note = None
        if correction is not None:
            note = require_text(correction, "correction", max_length=4000).strip()
        if verdict is explain.Outcome.CORRECTED and not note:
            raise ValidationError("a 'corrected' outcome needs the correction", "correction")
        judged = self.rt.store.get_use(user_id, use_id)
        if judged.kind is UseKind.OUTCOME:
            raise ValidationError("an outcome cannot itself be judged; judge the original use", "use_id")
        text, references, meta = explain.outcome_record(judged, verdict, note)
        with self.rt.store.transaction():
            active = self.rt.store.active_conversation(user_id)
            if active is not None:
                message = self.conversations.add_message(
                    text,
                    Role.SYSTEM.value,
                    speaker=OUTCOME_SPEAKER,
                    conversation_id=active.id,
                    meta={"type": "system_learning", "use_id": judged.id, "outcome": verdict.value},
                    user=user_id,
                )
                meta["message_id"] = message.id
            return self._insert_use(user_id, UseKind.OUTCOME, judged.query, references, meta, verdict.value)
