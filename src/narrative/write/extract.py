"""Deterministic extraction of meaning from one turn: the no-LLM default of the write and close paths.

:class:`HeuristicExtractor` turns a message into a :class:`TurnExtraction` with pure functions over the
text (no store, no model, no network), in well under a millisecond.  An LLM extractor implements the
same :class:`Extractor` protocol and falls back to this one when its answer is unusable.

Heuristics (lexical detectors live in :mod:`narrative.write.patterns`):

| field / entity      | fires on                                                                    |
|---------------------|-----------------------------------------------------------------------------|
| question_type       | most specific non-small-talk question: methodological ("how should", "which  |
|                     | approach", "should we", "how to") > interpretive ("why", "what does … mean", |
|                     | "how do you feel", "what do you think", "what inspired you") > factual        |
| is_clarification    | "what do you mean", "can you clarify", "do you mean", "I meant" (not "meant  |
|                     | to"), "to clarify"; a turn opening "I mean …" right after a question         |
| topic_tags          | ≤ 5 salient content words / capitalised phrases, lowercase, names excluded   |
| importance 1–5      | base 2; +2 life event (married, engaged, new job, moved to, passed away,     |
|                     | graduated, adopted a child, born, accident, …); +1 decision or state change  |
|                     | (insight, resolved question, cleared blocker, priority change); +1 strong    |
|                     | emotion; +1 "important/urgent/deadline/asap/critical"; +1 citation, quote or |
|                     | annotation; small talk only → 1; short turn with nothing found → 1           |
| emotions            | lexicon + phrases, negation in the same clause drops the cue (patterns)      |
| decisions           | "I/we decided/chose/opted/settled on", "made the decision/up my mind", "let's|
|                     | go with", "I'll go with", "the decision is to", first-person "use/adopt/go   |
|                     | with/stick with X instead of/rather than Y"; not in questions, not negated   |
|                     | ("haven't decided"); rationale after because/since/so that/'cause/given that |
|                     | (or a next sentence opening "Because …"); alternatives after instead of /    |
|                     | rather than / vs / versus / decided against (and "over" after prefer/choose);|
|                     | type by keyword counts (methodological/interpretive/scope, default scope);   |
|                     | confidence 0.8 (0.7 for "let's go with") −0.15 per hedge, +0.1 if emphatic;  |
|                     | reversible unless final/permanent/for good/once and for all/irreversible     |
| task                | "I/we need to / have to / 've got to / gotta / 'll / 'm going to", "remind  |
|                     | me to", "todo", "next step(s)", "action item" (formulaic "I'll let you know",|
|                     | "I have to say", "I'll never forget" … excluded); due date from "by <day>"  |
| waiting_on          | "waiting on/for X (to Y)", "until X gets back/replies", "X will/promised to  |
|                     | send/get back/confirm/…", "haven't heard back from X", "pending X"           |
| question_opened     | user-role questions that are not small talk; "I wonder if", "not sure       |
|                     | whether", "open question", "haven't decided (yet)", "need to figure out"    |
| question_resolved   | "figured out", "the answer is", "solved", "resolved", "found out", "the     |
|                     | fix/cause/solution was", "turns out" when a problem word or a previous       |
|                     | question is present (otherwise "turns out" is an insight)                    |
| blocker_cleared     | "unblocked", "no longer blocked", "not blocked anymore", "blocker … gone/   |
|                     | removed/cleared", "cleared the blocker/hurdle/way", "got the approval/green  |
|                     | light/go-ahead/sign-off", "got approved"                                      |
| priority_change     | "top/highest/first priority", "(de/re)prioritize", "lower priority", "let's |
|                     | do X first", "we should finish X before Y"                                   |
| insight             | "I/we realized/learned/discovered/noticed (that)", "it dawned on me", "it     |
|                     | turns out", "insight", "takeaway", "lesson learned", "now I understand"      |
| person              | see ``patterns.find_people``; the speaker is always included                |
| research            | "Author (Year[, p. N])", "(Author Year)", '"Title" by Author', "in Title by   |
|                     | Author", "Author's Title" (reading context), quoted passages ≥ 5 words,       |
|                     | p./pp./page references, book/paper/article mentions → source_type quote >   |
|                     | citation > annotation > note                                                  |
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
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
_SUBJ = r"\b(?:i|we|you|he|she|they|[a-z]+)(?:'ve|'d)?(?:\s+(?:have|had|finally|just|now|already|officially|eventually|ultimately|both|all|then|also|recently|today|yesterday))*\s+"  # noqa: E501
_DECIDED = re.compile(
    _SUBJ + r"(?:decided|chose|chosen|opted(?:\s+(?:for|to))?|settled\s+on|agreed\s+on|picked(?!\s+up)|"
    r"made\s+(?:the|a|my|our)\s+(?:decision|call|choice)(?:\s+to)?|made\s+up\s+(?:my|our)\s+minds?(?:\s+to)?)\b",
    _I,
)
_LETS_GO = re.compile(r"\b(?:let'?s|(?:i|we)'ll|(?:i|we)\s+will)\s+go\s+with\b", _I)
_DECISION_IS = re.compile(r"\b(?:the|our|my)\s+(?:final\s+)?decision\s+(?:is|was)\s+(?:to|that)\b", _I)
_CHOICE_VERB = (
    r"(?:use|using|adopt|adopting|stick(?:ing)?\s+with|switch(?:ing)?\s+to|prioriti[sz](?:e|ing)|pick(?:ing)?|"
    r"choos(?:e|ing)|go(?:ing)?\s+with|went\s+with|prefer|focus(?:ing)?\s+on)"
)
_INSTEAD = re.compile(r"\b" + _CHOICE_VERB + r"\b(?=[^.!?;]{1,90}?\b(?:instead\s+of|rather\s+than)\b)", _I)
_OVER = re.compile(r"\b(?:prefer(?:red)?|prioriti[sz]e[ds]?|chose|choose|picked)\b(?=[^.!?;]{1,60}?\bover\b)", _I)
_FIRST_PERSON = re.compile(r"\b(?:i|we|let's|i'm|we're|i'll|we'll|i've|we've|our|my)\b", _I)
_NOT_DECIDED = re.compile(
    r"\b(?:haven't|have\s+not|hasn't|didn't|not|never|undecided|can't|couldn't|yet\s+to|trying\s+to|still)\s+"
    r"(?:\w+\s+)?(?:decided|decide|chose|choose|chosen|made\s+up)",
    _I,
)
_RATIONALE = re.compile(
    r"(?:\bbecause\b|\bsince\b(?!\s+(?:then|last|\d|yesterday|we\s+last|i\s+last))|\bso\s+that\b|'cause\b|"
    r"\bcuz\b|\bgiven\s+that\b|\bdue\s+to\b|\bas\s+(?:it|they|this|that)\b|\bin\s+order\s+to\b|"
    r"\bthe\s+reason\s+(?:is|being)\b)\s*(?P<why>[^.!?]+)",
    _I,
)
_NEXT_RATIONALE = re.compile(
    r"^(?:because|since|that's\s+because|the\s+reason\s+(?:is|was)|it's\s+because|this\s+is\s+because)\b[,:]?\s*",
    _I,
)
_ALTERNATIVE = re.compile(
    r"\b(?:instead\s+of|rather\s+than|vs\.?|versus|decided\s+against)\s+(?P<alt>[^.!?;,]+)", _I
)
_ALT_STOP = re.compile(r"\s+(?:because|since|so\s+that|'cause|cuz|given|due\s+to|as\s+it|which|but|for)\b.*$", _I)
_ALT_SPLIT = re.compile(r"\s*(?:,|/|\bor\b|\band\b)\s*", _I)
_DECISION_END = re.compile(
    r"\s*(?:\b(?:because|since|so\s+that|given\s+that|due\s+to|instead\s+of|rather\s+than|vs\.?|versus|"
    r"in\s+order\s+to)\b|'cause\b|\bcuz\b|[.!?;]).*$",
    _I,
)
_HEDGES = re.compile(
    r"\b(?:maybe|probably|i\s+think|for\s+now|tentatively|might|perhaps|leaning|not\s+sure|i\s+guess|"
    r"kind\s+of|sort\s+of|for\s+the\s+time\s+being|unless|possibly|for\s+the\s+moment)\b",
    _I,
)
_EMPHATIC = re.compile(r"\b(?:definitely|final|for\s+sure|firmly|certain|absolutely|no\s+doubt|100%)", _I)
_IRREVERSIBLE = re.compile(
    r"\b(?:final|permanent(?:ly)?|for\s+good|irreversibl[ey]|no\s+going\s+back|once\s+and\s+for\s+all|"
    r"can(?:'t|not)\s+be\s+undone|forever)\b",
    _I,
)
_DECISION_TYPES = (
    (
        "methodological",
        re.compile(
            r"\b(?:method\w*|approach\w*|process\w*|technique|tool\w*|framework|librar\w+|database|format|"
            r"workflow|strateg\w+|structur\w+|pipeline|test\w*|analys\w+|implement\w*|architecture|design|"
            r"algorithm|use|using|model|measur\w+|protocol|schema|sqlite|postgres\w*|code|api)\b",
            _I,
        ),
    ),
    (
        "interpretive",
        re.compile(
            r"\b(?:interpret\w*|reading|meaning|understand\w*|view|position|terminology|concept\w*|fram\w+|"
            r"perspective|lens|sense|theor\w+|argument|claim|horizon|language|hermeneutic\w*|read\s+as)\b",
            _I,
        ),
    ),
    (
        "scope",
        re.compile(
            r"\b(?:scope|focus\w*|include|exclude|limit\w*|skip|drop|cut|only|prioriti\w+|priority|first|later|"
            r"defer|postpone|chapter|section|deadline|budget|timeline|plan|goal\w*)\b",
            _I,
        ),
    ),
)

_TASK = re.compile(
    r"\b(?:(?:i|we)(?:\s+(?:really|still|also|just|definitely|totally|seriously|now|first))*\s+"
    r"(?:need|have|got)\s+to|(?:i|we)'ve\s+got\s+to|(?:i|we)\s+gotta|"
    r"(?:i|we)(?:'ll|\s+will|'m\s+going\s+to|\s+am\s+going\s+to|'re\s+going\s+to|'m\s+gonna|'re\s+gonna)"
    r"(?:\s+(?:definitely|probably|also|just|still|really|need\s+to|have\s+to))*|"
    r"remind\s+me\s+to|to-?do:?|next\s+steps?(?:\s+is|\s+are|:)?(?:\s+to)?|action\s+items?:?)\s+(?P<task>[^.!?;]+)",
    _I,
)
_TASK_SKIP = re.compile(
    r"^(?:say|admit|confess|agree|thank|tell\s+you|ask\s+you|laugh|hand\s+it|be\s+(?:honest|there|fine|ok|okay|"
    r"careful|happy|glad)|always|never|miss|bet|see\b|take\s+that|keep\s+(?:you|that|it|this|in|going|at)|"
    r"let\s+you\s+know|have\s+fun|love|remember|cherish|think|do\s+my\s+best|try\s+my\s+best|be\s+sure|"
    r"give\s+it\s+a\s+(?:try|shot|go)|check\s+it\s+out|try\s+it|stay|continue\s+to\s+support|go\s*$)",
    _I,
)
_DUE = re.compile(
    r"\bby\s+(?P<due>tomorrow|tonight|(?:next|this|the\s+end\s+of\s+(?:the\s+)?)\s*(?:week|month|monday|tuesday|"
    r"wednesday|thursday|friday|saturday|sunday)|end\s+of\s+(?:the\s+)?(?:day|week|month)|monday|tuesday|"
    r"wednesday|thursday|friday|saturday|sunday|\w+\s+\d{1,2}(?:st|nd|rd|th)?)\b",
    _I,
)
_URGENT = re.compile(
    r"\b(?:important|urgent(?:ly)?|asap|deadline|critical|crucial|top\s+priority|high\s+priority|"
    r"don't\s+forget|must\s+not\s+forget|essential)\b",
    _I,
)
_WAITING = re.compile(
    r"\bwaiting\s+(?:on|for)\s+(?P<who>[^.!?;,]{2,60}?)(?:\s+to\s+(?P<what>[^.!?;,]{2,80}))?(?=[.!?;,]|$)"
    r"|\buntil\s+(?P<who2>[A-Z][a-z]+|he|she|they|the\s+\w+)\s+(?P<what2>(?:gets?\s+back|replies|responds|"
    r"confirms|sends|signs\s+off|approves)[^.!?;,]{0,60})"
    r"|\b(?P<who3>[A-Z][a-z]+|[Hh]e|[Ss]he|[Tt]hey|[Tt]he\s+(?:team|client|vendor|lawyer|landlord|bank|agency|"
    r"school|doctor|editor|reviewers?|publisher))\s+(?:will|'ll|is\s+going\s+to|promised\s+to|said\s+(?:she|he|"
    r"they)'d|is\s+supposed\s+to)\s+(?P<what3>(?:send|get\s+back|reply|respond|confirm|review|let\s+me\s+know|"
    r"call\s+(?:me\s+)?back|email|approve|sign|deliver|forward)[^.!?;,]{0,60})"
    r"|\bhaven'?t\s+heard\s+back\s+from\s+(?P<who4>[^.!?;,]{2,40})"
    r"|\bpending\s+(?P<what5>[^.!?;,]{2,60})"
)
_WAIT_VAGUE = re.compile(
    r"^(?:this|that|it|these|those|the\s+(?:day|moment|weekend|time)|a\s+while|ages|so\s+long)\b", _I
)
_OPEN_CUE = re.compile(
    r"\b(?:i\s+wonder\s+(?:if|whether|what|how|why|who|when)|open\s+question|not\s+sure\s+(?:if|whether|how|what|"
    r"which)|need\s+to\s+figure\s+out|(?:i|we)\s+(?:don't|do\s+not)\s+know\s+(?:if|whether|how|which)|"
    r"haven't\s+decided|still\s+undecided|still\s+deciding)\b",
    _I,
)
_RESOLVED = re.compile(
    r"\b(?:figured\s+(?:it\s+)?out|the\s+answer\s+(?:is|was)|solved|resolved|found\s+out|worked\s+out\s+(?:how|why|"
    r"that|what)|the\s+(?:fix|solution|cause|culprit|problem|issue)\s+(?:is|was))\b",
    _I,
)
_TURNS_OUT = re.compile(r"(?<!how it )(?<!how things )\b(?:turns\s+out|turned\s+out\s+(?:that|to\s+be|the))\b", _I)
_PROBLEM = re.compile(
    r"\b(?:bug|issue|problem|error|question|answer|cause|reason|fix|wrong|broken|crash\w*|fail\w*)\b", _I
)
_BLOCKER = re.compile(
    r"\b(?:unblock(?:ed|s)?|no\s+longer\s+blocked|not\s+blocked\s+anymore|blockers?\s+(?:is|are|was|were|has\s+been|"
    r"have\s+been)\s+(?:gone|removed|resolved|cleared|fixed|lifted)|cleared\s+(?:the|a|our|my|that)\s+(?:blocker|"
    r"hurdle|obstacle|way|path|roadblock)|(?:got|received|have)\s+(?:the\s+)?(?:approval|green\s+light|go-ahead|"
    r"sign-off)|got\s+approved)\b",
    _I,
)
_UNBLOCKS = re.compile(
    r"\b(?:so\s+(?:now\s+)?(?:we|i)\s+can|which\s+(?:means|lets)\s+(?:us|me)(?:\s+(?:can|to))?|unblock(?:s|ing))\s+"
    r"(?P<what>[^.!?;]+)",
    _I,
)
_PRIORITY = re.compile(
    r"\b(?P<high>(?:top|highest|first|main|number\s+one|biggest)\s+priority|(?:re-?)?prioriti[sz](?:e|ed|es|ing))\b"
    r"|\b(?P<low>de-?prioriti[sz](?:e|ed|es|ing)|lower(?:ed)?\s+(?:the\s+)?priority|(?:less|low(?:er)?)\s+(?:of\s+a\s+)?"
    r"priority)\b"
    r"|\b(?:let's|we'll|i'll|we\s+should|i\s+should|we\s+need\s+to|i\s+need\s+to|going\s+to|gonna)\s+(?:do|tackle|"
    r"handle|ship|build|fix|finish|focus\s+on|start\s+with)\s+(?P<item>[^.,;!?]{2,60}?)\s+(?:first\b|before\s+"
    r"(?P<before>[^.,;!?]{2,60}))",
    _I,
)
_PRIORITY_OBJECT = re.compile(
    r"\bprioriti[sz](?:e|ed|es|ing)\s+(?P<obj>[^.,;!?]{2,60}?)(?:\s+(?:over|before)\s+|$)", _I
)
_INSIGHT = re.compile(
    r"\b(?:(?:i|we)(?:'ve|\s+have|\s+just|\s+finally|\s+really|\s+also|\s+now)*\s+(?:realized|realised|learned|learnt|"
    r"discovered|noticed)\b(?!\s+(?:to|how\s+to)\b)|it\s+(?:dawned|occurred)\s+on\s+me|(?:key\s+)?insight|"
    r"takeaway|lesson\s+learned|the\s+lesson\s+is|now\s+i\s+(?:understand|see|get)\s+(?:that|why|how)|"
    r"it\s+turns\s+out)\b[,:]?\s*(?:that\s+)?(?P<what>[^.!?]*)",
    _I,
)
_LIFE_EVENT = re.compile(
    r"\b(?:(?:got|get|getting|just|am|are|is|was|were|be|been|'m|'re)\s+(?:\w+\s+)?(?:married|engaged|divorced|hired|"
    r"promoted|fired|laid\s+off|pregnant|diagnosed)|wedding|engagement|divorce|pregnan\w+|funeral|miscarriage|"
    r"graduat(?:ed|ing|ion)|retire[ds]?|retirement|promotion|new\s+(?:job|position|house|home|apartment|baby)|"
    r"(?:started|starting|landed|got|accepted)\s+(?:a|my|the)\s+(?:new\s+)?(?:job|position)|"
    r"mov(?:ed|ing)\s+(?:to|into|in\s+with|out|abroad|back|house|across)|passed\s+away|died|death\s+of|"
    r"lost\s+(?:my|his|her|our|their)\s+(?:mom|mother|dad|father|grand\w+|husband|wife|son|daughter|brother|sister|"
    r"friend|job|baby|dog|cat|pet)|adopt(?:ed|ing)?\s+(?:a|an|my|our|two|three)?\s*(?:\w+\s+)?(?:child|children|"
    r"baby|kid|kids|son|daughter|dog|cat|puppy|kitten|pet|pup)|adoption|(?:was|were|got|been|be|is|are)\s+born|"
    r"gave\s+birth|newborn|(?<!by\s)accident|surgery|hospitali[sz]ed|cancer|broke\s+up|proposed|"
    r"(?:first|new)\s+(?:grandchild|grandson|granddaughter))\b",
    _I,
)
_FILLER_PREFIX = re.compile(
    r"^(?:(?:wow|oh|yeah|yes|yep|hey|hi|hello|ok|okay|so|well|aw+|haha|lol|omg|btw|hmm|um)\b[,!.]?\s*)+", _I
)

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
    r"\bin\s+(?P<t>[A-Z][\w'\-]*(?:\s+(?:[A-Z][\w'\-]*|of|the|and|a|an|in|on|for|to)){0,8}?)\s+by\s+(?P<a>"
    + _PERSON_NAME
    + ")"
)
_POSSESSIVE_TITLE = re.compile(
    r"\b(?P<a>[A-Z][a-z'\-]+)'s\s+(?P<t>[A-Z][\w\-]*(?:\s+(?:(?:of|the|and|in|on|for|a|an)\s+)*[A-Z][\w\-]*)*)"
)
_BEFORE_PAGE = re.compile(r"(?P<w>[A-Z][\w'\-]*(?:\s+(?:[A-Z][\w'\-]*|of|the|and)){0,6}?)(?:'s)?,?\s+$")
_READING = re.compile(
    r"\b(?:read|reading|reread|book|books|novel|paper|article|essay|study|chapter|monograph|journal|thesis|"
    r"dissertation|poem|memoir|author|wrote|written|cite[sd]?|citing|quote[sd]?|argues?|according\s+to|"
    r"published|edition|volume|translation)\b",
    _I,
)
_MENTION = re.compile(
    r"\b(?:reading|read|rereading|finished|started|citing|annotating|studying|wrote|writing|published)\s+"
    r"(?:a|an|the|this|that|his|her|their|my|your)?\s*(?:\w+\s+){0,2}?(?:book|novel|paper|article|essay|study|"
    r"chapter|monograph|poem|memoir)s?\b|\b(?:book|novel|paper|article|essay|study|chapter)s?\s+(?:by|on|about)\s+"
    r"|\b(?:this|that|the)\s+(?:book|novel|paper|article|essay)\s+(?:i|you|we)\s+(?:read|recommended|cited)\b",
    _I,
)
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
    toks = text.strip(" ,;:-\u2013\u2014\"'").split()
    return " ".join(toks[:max_words]) + ("\u2026" if len(toks) > max_words else "")


def _sentence_ctx(sentence: str) -> str:
    return _clip(sentence, 40)


# --- decisions ---------------------------------------------------------------------------------


def _decision_start(sentence: str) -> tuple[int, float] | None:
    """Where the decided thing starts in ``sentence`` and the base confidence, or None."""
    for rx, base in ((_DECIDED, 0.8), (_DECISION_IS, 0.8), (_LETS_GO, 0.7)):
        m = rx.search(sentence)
        if m and not P.negated_before(sentence.lower(), m.start() + 1):
            return m.end(), base
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
    obj = re.sub(r"^\s*(?:to|on|that|with|for|,)\s+", "", sentence[start:], flags=_I)
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
    for q in P._QUOTED.finditer(sentence):
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
            ref = before.group("w")
            title, author = (ref, None) if len(ref.split()) > 1 else (None, ref)
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
        rest = _clip(sentence.replace(f'"{quote}"', " ").replace('""', " "), 30)
        note = rest if len(rest.split()) >= 3 else None
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
        task = _clip(_DECISION_END.sub("", m.group("task")), 12)
        if not task or _TASK_SKIP.match(task):
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
        if m.group("who3") and who[:1].isupper() and not P._name_ok(who) and who.split()[0].lower() != "the":
            continue
        if m.group("who") and _WAIT_VAGUE.match(who) and not what:
            continue
        if P.negated_before(sentence.lower(), m.start()):
            continue
        src = re.match(r"(?P<what>.+?)\s+from\s+(?P<who>.+)$", who)
        if src and not what:
            who, what = src.group("who"), src.group("what")
        name = _clip(f"{who}: {what}" if who and what else who or what, 14)
        out.append(_entity(EntityType.WAITING_ON, name, sentence, who=_clip(who, 8), what=_clip(what, 14)))
    return out


def _state_changes(sentence: str, previous_q: str | None) -> list[ExtractedEntity]:
    """Resolved questions, cleared blockers, priority changes and insights in one statement sentence."""
    out: list[ExtractedEntity] = []
    low = sentence.lower()
    turns = _TURNS_OUT.search(sentence)
    resolved = _RESOLVED.search(sentence)
    if turns and not resolved and (_PROBLEM.search(sentence) or previous_q):
        resolved = turns
    if resolved and not P.negated_before(low, resolved.start()):
        out.append(_entity(EntityType.QUESTION_RESOLVED, _clip(sentence, 16), sentence,
                           question=previous_q, answer=_clip(sentence, 30)))
    blocker = _BLOCKER.search(sentence)
    if blocker and not P.negated_before(low, blocker.start()):
        unblocks = _UNBLOCKS.search(sentence)
        out.append(_entity(EntityType.BLOCKER_CLEARED, _clip(sentence, 14), sentence,
                           what=_clip(sentence[: blocker.end()], 14),
                           unblocks=_clip(unblocks.group("what"), 12) if unblocks else None))
    prio = _PRIORITY.search(sentence)
    if prio:
        obj = _PRIORITY_OBJECT.search(sentence)
        item = prio.group("item") or (obj.group("obj") if obj else "") or sentence[: prio.start()]
        level = "low" if prio.group("low") else "next" if prio.group("item") else "high"
        item = _clip(re.sub(r"\s+(?:is|are)(?:\s+now)?(?:\s+(?:our|my|the))?\s*$", "", item.strip(), flags=_I), 12)
        out.append(_entity(EntityType.PRIORITY_CHANGE, item or _clip(sentence, 12), sentence, item=item, new=level,
                           before=_clip(prio.group("before") or "", 10)))
    insight = _INSIGHT.search(sentence)
    if insight and not (resolved is turns and turns) and not P.negated_before(low, insight.start()):
        what = _clip(insight.group("what") or sentence, 20)
        out.append(_entity(EntityType.INSIGHT, what, sentence, what=what))
    return out


def _life_event(lower: str) -> bool:
    return any(not P.negated_before(lower, m.start()) for m in _LIFE_EVENT.finditer(lower))


# --- key points and themes ---------------------------------------------------------------------


def _strip_filler(sentence: str) -> str:
    stripped = _FILLER_PREFIX.sub("", sentence).strip()
    return stripped[:1].upper() + stripped[1:] if stripped else ""


def _compress(scored: Sequence[tuple[int, str]], max_words: int) -> str:
    keep = [_strip_filler(s) for score, s in scored if score >= 2]
    if not keep:
        best = max((score for score, _ in scored), default=0)
        keep = [_strip_filler(s) for score, s in scored if score == best and score > 0][:1]
    out: list[str] = []
    used = 0
    for sentence in keep:
        n = len(sentence.split())
        if used and used + n > max_words:
            break
        out.append(sentence if used + n <= max_words else _clip(sentence, max_words - used))
        used += n
    return " ".join(out)


def _score_sentence(sentence: str, small: bool, signal: bool, tags: Iterable[str]) -> int:
    if small and not signal:
        return 0
    low = sentence.lower()
    score = 2 if signal else 0
    score += min(2, len(re.findall(r"\d+", sentence)))
    score += 1 if any(t in low for t in tags) else 0
    caps = [w for w in P.words(sentence)[1:] if w[:1].isupper() and P._name_ok(w)]
    score += 1 if caps else 0
    return score


def key_points(text: str, max_words: int = 30) -> str:
    """A ≤ ``max_words``-word compression of a turn for the "11–50 exchanges" retention tier.

    Keeps, in order, the sentences that carry an entity, decision, research item, life event or
    emotion-laden statement, numbers or names; drops greetings, thanks and bare reactions.  Returns
    "" when the turn is only small talk.
    """
    return HeuristicExtractor(key_point_words=max_words).extract_turn(text).key_points


def session_theme(texts: Iterable[str], *, speakers: Iterable[str] = (), max_tags: int = 4) -> str:
    """One line naming what many turns were about, for the "older: session themes" tier.

    Tags are ranked by how many turns carry them (ties: first seen), people by mentions;
    e.g. ``"adoption, pottery, painting and camping — with Caroline and Melanie"``.
    """
    extractor = HeuristicExtractor(max_tags=8)
    tag_counts: Counter[str] = Counter()
    people_counts: Counter[str] = Counter({s: 1 for s in speakers if s})
    order: dict[str, int] = {}
    for i, text in enumerate(texts):
        if not text or not text.strip():
            continue
        result = extractor.extract_turn(text)
        for tag in result.topic_tags:
            tag_counts[tag] += 1
            order.setdefault(tag, i)
        people_counts.update(result.people)
    names = [n for n, _ in sorted(people_counts.items(), key=lambda kv: -kv[1])][:3]
    lowered = {n.lower() for n in names}
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
        norm = P.normalize(text)
        speaker = speaker.strip()
        if not any(ch.isalnum() for ch in norm):
            return TurnExtraction(importance=IMPORTANCE_MIN, people=(speaker,) if speaker else ())
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
        if role == "user":
            entities += [_entity(EntityType.QUESTION_OPENED, _clip(q, 25), q) for q in real_questions]
        people = tuple(dict.fromkeys(([speaker] if speaker else []) + [name for name, _, _ in found]))
        tags = P.topic_tags(sentences, exclude=people, limit=self.max_tags)
        scored = [(_score_sentence(s, small, signal.get(s, False), tags), s) for s, _, small in turn.flags]
        return TurnExtraction(
            question_type=next((k for k in ("methodological", "interpretive", "factual") if k in kinds), None),
            is_clarification=P.is_clarification(lower, previous_q is not None),
            topic_tags=tags,
            importance=_importance(turn, on, entities, decisions, research, strong),
            emotions=emotions,
            entities=tuple(entities),
            decisions=tuple(decisions),
            research=tuple(research),
            people=people,
            key_points=_compress(scored, self.key_point_words),
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
    if on["life"] and _life_event(lower):
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
    if score == 2 and not kinds and sum(P.tag_key(w) is not None for w in P.words(lower)) <= 2:
        score = 1
    return max(IMPORTANCE_MIN, min(IMPORTANCE_MAX, score))


_STATE_TYPES = frozenset(
    {EntityType.INSIGHT, EntityType.QUESTION_RESOLVED, EntityType.BLOCKER_CLEARED, EntityType.PRIORITY_CHANGE}
)
