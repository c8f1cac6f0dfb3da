"""MCP tools for what a storyline carries and what a decision or a source did: storyline bindings and stale goals
(NarraNexus), decision chains and the decision audit, consolidation, linked items and source popularity (ITSERR).

Written against the engine facade only, like :mod:`narrative.interfaces.mcp_tools` (same ``tool`` marking).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from narrative.interfaces.mcp_tools import plain_dict, tool, with_text
from narrative.interfaces.numbers import Int
from narrative.interfaces.serialize import plain

if TYPE_CHECKING:
    from narrative.engine import Memory

BindingKind = Literal["toolset", "job", "goal", "module"]
BindingId = Annotated[Int, Field(description="The binding (see list_bindings).")]
DecisionId = Annotated[Int, Field(description="A memory of the decision stream (see recall or search_memories).")]


class AgendaTools:
    """Bindings, goals, decision chains and audit, research links and sources over one :class:`narrative.Memory`."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    # --- bindings (NarraNexus) ---------------------------------------------------------------------

    @tool(destructive=False, aliases={"act_id": "storyline_id"})
    def bind_to_storyline(
        self,
        storyline_id: Annotated[Int, Field(description="The storyline it belongs to (see list_storylines).")],
        kind: Annotated[BindingKind, Field(description="toolset, job, goal or module (a chat, a study session…).")],
        name: Annotated[str, Field(description="Its name, e.g. 'Launch before spring' or 'map tools'.")],
        status: Annotated[
            str | None,
            Field(
                description="job: running|pending|paused|done|failed|cancelled; goal: ongoing|paused|achieved|"
                "abandoned; toolset: active|retired; module: active|closed. Omit for the first."
            ),
        ] = None,
        payload: Annotated[
            dict[str, Any] | None, Field(description='Any JSON object, e.g. {"tools": ["draw_map"]}.')
        ] = None,
    ) -> dict[str, Any]:
        """Bind a tool set, a job, a goal or another module instance to the storyline it belongs to, so switching
        topics switches what is active. Binding the same kind and name there again updates it.

        A final status (done, achieved, retired, closed…) moves it to history. Returns {binding: {id, kind, name,
        status, payload, touched_at, completed_at, ...}}.
        """
        found = self.memory.bind(storyline_id, kind, name, status=status, payload=payload)
        return {"binding": plain_dict(found)}

    @tool(destructive=False)
    def update_binding(
        self,
        binding_id: BindingId,
        status: Annotated[str | None, Field(description="Its new status (a final one moves it to history).")] = None,
        payload: Annotated[dict[str, Any] | None, Field(description="Its new payload (replaced whole).")] = None,
        name: Annotated[str | None, Field(description="Its new name.")] = None,
    ) -> dict[str, Any]:
        """Change a binding: its status (a job's progress, a goal's state), payload or name. It counts as touched,
        so a goal you update is not stale. Returns {binding: {...}}."""
        return {
            "binding": plain_dict(self.memory.update_binding(binding_id, status=status, payload=payload, name=name))
        }

    @tool(destructive=False)
    def complete_binding(
        self,
        binding_id: BindingId,
        status: Annotated[str | None, Field(description="A final status; omit for done / achieved / retired.")] = None,
    ) -> dict[str, Any]:
        """Move a binding to history: the job is done, the goal achieved, the tool set retired.
        Returns {binding: {..., completed_at}}."""
        return {"binding": plain_dict(self.memory.complete_binding(binding_id, status=status))}

    @tool(read_only=True, aliases={"act_id": "storyline_id"})
    def list_bindings(
        self,
        storyline_id: Annotated[Int | None, Field(description="One storyline's; omit for every storyline.")] = None,
        kind: Annotated[BindingKind | None, Field(description="Only this kind.")] = None,
        history: Annotated[bool, Field(description="Completed bindings instead of live ones.")] = False,
    ) -> dict[str, Any]:
        """What is bound to the storylines: tool sets, jobs with their status, goals with their state.
        Returns {bindings: [{id, storyline_id, kind, name, status, payload, touched_at, touched_by, ...}]}."""
        return {"bindings": plain(self.memory.list_bindings(storyline_id, kind=kind, history=history))}

    @tool(read_only=True)
    def get_stale_goals(
        self,
        days: Annotated[Int | None, Field(ge=0, description="Untouched this many days; omit for the setting.")] = None,
    ) -> dict[str, Any]:
        """Long-running goals that nothing has touched for a while, so you can remind the user and pick them back
        up. Returns {goals: [{binding_id, goal, storyline, why: {rule, touched_at, touched_by, quiet_days}}]}."""
        return {"goals": [g.to_dict() for g in self.memory.stale_goals(days)]}

    # --- decisions (ITSERR) --------------------------------------------------------------------------

    @tool(destructive=False)
    def link_decision(
        self,
        memory_id: DecisionId,
        earlier_id: Annotated[Int, Field(description="The earlier decision it builds on or reverses.")],
        kind: Annotated[Literal["builds_on", "reverses"], Field(description="How the two relate.")] = "builds_on",
        reason: Annotated[str, Field(description="Why, in a few words.")] = "",
    ) -> dict[str, Any]:
        """Record that a decision builds on or reverses an earlier one (new decisions are linked automatically
        too; use this when the user says so). Returns {link: {memory_id, linked_id, kind, origin, reason}}."""
        return {"link": plain_dict(self.memory.link_decision(memory_id, earlier_id, kind, reason=reason))}

    @tool(read_only=True)
    def get_decision_chain(self, memory_id: DecisionId) -> dict[str, Any]:
        """How one decision influenced others: what it built on or reversed, and what built on or reversed it,
        both ways, each link with its reason. Returns {memory_id, stands, earlier: [...], later: [...], text}."""
        return with_text(self.memory.decision_chain(memory_id))

    @tool(read_only=True)
    def get_decisions_to_review(
        self, limit: Annotated[Int, Field(ge=1, le=100, description="How many at most.")] = 5
    ) -> dict[str, Any]:
        """Decisions due for a periodic audit (old ones, and reversible ones never revisited), each with its
        rationale, rejected alternatives and a question to ask the user. Answer with review_decision.
        Returns {decisions: [{memory_id, decision, rationale, alternatives, question, why}]}."""
        return {"decisions": [d.to_dict() for d in self.memory.decisions_to_review(limit=limit)]}

    @tool(destructive=False)
    def review_decision(
        self,
        memory_id: DecisionId,
        outcome: Annotated[Literal["kept", "reversed"], Field(description="Does the decision still stand?")],
        note: Annotated[str, Field(description="What the user said, briefly.")] = "",
    ) -> dict[str, Any]:
        """Record the user's answer to a decision audit prompt: kept (asked again later) or reversed (never
        again). Returns {review: {id, memory_id, outcome, note, created_at}}."""
        return {"review": plain_dict(self.memory.review_decision(memory_id, outcome, note=note))}

    # --- research (ITSERR) ----------------------------------------------------------------------------

    @tool(destructive=False)
    def consolidate_research(self) -> dict[str, Any]:
        """Link research items (citations, annotations, quotes, notes) about the same work, author or idea; they
        are linked, never merged. Safe to run again. Returns {items, links, by_kind, by_origin}."""
        found = self.memory.consolidate()
        return {k: v for k, v in found.items() if k != "made"}

    @tool(read_only=True)
    def open_linked(
        self, memory_id: Annotated[Int, Field(description="A memory, e.g. a hit of recall or search_memories.")]
    ) -> dict[str, Any]:
        """Open a memory's linked items: research items about the same work, author or idea, and the decisions it
        builds on or reverses (or that build on or reverse it). Returns {linked: [{memory_id, content, kind,
        direction, why}]}."""
        return {"linked": [item.to_dict() for item in self.memory.linked_memories(memory_id)]}

    @tool(read_only=True)
    def get_popular_sources(
        self,
        days: Annotated[
            Int | None, Field(ge=0, description="The last N days (0 = all time); omit for the setting.")
        ] = None,
        limit: Annotated[Int, Field(ge=1, le=100, description="How many sources.")] = 10,
    ) -> dict[str, Any]:
        """Which sources were most used over a period: cited, annotated, quoted, noted and recalled, best first.
        Returns {sources: [{source, author, work_title, score, cited, annotated, quoted, noted, recalled, why}]}."""
        return {"sources": [s.to_dict() for s in self.memory.source_popularity(days=days, limit=limit)]}


__all__ = ["AgendaTools"]
