"""Deterministic extraction of meaning from one turn: the no-LLM default of the write and close paths.

:class:`HeuristicExtractor` turns a message into a :class:`TurnExtraction` with pure functions over the
text (no store, no model, no network), in well under a millisecond.  An LLM extractor implements the
same :class:`Extractor` protocol and falls back to this one when its answer is unusable.

Heuristics (the lexical detectors — sentences, questions, small talk, emotions, people, tags — live in
:mod:`narrative.text.patterns` and document their own rules):

| field / entity    | fires on                                                                                      |
|-------------------|-----------------------------------------------------------------------------------------------|
| question_type     | most specific non-small-talk question: methodological ("how should / which approach / should |
|                   | we / how to") > interpretive ("why / what does … mean / how did it feel / what do you think / |
|                   | what inspired you") > factual (who/what/when/where/how many, yes/no)                          |
| is_clarification  | "what do you mean", "can you clarify", "do you mean", "I meant" (not "meant to"), "to         |
|                   | clarify"; a turn opening "I mean …" right after a question                                    |
| topic_tags        | ≤ 5 salient content words and capitalised phrases, lowercase; stopwords, emotions, names out   |
| importance 1–5    | base 2; +2 life event in a statement (married, engaged, new job, moved to, passed away,       |
|                   | graduated, adopted a child, born, accident, …); +1 decision or state change (insight,         |
|                   | resolved question, cleared blocker, priority change); +1 strong emotion; +1 urgent / deadline |
|                   | / asap / critical / "important" (not "important to …"); +1 citation, quote or annotation;     |
|                   | 1 for small talk only, or for a ≤ 5-word turn with nothing in it                              |
| emotions          | lexicon + phrases; a negator earlier in the same clause drops the cue                         |
| decision          | "I/we decided / chose / opted / settled on / made up my mind", "the decision is to", "let's / |
|                   | I'll go with", first-person "use / adopt / stick with X instead of / rather than Y"; never in |
|                   | questions or when negated ("haven't decided").  Rationale after because / since / so that /  |
|                   | 'cause / given that / due to, or from a next sentence opening "Because …"; alternatives after |
|                   | instead of / rather than / vs / decided against ("over" only after prefer / choose); type by  |
|                   | keyword hits; confidence 0.8 (0.7 for "go with") − 0.15 per hedge, + 0.1 if emphatic, kept in |
|                   | [0.3, 0.95]; reversible unless final / permanent / for good / once and for all / forever      |
| task              | "I/we need to / have to / 've got to / gotta", "remind me to" (as a request), "todo", "next   |
|                   | step", "action item"; "I'll / I'm going to" only with an action verb or a time marker;        |
|                   | formulaic promises ("I'll keep you posted", "I have to say") skipped; due from "by <day>"     |
| waiting_on        | "waiting on/for X (to Y)", "until X gets back", "X will / promised to send / reply / confirm", |
|                   | "haven't heard back from X", "pending X"                                                      |
| question_opened   | user-role questions that are not small talk; "I wonder if", "not sure whether", "open         |
|                   | question", "haven't decided", "need to figure out"                                            |
| question_resolved | "figured out", "the answer is", "solved / resolved", "worked out how", "the fix / cause was", |
|                   | "turns out" next to a problem word; records the previous turn's question when there is one    |
| blocker_cleared   | "unblocked", "no longer blocked", "blocker … removed", "cleared the hurdle", "got the green   |
|                   | light / approval / go-ahead"; "so we can X" becomes ``unblocks``                              |
| priority_change   | "top priority", "(de/re)prioritize", "lower priority", "let's do X first", "finish X before Y" |
| insight           | "I realized / learned / discovered / found out / noticed that", "it turns out", "it dawned on |
|                   | me", "the takeaway is", "lesson learned", "now I understand"                                  |
| person            | ``patterns.find_people`` plus research authors; speaker and addressees go to ``people`` only  |
| research          | "Author (Year, p. N)", "(Author Year)", '"Title" by Author', "in Title by Author", "Author's  |
|                   | Title" (reading context), quoted passages ≥ 5 words, p. / pp. / page refs, book or paper      |
|                   | mentions; source_type quote > citation (author + year or title) > annotation (page) > note    |

The package is split by what it extracts: :mod:`.decisions`, :mod:`.items` (tasks, waiting-ons, state changes),
:mod:`.research`; :mod:`.salience` scores and compresses sentences into key points; :mod:`.heuristic` assembles them
(and gives key points and session themes of a text alone), :mod:`.results` holds what they return and :mod:`.cues`
what they share.
"""

from __future__ import annotations

from narrative.write.extract.heuristic import HeuristicExtractor, key_points, session_theme
from narrative.write.extract.results import (
    ExtractedDecision,
    ExtractedEntity,
    ExtractedResearch,
    Extractor,
    TurnExtraction,
)

__all__ = [
    "ExtractedDecision",
    "ExtractedEntity",
    "ExtractedResearch",
    "Extractor",
    "HeuristicExtractor",
    "TurnExtraction",
    "key_points",
    "session_theme",
]
