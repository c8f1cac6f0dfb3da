"""The facade's storyline bindings (NarraNexus): bind, update, complete, list; stale goals; what follows a turn
(the routed storyline's bindings on the result, goals the turn named touched) and a close (a model's judgement of
the goals the conversation moved)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from narrative.checks import require_choice
from narrative.engine.core import Runtime
from narrative.model import Binding, BindingKind
from narrative.read import agenda
from narrative.read.agenda import GoalReminder
from narrative.write import bindings
from narrative.write.turn_types import TurnResult


class Bindings:
    """Named instances bound to storylines, and the goals among them that went quiet."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime

    def bind(
        self,
        storyline_id: int,
        kind: str,
        name: str,
        *,
        status: str | None = None,
        payload: Mapping[str, Any] | None = None,
        at: datetime | None = None,
        user: str | None = None,
    ) -> Binding:
        user_id = self.rt.owner_id(user)
        chosen = require_choice(BindingKind, kind, "kind")
        with self.rt.store.transaction():
            return bindings.bind(
                self.rt.store, user_id, storyline_id, chosen, name, status, payload, at or self.rt.clock()
            )

    def update_binding(
        self,
        binding_id: int,
        *,
        status: str | None = None,
        payload: Mapping[str, Any] | None = None,
        name: str | None = None,
        at: datetime | None = None,
        user: str | None = None,
    ) -> Binding:
        user_id = self.rt.owner_id(user)
        with self.rt.store.transaction():
            found = self.rt.store.get_binding(user_id, binding_id)
            return bindings.update(
                self.rt.store, user_id, found, status=status, payload=payload, name=name, now=at or self.rt.clock()
            )

    def complete_binding(
        self, binding_id: int, *, status: str | None = None, at: datetime | None = None, user: str | None = None
    ) -> Binding:
        user_id = self.rt.owner_id(user)
        with self.rt.store.transaction():
            found = self.rt.store.get_binding(user_id, binding_id)
            return bindings.complete(self.rt.store, user_id, found, at or self.rt.clock(), status)

    def delete_binding(self, binding_id: int, *, user: str | None = None) -> dict[str, int]:
        return bindings.delete(self.rt.store, self.rt.owner_id(user), binding_id)

    def list_bindings(
        self,
        storyline_id: int | None = None,
        *,
        kind: str | None = None,
        history: bool = False,
        user: str | None = None,
    ) -> list[Binding]:
        user_id = self.rt.reader_id(user)
        kinds = None if kind is None else [require_choice(BindingKind, kind, "kind")]
        return agenda.bindings_of(self.rt.store, user_id, storyline_id, kinds, history)

    def stale_goals(self, days: int | None = None, *, user: str | None = None) -> list[GoalReminder]:
        user_id = self.rt.reader_id(user)
        wait = self.rt.settings.goal_stale_days if days is None else days
        return agenda.stale_goals(self.rt.store, user_id, self.rt.clock(), wait)

    # --- what follows a turn and a close ------------------------------------------------------------

    def after_turns(self, user_id: str, results: Sequence[TurnResult]) -> None:
        """Touch the goals the turns named; give each result its storyline's live bindings and the binding
        names of up to two other recent storylines (NarraNexus: what the storyline carries into the turn)."""
        live = bindings.after_turns(self.rt.store, user_id, [(r.message, r.storyline.id) for r in results])
        carried = agenda.carried(self.rt.store, user_id, live, [r.storyline.id for r in results])
        for result in results:
            result.bindings, result.auxiliary = carried[result.storyline.id]

    def after_close(self, user_id: str, conversation_id: int) -> None:
        """With an LLM: ask which live goals of the conversation's storylines it moved, achieved or abandoned."""
        if not self.rt.llm_enabled():
            return
        from narrative.providers.llm import LLMSettings

        judge = bindings.GoalJudge(self.rt.llm, LLMSettings.from_settings(self.rt.settings))
        bindings.after_close(self.rt.store, user_id, conversation_id, judge)
