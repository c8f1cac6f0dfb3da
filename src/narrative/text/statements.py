"""Statements: what a sentence asserts, in the terms that tell whether a later sentence updates or contradicts it.

People correct themselves in a few recognisable ways, and this module reads only those (no model):

* **a change cue** — "actually", "now", "no longer", "anymore", "not … anymore", "correction", "update" (a verb
  or a label: "the DOM updates" names a thing), "instead", "changed", "moved", "switched", "new", "recently",
  verbs of change followed by "to" ("improved to 78%", "moved to Lisbon", "extended … to 4 hours", "reduced the
  latency from 520ms to 290ms"), "has reached", "is now";
* **a value** — a number with its unit ("8 cards", "65%", "250ms", "1,200 calls"), a date ("April 5, 2024",
  "2024-04-05", "16.01.2024"), a weekday a plan is on ("on Friday"; not "last Friday"), or the thing a "not X"
  names as the old value ("Lisbon now, not Berlin");
* **a subject** — the content words the two sentences share (singular, lower case), beyond values and cues.

A sentence *updates* an earlier one when it has a change cue, they share the subject, and it gives the same kind of
value with a different content for the same thing (a count of the same things, "1,200 calls" after "1,000 calls",
and of things about the same thing when it is named after them: "8 problems on medians" counts no problems on the
Pythagorean theorem; for a percentage, a duration or a date, the words around the two values share a content word:
"the launch moved to April 5" and "the launch is on April 1"; and a number that names what it measures beside it —
"a 95% success rate", "the bounce rate under 40%", "a 300ms debounce", or before the comma of the relative clause
it stands in: "the input latency, which is currently 520ms" — measures that only when the other sentence names it
too: "the bounce rate is now below 35%" updates no success rate, "the input lag is now over 500ms" no debounce; two
numbers in long sentences that merely share a topic are values of different things; a bare number with no unit,
like a triangle's sides "3, 4, 5", is no value that changes) — or its "not X" names a value the earlier one states
("…, not X" alone is a correction: "on Wednesday, not Tuesday"). The cue says which value changed: one in its own
clause ("I've studied for a week now, so I want to check my 90% accuracy" changes no percentage), or any when it
opens the sentence ("Update: …"), never the one a change is "from" (a verb of change changes the value after its
"to", and one that says what it was, "from 60% to 85%", or "which was initially 800ms, … to 300ms", updates only a
statement of that value). What an earlier sentence says a value changed to is what stood when it was said: a later
figure updates that ("from 450ms to 120ms", then "now 300ms": was 120), and the value it was changed from only when
nothing else fits. A version ("Flask 2.3.1") and the date a figure was true "as of" are no values. A sentence
*contradicts* an earlier one, with no order between them, when one denies ("I've never …", "I haven't …") what the
other affirms about the same subject (at least two shared content words, one of them a content word of the denied
clause). Code blocks assert nothing here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from narrative.text import patterns as P

__all__ = [
    "DISAGREES",
    "SINCE_DONE",
    "UPDATES",
    "Change",
    "Statement",
    "Value",
    "blank_code",
    "contradiction",
    "denied_shared",
    "statements",
    "update",
]

#: How a conflict row's reason starts when it links an update to an earlier statement whose message says more
#: than what was updated (so the message stays current; readers show the update first).
UPDATES = "updates: "
#: How the reason of an update starts when it reports doing what an earlier statement denied ("I've never written
#: Flask routes", later "I wrote the homepage route"): progress that leaves the denial current.
SINCE_DONE = UPDATES + "since done: "
#: How a contradiction's reason starts (then the denied words the other statement affirms).
DISAGREES = "one says never, the other says it did: "

_FENCE = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)", re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
#: A verb of change counts as a cue when the value it changes to follows ("extended … to 4 hours", "pushed to
#: April 20"): "pushed to the GitHub repository" changes nothing.
_DAYS = "next|tomorrow|monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_TO_VALUE = rf"to(?=\s+(?:\w+\s+){{0,3}}?(?:[$€£]?\d|(?:{_MONTHS}|{_DAYS})\b))"
_CUE = re.compile(
    r"\b(?:actually|correction|corrected|update[ds]?|updating|anymore|any more|no longer|instead|"
    r"now|nowadays|currently|recently|lately|latest|new|newly|changed?|changing|moved|switch(?:ed)?|"
    r"(?:improv|increas|decreas|extend|reduc|rais|lower|grow|grew|drop|dropp|bump|push|revis|adjust|"
    rf"shift|postpon|delay|mov)(?:e|es|ed|ing)?\s+(?:\w+\s+){{0,4}}?(?:from\s+\S+\s+)?{_TO_VALUE}|reached|has\s+become|"
    r"is\s+now|are\s+now)\b",
    re.IGNORECASE,
)
_DATE = re.compile(
    rf"\b(?:(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?"
    rf"(?:{_MONTHS})\.?(?:,?\s+\d{{4}})?|\d{{4}}-\d{{2}}-\d{{2}}|\d{{1,2}}[./]\d{{1,2}}[./]\d{{4}})\b",
    re.IGNORECASE,
)
_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
#: A weekday a plan is on ("the appointment is on Monday", "moved to Friday", "every Sunday"); not "last Friday",
#: the day something already happened.
_WEEKDAY = re.compile(
    rf"\b(?:on|by|until|till|to|next|this|every|from)\s+(?:(?:the|a)\s+)?({_WEEKDAYS})s?\b", re.IGNORECASE
)
_NUMBER = re.compile(r"(?<![\w.])(\$|€|£)?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?:\s*(%|percent\b|[a-zA-Z]+))?")
_NOT_X = re.compile(
    r"(?:[,;:\u2014\u2013]\s*|\bnow\s+)not\s+(?:the\s+|a\s+|an\s+|in\s+|at\s+)?([\w][\w\-]*)|"
    r"\b(?:instead\s+of|rather\s+than)\s+(?:the\s+|a\s+|an\s+|my\s+)?([\w][\w\-]*)|"
    r"\bnot\s+(?:the\s+|a\s+|an\s+|in\s+|at\s+)?([\w][\w\-]*)\s+(?:any\s*more|any\s+longer)\b",
    re.IGNORECASE,
)
#: How a question opens (after fillers): "how do I …?", "can you …?", "is it …?".  "I've done 12, can you …?"
#: opens with a statement and still states its value.
_ASKING = re.compile(
    r"(?:how|what|why|when|where|which|who|whom|whose|can|could|would|should|will|shall|do|does|did|is|are|was|"
    r"were|am|may|might|have|has|had)\b"
)
#: How an instruction opens: "Always …", "Never …" (no one said it of themselves), "Please …", "Don't …",
#: "Make sure …", "Remember to …".
_INSTRUCTION = re.compile(r"(?:please[,\s]+)?(?:always|never|don't|do\s+not|make\s+sure|be\s+sure|remember\s+to)\b")
#: How a sentence of what the speaker wants or plans opens: "I want to …", "I'd like …", "I need …", "I plan
#: to …", "I'm going to …", "I hope …".
_INTENT = re.compile(
    r"(?:i|we)(?:'d|\s+would)?\s*(?:want|'d\s+like|like\s+to|need|plan|hope|intend|aim|wish)\b|"
    r"(?:i|we)(?:'m|'re|\s+am|\s+are)\s+(?:going|planning|hoping|aiming|about)\s+to\b"
)
#: ... and what makes it report something done all the same ("…, especially since I've been practising coin tosses").
_REPORT = re.compile(
    r"\b(?:i|we)(?:'ve|\s+have|\s+had)\b(?!\s+to\b)|\b(?:i|we)\s+(?:did|was|were|got)\b|\b(?:i|we)\s+[a-z]+ed\b",
    re.IGNORECASE,
)
_PERSONAL = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|we|we're|we've|my|our)\b", re.IGNORECASE)
_ENDED = re.compile(r"\b(?:any\s*more|any\s+longer|no\s+longer)\b", re.IGNORECASE)
_DENIAL = re.compile(
    r"\b(?:i|we)\s*(?:'ve|\s+have|'d|\s+had)?\s*(?:never|not\s+yet|not\s+ever)\b|"
    r"\b(?:i|we)\s+(?:haven't|hadn't|have\s+not|had\s+not|didn't|did\s+not|don't|do\s+not)\s+"
    r"(?:\w+\s+){0,2}?(?:any|ever|yet|before)\b",
    re.IGNORECASE,
)
_UNIT_WORDS = frozenset(
    """ms millisecond milliseconds s sec second seconds min minute minutes h hr hrs hour hours day days week weeks
    month months year years km kg g mb gb kb tb px pt em rem k""".split()
)
#: Cues that also appear where nothing changes ("a new camera", "now I'm reading"): they need more evidence.
_WEAK_CUES = frozenset({"now", "nowadays", "currently", "recently", "lately", "latest", "new", "newly"})
_SYMBOLS = frozenset({"percent", "money", "ms", "s", "sec", "h", "hr", "hrs", "km", "kg", "g", "mb", "gb", "kb"})
_NOT_UNITS = frozenset(P.STOPWORDS) | {"and", "or", "to", "of", "in", "on", "at", "by", "for", "with", "from"}
#: Words that describe rather than name: "instead of the correct s = 18" names no old value.
_DESCRIBING = frozenset(
    """correct right wrong same usual original previous old other default standard normal regular proper best
    good bad first last next whole full real actual exact simple basic""".split()
)
_CUE_KEYS = frozenset(
    """actually correction update updating anymore longer instead now nowadays currently recently lately latest
    new newly change changing moved switch switched reached become""".split()
)


@dataclass(frozen=True)
class Value:
    """One stated value: ``kind`` (number, date, named) and ``unit`` (what it counts, "" when unknown)."""

    kind: str
    unit: str
    text: str  # normalised, for comparing ("1200", "2024-04-05" as written, "lisbon")
    near: frozenset[str] = frozenset()  # content keys of the words around it: what it is the value of
    noun: str = ""  # the last word of the noun phrase it counts ("12 conditional probability problems": problem)
    alone: bool = False  # a number no word follows ("… have reached 165."): it counts what the words before name
    at: int = field(default=-1, compare=False)  # where it starts in its sentence
    #: the words that name what it measures, modifier first ("95% success rate", "the bounce rate under 40%",
    #: "a response time of 280ms"); () when no noun phrase is attached to it ("… which is now 35%")
    measure: tuple[str, ...] = field(default=(), compare=False)
    was: str = field(default="", compare=False)  # what it changed from, when the sentence says ("from 60% to 85%")
    #: what a count's things are about, when a word names it after them ("8 problems on medians": median)
    about: str = field(default="", compare=False)


@dataclass(frozen=True)
class Change:
    """Why a statement updates an earlier one, and the words of the earlier value that are no longer true."""

    reason: str
    gone: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True)
class Statement:
    """A prose sentence of a text: where it is, its content keys, values, change cue, denial, "not X"."""

    start: int
    end: int
    keys: frozenset[str]
    values: tuple[Value, ...]
    cue: str
    denied: bool
    not_values: tuple[str, ...]
    ended: bool = False  # "no longer", "anymore": the earlier state is over
    personal: bool = False  # said in the first person ("I", "we", "my"): what a denial can contradict
    denied_keys: frozenset[str] = frozenset()  # content keys of the clause denied ("never … coin toss problems")
    asks: bool = False  # a question ("how do I get alerts when bounce rates go above 40%?"): it states no value
    frames: tuple[tuple[str, ...], ...] = ()  # each part between commas and semicolons, as words, cue words left out
    changed: tuple[Value, ...] = ()  # the values a change cue governs (in the cue's clause): what it says changed
    instructs: bool = False  # an instruction ("Always include units when I ask about …"): it says nothing done
    intends: bool = False  # what the speaker wants or plans, with no report of anything done ("I want to solve …")


def blank_code(text: str) -> str:
    """``text`` with its code (fenced blocks, then inline spans) blanked by spaces: prose keeps its positions."""
    prose = _FENCE.sub(lambda m: " " * len(m.group(0)), text)
    return _INLINE_CODE.sub(lambda m: " " * len(m.group(0)), prose)


def statements(text: str) -> list[Statement]:
    """The prose sentences of ``text`` (code blocks left out) as statements, in order."""
    prose = blank_code(text)
    found: list[Statement] = []
    position = 0
    for sentence in P.split_sentences(prose):
        start = prose.find(sentence, position)
        if start < 0:
            continue
        position = start + len(sentence)
        for clause, at in _clauses(sentence, start):
            if P.words(clause):
                found.append(_statement(clause, at))
    return found


LONGEST = 600  # characters: a longer run-on sentence is read clause by clause
_CLAUSE_END = re.compile(r"(?<=[,;:])\s+|\s+(?=(?:but|so|because|although|though|whereas)\b)", re.IGNORECASE)


def _clauses(sentence: str, start: int) -> list[tuple[str, int]]:
    """``sentence`` (at ``start``) whole, or clause by clause when it runs on past ``LONGEST`` characters (a
    clause still longer than that is left out)."""
    if len(sentence) <= LONGEST:
        return [(sentence, start)]
    found: list[tuple[str, int]] = []
    at = 0
    for cut in [*_CLAUSE_END.finditer(sentence), None]:
        end = len(sentence) if cut is None else cut.start()
        if 0 < end - at <= LONGEST:
            found.append((sentence[at:end], start + at))
        at = end if cut is None else cut.end()
    return found


def _statement(sentence: str, start: int) -> Statement:
    normal = P.normalize(sentence)
    values = _values(normal)
    value_words = {w for v in values for w in v.text.split()}
    keys = frozenset(
        key
        for word in P.words(normal)
        if (key := P.tag_key(word.lower())) is not None and key not in _CUE_KEYS and key not in value_words
    )
    cues = _cues(normal)
    cue = cues[0] if cues else None
    denial = _DENIAL.search(normal)
    nots = tuple(next(g for g in m.groups() if g).lower() for m in _NOT_X.finditer(normal))
    return Statement(
        start=start,
        end=start + len(sentence),
        keys=keys,
        values=values,
        cue="" if cue is None else cue.group(0).lower(),
        denied=denial is not None,
        not_values=tuple(
            n for n in nots if (P.tag_key(n) is not None or n in _WEEKDAYS.split("|")) and n not in _DESCRIBING
        ),
        ended=_ENDED.search(normal) is not None,
        personal=_PERSONAL.search(normal) is not None and len(keys) >= 2,
        denied_keys=frozenset() if denial is None else _denied(normal, denial.start(), keys),
        asks=normal.rstrip().endswith("?") and _ASKING.match(P.strip_lead(normal.lower())) is not None,
        frames=_frames(normal),
        changed=_governed(normal, cues, values),
        instructs=_INSTRUCTION.match(P.strip_lead(normal.lower())) is not None,
        intends=_INTENT.match(P.strip_lead(normal.lower())) is not None and _REPORT.search(normal) is None,
    )


_PART = re.compile(r"[,;:\u2014\u2013]|\s-\s")
_TOKEN = re.compile(r"[\w][\w'\u2019.-]*[\w]|[\w]")
#: What a restated sentence may change in place of a value: not its negation ("I live in Berlin" / "I don't live
#: in Berlin now" is a denial, read by the rules above).
_NEGATING = frozenset({"not", "never", "no", "don't", "doesn't", "didn't", "isn't", "aren't", "wasn't", "won't", "nor"})
#: ... nor add to it ("I like tea" / "I like coffee now too" likes both).
_ADDING = frozenset({"too", "also", "either", "both", "well", "besides"})
_COPULAS = frozenset({"i'm", "im", "we're"})  # one word that keeps a subject and its verb
_FIRST_PERSON = frozenset({"i", "i'm", "im", "i've", "my", "we", "we're", "we've", "our"})
SLOT = 3  # words at most on either side of a restated sentence's changed place
SAID_AGAIN = 14  # words at most in either sentence: a fact said again is short ("my manager is Bob now")


def _frames(normal: str) -> tuple[tuple[str, ...], ...]:
    """The sentence's parts as lower-case words without change cues: "Alice left; my manager is Bob now" gives
    ("alice", "left") and ("my", "manager", "is", "bob")."""
    found = []
    for part in _PART.split(normal):
        tokens = tuple(t for t in _TOKEN.findall(part.lower()) if t not in _CUE_KEYS)
        if tokens:
            found.append(tokens)
    return tuple(found)


def restated(new: Statement, old: Statement) -> tuple[str, str] | None:
    """(new value, old value) when ``new`` says ``old`` again with one place changed: what the person says of
    themselves, both short (at most :data:`SAID_AGAIN` words), the same first-person opening (two words or
    more, or "I'm" before one word) and the changed place at the end, at most :data:`SLOT` words on either side,
    each naming something (a content word or a number), neither a negation nor an addition ("too").  "I live in
    Berlin" → "I live in Lisbon now"; "my manager is Alice" → "… my manager is Bob now"; "I'm vegetarian" →
    "I'm pescatarian now"."""
    if sum(map(len, new.frames)) > SAID_AGAIN or sum(map(len, old.frames)) > SAID_AGAIN:
        return None  # a long sentence (a question with a worked example) is not a fact said again
    for after in new.frames:
        for before in old.frames:
            if after == before:
                continue
            head = 0
            while head < min(len(after), len(before)) and after[head] == before[head]:
                head += 1
            tail = 0
            while (
                tail < min(len(after), len(before)) - head
                and after[len(after) - 1 - tail] == before[len(before) - 1 - tail]
            ):
                tail += 1
            now, was = after[head : len(after) - tail], before[head : len(before) - tail]
            if not now or not was or len(now) > SLOT or len(was) > SLOT:
                continue
            if (_NEGATING | _ADDING) & {*now, *was} or not (_named(now) and _named(was)):
                continue
            kept = after[:head]
            if tail or not kept or kept[0] not in _FIRST_PERSON:
                continue  # the changed place ends what the person says of themselves ("I live in …", "my … is …")
            if len(kept) >= 2 or (set(kept) <= _COPULAS and len(now) == len(was) == 1):
                return " ".join(now), " ".join(was)
    return None


def _named(words: Sequence[str]) -> bool:
    """Whether a changed place names something: a content word or a number."""
    return any(P.tag_key(w) is not None or any(c.isdigit() for c in w) for w in words)


_CLAUSE_START = re.compile(r"[,;:]\s*|\s(?:but|so|and|or|because|although|though|while|whereas)\s", re.IGNORECASE)


_AUX = r"(?:do|does|did|is|are|was|were|am|can|could|would|should|will|shall|might|has|have|had)"
#: How a clause that asks or supposes opens: "how" or "why" and an auxiliary ("how does that change …"), "what
#: if", an auxiliary and its subject ("does it change …", "can you update …"), or a supposition ("if …",
#: "suppose …").  "When I moved to Lisbon", "…, which has now reached 165" (a relative clause) and "…, is now
#: Tuesday" state.
_NOT_STATED = re.compile(
    rf"(?:how|why)\s+{_AUX}\b|what\s+if\b|"
    rf"{_AUX}\s+(?:i|you|we|they|it|he|she|that|this|these|those|the|my|your|our)\b|"
    r"(?:if|suppose|supposing|assuming)\b"
)


#: The words after which "update" is a verb ("I need to update the deadline", "we just updated …") rather than a
#: noun ("the DOM updates", "a status update"): a noun names a thing, not a change.
_UPDATE_VERB_AFTER = frozenset(
    """to i we you they he she it just also then will would can could should must please and i'll we'll i've
    we've i'd we'd have has had did do finally recently""".split()
)


def _names_update(sentence: str, cue: re.Match[str]) -> bool:
    """Whether the cue "update" / "updates" is a noun here ("optimized DOM updates", "a quick status update"): it
    is a cue when it opens the sentence ("Update: …"), labels what follows ("an update: …") or follows a
    subject, "to" or an auxiliary."""
    if cue.group(0).lower() not in ("update", "updates"):
        return False
    before = P.strip_lead(sentence[: cue.start()].lower()).strip(" ,;:-\u2014\u2013")
    if not before or sentence[cue.end() :].lstrip().startswith(":"):
        return False
    last = before.split()[-1].strip("\"'()[]")
    return last not in _UPDATE_VERB_AFTER


def _cues(sentence: str) -> list[re.Match[str]]:
    """The change cues of ``sentence`` in clauses that state: in "…, how does that change the calculation, …"
    the clause holding "change" asks, and a question changes nothing.  "Update" as a noun is no cue."""
    found = []
    for cue in _CUE.finditer(sentence):
        if _names_update(sentence, cue):
            continue
        opened = 0
        for stop in _CLAUSE_START.finditer(sentence, 0, cue.start()):
            opened = stop.end()
        if _NOT_STATED.match(P.strip_lead(sentence[opened : cue.start()].lower())) is None:
            found.append(cue)
    return found


#: Where a clause ends, for what a change cue governs: a comma, semicolon, colon or dash and the space after it,
#: or the space before a conjunction that starts another clause ("…, so I want to make sure I retained 90%").
_REACH_END = re.compile(
    r"(?<=[,;:])\s+|\s[\u2014\u2013-]\s|\s+(?=(?:but|so|because|although|though|whereas|while|since)\b)",
    re.IGNORECASE,
)


def _governed(sentence: str, cues: Sequence[re.Match[str]], values: Sequence[Value]) -> tuple[Value, ...]:
    """The values a change cue says changed: those in a cue's own clause ("the gallery now has 10 cards";
    "I've been studying for a week now, so I want to make sure I retained the 90% accuracy" changes no
    percentage), or anywhere in the sentence when the cue opens it ("Actually, it's April 5"; "Update: …")."""
    if not cues or not values:
        return ()
    values = [  # "from 300KB to …", "initially 300KB, …": what it was
        v for v in values if not _FROM.search(sentence, 0, max(0, v.at)) and not _initially(sentence, v)
    ]
    ends = [0, *(m.end() for m in _REACH_END.finditer(sentence)), len(sentence)]
    reach: list[tuple[int, int]] = []
    for cue in cues:
        if cue.group(0).lower().endswith("to") and cue.group(0).lower() != "to":
            after = [v.at for v in values if v.at >= cue.end()]
            reach.append((cue.end(), min(after) + 1) if after else (0, 0))
            continue  # "increased my quiz score from 75% to 92% after 15 problems" changed the score: 92%
        if not P.strip_lead(sentence[: cue.start()].lower()).strip(" ,;:-\u2014\u2013"):
            return tuple(values)  # the cue opens the sentence: it is about all of it
        start = max(e for e in ends if e <= cue.start())
        end = min((e for e in ends if e > cue.end()), default=len(sentence))
        reach.append((start, end))
    return tuple(v for v in values if any(a <= v.at < b for a, b in reach))


_DENIED_END = re.compile(r"[,;:.!?()]|\s(?:but|so|because|although|though|since|while|whereas)\s", re.IGNORECASE)


def _denied(sentence: str, start: int, keys: frozenset[str]) -> frozenset[str]:
    """The content keys of the clause a denial starting at ``start`` denies, up to the clause's end ("I've never
    written any Flask routes or handled HTTP requests in this project, so …": flask, route, http, request, …)."""
    end = _DENIED_END.search(sentence, start)
    clause = sentence[start : len(sentence) if end is None else end.start()]
    return frozenset(k for w in P.words(clause) if (k := P.tag_key(w.lower())) is not None and k in keys)


NEAR = 3  # content words on each side of a value that say what it is the value of
REACH = 12  # words walked on each side to find them


def _near(sentence: str, start: int, end: int) -> frozenset[str]:
    """The ``NEAR`` closest content keys on each side of ``sentence[start:end]`` within ``REACH`` words (cue
    words and verbs skipped: "coverage has recently improved to 78%" gives "coverage")."""
    found: list[str] = []
    for side in (reversed(P.words(sentence[:start])[-REACH:]), P.words(sentence[end:])[:REACH]):
        keys = (k for w in side if (k := P.tag_key(w.lower())) is not None and k not in _CUE_KEYS)
        found += [k for _, k in zip(range(NEAR), keys, strict=False)]
    return frozenset(found)


def _values(sentence: str) -> tuple[Value, ...]:
    values: list[Value] = []
    taken: list[tuple[int, int]] = []
    for match in _DATE.finditer(sentence):
        taken.append(match.span())
        if _AS_OF.search(sentence, 0, match.start()):
            continue  # "85% as of April 9": when it was said, not a date that changes
        text = " ".join(match.group(0).lower().replace(",", " ").split())
        values.append(Value("date", "", text, _near(sentence, *match.span()), at=match.start()))
    for match in _WEEKDAY.finditer(sentence):
        start, end = match.span(1)
        if not any(a <= start < b for a, b in taken):
            taken.append((start, end))
            values.append(Value("date", "", match.group(1).lower(), _near(sentence, start, end), at=start))
    for match in _NUMBER.finditer(sentence):
        if any(a <= match.start() < b for a, b in taken) or _in_formula(sentence, match):
            continue
        if _VERSION_REST.match(sentence, match.end(3) if match.group(3) else match.end(2)):
            continue  # "Flask 2.3.1", "Bootstrap 5.3.0": a version names a release, it counts nothing
        currency, whole, fraction, unit = match.groups()
        number = whole.replace(",", "") + (f".{fraction}" if fraction else "")
        word = (unit or "").lower()
        if currency:
            word = "money"
        elif word in ("%", "percent"):
            word = "percent"
        elif word not in _UNIT_WORDS and (word in _NOT_UNITS | _DESCRIBING or (word and P.tag_key(word) is None)):
            word = ""  # "2 weeks" keeps its unit, though "weeks" is a stopword elsewhere
        elif word:
            word = P.singular(word)
        noun = _noun(sentence, match.end()) if word and word not in _SYMBOLS | _UNIT_WORDS else ""
        alone = (
            not word
            and not re.match(r"\s*[A-Za-z]", sentence[match.end() :])
            and _COMPLETES.search(sentence, 0, match.start()) is not None
        )
        near, measure = _near(sentence, *match.span()), _measure(sentence, match.start(), match.end())
        about = _about(sentence, match.end()) if word and word not in _SYMBOLS | _UNIT_WORDS else ""
        values.append(Value("number", word, number, near, noun, alone, match.start(), measure, about=about))
    starts = {v.at: v for v in values}
    first = [v for v in values if _initially(sentence, v)]
    for i, value in enumerate(values):
        span = _FROM_TO.search(sentence, 0, max(0, value.at))
        was = starts.get(span.start(1)) if span is not None else None
        if was is None and all(v.at != value.at for v in first):  # "which was initially 800ms, and I've reduced
            was = next((v for v in first if v.at < value.at and v.unit == value.unit), None)  # it to 300ms"
        if was is not None and was.kind == value.kind:
            values[i] = replace(value, was=was.text)
    return tuple(values)


#: "initially", "originally", "at first" a few words before a value: what it was before the sentence's change.
_INITIALLY = re.compile(r"\b(?:initially|originally|at\s+first)\b(?:\s+[A-Za-z]+){0,2}\s+$", re.IGNORECASE)
#: "… problems on medians", "… questions about dice": what the things a count counts are about.
_ABOUT = re.compile(
    r"((?:[ \t]+[A-Za-z][A-Za-z\-]*){0,2}?)[ \t]+(?:on|about|involving|covering)[ \t]+(?:(?:the|a|an)[ \t]+)?"
    r"([A-Za-z][A-Za-z\-]*)"
)


def _initially(sentence: str, value: Value) -> bool:
    """Whether the sentence says ``value`` is what something was at first ("which was initially 800ms")."""
    return _INITIALLY.search(sentence, max(0, value.at - 40), max(0, value.at)) is not None


def _about(sentence: str, end: int) -> str:
    """What the things counted by the number ending at ``end`` are about, when the words after its noun name it
    ("8 problems on medians and altitudes": median), else ""."""
    found = _ABOUT.match(sentence, end)
    if found is None or any(  # the rest of the noun phrase only: "12 branches merged on …" is no topic
        w.lower().endswith(("ed", "ing")) or P.tag_key(w.lower()) is None for w in found.group(1).split()
    ):
        return ""
    return P.tag_key(found.group(2).lower()) or ""


#: "from X to" right before a value: the sentence says what it changed from.
_FROM_TO = re.compile(r"\bfrom\s+(\S+(?:\s+\S+){0,3}?)\s+to\s+$", re.IGNORECASE)


_OPERATORS = frozenset("/×*=+^÷<>")
#: What follows a number that is part of a version ("2.3" of "2.3.1").
_VERSION_REST = re.compile(r"\.\d")
#: "from" right before a value: what it changed from ("reduced the sizes from 300KB to 180KB"), not to.
_FROM = re.compile(r"\bfrom\s+$", re.IGNORECASE)
#: "as of" right before a date: the time a figure was true, not a value of its own.
_AS_OF = re.compile(r"\bas\s+of\s+$", re.IGNORECASE)
#: The words a number no word follows must complete to count what the words before it name: "… which has now
#: reached 165", "the total is 12" (not "rolling a 4", nor the "21" of "3,21").
_COMPLETES = re.compile(
    r"\b(?:reached|reach|reaches|hit|hits|is|are|was|were|at|to|of|now|totals?|totalled|totaled|about|around|"
    r"over|under|below|above)\s+$",
    re.IGNORECASE,
)


def _in_formula(sentence: str, match: re.Match[str]) -> bool:
    """Whether a number is a term of a fraction or a formula ("4/5 correct", "1/2 × 1/2 = 1/4"): a ratio or a
    worked example, not a value the speaker states and may later change."""
    before = sentence[: match.start()].rstrip()[-1:]
    after = sentence[match.end(3) if match.group(3) else match.end(2) :].lstrip()[:1]
    return before in _OPERATORS or after in _OPERATORS


_PHRASE = re.compile(r"(?:[ \t]+[A-Za-z][A-Za-z\-]*){1,2}")


def _noun(sentence: str, end: int) -> str:
    """The counted noun of a number whose first word is ``sentence[:end]``'s last: the last of up to two more
    content words that follow it with nothing between ("12 conditional probability problems", "5 coin toss
    problems"), or "" when the first word is the noun ("8 problems with …")."""
    phrase = _PHRASE.match(sentence, end)
    if phrase is None:
        return ""
    noun = ""
    for word in phrase.group(0).split():
        if word.lower() in _NOT_UNITS or P.tag_key(word.lower()) is None:
            break
        noun = P.singular(word.lower())
    return noun


#: The words that join a measure to its value before it: "the bounce rate under 40%", "a response time of 280ms".
_JOINS = frozenset("of at under over below above from to around about near within".split())
_MEASURE_WORD = re.compile(r"[A-Za-z][A-Za-z\-]*")
_MEASURE_AFTER = re.compile(r"(?:[ \t]+[A-Za-z][A-Za-z\-]*){1,2}")
_MEASURE_TOKEN = re.compile(r"[A-Za-z][A-Za-z\-]*|[^\sA-Za-z]")
#: A figure in a relative clause right after what it measures: "the average input latency, which is currently
#: around 520ms" (the one or two words before the comma; the clause up to the figure is at most four words).
_RELATIVE = re.compile(
    r"(?:\b([A-Za-z][A-Za-z\-]*)\s+)?\b([A-Za-z][A-Za-z\-]*),\s+(?:which|that)\s+(?:[A-Za-z]+\s+){0,4}$"
)


def _measure_keys(words: Sequence[str]) -> tuple[str, ...]:
    keys = (P.tag_key(w.lower()) for w in words if w.lower() not in _NOT_UNITS)
    return tuple(k for k in keys if k is not None and k not in _CUE_KEYS)


def _measure(sentence: str, start: int, end: int) -> tuple[str, ...]:
    """What the number at ``sentence[start:end]`` (with its unit) measures, as content keys, modifier first: the
    content words right after it ("95% success rate", "300ms debounce"), else the one or two words right before
    a joining word before it ("the bounce rate under 40%", "response time of 280ms", "my study sessions to 4
    hours"); () when neither names it ("it's under 300ms", "… which is now 35%")."""
    after = _MEASURE_AFTER.match(sentence, end)
    if after is not None:
        found = []
        for word in after.group(0).split():
            key = P.tag_key(word.lower())
            if key is None or word.lower() in _NOT_UNITS or key in _CUE_KEYS:
                break
            found.append(key)
        if found:
            return tuple(found)
    tokens = _MEASURE_TOKEN.findall(sentence[max(0, start - 80) : start])
    joins = 0
    while tokens and tokens[-1].lower() in _JOINS and joins < 2:
        tokens.pop()
        joins += 1
    head = tokens[-1].lower() if tokens else ""
    if joins and _names_measure(head):
        words = tokens[-2:] if len(tokens) >= 2 and _MEASURE_WORD.fullmatch(tokens[-2]) else tokens[-1:]
        return _measure_keys(words)
    clause = _RELATIVE.search(sentence, max(0, start - 120), start)
    if clause is not None and _names_measure(clause.group(2).lower()):
        return _measure_keys([w for w in clause.group(1, 2) if w])  # "the input latency, which is now 520ms"
    return ()  # "it's under 300ms", "improved to 78%", "staying below 35%": no noun before the joining word


def _names_measure(word: str) -> bool:
    """Whether a word before a figure can name what it measures: a noun ("rate", "latency", "time"), not a verb
    ("staying below 35%") or a word of no content."""
    return bool(word) and not word.endswith("ing") and bool(P.tag_key(word) or word == "time")


def _measured_in(value: Value, other: Statement) -> bool:
    """Whether what ``value`` measures is said by ``other`` too: its first word (the modifier of "success rate"
    or "study sessions", the noun of "debounce"), or a word it begins or that begins it ("study", "studying").
    A value that names no measure is decided by the words around it."""
    if not value.measure:
        return True
    first = value.measure[0]
    return any(
        key == first or (min(len(key), len(first)) >= 4 and (key.startswith(first) or first.startswith(key)))
        for key in other.keys
    )


def update(new: Statement, old: Statement) -> Change | None:
    """Why ``new`` (said later) updates ``old``, or None: a change cue, a shared subject, and a changed value
    of the same kind (or a "not X" naming the old one).  The reason reads like "now: 78 percent, was 65"."""
    if new.asks or old.asks:
        return None  # a question states no value to change or be changed
    shared = new.keys & old.keys
    if not new.cue:  # "The meeting is on Wednesday, not Tuesday": a "not X" naming a value said before corrects it
        stated = {v.text for v in old.values} | set(old.keys)
        gone = next((n for n in new.not_values if n in stated), None)
        return Change(f"not {gone} any more", (gone,)) if gone is not None and shared - {gone} else None
    for gone in new.not_values:
        if gone in {v.text for v in old.values} | set(old.keys) and len(shared - {gone}) >= 1:
            return Change(f"{new.cue}: not {gone} any more", (gone,))
    if new.ended and not old.denied and len(shared) >= 2:
        return Change(f"{new.cue}: no longer " + ", ".join(sorted(shared)[:4]))
    past = {b.was for b in old.values if b.was}  # "reduced it from 450ms to 120ms": 450ms was past when said
    stood = sorted(old.values, key=lambda b: b.text in past and not b.was)  # what stood when said: tried first
    for value in new.changed:
        for before in stood:
            if before.kind != value.kind or before.text == value.text:
                continue
            if value.was and not _same_text(value.was, before.text):
                continue  # "improved from 60% to 85%" says what it was: an earlier 80% is another figure
            if value.was and any(b.was == value.was and b.text == value.text for b in old.values):
                continue  # the earlier sentence told the same change ("… improved from 60% to 85% …") again
            unit = _same_unit(value, before, new, old)
            if unit is None or (value.kind == "number" and not unit):
                continue  # counts different things, or a bare number (a side of a triangle, a step)
            counted = bool(unit) and unit not in _SYMBOLS and unit not in _UNIT_WORDS  # "1,200 calls", "10 cards"
            if not counted and not value.near & before.near:
                continue  # a percentage, a time, a date: of what is said by the words around it
            if not counted and not (_measured_in(value, old) and _measured_in(before, new)):
                continue  # "the bounce rate … below 35%" after "a 95% success rate": another measure
            needed = 1 if unit in _SYMBOLS or new.cue.split()[0] not in _WEAK_CUES else 2
            if len(shared | ({unit} if unit and unit not in P.STOPWORDS else set())) >= needed:
                return Change(f"{new.cue}: {value.text}{' ' + unit if unit else ''}, was {before.text}", (before.text,))
    swapped = restated(new, old)  # the same sentence again, one place changed
    if swapped is not None:
        return Change(f"{new.cue}: {swapped[0]}, was {swapped[1]}", (swapped[1],))
    return None


def _same_text(said: str, stated: str) -> bool:
    """Whether a value a change names as what it was is the one stated ("April 1" names "april 1 2024")."""
    return said == stated or stated.startswith(said + " ") or said.startswith(stated + " ")


def _kind_said(value: Value, other: Statement) -> bool:
    """Whether the kind a counted noun phrase names ("15 *classification* problems") is said by the other
    statement too: "8 problems on medians" counts other problems."""
    return not value.noun or value.unit == value.noun or value.unit in other.keys


def _about_said(value: Value, other: Statement) -> bool:
    """Whether what a count's things are about ("8 problems on *medians*") is said by the other statement too."""
    return not value.about or value.about in other.keys


def _same_unit(value: Value, before: Value, new: Statement, old: Statement) -> str | None:
    """The unit two values share ("" for dates and plain numbers), or None when they count different things.
    A number no word follows takes what the other counts (its noun, else its unit), when that word is among the
    words around it ("the commits … reached 165" and "150 commits"; not the "4" of "4/5 correct" in a sentence
    that mentions probability elsewhere, nor a "2" that counts weeks)."""
    if value.kind != "number":
        return value.unit
    if not (_about_said(value, old) and _about_said(before, new)):
        return None  # "8 problems on medians" counts no problems on the Pythagorean theorem
    if value.unit == before.unit:
        return value.unit
    named = {value.unit, value.noun} & {before.unit, before.noun} - {""}
    if named and _kind_said(value, old) and _kind_said(before, new):
        return named.pop()  # "12 conditional probability problems" and "8 problems" on conditional probability
    if value.alone and (before.noun or before.unit) in value.near:
        return before.noun or before.unit
    if before.alone and (value.noun or value.unit) in before.near:
        return value.noun or value.unit
    return None


def contradiction(new: Statement, old: Statement) -> str | None:
    """Why two statements disagree with no update between them (one denies what the other affirms), or None."""
    shared = denied_shared(new, old)
    if len(shared) < 2:
        return None
    return DISAGREES + ", ".join(sorted(shared)[:4])


def disagreement(new: Statement, old: Statement) -> int:
    """How strongly two statements disagree: the denied words the other affirms, one more when it counts the
    denied thing ("5 coin toss problems" against "never completed any coin toss problems")."""
    shared = denied_shared(new, old)
    other = old if new.denied else new
    return len(shared) + any(v.unit in shared or v.noun in shared for v in other.values if v.unit or v.noun)


def denied_shared(new: Statement, old: Statement) -> frozenset[str]:
    """The content words of the denied clause that the other statement affirms (empty unless exactly one of
    the two is a denial): how strongly two statements disagree."""
    if new.denied == old.denied:
        return frozenset()
    denial, other = (new, old) if new.denied else (old, new)
    return denial.denied_keys & other.keys
