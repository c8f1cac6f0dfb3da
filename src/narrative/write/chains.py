"""Decision chains (ITSERR): "Decision chains tracked (how one decision influenced others)".

A decision (a memory of the ``decision`` stream) records the earlier decisions it **builds on** or **reverses**
as links (``memory_links``: the new decision → the earlier one).  The user or agent can record a link by hand
(:func:`link`); every new decision is also compared with the user's earlier ones (:func:`propose_links`).

Without an LLM the rules are these (each link's ``reason`` names the rule that made it):

* **reverses** — the new decision rejects what the earlier one chose (the earlier choice's words are among the
  new one's alternatives: "Postgres instead of SQLite" after "go with SQLite"), or chooses what the earlier one
  rejected ("Firebase after all" after "SQLite instead of Firebase"), or says it is a reversal ("after all",
  "no longer", "changed our minds", "switch back" …) while naming the earlier choice;
* **builds on** — otherwise, the new decision names the earlier choice and either says it builds on it ("since we
  went with", "given that we chose", "building on", "now that we" …) or names every word of it.

At most :data:`MAX_LINKS` links per decision, the strongest first.  With an LLM the model judges the same
candidates (:class:`ChainJudge`); a failed or malformed answer falls back to the rules.

A reversal means the earlier decision no longer stands: :func:`on_reversal` is called for each one.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from narrative.errors import InvalidTransition, ValidationError
from narrative.model import DecisionDetails, EventKind, LinkKind, LinkOrigin, MemoryItem, MemoryLink, Stream
from narrative.store.filters import MemoryFilter
from narrative.store.protocol import Store
from narrative.text.words import word_keys
from narrative.write import history, supersede

if TYPE_CHECKING:
    from narrative.providers.llm import LLM, LLMSettings

__all__ = [
    "MAX_LINKS",
    "ChainJudge",
    "decision_of",
    "earlier_decisions",
    "link",
    "on_reversal",
    "propose_links",
    "record_links",
]

log = logging.getLogger("narrative.write")

MAX_LINKS = 3  # links one decision makes at most
MAX_CANDIDATES = 8  # earlier decisions a model is shown
CANDIDATE_POOL = 200  # earlier decisions compared by the rules (newest first)
_GENERIC = frozenset({"switch", "use", "keep", "stick", "move", "adopt", "choose", "pick", "start", "stop", "try"})
_REVERSAL = re.compile(
    r"\b(?:after\s+all|no\s+longer|not\s+any\s*more|changed?\s+(?:my|our)\s+minds?|revers(?:e|ed|ing)|"
    r"switch(?:ed|ing)?\s+back|go(?:ing)?\s+back\s+to|went\s+back\s+to|scrap(?:ped|ping)?|drop(?:ped|ping)?\s+"
    r"(?:the|our|my)\s+(?:plan|idea|decision)|abandon(?:ed|ing)?|instead\s+of\s+what\s+(?:we|i)\s+(?:decided|chose)|"
    r"rethink|rethought|undo|on\s+second\s+thought)\b",
    re.IGNORECASE,
)
_BUILDS = re.compile(
    r"\b(?:since\s+(?:we|i)(?:'re|\s+are|\s+am)?\s+(?:went|go(?:ing)?|chose|decided|picked|settled|opted|on|using)|"
    r"given\s+(?:that\s+)?(?:we|i)\s+(?:chose|picked|went|decided|use)|build(?:s|ing)?\s+on|"
    r"based\s+on\s+(?:the|our|my)\s+(?:decision|choice)|now\s+that\s+(?:we|i)|"
    r"following\s+(?:the|our|my)\s+(?:decision|choice)|as\s+(?:we|i)\s+(?:decided|chose|agreed)|"
    r"because\s+(?:we|i)\s+(?:chose|went\s+with|picked|decided)|with\s+(?:that|this)\s+(?:decided|settled|in\s+place))",
    re.IGNORECASE,
)


def decision_of(memory: MemoryItem) -> DecisionDetails:
    """A decision memory's details (a hand-made decision without details is its own text)."""
    details = memory.details
    return details if isinstance(details, DecisionDetails) else DecisionDetails(decision=memory.content)


def _choice(memory: MemoryItem) -> set[str]:
    """The words of what a decision chose (its object), without verbs that only say "choose"."""
    details = decision_of(memory)
    keys = word_keys(details.decision or memory.content) - _GENERIC
    return keys or word_keys(memory.content) - _GENERIC


def _rejected(memory: MemoryItem) -> set[str]:
    return word_keys(" ".join(decision_of(memory).alternatives_considered)) - _GENERIC


def _said(memory: MemoryItem) -> str:
    details = decision_of(memory)
    return " ".join([memory.content, details.decision, details.rationale])


@dataclass(frozen=True)
class _Proposal:
    earlier: MemoryItem
    kind: LinkKind
    reason: str
    strength: float


def _compare(new: MemoryItem, earlier: MemoryItem) -> _Proposal | None:
    """The rule that links ``new`` to ``earlier``, if any (module docstring)."""
    if new.content.strip().casefold() == earlier.content.strip().casefold():
        return None  # the same decision said again is not a chain
    chose, said = _choice(earlier), word_keys(_said(new))
    named = sorted(chose & said)
    rejects = sorted(chose & _rejected(new))
    if rejects:
        return _Proposal(earlier, LinkKind.REVERSES, f"rejects {', '.join(rejects)}, which #{earlier.id} chose", 1.0)
    takes = sorted(_choice(new) & _rejected(earlier))
    if takes:
        return _Proposal(earlier, LinkKind.REVERSES, f"chooses {', '.join(takes)}, which #{earlier.id} rejected", 1.0)
    if not named:
        return None
    cue = _REVERSAL.search(new.content)
    if cue:
        reason = f"says “{cue.group(0)}” and names {', '.join(named)} of #{earlier.id}"
        return _Proposal(earlier, LinkKind.REVERSES, reason, 0.8)
    cue = _BUILDS.search(new.content)
    if cue:
        reason = f"says “{cue.group(0)}” and names {', '.join(named)}, what #{earlier.id} chose"
        return _Proposal(earlier, LinkKind.BUILDS_ON, reason, 0.7 + 0.1 * len(named))
    if chose <= said:
        reason = f"names {', '.join(named)}: all of what #{earlier.id} chose"
        return _Proposal(earlier, LinkKind.BUILDS_ON, reason, 0.5 + 0.1 * len(named))
    return None


def _rule_links(new: MemoryItem, earlier: Sequence[MemoryItem], now: datetime) -> list[MemoryLink]:
    found = [p for p in (_compare(new, e) for e in earlier) if p is not None]
    found.sort(key=lambda p: (-p.strength, -p.earlier.id))
    return [
        MemoryLink(new.user_id, new.id, p.earlier.id, p.kind, LinkOrigin.RULE, now, p.reason, round(p.strength, 3))
        for p in found[:MAX_LINKS]
    ]


def earlier_decisions(store: Store, user_id: str, new: MemoryItem) -> list[MemoryItem]:
    """The user's decisions made before ``new`` (newest first, at most :data:`CANDIDATE_POOL`)."""
    found = store.list_memories(user_id, MemoryFilter(streams=[Stream.DECISION], limit=CANDIDATE_POOL + 50))
    return [m for m in found if m.id < new.id][:CANDIDATE_POOL]


def propose_links(
    store: Store, user_id: str, new: MemoryItem, now: datetime, judge: ChainJudge | None = None
) -> list[MemoryLink]:
    """The links a new decision makes: the model's judgement when it answers well, else the rules'."""
    earlier = earlier_decisions(store, user_id, new)
    if not earlier:
        return []
    if judge is not None:
        judged = judge.links(new, _candidates(new, earlier), now)
        if judged is not None:
            return judged
    return _rule_links(new, earlier, now)


def _candidates(new: MemoryItem, earlier: Sequence[MemoryItem]) -> list[MemoryItem]:
    """What a model is shown: the earlier decisions sharing the most words with the new one, then the newest."""
    said = word_keys(_said(new)) | _rejected(new)
    ranked = sorted(earlier, key=lambda e: (-len((_choice(e) | _rejected(e)) & said), -e.id))
    return ranked[:MAX_CANDIDATES]


def record_links(store: Store, user_id: str, links: Sequence[MemoryLink], now: datetime) -> int:
    """Store links (those already there are kept as they are); each new reversal calls :func:`on_reversal`."""
    existing = {(k.memory_id, k.linked_id, k.kind) for k in store.memory_links(user_id, [k.memory_id for k in links])}
    fresh = [k for k in links if (k.memory_id, k.linked_id, k.kind) not in existing]
    added = store.insert_memory_links(fresh)
    for item in fresh:
        if item.kind is LinkKind.REVERSES:
            on_reversal(store, user_id, item.linked_id, item.memory_id, now)
    return added


def link(
    store: Store, user_id: str, memory_id: int, earlier_id: int, kind: LinkKind, reason: str, now: datetime
) -> MemoryLink:
    """Record by hand that a decision builds on or reverses an earlier one (both decisions of this user)."""
    if kind not in (LinkKind.BUILDS_ON, LinkKind.REVERSES):
        raise ValidationError("a decision builds_on or reverses an earlier one", field="kind")
    if memory_id == earlier_id:
        raise ValidationError("a decision cannot build on or reverse itself", field="earlier_id")
    later, earlier = store.get_memory(user_id, memory_id), store.get_memory(user_id, earlier_id)
    for memory, field in ((later, "memory_id"), (earlier, "earlier_id")):
        if memory.stream is not Stream.DECISION:
            raise ValidationError(f"memory {memory.id} is not a decision (stream {memory.stream.value})", field=field)
    if (later.event_at or later.created_at, later.id) < (earlier.event_at or earlier.created_at, earlier.id):
        raise InvalidTransition(f"decision {memory_id} was made before {earlier_id}: link the later one to the earlier")
    other = LinkKind.REVERSES if kind is LinkKind.BUILDS_ON else LinkKind.BUILDS_ON
    _unlink(store, user_id, memory_id, earlier_id, other, now)
    made = MemoryLink(user_id, memory_id, earlier_id, kind, LinkOrigin.USER, now, reason.strip() or "recorded", 1.0)
    record_links(store, user_id, [made], now)
    return made


def _unlink(store: Store, user_id: str, later_id: int, earlier_id: int, kind: LinkKind, now: datetime) -> None:
    """A decision builds on an earlier one or reverses it, not both: a link by hand of the other kind replaces
    this one.  A reversal taken back makes the earlier decision current again (a ``restored`` event says why)."""
    held = store.memory_links(user_id, [later_id], kinds=[kind])
    if not any(k.memory_id == later_id and k.linked_id == earlier_id for k in held):
        return
    store.delete_memory_link(user_id, later_id, earlier_id, kind)
    if kind is LinkKind.REVERSES and store.get_memory(user_id, earlier_id).superseded_by == later_id:
        why = f"decision {later_id} builds on it instead of reversing it"
        supersede.restore(store, user_id, earlier_id, now, why)


def on_reversal(store: Store, user_id: str, earlier_id: int, later_id: int, now: datetime) -> None:
    """A decision (``later_id``) reversed an earlier one (``earlier_id``): the earlier no longer stands.

    The ``reverses`` link is the chain's record; the earlier decision is also superseded by the later one
    (``valid_to``, ``superseded_by``, a ``superseded`` event in its history), so every reader (search, context,
    the greeting, the audit) takes the later decision as the current one.  Nothing is deleted; ``restore_memory``
    undoes it.
    """
    earlier = store.get_memories(user_id, [earlier_id])
    for ident in store.supersede_memories(user_id, [earlier_id], later_id, now):
        old = earlier[0].content if earlier else ""
        history.record(store, user_id, ident, EventKind.SUPERSEDED, old, old, now, {"superseded_by": later_id})
    log.debug("decision %s reverses decision %s (user %s, %s)", later_id, earlier_id, user_id, now.isoformat())


# --- the model's judgement ----------------------------------------------------------------------------


def _decision_line(memory: MemoryItem) -> dict[str, Any]:
    details = decision_of(memory)
    return {
        "id": memory.id,
        "decided": (memory.event_at or memory.created_at).date().isoformat(),
        "decision": details.decision or memory.content,
        "rationale": details.rationale,
        "rejected": list(details.alternatives_considered),
    }


class ChainJudge:
    """Asks a model which earlier decisions a new one builds on or reverses (one call per decision)."""

    def __init__(self, llm: LLM, limits: LLMSettings) -> None:
        self.llm, self.limits = llm, limits

    def links(self, new: MemoryItem, candidates: Sequence[MemoryItem], now: datetime) -> list[MemoryLink] | None:
        """The model's links, or None (logged) when it failed or answered out of shape: the rules decide then."""
        if not candidates:
            return []
        allowed = {c.id for c in candidates}

        def valid(obj: dict[str, Any]) -> dict[str, Any]:
            from narrative.providers.llm import check_fields

            items = check_fields(obj, {"links": list})["links"]
            seen: set[int] = set()
            for item in items:
                checked = check_fields(item, {"id": int, "kind": str, "reason": str})
                if checked["id"] not in allowed or checked["id"] in seen:
                    raise ValidationError(f"decision {checked['id']} was not among the candidates", field="id")
                if checked["kind"] not in (LinkKind.BUILDS_ON.value, LinkKind.REVERSES.value):
                    raise ValidationError(f"unknown link kind {checked['kind']!r}", field="kind")
                if not checked["reason"].strip() or len(checked["reason"]) > 300:
                    raise ValidationError("each link needs a short reason", field="reason")
                seen.add(checked["id"])
            if len(items) > MAX_LINKS:
                raise ValidationError(f"more than {MAX_LINKS} links", field="links")
            return {"links": items}

        from narrative.providers.llm import TurnBudget, ask_json

        reply = ask_json(
            self.llm,
            TurnBudget.from_settings(self.limits),
            "decision_links",
            {"decision": _decision_line(new), "candidates": [_decision_line(c) for c in candidates]},
            valid,
        )
        if reply is None:
            return None
        return [
            MemoryLink(
                new.user_id,
                new.id,
                int(item["id"]),
                LinkKind(item["kind"]),
                LinkOrigin.LLM,
                now,
                " ".join(str(item["reason"]).split()),
                1.0,
            )
            for item in reply["links"]
        ]
