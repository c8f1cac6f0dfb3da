"""The facade's research stream upkeep (ITSERR): consolidation (linking related research items), a memory's linked
items, and source popularity; what follows new research memories (their links)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from narrative.checks import require_choice, require_positive
from narrative.engine.core import Runtime
from narrative.model import LinkKind, MemoryItem, Stream
from narrative.read.linked import LinkedMemory, linked_memories
from narrative.read.popularity import SourceUse, source_popularity
from narrative.write import consolidate


class Research:
    """Consolidation, linked items and source popularity."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime

    def _judge(self) -> consolidate.ResearchJudge | None:
        if not self.rt.llm_enabled():
            return None
        from narrative.providers.llm import LLMSettings

        return consolidate.ResearchJudge(self.rt.llm, LLMSettings.from_settings(self.rt.settings))

    def consolidate(self, *, since: datetime | None = None, user: str | None = None) -> dict[str, Any]:
        """Link related research items (the items made ``since`` a time, or all) to the earlier ones."""
        user_id = self.rt.owner_id(user)
        since = _utc(since)
        pool = consolidate.research_items(self.rt.store, user_id)
        new = [m for m in pool if since is None or (m.event_at or m.created_at) >= since]
        with self.rt.store.transaction():
            made = consolidate.consolidate(self.rt.store, user_id, new, self.rt.clock(), self._judge(), pool)
        by_kind: dict[str, int] = {}
        by_origin: dict[str, int] = {}
        for link in made:
            by_kind[link.kind.value] = by_kind.get(link.kind.value, 0) + 1
            by_origin[link.origin.value] = by_origin.get(link.origin.value, 0) + 1
        return {"items": len(new), "links": len(made), "by_kind": by_kind, "by_origin": by_origin, "made": made}

    def linked_memories(
        self, memory_id: int, *, kinds: Sequence[str] | None = None, user: str | None = None
    ) -> list[LinkedMemory]:
        user_id = self.rt.reader_id(user)
        self.rt.store.get_memory(user_id, memory_id)
        chosen = None if kinds is None else [require_choice(LinkKind, k, "kinds") for k in kinds]
        return linked_memories(self.rt.store, user_id, memory_id, chosen)

    def source_popularity(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        days: int | None = None,
        limit: int = 10,
        user: str | None = None,
    ) -> list[SourceUse]:
        user_id = self.rt.reader_id(user)
        require_positive(limit, "limit")
        since, until = _utc(since), _utc(until)
        if since is None and days != 0:
            end = until or self.rt.clock()
            try:
                since = end - timedelta(days=self.rt.settings.popularity_days if days is None else days)
            except OverflowError:  # a period reaching before the calendar: all time
                since = None
        return source_popularity(self.rt.store, user_id, since, until, limit)

    def after_memories(self, user_id: str, memories: Sequence[MemoryItem]) -> None:
        """Link new research items to the earlier ones (rules, and a model when an LLM is configured)."""
        new = [m for m in memories if m.stream is Stream.RESEARCH]
        if not new:
            return
        with self.rt.store.transaction():
            consolidate.consolidate(self.rt.store, user_id, new, self.rt.clock(), self._judge())


def _utc(moment: datetime | None) -> datetime | None:
    """A time without a zone is UTC (as the store reads it)."""
    return moment if moment is None or moment.tzinfo is not None else moment.replace(tzinfo=UTC)
