"""Filters the read path hands to any store (a value, not SQL)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from narrative.errors import ValidationError
from narrative.model import EntityType, Source, Stream
from narrative.store.filter_tree import Node


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories a query may see.  ``None`` means "no restriction" for that field.

    The user is never part of the filter: every store call takes the user id
    separately and always applies it.
    """

    conversation_ids: Sequence[int] | None = None
    storyline_ids: Sequence[int] | None = None
    streams: Sequence[Stream] | None = None
    sources: Sequence[Source] | None = None
    entity_types: Sequence[EntityType] | None = None
    since: datetime | None = None
    until: datetime | None = None
    min_importance: int | None = None
    current_only: bool = False  # only memories nothing superseded (valid_to unset)
    as_of: datetime | None = None  # only memories that existed and were current at this time
    match: Node | None = None  # conditions joined by AND/OR/NOT (store/filter_tree.py: parse_filters)
    limit: int | None = None
    offset: int = 0

    def __post_init__(self) -> None:
        if self.since is not None and self.until is not None and self.since > self.until:
            raise ValidationError(  # a reversed range matches nothing: say so, not "no memories match"
                f"since ({self.since.isoformat()}) is after until ({self.until.isoformat()})", field="since"
            )

    @property
    def is_open(self) -> bool:
        """True when nothing but the user restricts the query."""
        return (
            all(
                value is None
                for value in (
                    self.conversation_ids,
                    self.storyline_ids,
                    self.streams,
                    self.sources,
                    self.entity_types,
                    self.since,
                    self.until,
                    self.min_importance,
                    self.as_of,
                    self.match,
                )
            )
            and not self.current_only
        )
