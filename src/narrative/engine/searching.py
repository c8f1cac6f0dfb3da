"""The facade's read path: hybrid search, recall with the chain, and use recording."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np

from narrative.checks import require_choice, require_flag, require_positive, require_score, require_text, require_time
from narrative.engine.core import Runtime
from narrative.model import EntityType, InfluenceType, Source, Stream, Use, UseKind, UseReference
from narrative.read import chain
from narrative.read.search import SearchHit, SearchMode, SearchParams, Weights, hybrid_search
from narrative.store.filter_tree import parse_filters
from narrative.store.filters import MemoryFilter


class Search:
    """Hybrid search and recall over a user's memories (each call records a use)."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime

    def search_params(self, k: int, mode: str, min_score: float = 0.0) -> SearchParams:
        s = self.rt.settings
        floor = s.similarity_floor
        if floor < 0:
            floor = float(getattr(self.rt.embedder, "similarity_floor", 0.0)) if self.rt.embedder is not None else 0.0
        return SearchParams(
            k=require_positive(k, "k"),
            pool=max(100, 2 * k),
            rrf_k=s.rrf_k,
            half_life_days=s.recency_half_life_days,
            mode=require_choice(SearchMode, mode, "mode"),
            stream_weights={name: Weights(w.semantic, w.recency) for name, w in s.stream_weights.items()},
            keyword_weight=s.keyword_weight,
            vector_weight=s.vector_weight,
            similarity_floor=floor,
            summary_weight=s.summary_weight,
            min_score=require_score(min_score),
        )

    def embed_query(self, text: str) -> tuple[np.ndarray, str]:
        embedder = self.rt.embedder
        assert embedder is not None
        from narrative.providers.embed import embed_one

        return embed_one(embedder, text), embedder.identity

    def search(
        self,
        query: str,
        k: int = 10,
        *,
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
        """Hybrid search over this user's memories; every hit carries ``why()``.

        By default every conversation (session) is searched — cross-session search;
        pass ``conversation_id``/``conversation_ids`` to isolate sessions.  A memory needs evidence of its own to
        be returned (a query word, or a cosine similarity at the embedder's floor), so a query with nothing
        relevant returns nothing; ``min_score`` (0–1) drops weaker hits too.  No message is shown by two hits:
        ``hit.text`` is what to show a reader, ``hit.also`` the memories folded into the hit.

        Only what is current is returned: a statement a later one superseded ("I live in Lisbon now, not
        Berlin") is left out, and named in the newer hit's ``why()``.  ``include_superseded=True`` returns it
        too; ``as_of`` a time returns what was current then.

        ``filters``: conditions on fields and metadata joined by AND/OR/NOT (mem0's grammar,
        :mod:`narrative.store.filter_tree`); they hold with the flat filters above (all must pass).
        """
        recording = self.rt.settings.record_uses if record is None else record
        user_id = self.rt.reader_id(user)
        require_text(query, "query", max_length=10_000)
        ids = list(conversation_ids or []) + ([conversation_id] if conversation_id is not None else [])
        where = MemoryFilter(
            conversation_ids=ids or None,
            storyline_ids=None if storyline_id is None else [storyline_id],
            streams=None if streams is None else [require_choice(Stream, s, "streams") for s in streams],
            sources=None if sources is None else [require_choice(Source, s, "sources") for s in sources],
            entity_types=None
            if entity_types is None
            else [require_choice(EntityType, t, "entity_types") for t in entity_types],
            since=since,
            until=until,
            match=parse_filters(filters),
        )
        params = replace(
            self.search_params(k, mode, min_score),
            include_superseded=require_flag(include_superseded, "include_superseded"),
            as_of=None if as_of is None else require_time(as_of, "as_of"),
        )
        embed = self.embed_query if self.rt.embedder is not None else None
        hits = hybrid_search(self.rt.store, user_id, query, self.rt.clock(), params, where, embed)
        if recording and (hits or self.rt.holds(user_id)):  # a user nobody wrote for: nothing is stored
            self._record_hits(user_id, UseKind.RECALL, query, hits)
        return hits

    def recall(
        self, query: str, k: int = 10, *, depth: int = 1, user: str | None = None, **filters: object
    ) -> list[tuple[SearchHit, chain.RecallChain]]:
        """Search, then open each hit into its recall chain (narrative, siblings, earlier links)."""
        hits = self.search(query, k, user=user, **filters)  # type: ignore[arg-type]
        user_id = self.rt.reader_id(user)
        return [(hit, chain.recall_chain(self.rt.store, user_id, hit.memory.id, depth)) for hit in hits]

    def _record_hits(
        self,
        user_id: str,
        kind: UseKind,
        query: str,
        hits: Sequence[SearchHit],
        influence: InfluenceType = InfluenceType.RETRIEVAL,
        meta: dict[str, object] | None = None,
    ) -> Use:
        references = [
            UseReference(
                memory_id=hit.memory.id,
                influence_type=influence,
                score=round(hit.score, 6),
                reasoning=str(hit.why()["summary"]),
                rank=rank,
            )
            for rank, hit in enumerate(hits, start=1)
        ]
        active = self.rt.store.active_conversation(user_id)
        return self.rt.store.insert_use(
            user_id,
            kind,
            query,
            references,
            self.rt.clock(),
            conversation_id=None if active is None else active.id,
            meta=meta,
        )
