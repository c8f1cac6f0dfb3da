"""What a configured LLM adds to the write path — and the heuristic it falls back to.

Every method asks the model through :func:`narrative.providers.llm.ask_json` /
``ask_text``, which never raise: a timeout, an HTTP error, malformed JSON, a
reply of the wrong shape or a spent per-turn budget all log a warning and give
``None``, and the caller keeps the heuristic's answer.  A turn is never lost.

The per-turn budget (calls and tokens) starts afresh at :meth:`begin_turn`.
"""

from __future__ import annotations

import logging
from typing import Any

from narrative.config import Settings
from narrative.errors import ValidationError
from narrative.model import DecisionDetails, EntityType, ResearchDetails, Storyline
from narrative.providers.llm import LLM, LLMSettings, TurnBudget, ask_json, ask_text, check_fields
from narrative.write.answers import prose
from narrative.write.extract import (
    ExtractedDecision,
    ExtractedEntity,
    ExtractedResearch,
    HeuristicExtractor,
    TurnExtraction,
)

log = logging.getLogger("narrative.write")

_ENTITY_TYPES = {t.value for t in EntityType}
MAX_SENTENCE = 300  # the running link's one sentence
MAX_SUMMARY = 1200  # a storyline card's few bullet points
MAX_NAME = 80  # "three to six words"


def _continuity(obj: dict[str, Any]) -> dict[str, Any]:
    return check_fields(obj, {"same_storyline": bool})


def _summary(obj: dict[str, Any]) -> dict[str, Any]:
    checked = check_fields(obj, {"name": str, "keywords": list, "summary": str})
    if not checked["summary"].strip():
        raise ValidationError("empty summary", field="summary")
    if len(checked["summary"]) > MAX_SUMMARY or len(checked["name"]) > MAX_NAME:
        raise ValidationError("the card is longer than asked", field="summary")
    return checked


RELATIONS = ("update", "contradiction", "none")


def _relation(obj: dict[str, Any]) -> dict[str, Any]:
    checked = check_fields(obj, {"relation": str})
    if checked["relation"] not in RELATIONS:
        raise ValidationError(f"relation must be one of {', '.join(RELATIONS)}", field="relation")
    return checked


def _extraction(obj: dict[str, Any]) -> dict[str, Any]:
    checked = check_fields(obj, {"topic_tags": list, "importance": int})
    if not 1 <= checked["importance"] <= 5:
        raise ValidationError("importance must be 1-5", field="importance")
    return obj


class LLMTurnAssist:
    """LLM help for one user's turns: continuity, storyline card, narrative sentence, extraction."""

    def __init__(self, llm: LLM, settings: Settings) -> None:
        self.llm = llm
        self.limits = LLMSettings.from_settings(settings) if settings.llm_provider != "none" else LLMSettings()
        self.budget = TurnBudget.from_settings(self.limits)
        self.heuristic = HeuristicExtractor()
        self.identity = f"llm:{getattr(llm, 'identity', 'unknown')}"

    def begin_turn(self) -> None:
        self.budget = TurnBudget.from_settings(self.limits)

    # --- TurnAssist ------------------------------------------------------------------------

    def continuity(self, storyline: Storyline, previous: str, text: str) -> bool | None:
        reply = ask_json(
            self.llm,
            self.budget,
            "continuity_check",
            {
                "storyline_name": storyline.name,
                "storyline_keywords": ", ".join(storyline.keywords),
                "storyline_summary": storyline.summary or "(none yet)",
                "previous_query": previous,
                "previous_response": "",
                "elapsed": "moments ago",
                "message": text,
            },
            _continuity,
        )
        return None if reply is None else bool(reply["same_storyline"])

    def storyline_summary(self, storyline: Storyline, text: str) -> dict[str, Any] | None:
        return ask_json(
            self.llm,
            self.budget,
            "storyline_summary",
            {
                "name": storyline.name,
                "keywords": ", ".join(storyline.keywords),
                "summary": storyline.summary or "(empty)",
                "exchange": text,
            },
            _summary,
        )

    def narrative_sentence(self, topic: str, previous_summary: str, text: str) -> str | None:
        sentence = ask_text(
            self.llm,
            self.budget,
            "narrative_update",
            {"topic": topic, "narrative": previous_summary, "exchange": text},
            max_tokens=120,
        )
        # one sentence was asked for, about this topic and exchange: anything else is not stored
        material = f"{topic}\n{previous_summary}\n{text}"
        return prose(sentence, "narrative_update", sentences=(1, 1), max_chars=MAX_SENTENCE, material=material)

    def judge_statement(self, speaker: str, earlier: str, earlier_said: str, new: str, new_said: str) -> str | None:
        """The model's add/update/no-op judgement of two statements (``update``, ``contradiction``, ``none``), or
        None (no answer, a malformed one, a spent budget): the heuristic decides then."""
        reply = ask_json(
            self.llm,
            self.budget,
            "statement_judgement",
            {
                "speaker": speaker or "the user",
                "earlier": earlier,
                "earlier_said": earlier_said,
                "new": new,
                "new_said": new_said,
            },
            _relation,
        )
        return None if reply is None else str(reply["relation"])

    # --- Extractor ---------------------------------------------------------------------------

    def extract_turn(
        self, text: str, *, speaker: str = "", role: str = "user", previous: str | None = None
    ) -> TurnExtraction:
        """The model's extraction when it answers well; the heuristic's otherwise."""
        fallback = self.heuristic.extract_turn(text, speaker=speaker, role=role, previous=previous)
        user_input, response = (text, "") if role == "user" else (previous or "", text)
        reply = ask_json(
            self.llm,
            self.budget,
            "turn_extraction",
            {"storyline": "", "user_input": user_input, "agent_response": response},
            _extraction,
        )
        if reply is None:
            return fallback
        try:
            return _from_reply(reply, fallback)
        except (TypeError, ValueError, KeyError) as error:
            log.warning("LLM extraction had an unusable shape (%s); using the heuristic", error)
            return fallback


def _from_reply(reply: dict[str, Any], fallback: TurnExtraction) -> TurnExtraction:
    decisions = tuple(
        ExtractedDecision(
            str(d.get("decision", "")),
            DecisionDetails(
                decision=str(d.get("decision", "")),
                rationale=str(d.get("rationale", "")),
                alternatives_considered=tuple(str(a) for a in d.get("alternatives", []) if a),
                decision_type=str(d.get("decision_type", "scope")),
                confidence=float(d.get("confidence", 0.5)),
                reversible=bool(d.get("reversible", True)),
            ),
        )
        for d in reply.get("decisions", [])
        if isinstance(d, dict) and d.get("decision")
    )
    research = tuple(
        ExtractedResearch(
            str(r.get("content", "")),
            ResearchDetails(
                source_type=str(r.get("source_type", "note")),
                source_reference=r.get("source_reference") or None,
                author=r.get("author") or None,
                work_title=r.get("work_title") or None,
                page_reference=r.get("page_reference") or None,
            ),
        )
        for r in reply.get("research", [])
        if isinstance(r, dict) and r.get("content")
    )
    entities = tuple(
        ExtractedEntity(EntityType(e["type"]), str(e["name"]), {"detail": str(e.get("detail", ""))})
        for e in reply.get("entities", [])
        if isinstance(e, dict) and e.get("type") in _ENTITY_TYPES and e.get("name")
    )
    question_type = reply.get("question_type")
    return TurnExtraction(
        question_type=None if question_type in (None, "none", "") else str(question_type),
        is_clarification=fallback.is_clarification,
        topic_tags=tuple(str(t).lower() for t in reply.get("topic_tags", []) if t)[:5] or fallback.topic_tags,
        importance=int(reply["importance"]),
        emotions=tuple(str(e).lower() for e in reply.get("emotions", []) if e),
        entities=entities or fallback.entities,
        decisions=decisions,
        research=research,
        people=fallback.people,
        key_points=fallback.key_points,
        about_you=fallback.about_you,
    )
