"""The facade's storylines: list, create, rename, archive, and why a message went where it did."""

from __future__ import annotations

from narrative.checks import require_text
from narrative.engine.core import Runtime
from narrative.errors import InvalidTransition
from narrative.model import RoutingDecision, Storyline, StorylineKind, StorylineStatus


class Storylines:
    """Storylines: list, create, rename, archive; routing decisions."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime

    def list_storylines(self, *, include_archived: bool = False, user: str | None = None) -> list[Storyline]:
        """Your Story, the defaults and every topic storyline, most recently active first."""
        return self.rt.store.list_storylines(self.rt.user_id(user), include_archived=include_archived)

    def get_storyline(self, storyline_id: int, *, user: str | None = None) -> Storyline:
        return self.rt.store.get_storyline(self.rt.user_id(user), storyline_id)

    def your_story(self, *, user: str | None = None) -> Storyline:
        return self.rt.store.get_storyline(self.rt.user_id(user), self.rt.your_story_id(self.rt.user_id(user)))

    def create_storyline(
        self, name: str, *, description: str = "", keywords: tuple[str, ...] = (), user: str | None = None
    ) -> Storyline:
        """A storyline made by the user (NarraNexus: also detected automatically from conversation)."""
        user_id = self.rt.user_id(user)
        return self.rt.store.insert_storyline(
            user_id, require_text(name, "name", 200).strip(), StorylineKind.USER, self.rt.clock(),
            description=description, keywords=tuple(k.strip().lower() for k in keywords if k.strip()),
        )

    def rename_storyline(self, storyline_id: int, name: str, *, user: str | None = None) -> Storyline:
        user_id = self.rt.user_id(user)
        storyline = self.rt.store.get_storyline(user_id, storyline_id)
        self._refuse_permanent(storyline, "rename")
        # a renamed storyline is the user's now: it keeps the name they gave it
        kind = StorylineKind.USER if storyline.kind is StorylineKind.DETECTED else storyline.kind
        return self.rt.store.update_storyline(user_id, storyline_id, name=require_text(name, "name", 200).strip(),
                                           kind=kind, updated_at=self.rt.clock())

    def archive_storyline(self, storyline_id: int, *, user: str | None = None) -> Storyline:
        user_id = self.rt.user_id(user)
        storyline = self.rt.store.get_storyline(user_id, storyline_id)
        self._refuse_permanent(storyline, "archive")
        return self.rt.store.update_storyline(user_id, storyline_id, status=StorylineStatus.ARCHIVED,
                                           updated_at=self.rt.clock())

    def routing_decisions(
        self, message_id: int | None = None, *, limit: int = 50, user: str | None = None
    ) -> list[RoutingDecision]:
        """Why messages went to their storylines: decision, candidates and scores."""
        return self.rt.store.routing_decisions(self.rt.user_id(user), message_id=message_id, limit=limit)

    @staticmethod
    def _refuse_permanent(storyline: Storyline, step: str) -> None:
        if storyline.kind is StorylineKind.YOUR_STORY:
            raise InvalidTransition(f"Your Story is permanent: it cannot be {step}d")
