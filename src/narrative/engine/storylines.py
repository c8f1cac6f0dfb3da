"""The facade's storylines: list, create, rename, archive, and why a message went where it did."""

from __future__ import annotations

from narrative.checks import require_text
from narrative.engine.core import Runtime
from narrative.model import RoutingDecision, Storyline
from narrative.write import storylines


class Storylines:
    """Storylines: list, create, rename, archive; routing decisions."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime

    def list_storylines(self, *, include_archived: bool = False, user: str | None = None) -> list[Storyline]:
        """Your Story, the defaults and every topic storyline, most recently active first."""
        return self.rt.store.list_storylines(self.rt.reader_id(user), include_archived=include_archived)

    def get_storyline(self, storyline_id: int, *, user: str | None = None) -> Storyline:
        return self.rt.store.get_storyline(self.rt.reader_id(user), storyline_id)

    def your_story(self, *, user: str | None = None) -> Storyline:
        """The user's Your Story, made with the user when missing: it is the id writes file under (``add_memory(...,
        storyline_id=mem.your_story().id)``), so, unlike the reads, it creates the user on first sight."""
        return storylines.your_story(self.rt.store, self.rt.user_id(user), self.rt.clock())

    def create_storyline(
        self, name: str, *, description: str = "", keywords: tuple[str, ...] = (), user: str | None = None
    ) -> Storyline:
        """A storyline made by the user (NarraNexus: also detected automatically from conversation)."""
        self.rt.reader_id(user)
        name = require_text(name, "name", 200).strip()  # checked before the user is made: a refused name makes none
        user_id = self.rt.user_id(user)
        return storylines.create_by_hand(self.rt.store, user_id, name, description, keywords, self.rt.clock())

    def rename_storyline(self, storyline_id: int, name: str, *, user: str | None = None) -> Storyline:
        user_id = self.rt.owner_id(user)
        name = require_text(name, "name", 200).strip()
        return storylines.rename(self.rt.store, user_id, storyline_id, name, self.rt.clock())

    def archive_storyline(self, storyline_id: int, *, user: str | None = None) -> Storyline:
        return storylines.archive(self.rt.store, self.rt.owner_id(user), storyline_id, self.rt.clock())

    def routing_decisions(
        self, message_id: int | None = None, *, limit: int = 50, user: str | None = None
    ) -> list[RoutingDecision]:
        """Why messages went to their storylines: decision, candidates and scores."""
        return self.rt.store.routing_decisions(self.rt.reader_id(user), message_id=message_id, limit=limit)
