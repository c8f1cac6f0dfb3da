"""Deterministic extraction of meaning from one turn: the no-LLM default of the write and close paths.

:class:`HeuristicExtractor` turns a message into a :class:`TurnExtraction` with pure functions over the
text (no store, no model, no network), in well under a millisecond.  An LLM extractor implements the
same :class:`Extractor` protocol and falls back to this one when its answer is unusable.

Heuristics (the lexical detectors — sentences, questions, small talk, emotions, people, tags — live in
:mod:`narrative.write.patterns` and document their own rules):

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
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple, Protocol

from narrative.model import IMPORTANCE_MAX, IMPORTANCE_MIN, DecisionDetails, EntityType, ResearchDetails
from narrative.write import patterns as P

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


# --- results -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExtractedEntity:
    """An entity found in a turn; ``data`` holds type-specific fields (who/what/why/…) and the sentence."""

    entity_type: EntityType
    name: str
    data: dict[str, Any] = field(default_factory=dict)


class ExtractedDecision(NamedTuple):
    """A decision-stream item: the sentence it came from and its ITSERR details."""

    content: str
    details: DecisionDetails


class ExtractedResearch(NamedTuple):
    """A research-stream item: the sentence it came from and its source reference."""

    content: str
    details: ResearchDetails


@dataclass(frozen=True)
class TurnExtraction:
    """Everything the write path keeps from one turn."""

    question_type: str | None = None
    is_clarification: bool = False
    topic_tags: tuple[str, ...] = ()
    importance: int = 2
    emotions: tuple[str, ...] = ()
    entities: tuple[ExtractedEntity, ...] = ()
    decisions: tuple[ExtractedDecision, ...] = ()
    research: tuple[ExtractedResearch, ...] = ()
    people: tuple[str, ...] = ()
    key_points: str = ""

    def of_type(self, entity_type: EntityType) -> tuple[ExtractedEntity, ...]:
        """The entities of one type, in extraction order."""
        return tuple(e for e in self.entities if e.entity_type is entity_type)


class Extractor(Protocol):
    """Anything that extracts a turn; ``identity`` is recorded as ``Memory.extraction_model``."""

    identity: str

    def extract_turn(
        self, text: str, *, speaker: str = "", role: str = "user", previous: str | None = None
    ) -> TurnExtraction: ...


# --- expressions -------------------------------------------------------------------------------

_I = re.IGNORECASE


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, _I)


_SUBJ = (
    r"\b(?!you\b)(?:i|we|he|she|they|[a-z]+)(?:'ve|'d)?(?:\s+(?:have|had|finally|just|now|already|officially|"
    r"eventually|ultimately|both|all|then|also|recently|today|yesterday))*\s+"
)
_DECIDED = _rx(
    _SUBJ + r"(?:(?P<np>chose|chosen|opted\s+for|settled\s+on|agreed\s+on|picked(?!\s+up))|decided|opted\s+to|"
    r"made\s+(?:the|a|my|our)\s+(?:decision|call|choice)(?:\s+to)?|made\s+up\s+(?:my|our)\s+minds?(?:\s+to)?)\b")
_LETS_GO = _rx(r"\b(?:let'?s|(?:i|we)'ll|(?:i|we)\s+will)\s+go\s+with\b")
_DECISION_IS = _rx(r"\b(?:the|our|my)\s+(?:final\s+)?decision\s+(?:is|was)\s+(?:to|that)\b")
_CHOICE_VERB = (
    r"(?:use|using|adopt|adopting|stick(?:ing)?\s+with|switch(?:ing)?\s+to|prioriti[sz](?:e|ing)|pick(?:ing)?|"
    r"choos(?:e|ing)|go(?:ing)?\s+with|went\s+with|prefer|focus(?:ing)?\s+on)"
)
_INSTEAD = _rx(r"\b" + _CHOICE_VERB + r"\b(?=[^.!?;]{1,90}?\b(?:instead\s+of|rather\s+than)\b)")
_OVER = _rx(r"\b(?:prefer(?:red)?|prioriti[sz]e[ds]?|chose|choose|picked)\b(?=[^.!?;]{1,60}?\bover\b)")
_FIRST_PERSON = _rx(r"\b(?:i|we|let's|i'm|we're|i'll|we'll|i've|we've|our|my)\b")
_NOT_DECIDED = _rx(
    r"\b(?:haven't|have\s+not|hasn't|didn't|not|never|undecided|can't|couldn't|yet\s+to|trying\s+to|still)\s+"
    r"(?:\w+\s+)?(?:decided|decide|chose|choose|chosen|made\s+up)")
_RATIONALE = _rx(
    r"(?:\bbecause\b|\bsince\b(?!\s+(?:then|last|\d|yesterday|we\s+last|i\s+last))|\bso\s+that\b|'cause\b|"
    r"\bcuz\b|\bgiven\s+that\b|\bdue\s+to\b|\bas\s+(?:it|they|this|that)\b|\bin\s+order\s+to\b|"
    r"\bthe\s+reason\s+(?:is|being)\b)\s*(?P<why>[^.!?]+)")
_NEXT_RATIONALE = _rx(
    r"^(?:because|since|that's\s+because|the\s+reason\s+(?:is|was)|it's\s+because|this\s+is\s+because)\b[,:]?\s*")
_ALTERNATIVE = _rx(r"\b(?:instead\s+of|rather\s+than|vs\.?|versus|decided\s+against)\s+(?P<alt>[^.!?;,]+)")
_ALT_STOP = _rx(r"\s+(?:because|since|so\s+that|'cause|cuz|given|due\s+to|as\s+it|which|but|for)\b.*$")
_ALT_SPLIT = _rx(r"\s*(?:,|/|\bor\b|\band\b)\s*")
_DECISION_END = _rx(
    r"\s*(?:\b(?:because|since|so\s+that|given\s+that|due\s+to|instead\s+of|rather\s+than|vs\.?|versus|"
    r"in\s+order\s+to|even\s+though|although)\b|'cause\b|\bcuz\b|[!?;]|\.\s*$|\s-\s|,\s*which\b).*$")
_PARENS = re.compile(r"\s*\([^()]*\)")
_HEDGES = _rx(
    r"\b(?:maybe|probably|i\s+think|for\s+now|tentatively|might|perhaps|leaning|not\s+sure|i\s+guess|"
    r"kind\s+of|sort\s+of|for\s+the\s+time\s+being|unless|possibly|for\s+the\s+moment)\b")
_EMPHATIC = _rx(r"\b(?:definitely|final|for\s+sure|firmly|certain|absolutely|no\s+doubt|100%)")
_IRREVERSIBLE = _rx(
    r"\b(?:final|permanent(?:ly)?|for\s+good|irreversibl[ey]|no\s+going\s+back|once\s+and\s+for\s+all|"
    r"can(?:'t|not)\s+be\s+undone|forever)\b")
_DECISION_TYPES = (  # the type with the most keyword hits wins; ties go to the earlier one; none → scope
    ("methodological", _rx(
        r"\b(?:method\w*|approach\w*|process\w*|technique|tool\w*|framework|librar\w+|database|format|workflow|"
        r"strateg\w+|structur\w+|pipeline|test\w*|analys\w+|implement\w*|architecture|design|algorithm|use|using|"
        r"model|measur\w+|protocol|schema|sqlite|postgres\w*|code|api)\b")),
    ("interpretive", _rx(
        r"\b(?:interpret\w*|reading|meaning|understand\w*|view|position|terminology|concept\w*|fram\w+|perspective|"
        r"lens|sense|theor\w+|argument|claim|horizon|language|hermeneutic\w*|read\s+as)\b")),
    ("scope", _rx(
        r"\b(?:scope|focus\w*|include|exclude|limit\w*|skip|drop|cut|only|prioriti\w+|priority|first|later|defer|"
        r"postpone|chapter|section|deadline|budget|timeline|plan|goal\w*)\b")),
)
_TASK = _rx(
    r"\b(?:(?:i|we)(?:\s+(?:really|still|also|just|definitely|totally|seriously|now|first))*\s+(?:need|have)\s+to|"
    r"(?:i|we)'ve\s+got\s+to|(?:i|we)\s+gotta|(?P<intent>(?:i|we)(?:'ll|\s+will|'m\s+going\s+to|\s+am\s+going\s+to|"
    r"'re\s+going\s+to|'m\s+gonna|'re\s+gonna))(?:\s+(?:definitely|probably|also|just|still|really|need\s+to|"
    r"have\s+to|try\s+to))*|(?P<remind>remind\s+me\s+to)|to-?do:?|next\s+steps?(?:\s+is|\s+are|:)?(?:\s+to)?|action\s+items?:?)\s+"
    r"(?P<task>[^!?;]+)")
#: "I'll / I'm going to …" is a task only with a concrete action verb or a time marker (chat is full of
#: "we'll make great memories"); "going to" followed by a determiner is a destination.
_ACTION = _rx(
    r"^(?:send|call|email|text|write|finish|fix|look\s+into|check\s+(?:on|with|in)|book|buy|schedule|ask|talk\s+to|"
    r"review|update|share|bring|make\s+sure|start|sign\s+up|register|apply|submit|pick\s+up|clean|prepare|read|"
    r"research|contact|reach\s+out|follow\s+up|set\s+up|plan|organi[sz]e|draft|ship|deploy|test|merge|order|pay|"
    r"visit|meet|join|move|cancel|return|renew|file|print|install|learn|practice|study|train|cook|bake|try)\b")
_WHEN = _rx(
    r"\b(?:today|tomorrow|tonight|later|soon|this\s+(?:week|weekend|month|year|morning|afternoon|evening)|"
    r"next\s+(?:week|weekend|month|year)|on\s+(?:monday|tuesday|wednesday|thursday|friday|saturday|"
    r"sunday))\b")
_CLAUSE_END = _rx(r"\s*(?:,|\s-\s|\band\s+\(?(?:hopefully|then|maybe)\b|\bbut\b|\bso\b|\bif\b).*$")
_DESTINATION = re.compile(r"^(?:(?:a|an|the|my|our|your|his|her|their|this|that|some)\b|[A-Z])")
_TASK_SKIP = _rx(
    r"^(?:say|admit|confess|agree|thank|tell\s+you|ask\s+you|laugh|hand\s+it|be\s+(?:honest|there|fine|ok|okay|"
    r"careful|happy|glad)|always|never|miss|bet|see\b|take\s+that|keep\s+(?:you|that|it|this|in|going|at)|"
    r"let\s+you\s+know|keep\s+(?:ya|u)\s+posted|do\s+(?:for|with|about|in|on|at)\b|do\s*$|have\s+fun|"
    r"make\s+sure\s+to\s+(?:keep\s+you|remember|let\s+you)|love|remember|cherish|think|do\s+my\s+best|try\s+my\s+best|be\s+sure|"
    r"give\s+it\s+a\s+(?:try|shot|go)|check\s+it\s+out|try\s+it|stay|continue\s+to\s+support|go\s*$)")
_DUE = _rx(
    r"\bby\s+(?P<due>tomorrow|tonight|(?:next|this|the\s+end\s+of\s+(?:the\s+)?)\s*(?:week|month|monday|tuesday|"
    r"wednesday|thursday|friday|saturday|sunday)|end\s+of\s+(?:the\s+)?(?:day|week|month)|monday|tuesday|"
    r"wednesday|thursday|friday|saturday|sunday|\w+\s+\d{1,2}(?:st|nd|rd|th)?)\b")
#: "important" as a generic maxim ("it's important to …", "important to me") does not count.
_URGENT = _rx(
    r"\b(?:important(?!\s+(?:to|for|part|thing|that|than)\b)|urgent(?:ly)?|asap|deadline|critical|crucial|"
    r"top\s+priority|high\s+priority|don't\s+forget|must\s+not\s+forget)\b")
_WAITING = re.compile(
    r"\b[Ww]aiting\s+(?:on|for)\s+(?P<who>[^.!?;,]{2,60}?)(?:\s+to\s+(?P<what>[^.!?;,]{2,80}))?(?=[.!?;,]|$)"
    r"|\b[Uu]ntil\s+(?P<who2>[A-Z][a-z]+|he|she|they|the\s+\w+)\s+(?P<what2>(?:gets?\s+back|replies|responds|"
    r"confirms|sends|signs\s+off|approves)[^.!?;,]{0,60})"
    r"|\b(?P<who3>[A-Z][a-z]+|[Hh]e|[Ss]he|[Tt]hey|[Tt]he\s+(?:team|client|vendor|lawyer|landlord|bank|agency|"
    r"school|doctor|editor|reviewers?|publisher))\s+(?:will|'ll|is\s+going\s+to|promised\s+to|said\s+(?:she|he|"
    r"they)'d|is\s+supposed\s+to)\s+(?P<what3>(?:send|get\s+back|reply|respond|confirm|review|let\s+me\s+know|"
    r"call\s+(?:me\s+)?back|email|approve|sign|deliver|forward)[^.!?;,]{0,60})"
    r"|\b[Hh]aven'?t\s+heard\s+back\s+from\s+(?P<who4>[^.!?;,]{2,40})"
    r"|\b[Pp]ending\s+(?P<what5>[^.!?;,]{2,60})"
)
_WAIT_VAGUE = _rx(
    r"^(?:this|that|it|these|those|the\s+(?:day|moment|weekend|time)|a\s+while|ages|so\s+long)\b")
_OPEN_CUE = _rx(
    r"\b(?:i\s+wonder\s+(?:if|whether|what|how|why|who|when)|open\s+question|not\s+sure\s+(?:if|whether|how|what|"
    r"which)|need\s+to\s+figure\s+out|(?:i|we)\s+(?:don't|do\s+not)\s+know\s+(?:if|whether|how|which)|"
    r"haven't\s+decided|still\s+undecided|still\s+deciding)\b")
_RESOLVED = _rx(
    r"\b(?:figured\s+(?:it\s+)?out|the\s+answer\s+(?:is|was)|solved|resolved|worked\s+out\s+(?:how|why|"
    r"that|what)|the\s+(?:fix|solution|cause|culprit|problem|issue)\s+(?:is|was))\b")
_TURNS_OUT = _rx(r"(?<!how it )(?<!how things )\b(?:turns\s+out|turned\s+out\s+(?:that|to\s+be|the))\b")
_PROBLEM = _rx(
    r"\b(?:bug|issue|problem|error|question|answer|cause|reason|fix|wrong|broken|crash\w*|fail\w*)\b")
_BLOCKER = _rx(
    r"\b(?:unblocked|no\s+longer\s+blocked|not\s+blocked\s+anymore|blockers?\s+(?:is|are|was|were|has\s+been|"
    r"have\s+been)\s+(?:gone|removed|resolved|cleared|fixed|lifted)|cleared\s+(?:the|a|our|my|that)\s+(?:blocker|"
    r"hurdle|obstacle|way|path|roadblock)|(?:got|received|have)\s+(?:the\s+)?(?:approval|green\s+light|go-ahead|"
    r"sign-off)|got\s+approved)\b")
_SUBJECT_TAIL = _rx(r"(?:[\s,]+(?:since|because|as|which|that|this|it|is|was|now|so|and|the|has|been|got))*[\s,]*$")
_UNBLOCKS = _rx(
    r"\b(?:so\s+(?:now\s+)?(?:we|i)\s+can|which\s+(?:means|lets)\s+(?:us|me)(?:\s+(?:can|to))?|unblock(?:s|ing))\s+"
    r"(?P<what>[^.!?;]+)")
_PRIORITY = _rx(
    r"\b(?P<high>(?:top|highest|first|main|number\s+one|biggest)\s+priority|(?:re-?)?prioriti[sz](?:e|ed|es|ing))\b"
    r"|\b(?P<low>de-?prioriti[sz](?:e|ed|es|ing)|lower(?:ed)?\s+(?:the\s+)?priority|(?:less|low(?:er)?)\s+(?:of\s+a\s+)?"
    r"priority)\b"
    r"|\b(?:let's|we'll|i'll|we\s+should|i\s+should|we\s+need\s+to|i\s+need\s+to|going\s+to|gonna)\s+(?:do|tackle|"
    r"handle|ship|build|fix|finish|focus\s+on|start\s+with)\s+(?P<item>[^.,;!?]{2,60}?)\s+(?:first\b|before\s+"
    r"(?P<before>[^.,;!?]{2,60}))")
_PRIORITY_SUBJECT = _rx(r"\s+(?:is|are|was|were)(?:\s+now)?(?:\s+(?:our|my|the|a))?\s*$|^\s*(?:our|my|the)\s*$")
_PRIORITY_OBJECT = _rx(
    r"\bprioriti[sz](?:e|ed|es|ing)\s+(?P<obj>[^.,;!?]{2,60}?)(?:\s+(?:over|before)\s+(?P<over>[^.,;!?]{2,60})|"
    r"(?=[.,;!?]|$))")
_INSIGHT = _rx(
    r"\b(?:(?:i|we)(?:'ve|\s+have|\s+just|\s+finally|\s+really|\s+also|\s+now|\s+recently)*\s+(?:realized|realised|"
    r"learned|learnt|discovered|noticed\s+that|found\s+out)\b(?:\s+(?:again|recently|today|now|finally))?(?!\s+(?:to|how\s+to)\b)|it\s+(?:dawned|occurred)\s+on\s+me|"
    r"(?:key\s+|main\s+|big\s+)?(?:insight|takeaway)\s*(?:is|was|here\s+is|:)|lesson\s+learned|the\s+lesson\s+is|"
    r"now\s+i\s+(?:understand|see|get)\s+(?:that|why|how)|(?<!how\s)(?<!see\s)it\s+turns\s+out)\b[,:]?\s*(?:that\s+)?"
    r"(?P<what>[^.!?]*)")
_LIFE_EVENT = _rx(
    r"\b(?:(?:got|get|getting|just|am|are|is|was|were|be|been|'m|'re)\s+(?:\w+\s+)?(?:married|engaged|divorced|hired|"
    r"promoted|fired|laid\s+off|pregnant|diagnosed)|wedding|engagement|divorce|pregnan\w+|funeral|miscarriage|"
    r"graduat(?:ed|ing|ion)|retire[ds]?|retirement|promotion|new\s+(?:job|position|house|home|apartment|baby)|"
    r"(?:started|starting|landed|got|accepted)\s+(?:a|my|the)\s+(?:new\s+)?(?:job|position)|"
    r"mov(?:ed|ing)\s+(?:to|into|in\s+with|out|abroad|back|house|across)|passed\s+away|died|death\s+of|"
    r"lost\s+(?:my|his|her|our|their)\s+(?:mom|mother|dad|father|grand\w+|husband|wife|son|daughter|brother|sister|"
    r"friend|job|baby|dog|cat|pet)|adopt(?:ed|ing)?\s+(?:a|an|my|our|two|three)?\s*(?:\w+\s+)?(?:child|children|"
    r"baby|kid|kids|son|daughter|dog|cat|puppy|kitten|pet|pup)|adoption|(?:was|were|got|been|be|is|are)\s+born|"
    r"gave\s+birth|newborn|(?<!by\s)accident|surgery|hospitali[sz]ed|cancer|broke\s+up|proposed|"
    r"(?:first|new)\s+(?:grandchild|grandson|granddaughter))\b")
_FILLER_PREFIX = _rx(
    r"^(?:(?:wow|woah|whoa|woohoo|yay|oh|yeah|yes|yep|hey|hi|hello|ok|okay|so|well|aw+|haha|lol|omg|btw|hmm|um)"
    r"\b[,!.]?\s*)+")

# research
_NAME = r"[A-Z][A-Za-z'\-]+"
_AUTHORS = _NAME + r"(?:\s+(?:and|&)\s+" + _NAME + r"|\s+et\s+al\.?)?"
_PAGES = r"(?:pp?\.|pages?)\s*\d+(?:\s*(?:[-\u2013]|to)\s*\d+)?"
_AUTHOR_YEAR = re.compile(r"\b(?P<a>" + _AUTHORS + r")\s*\((?P<y>\d{4})[a-z]?(?:,\s*(?P<p>" + _PAGES + r"))?\)")
_PAREN_CITE = re.compile(r"\((?P<a>" + _AUTHORS + r"),?\s+(?P<y>\d{4})[a-z]?(?:,\s*(?P<p>" + _PAGES + r"))?\)")
_PAGE = re.compile(r"\b" + _PAGES, _I)
_PERSON_NAME = r"(?:[A-Z][a-z'\-]+|[A-Z]\.)(?:\s+(?:[A-Z][a-z'\-]+|[A-Z]\.)){0,3}"
_TITLE_BY = re.compile(r"\"(?P<t>[^\"]{2,120}?)[,.]?\"\s*,?\s+by\s+(?P<a>" + _PERSON_NAME + ")")
_IN_TITLE_BY = re.compile(
    r"\b(?:in|of|reading|read|from)\s+(?P<t>[A-Z][\w'\-]*(?:\s+(?:[A-Z][\w'\-]*|of|the|and|a|an|in|on|for|to)){0,8}?)\s+by\s+(?P<a>"
    + _PERSON_NAME
    + ")"
)
_POSSESSIVE_TITLE = re.compile(
    r"\b(?P<a>[A-Z][a-z'\-]+)'s\s+(?P<t>[A-Z][\w\-]*(?:\s+(?:(?:of|the|and|in|on|for|a|an)\s+)*[A-Z][\w\-]*)*)"
)
_BEFORE_PAGE = re.compile(r"(?P<w>[A-Z][\w'\-]*(?:\s+(?:[A-Z][\w'\-]*|of|the|and)){0,6}?)(?:'s)?,?\s+$")
_READING = _rx(
    r"\b(?:read|reading|reread|book|books|novel|paper|article|essay|study|chapter|monograph|journal|thesis|"
    r"dissertation|poem|memoir|author|wrote|written|cite[sd]?|citing|quote[sd]?|argues?|according\s+to|"
    r"published|edition|volume|translation)\b")
_MENTION = _rx(
    r"\b(?:reading|read|rereading|finished|started|citing|annotating|studying|wrote|writing|published)\s+"
    r"(?:a|an|the|this|that|his|her|their|my|your)?\s*(?:\w+\s+){0,2}?(?:book|novel|paper|article|essay|study|"
    r"chapter|monograph|poem|memoir)s?\b|\b(?:book|novel|paper|article|essay|study|chapter)s?\s+(?:by|on|about)\s+"
    r"|\b(?:this|that|the)\s+(?:book|novel|paper|article|essay)\s+(?:i|you|we)\s+(?:read|recommended|cited)\b")
_QUOTE_AUTHOR = re.compile(r"\b(?:according\s+to|by|as)\s+(?P<a>" + _PERSON_NAME + r")|(?P<b>" + _PERSON_NAME + r")\s+"
                           r"(?:says|said|writes|wrote|argues|argued|notes|noted|puts\s+it)\b")
_MINOR = P.lex("a an the of and in on for to at by with from or")


# Cheap substring pre-checks: a family's expressions run only when one of its keys is in the turn.
_HINTS: dict[str, tuple[str, ...]] = {
    "decision": ("decid", "decision", "chose", "chosen", "opted", "settled on", "agreed on", "picked", "made up",
                 "go with", "instead of", "rather than", "prefer", "priorit", "choose"),
    "task": ("need to", "have to", "got to", "gotta", "'ll ", " will ", "going to", "gonna", "remind me", "todo",
             "to-do", "next step", "action item"),
    "waiting": ("waiting", "until ", " will ", "'ll ", "promised", "supposed to", "heard back", "pending"),
    "open": ("wonder", "open question", "not sure", "figure out", "know if", "know whether", "know how",
             "know which", "decided", "deciding"),
    "state": ("figured", "answer", "solved", "resolved", "found out", "worked out", "fix", "solution", "the cause",
              "culprit", "problem", "issue", "turns out", "turned out", "block", "cleared", "approv", "green light",
              "go-ahead", "sign-off", "priorit", " first", "before", "realiz", "realis", "learn", "discover",
              "notic", "dawned", "occurred", "insight", "takeaway", "lesson", "now i "),
    "life": ("marri", "engage", "divorc", "hired", "promot", "fired", "laid off", "pregnan", "diagnos", "wedding",
             "funeral", "miscarr", "graduat", "retire", "new job", "new position", "new house", "new home",
             "new apartment", "new baby", " job", "position", "moved", "moving", "passed away", "died", "death",
             "lost ", "adopt", "born", "birth", "accident", "surgery", "hospital", "cancer", "broke up", "proposed",
             "grandchild", "grandson", "granddaughter"),
    "urgent": ("important", "urgent", "asap", "deadline", "critical", "crucial", "priority", "forget", "essential"),
    "research": ('"', "(1", "(2", " p.", "(p.", "pp.", "page", " read", "reread", "book", "novel", "paper",
                 "article", "essay", " stud", "chapter", "monograph", "journal", "thesis", "dissertation", "poem",
                 "memoir", "author", "wrote", "written", " cite", "cited", "citing", "quot", "argue", "according to",
                 "publish", "edition", "volume", "translation"),
}


def _hint(lower: str, family: str) -> bool:
    return any(map(lower.__contains__, _HINTS[family]))


# --- helpers -----------------------------------------------------------------------------------


def _clip(text: str, max_words: int = 16) -> str:
    """At most ``max_words`` words, trimmed of edge punctuation (a question keeps its "?")."""
    toks = text.strip(" ,;:.!-\u2013\u2014\"'").split()
    return " ".join(toks[:max_words]) + ("\u2026" if len(toks) > max_words else "")


# --- decisions ---------------------------------------------------------------------------------


def _decision_start(sentence: str) -> tuple[int, float] | None:
    """Where the decided thing starts in ``sentence`` and the base confidence, or None."""
    for rx, base in ((_DECIDED, 0.8), (_DECISION_IS, 0.8), (_LETS_GO, 0.7)):
        m = rx.search(sentence)
        if m and not P.negated_before(sentence.lower(), m.start() + 1):
            return (m.start("np") if rx is _DECIDED and m.group("np") else m.end()), base
    for rx in (_INSTEAD, _OVER):
        m = rx.search(sentence)
        if m and (m.start() <= 2 or _FIRST_PERSON.search(sentence[: m.start()])):
            return m.start(), 0.7
    return None


def _alternatives(sentence: str, start: int) -> tuple[str, ...]:
    alts: list[str] = []
    tail = sentence[start:]
    for m in _ALTERNATIVE.finditer(sentence):
        alts.extend(_ALT_SPLIT.split(_ALT_STOP.sub("", m.group("alt"))))
    over = re.search(r"\bover\s+(?P<alt>[^.!?;,]+)", tail, _I)
    if over and _OVER.search(sentence):
        alts.extend(_ALT_SPLIT.split(_ALT_STOP.sub("", over.group("alt"))))
    out: list[str] = []
    for alt in alts:
        a = _clip(re.sub(r"^(?:the|a|an|to)\s+", "", alt.strip(), flags=_I), 8)
        if a and a.lower() not in (o.lower() for o in out):
            out.append(a)
    return tuple(out)


def _decision_type(text: str) -> str:
    counts = [(len(rx.findall(text)), -i, name) for i, (name, rx) in enumerate(_DECISION_TYPES)]
    best = max(counts)
    return best[2] if best[0] else "scope"


def find_decision(sentence: str, following: str | None = None) -> DecisionDetails | None:
    """Parse one statement sentence into ``DecisionDetails`` (see the module table), or None."""
    if _NOT_DECIDED.search(sentence):
        return None
    found = _decision_start(sentence)
    if found is None:
        return None
    start, confidence = found
    obj = re.sub(r"^\s*(?:to|on|that|with|for|,)\s+", "", _PARENS.sub("", sentence[start:]), flags=_I)
    against = re.match(r"\s*against\s+", sentence[start:], _I)
    what = _clip(_DECISION_END.sub("", obj), 16)
    if against:
        what = "not " + _clip(_DECISION_END.sub("", sentence[start + against.end() :]), 14)
    if not what:
        return None
    why_m = _RATIONALE.search(sentence, start)
    why = _clip(why_m.group("why"), 25) if why_m else ""
    if not why and following and _NEXT_RATIONALE.match(following):
        why = _clip(_NEXT_RATIONALE.sub("", following), 25)
    hedges = len(_HEDGES.findall(sentence))
    confidence = confidence - 0.15 * hedges + (0.1 if _EMPHATIC.search(sentence) else 0.0)
    return DecisionDetails(
        decision=what,
        rationale=why,
        alternatives_considered=_alternatives(sentence, start),
        decision_type=_decision_type(sentence),
        confidence=round(min(0.95, max(0.3, confidence)), 2),
        reversible=not _IRREVERSIBLE.search(sentence),
    )


# --- research ----------------------------------------------------------------------------------


def _title_like(text: str) -> bool:
    toks = [t for t in text.split() if t.lower() not in _MINOR]
    caps = sum(t[:1].isupper() or t[:1].isdigit() for t in toks)
    return 0 < len(text.split()) <= 8 and bool(toks) and caps * 2 >= len(toks)


def find_research(sentence: str, is_q: bool) -> ResearchDetails | None:
    """A research item for one sentence, or None: quote > citation > annotation > note."""
    author = year = title = page = quote = None
    for rx in (_AUTHOR_YEAR, _PAREN_CITE):
        m = rx.search(sentence)
        if m:
            author, year, page = m.group("a"), m.group("y"), m.group("p")
            break
    for rx in (_TITLE_BY, _IN_TITLE_BY):
        m = rx.search(sentence)
        if m:
            title, author = title or m.group("t").strip(" ,."), author or m.group("a")
            break
    reading = bool(_READING.search(sentence))
    for q in P.QUOTED.finditer(sentence):
        inner = q.group(0)[1:-1].strip(" ,.")
        if _title_like(inner):
            title = title or (inner if reading or author else None)
        elif len(inner.split()) >= 5:
            quote = inner
    if title is None and reading:
        m = _POSSESSIVE_TITLE.search(sentence)
        if m and len(m.group("t").split()) >= 2:
            author, title = author or m.group("a"), m.group("t")
    pm = _PAGE.search(sentence)
    if pm:
        page = page or pm.group(0)
        before = _BEFORE_PAGE.search(sentence[: pm.start()])
        if before and not (author or title):
            ref = " ".join(P.drop_leading_stopwords(before.group("w").split()))
            title, author = (ref, None) if len(ref.split()) > 1 else (None, ref or None)
    if quote is None and not (author and (year or title)) and not page and is_q:
        return None
    if quote is not None:
        qa = _QUOTE_AUTHOR.search(sentence)
        author = author or (qa.group("a") or qa.group("b") if qa else None)
        kind = "quote"
    elif author and (year or title):
        kind = "citation"
    elif page:
        kind = "annotation"
    elif title or _MENTION.search(sentence):
        kind = "note"
    else:
        return None
    return _research_details(sentence, kind, author, year, title, page, quote, pm)


def _research_details(
    sentence: str,
    kind: str,
    author: str | None,
    year: str | None,
    title: str | None,
    page: str | None,
    quote: str | None,
    page_match: re.Match[str] | None,
) -> ResearchDetails:
    parts = [f"{author} ({year})" if author and year else author or "", f'"{title}"' if title else "", page or ""]
    reference = ", ".join(p for p in parts if p) or None
    note: str | None = None
    if kind == "annotation" and page_match:
        note = _clip(re.sub(r"^[\s,;:\-\u2013\u2014]*(?:on\s+)?", "", sentence[page_match.end() :]), 30) or None
    elif kind == "quote" and quote:
        rest = re.sub(r"\s+([,.;:!?])", r"\1", P.QUOTED.sub(" ", sentence)).strip(" ,.;:")
        note = _clip(rest, 30) if len(P.words(rest)) >= 3 else None
    return ResearchDetails(
        source_type=kind,
        source_reference=reference,
        author=author,
        work_title=title,
        page_reference=page,
        user_annotation=note,
    )


# --- entities ----------------------------------------------------------------------------------


def _entity(kind: EntityType, name: str, sentence: str, **data: Any) -> ExtractedEntity:
    payload = {k: v for k, v in data.items() if v not in (None, "", ())}
    payload["sentence"] = _clip(sentence, 40)
    return ExtractedEntity(kind, name, payload)


def _tasks(sentence: str, owner: str) -> list[ExtractedEntity]:
    out: list[ExtractedEntity] = []
    for m in _TASK.finditer(sentence):
        task = _clip(_CLAUSE_END.sub("", _DECISION_END.sub("", m.group("task"))), 12)
        if not task or _TASK_SKIP.match(task):
            continue
        if m.group("remind") and sentence[: m.start()].strip(" ,").lower() not in ("", "please", "pls"):
            continue  # "they remind me to slow down" is not a request
        intent = m.group("intent")
        destination = intent is not None and "going" in intent and _DESTINATION.match(task)
        if intent and (destination or not (_ACTION.match(task) or _WHEN.search(task) or _DUE.search(task))):
            continue
        due = _DUE.search(m.group("task"))
        urgent = bool(_URGENT.search(sentence))
        out.append(
            _entity(EntityType.TASK, task, sentence, description=task, owner=owner, status="open",
                    priority="high" if urgent else "", due=due.group("due") if due else None)
        )
    return out


def _waiting(sentence: str) -> list[ExtractedEntity]:
    out: list[ExtractedEntity] = []
    for m in _WAITING.finditer(sentence):
        who = next((m.group(g) for g in ("who", "who2", "who3", "who4") if m.group(g)), "") or ""
        what = next((m.group(g) for g in ("what", "what2", "what3", "what5") if m.group(g)), "") or ""
        who, what = who.strip(), what.strip()
        if m.group("who3") and who[:1].isupper() and not P.name_ok(who) and who.split()[0].lower() != "the":
            continue
        if m.group("who") and _WAIT_VAGUE.match(who) and not what:
            continue
        if P.negated_before(sentence.lower(), m.start()):
            continue
        src = re.match(r"(?P<what>.+?)\s+from\s+(?P<who>.+)$", who)
        topic = re.match(r"(?P<who>.+?)\s+(?:for|about|on|re)\s+(?P<what>.+)$", who)
        if src and not what:
            who, what = src.group("who"), src.group("what")
        elif topic and not what and who[:1].isupper():
            who, what = topic.group("who"), topic.group("what")
        name = _clip(f"{who}: {what}" if who and what else who or what, 14)
        out.append(_entity(EntityType.WAITING_ON, name, sentence, who=_clip(who, 8), what=_clip(what, 14)))
    return out


def _state_changes(sentence: str, previous_q: str | None) -> list[ExtractedEntity]:
    """Resolved questions, cleared blockers, priority changes and insights in one statement sentence."""
    out: list[ExtractedEntity] = []
    low = sentence.lower()
    turns = _TURNS_OUT.search(sentence)
    resolved = _RESOLVED.search(sentence)
    if turns and not resolved and _PROBLEM.search(sentence):
        resolved = turns
    if resolved and not P.negated_before(low, resolved.start()):
        out.append(_entity(EntityType.QUESTION_RESOLVED, _clip(sentence, 16), sentence,
                           question=previous_q, answer=_clip(sentence, 30)))
    blocker = _BLOCKER.search(sentence)
    if blocker and not P.negated_before(low, blocker.start()):
        unblocks = _UNBLOCKS.search(sentence)
        what = _clip(_SUBJECT_TAIL.sub("", sentence[: blocker.start()]), 14) or _clip(sentence, 14)
        out.append(_entity(EntityType.BLOCKER_CLEARED, what, sentence, what=what,
                           unblocks=_clip(unblocks.group("what"), 12) if unblocks else None))
    prio = _PRIORITY.search(sentence)
    if prio:
        obj = _PRIORITY_OBJECT.search(sentence)
        level = "low" if prio.group("low") else "next" if prio.group("item") else "high"
        subject = _PRIORITY_SUBJECT.sub("", sentence[: prio.start()]).strip()
        after = re.match(r"[\s:]*(?:is|was|will\s+be|now)?\s*(?P<x>[^.;!?]+)", sentence[prio.end() :], _I)
        if not any(P.tag_key(w.lower()) for w in P.words(subject)):
            subject = after.group("x") if after else ""
        item = _clip(prio.group("item") or (obj.group("obj") if obj else "") or subject, 12)
        before = prio.group("before") or (obj.group("over") if obj and not prio.group("item") else "") or ""
        out.append(_entity(EntityType.PRIORITY_CHANGE, item or _clip(sentence, 12), sentence, item=item, new=level,
                           before=_clip(before, 10)))
    insight = _INSIGHT.search(sentence)
    if insight and not (resolved is turns and turns) and not P.negated_before(low, insight.start()):
        what = insight.group("what")
        what = _clip(sentence if len(what.split()) < 3 or what.lower().startswith("the hard way") else what, 20)
        out.append(_entity(EntityType.INSIGHT, what, sentence, what=what))
    return out


def _life_event(lower: str) -> bool:
    return any(not P.negated_before(lower, m.start()) for m in _LIFE_EVENT.finditer(lower))


# --- key points and themes ---------------------------------------------------------------------


def _strip_filler(sentence: str, people: Sequence[str]) -> str:
    """Drop leading interjections and a leading vocative ("Wow, Caroline! …" → "…")."""
    stripped = _FILLER_PREFIX.sub("", sentence).strip()
    head = re.match(r"([A-Z][a-z]+)[,!]\s+", stripped)
    if head and head.group(1) in people:
        stripped = stripped[head.end() :]
    return stripped[:1].upper() + stripped[1:] if stripped else ""


def _compress(scored: Sequence[tuple[int, str]], max_words: int, people: Sequence[str]) -> str:
    """Best-scoring sentences first until the word budget is used, then put back in turn order."""
    ranked = sorted((i for i, (score, _) in enumerate(scored) if score > 0), key=lambda i: (-scored[i][0], i))
    chosen: dict[int, str] = {}
    used = 0
    for i in ranked:
        text = _strip_filler(scored[i][1], people)
        n = len(text.split())
        if used + n <= max_words:
            chosen[i] = text
            used += n
        elif not chosen:
            chosen[i] = _clip(text, max_words)
            break
    return " ".join(chosen[i] for i in sorted(chosen))


def _score_sentence(sentence: str, small: bool, signal: bool, tags: Iterable[str]) -> int:
    """2 for an entity/decision/research/life event, +1 per number (≤ 2), +1 per turn tag (≤ 3), +1 names."""
    if small and not signal:
        return 0
    low = sentence.lower()
    score = 2 if signal else 0
    score += min(2, len(re.findall(r"\d+", sentence)))
    score += min(3, sum(t in low for t in tags))
    caps = [w for w in P.words(sentence)[1:] if w[:1].isupper() and P.name_ok(w)]
    return score + (1 if caps else 0)


def key_points(text: str, max_words: int = 30) -> str:
    """A ≤ ``max_words``-word compression of a turn for the "11–50 exchanges" retention tier.

    Keeps, in order, the sentences that carry an entity, decision, research item, life event or
    emotion-laden statement, numbers or names; drops greetings, thanks and bare reactions.  Returns
    "" when the turn is only small talk.
    """
    return _analyse_alone(text).finish(5, max_words).key_points


def session_theme(texts: Iterable[str], *, speakers: Iterable[str] = (), max_tags: int = 4) -> str:
    """One line naming what many turns were about, for the "older: session themes" tier.

    Tags are ranked by how many turns carry them (ties: first seen), people by mentions;
    e.g. ``"adoption, pottery, painting and camping — with Caroline and Melanie"``.
    """
    tag_counts: Counter[str] = Counter()
    people_counts: Counter[str] = Counter()
    order: dict[str, int] = {}
    for i, text in enumerate(texts):
        if not text or not text.strip():
            continue
        analysis = _analyse_alone(text)
        for tag in analysis.tags(8):
            tag_counts[tag] += 1
            order.setdefault(tag, i)
        people_counts.update(analysis.people)
    for speaker in speakers:
        people_counts[speaker] += 0  # participants, listed after the people talked about
    lowered = {n.lower() for n in people_counts}
    names = [n for n, _ in sorted(people_counts.items(), key=lambda kv: -kv[1]) if n][:3]
    tags = [t for t in sorted(tag_counts, key=lambda t: (-tag_counts[t], order[t])) if t not in lowered][:max_tags]
    about = _join(tags)
    with_ = f"with {_join(names)}" if names else ""
    if about and with_:
        return f"{about} \u2014 {with_}"
    return about or (f"conversation {with_}" if with_ else "")


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1] if items else ""


# --- the extractor -----------------------------------------------------------------------------


class HeuristicExtractor:
    """The deterministic, model-free :class:`Extractor` (see the module docstring for the rules)."""

    identity = "heuristic"

    def __init__(self, *, max_tags: int = 5, key_point_words: int = 30) -> None:
        self.max_tags = max_tags
        self.key_point_words = key_point_words

    def extract_turn(
        self, text: str, *, speaker: str = "", role: str = "user", previous: str | None = None
    ) -> TurnExtraction:
        return _analyse(text, speaker.strip(), role, previous).finish(self.max_tags, self.key_point_words)


class _Analysis(NamedTuple):
    """What a turn yields before the tag limit and the key-point budget are applied."""

    turn: _Turn
    question_type: str | None
    is_clarification: bool
    importance: int
    emotions: tuple[str, ...]
    entities: tuple[ExtractedEntity, ...]
    decisions: tuple[ExtractedDecision, ...]
    research: tuple[ExtractedResearch, ...]
    people: tuple[str, ...]
    signal: dict[str, bool]
    works: tuple[str, ...]
    ranked_tags: tuple[str, ...]  # every candidate tag, best first (works not included)

    def tags(self, limit: int) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.works + self.ranked_tags[:limit]))[:limit]

    def finish(self, max_tags: int, key_point_words: int) -> TurnExtraction:
        if not self.turn.lower:  # nothing but punctuation
            return TurnExtraction(importance=IMPORTANCE_MIN, people=self.people)
        tags = self.tags(max_tags)
        scored = [(_score_sentence(s, small, self.signal.get(s, False), tags), s) for s, _, small in self.turn.flags]
        return TurnExtraction(
            question_type=self.question_type,
            is_clarification=self.is_clarification,
            topic_tags=tags,
            importance=self.importance,
            emotions=self.emotions,
            entities=self.entities,
            decisions=self.decisions,
            research=self.research,
            people=self.people,
            key_points=_compress(scored, key_point_words, self.people),
        )


@lru_cache(maxsize=1024)
def _analyse_alone(text: str) -> _Analysis:
    """A text read on its own (no speaker, no previous turn): retention reads each exchange twice, once for
    its key points and later for its session theme, so the reading is kept."""
    return _analyse(text, "", "user", None)


def _analyse(text: str, speaker: str, role: str, previous: str | None) -> _Analysis:
    norm = P.normalize(text)
    if not any(ch.isalnum() for ch in norm):
        return _Analysis(
            _Turn("", []), None, False, IMPORTANCE_MIN, (), (), (), (), (speaker,) if speaker else (), {}, (), ()
        )
    sentences = P.split_sentences(norm)
    lower = norm.lower()
    prev_last = P.split_sentences(P.normalize(previous))[-1:] if previous and previous.strip() else []
    previous_q = prev_last[0] if prev_last and P.is_question(prev_last[0]) else None
    turn = _Turn(lower, [(s, P.is_question(s), P.is_small_talk(s)) for s in sentences])
    real_questions = [s for s, q, small in turn.flags if q and not small]
    kinds = {P.question_kind(q) for q in real_questions}
    emotions, strong = P.find_emotions(lower)
    found = P.find_people(sentences)
    entities = [
        _entity(EntityType.PERSON, name, sentence, relation=rel, context=_clip(sentence, 20))
        for name, rel, sentence in found
        if rel != "addressee" and name.lower() != speaker.lower()
    ]
    on = {family: _hint(lower, family) for family in _HINTS}
    decisions, research, signal = _statements(turn, on, speaker or role, previous_q, entities)
    known = {name.lower() for name, _, _ in found}
    for content, details in research:
        author = details.author
        if author and author.lower() not in known and not author.lower().startswith(tuple(known)):
            known.add(author.lower())
            found.append((author, "author", content))
            entities.insert(
                len([e for e in entities if e.entity_type is EntityType.PERSON]),
                _entity(EntityType.PERSON, author, content, relation="author"),
            )
    if role == "user":
        entities += [_entity(EntityType.QUESTION_OPENED, _clip(q, 25), q) for q in real_questions]
    titles = " ".join(d.work_title or "" for _, d in research).split()
    if titles:  # "Truth and Method" names a book, not two people
        found = [f for f in found if f[0] not in titles]
        entities = [e for e in entities if e.entity_type is not EntityType.PERSON or e.name not in titles]
    people = tuple(dict.fromkeys(([speaker] if speaker else []) + [name for name, _, _ in found]))
    works = tuple(dict.fromkeys(d.work_title.lower() for _, d in research if d.work_title))
    return _Analysis(
        turn=turn,
        question_type=next((k for k in ("methodological", "interpretive", "factual") if k in kinds), None),
        is_clarification=P.is_clarification(lower, previous_q is not None),
        importance=_importance(turn, on, entities, decisions, research, strong),
        emotions=emotions,
        entities=tuple(entities),
        decisions=tuple(decisions),
        research=tuple(research),
        people=people,
        signal=signal,
        works=works,
        ranked_tags=P.topic_tags(sentences, exclude=people + works, limit=None),
    )


class _Turn(NamedTuple):
    lower: str
    flags: list[tuple[str, bool, bool]]  # (sentence, is_question, is_small_talk)


_BY_CAP = re.compile(r"\bby [A-Z]")


def _statements(
    turn: _Turn, on: dict[str, bool], owner: str, previous_q: str | None, entities: list[ExtractedEntity]
) -> tuple[list[ExtractedDecision], list[ExtractedResearch], dict[str, bool]]:
    """Decisions, research items and statement-level entities; also which sentences carry one."""
    decisions: list[ExtractedDecision] = []
    research: list[ExtractedResearch] = []
    signal: dict[str, bool] = {}
    for i, (sentence, is_q, small) in enumerate(turn.flags):
        before = len(entities)
        item = find_research(sentence, is_q) if on["research"] or _BY_CAP.search(sentence) else None
        if item is not None:
            research.append(ExtractedResearch(sentence, item))
        if on["open"] and _OPEN_CUE.search(sentence):
            entities.append(_entity(EntityType.QUESTION_OPENED, _clip(sentence, 25), sentence))
        if not (is_q or small):
            following = turn.flags[i + 1][0] if i + 1 < len(turn.flags) else None
            decision = find_decision(sentence, following) if on["decision"] else None
            if decision is not None:
                decisions.append(ExtractedDecision(sentence, decision))
                entities.append(_entity(EntityType.DECISION, decision.decision, sentence, what=decision.decision,
                                        why=decision.rationale, alternatives=list(decision.alternatives_considered)))
            entities.extend(_tasks(sentence, owner) if on["task"] else ())
            entities.extend(_waiting(sentence) if on["waiting"] else ())
            entities.extend(_state_changes(sentence, previous_q) if on["state"] else ())
        life = on["life"] and bool(_LIFE_EVENT.search(sentence))
        signal[sentence] = item is not None or len(entities) > before or life
    return decisions, research, signal


def _importance(
    turn: _Turn,
    on: dict[str, bool],
    entities: Sequence[ExtractedEntity],
    decisions: Sequence[ExtractedDecision],
    research: Sequence[ExtractedResearch],
    strong_emotion: bool,
) -> int:
    """Base 2, +2 life event, +1 decision/state change, +1 strong emotion, +1 urgency, +1 citation."""
    kinds = {e.entity_type for e in entities if e.entity_type is not EntityType.PERSON}
    if all(small for _, _, small in turn.flags) and not kinds:
        return IMPORTANCE_MIN
    lower = turn.lower
    score = 2
    if on["life"] and any(_life_event(s.lower()) for s, q, _ in turn.flags if not q):
        score += 2
    if decisions or kinds & _STATE_TYPES:
        score += 1
    if strong_emotion:
        score += 1
    urgent = _URGENT.search(lower) if on["urgent"] else None
    if urgent and not P.negated_before(lower, urgent.start()):
        score += 1
    if any(r.details.source_type != "note" for r in research):
        score += 1
    tokens = P.words(lower)
    if score == 2 and not kinds and len(tokens) <= 5 and sum(P.tag_key(w) is not None for w in tokens) <= 1:
        score = 1
    return max(IMPORTANCE_MIN, min(IMPORTANCE_MAX, score))


_STATE_TYPES = frozenset(
    {EntityType.INSIGHT, EntityType.QUESTION_RESOLVED, EntityType.BLOCKER_CLEARED, EntityType.PRIORITY_CHANGE}
)
