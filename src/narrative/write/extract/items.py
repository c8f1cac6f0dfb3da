"""Open items and state changes: tasks, waiting-ons, opened and resolved questions, blockers, priorities, insights."""

from __future__ import annotations

import re
from typing import Any

from narrative.model import EntityType
from narrative.text import patterns as P
from narrative.write.extract.cues import IGNORE_CASE, caseless, clip
from narrative.write.extract.decisions import DECISION_END
from narrative.write.extract.results import ExtractedEntity

_TASK = caseless(
    r"\b(?:(?:i|we)(?:\s+(?:really|still|also|just|definitely|totally|seriously|now|first))*\s+(?:need|have)\s+to|"
    r"(?:i|we)'ve\s+got\s+to|(?:i|we)\s+gotta|(?P<intent>(?:i|we)(?:'ll|\s+will|'m\s+going\s+to|\s+am\s+going\s+to|"
    r"'re\s+going\s+to|'m\s+gonna|'re\s+gonna))(?:\s+(?:definitely|probably|also|just|still|really|need\s+to|"
    r"have\s+to|try\s+to))*|(?P<remind>remind\s+me\s+to)|to-?do:?|next\s+steps?(?:\s+is|\s+are|:)?(?:\s+to)?|action\s+items?:?)\s+"
    r"(?P<task>[^!?;]+)"
)
#: "I'll / I'm going to …" is a task only with a concrete action verb or a time marker (chat is full of
#: "we'll make great memories"); "going to" followed by a determiner is a destination.
_ACTION = caseless(
    r"^(?:send|call|email|text|write|finish|fix|look\s+into|check\s+(?:on|with|in)|book|buy|schedule|ask|talk\s+to|"
    r"review|update|share|bring|make\s+sure|start|sign\s+up|register|apply|submit|pick\s+up|clean|prepare|read|"
    r"research|contact|reach\s+out|follow\s+up|set\s+up|plan|organi[sz]e|draft|ship|deploy|test|merge|order|pay|"
    r"visit|meet|join|move|cancel|return|renew|file|print|install|learn|practice|study|train|cook|bake|try)\b"
)
_WHEN = caseless(
    r"\b(?:today|tomorrow|tonight|later|soon|this\s+(?:week|weekend|month|year|morning|afternoon|evening)|"
    r"next\s+(?:week|weekend|month|year)|on\s+(?:monday|tuesday|wednesday|thursday|friday|saturday|"
    r"sunday))\b"
)
_CLAUSE_END = caseless(r"\s*(?:,|\s-\s|\band\s+\(?(?:hopefully|then|maybe)\b|\bbut\b|\bso\b|\bif\b).*$")
_DESTINATION = re.compile(r"^(?:(?:a|an|the|my|our|your|his|her|their|this|that|some)\b|[A-Z])")
_TASK_SKIP = caseless(
    r"^(?:say|admit|confess|agree|thank|tell\s+you|ask\s+you|laugh|hand\s+it|be\s+(?:honest|there|fine|ok|okay|"
    r"careful|happy|glad)|always|never|miss|bet|see\b|take\s+that|keep\s+(?:you|that|it|this|in|going|at)|"
    r"let\s+you\s+know|keep\s+(?:ya|u)\s+posted|do\s+(?:for|with|about|in|on|at)\b|do\s*$|have\s+fun|"
    r"make\s+sure\s+to\s+(?:keep\s+you|remember|let\s+you)|love|remember|cherish|think|do\s+my\s+best|try\s+my\s+best|be\s+sure|"
    r"give\s+it\s+a\s+(?:try|shot|go)|check\s+it\s+out|try\s+it|stay|continue\s+to\s+support|go\s*$)"
)
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_MONTH = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|"
    r"jun|jul|aug|sept|sep|oct|nov|dec)\.?"
)
_ORDINAL = r"\d{1,2}(?:st|nd|rd|th)?"
#: a time a deadline names: "Friday", "next week", "April 30", "the 14th", "end of March", "5pm", "2026-04-30"
DATE = (
    rf"(?:today|tonight|tomorrow|(?:(?:this|next|on)\s+)?{_WEEKDAY}(?:\s+(?:morning|afternoon|evening|night))?|"
    rf"(?:this|next)\s+(?:week|weekend|month|year)|(?:the\s+)?end\s+of\s+(?:the\s+)?(?:day|week|month|year|"
    rf"quarter|{_MONTH})|{_MONTH}\s+{_ORDINAL}(?:,?\s+\d{{4}})?|{_ORDINAL}\s+(?:of\s+)?{_MONTH}(?:,?\s+\d{{4}})?|"
    rf"the\s+\d{{1,2}}(?:st|nd|rd|th)|\d{{1,2}}(?::\d{{2}})?\s*(?:am|pm)|noon|midnight|\d{{4}}-\d{{2}}-\d{{2}}|"
    rf"\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?)"
)
_DUE = caseless(rf"\b(?:by|before|no\s+later\s+than|due(?:\s+(?:on|by))?|until)\s+(?P<due>{DATE})\b")
#: a deadline stated about a thing rather than as an action: "my tax return is due on April 30", "the deadline
#: for the grant is March 3", "the slides have to be in by Thursday"
_DEADLINE = caseless(
    r"\b(?P<what>(?:(?:my|our|the|his|her|their|your|this|that)\s+)[^.!?;,]{2,50}?)\s+(?:is|are|'s)\s+"
    rf"(?:(?:still|also|now)\s+)?due\s+(?:(?:on|by|at|before)\s+)?(?P<due>{DATE})\b"
    r"|\bdeadline\s+(?:for|of|on)\s+(?P<what2>[^.!?;,]{2,50}?)\s+(?:is|was|'s)\s+(?:(?:on|at)\s+)?"
    rf"(?P<due2>{DATE})\b"
    r"|\b(?P<what3>(?:(?:my|our|the|his|her|their|this|that)\s+)[^.!?;,]{2,50}?)\s+(?:has|have|needs?)\s+to\s+be\s+"
    rf"(?:done|finished|submitted|filed|sent|in|ready|signed|paid|booked)\s+(?:by|before)\s+(?P<due3>{DATE})\b"
)
#: "important" as a generic maxim ("it's important to …", "important to me") does not count.
URGENT = caseless(
    r"\b(?:important(?!\s+(?:to|for|part|thing|that|than)\b)|urgent(?:ly)?|asap|deadline|critical|crucial|"
    r"top\s+priority|high\s+priority|don't\s+forget|must\s+not\s+forget)\b"
)
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
_WAIT_VAGUE = caseless(r"^(?:this|that|it|these|those|the\s+(?:day|moment|weekend|time)|a\s+while|ages|so\s+long)\b")
OPEN_CUE = caseless(
    r"\b(?:i\s+wonder\s+(?:if|whether|what|how|why|who|when)|open\s+question|not\s+sure\s+(?:if|whether|how|what|"
    r"which)|need\s+to\s+figure\s+out|(?:i|we)\s+(?:don't|do\s+not)\s+know\s+(?:if|whether|how|which)|"
    r"haven't\s+decided|still\s+undecided|still\s+deciding)\b"
)
_RESOLVED = caseless(
    r"\b(?:figured\s+(?:it\s+)?out|the\s+answer\s+(?:is|was)|solved|resolved|worked\s+out\s+(?:how|why|"
    r"that|what)|the\s+(?:fix|solution|cause|culprit|problem|issue)\s+(?:is|was))\b"
)
_TURNS_OUT = caseless(r"(?<!how it )(?<!how things )\b(?:turns\s+out|turned\s+out\s+(?:that|to\s+be|the))\b")
_PROBLEM = caseless(r"\b(?:bug|issue|problem|error|question|answer|cause|reason|fix|wrong|broken|crash\w*|fail\w*)\b")
_BLOCKER = caseless(
    r"\b(?:unblocked|no\s+longer\s+blocked|not\s+blocked\s+anymore|blockers?\s+(?:is|are|was|were|has\s+been|"
    r"have\s+been)\s+(?:gone|removed|resolved|cleared|fixed|lifted)|cleared\s+(?:the|a|our|my|that)\s+(?:blocker|"
    r"hurdle|obstacle|way|path|roadblock)|(?:got|received|have)\s+(?:the\s+)?(?:approval|green\s+light|go-ahead|"
    r"sign-off)|got\s+approved)\b"
)
_SUBJECT_TAIL = caseless(
    r"(?:[\s,]+(?:since|because|as|which|that|this|it|is|was|now|so|and|the|has|been|got))*[\s,]*$"
)
_UNBLOCKS = caseless(
    r"\b(?:so\s+(?:now\s+)?(?:we|i)\s+can|which\s+(?:means|lets)\s+(?:us|me)(?:\s+(?:can|to))?|unblock(?:s|ing))\s+"
    r"(?P<what>[^.!?;]+)"
)
_PRIORITY = caseless(
    r"\b(?P<high>(?:top|highest|first|main|number\s+one|biggest)\s+priority|(?:re-?)?prioriti[sz](?:e|ed|es|ing))\b"
    r"|\b(?P<low>de-?prioriti[sz](?:e|ed|es|ing)|lower(?:ed)?\s+(?:the\s+)?priority|(?:less|low(?:er)?)\s+(?:of\s+a\s+)?"
    r"priority)\b"
    r"|\b(?:let's|we'll|i'll|we\s+should|i\s+should|we\s+need\s+to|i\s+need\s+to|going\s+to|gonna)\s+(?:do|tackle|"
    r"handle|ship|build|fix|finish|focus\s+on|start\s+with)\s+(?P<item>[^.,;!?]{2,60}?)\s+(?:first\b|before\s+"
    r"(?P<before>[^.,;!?]{2,60}))"
)
_PRIORITY_SUBJECT = caseless(r"\s+(?:is|are|was|were)(?:\s+now)?(?:\s+(?:our|my|the|a))?\s*$|^\s*(?:our|my|the)\s*$")
_PRIORITY_OBJECT = caseless(
    r"\bprioriti[sz](?:e|ed|es|ing)\s+(?P<obj>[^.,;!?]{2,60}?)(?:\s+(?:over|before)\s+(?P<over>[^.,;!?]{2,60})|"
    r"(?=[.,;!?]|$))"
)
_INSIGHT = caseless(
    r"\b(?:(?:i|we)(?:'ve|\s+have|\s+just|\s+finally|\s+really|\s+also|\s+now|\s+recently)*\s+(?:realized|realised|"
    r"learned|learnt|discovered|noticed\s+that|found\s+out)\b(?:\s+(?:again|recently|today|now|finally))?(?!\s+(?:to|how\s+to)\b)|it\s+(?:dawned|occurred)\s+on\s+me|"
    r"(?:key\s+|main\s+|big\s+)?(?:insight|takeaway)\s*(?:is|was|here\s+is|:)|lesson\s+learned|the\s+lesson\s+is|"
    r"now\s+i\s+(?:understand|see|get)\s+(?:that|why|how)|(?<!how\s)(?<!see\s)it\s+turns\s+out)\b[,:]?\s*(?:that\s+)?"
    r"(?P<what>[^.!?]*)"
)


# --- entities ----------------------------------------------------------------------------------


def entity_of(kind: EntityType, name: str, sentence: str, **data: Any) -> ExtractedEntity:
    payload = {k: v for k, v in data.items() if v not in (None, "", ())}
    payload["sentence"] = clip(sentence, 40)
    return ExtractedEntity(kind, name, payload)


def find_tasks(sentence: str, owner: str) -> list[ExtractedEntity]:
    out: list[ExtractedEntity] = []
    for m in _TASK.finditer(sentence):
        task = clip(_CLAUSE_END.sub("", DECISION_END.sub("", m.group("task"))), 12)
        if not task or _TASK_SKIP.match(task):
            continue
        if m.group("remind") and sentence[: m.start()].strip(" ,").lower() not in ("", "please", "pls"):
            continue  # "they remind me to slow down" is not a request
        intent = m.group("intent")
        destination = intent is not None and "going" in intent and _DESTINATION.match(task)
        if intent and (destination or not (_ACTION.match(task) or _WHEN.search(task) or _DUE.search(task))):
            continue
        due = _DUE.search(m.group("task"))
        urgent = bool(URGENT.search(sentence))
        out.append(
            entity_of(
                EntityType.TASK,
                task,
                sentence,
                description=task,
                owner=owner,
                status="open",
                priority="high" if urgent else "",
                due=due.group("due") if due else None,
            )
        )
    return out


def find_deadlines(sentence: str, owner: str) -> list[ExtractedEntity]:
    """A deadline said of a thing ("my tax return is due on April 30"): an open task with its due date."""
    out: list[ExtractedEntity] = []
    for m in _DEADLINE.finditer(sentence):
        what = next((m.group(g) for g in ("what", "what2", "what3") if m.group(g)), "").strip()
        due = next((m.group(g) for g in ("due", "due2", "due3") if m.group(g)), "").strip()
        if not what or not due or P.negated_before(sentence.lower(), m.start()):
            continue
        name = clip(f"{what} due {due}", 14)
        out.append(entity_of(EntityType.TASK, name, sentence, description=name, owner=owner, status="open", due=due))
    return out


def find_waiting(sentence: str) -> list[ExtractedEntity]:
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
        name = clip(f"{who}: {what}" if who and what else who or what, 14)
        out.append(entity_of(EntityType.WAITING_ON, name, sentence, who=clip(who, 8), what=clip(what, 14)))
    return out


def find_state_changes(sentence: str, previous_q: str | None) -> list[ExtractedEntity]:
    """Resolved questions, cleared blockers, priority changes and insights in one statement sentence."""
    out: list[ExtractedEntity] = []
    low = sentence.lower()
    turns = _TURNS_OUT.search(sentence)
    resolved = _RESOLVED.search(sentence)
    if turns and not resolved and _PROBLEM.search(sentence):
        resolved = turns
    if resolved and not P.negated_before(low, resolved.start()):
        out.append(
            entity_of(
                EntityType.QUESTION_RESOLVED,
                clip(sentence, 16),
                sentence,
                question=previous_q,
                answer=clip(sentence, 30),
            )
        )
    blocker = _BLOCKER.search(sentence)
    if blocker and not P.negated_before(low, blocker.start()):
        unblocks = _UNBLOCKS.search(sentence)
        what = clip(_SUBJECT_TAIL.sub("", sentence[: blocker.start()]), 14) or clip(sentence, 14)
        out.append(
            entity_of(
                EntityType.BLOCKER_CLEARED,
                what,
                sentence,
                what=what,
                unblocks=clip(unblocks.group("what"), 12) if unblocks else None,
            )
        )
    prio = _PRIORITY.search(sentence)
    if prio:
        obj = _PRIORITY_OBJECT.search(sentence)
        level = "low" if prio.group("low") else "next" if prio.group("item") else "high"
        subject = _PRIORITY_SUBJECT.sub("", sentence[: prio.start()]).strip()
        after = re.match(r"[\s:]*(?:is|was|will\s+be|now)?\s*(?P<x>[^.;!?]+)", sentence[prio.end() :], IGNORE_CASE)
        if not any(P.tag_key(w.lower()) for w in P.words(subject)):
            subject = after.group("x") if after else ""
        item = clip(prio.group("item") or (obj.group("obj") if obj else "") or subject, 12)
        before = prio.group("before") or (obj.group("over") if obj and not prio.group("item") else "") or ""
        out.append(
            entity_of(
                EntityType.PRIORITY_CHANGE,
                item or clip(sentence, 12),
                sentence,
                item=item,
                new=level,
                before=clip(before, 10),
            )
        )
    insight = _INSIGHT.search(sentence)
    if insight and not (resolved is turns and turns) and not P.negated_before(low, insight.start()):
        what = insight.group("what")
        what = clip(sentence if len(what.split()) < 3 or what.lower().startswith("the hard way") else what, 20)
        out.append(entity_of(EntityType.INSIGHT, what, sentence, what=what))
    return out
