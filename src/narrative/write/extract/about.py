"""Who the person is, in their own words: the self-descriptions a turn holds, for Your Story.

Talking Rock's Your Story "tells who you are".  People say it in passing, mid-question ("… can you check my
maths, as a 44-year-old colour technologist from Port Michael?"), where the rest of the message is about
something else and neither its words nor its vector lead back to the clause.  This module finds those clauses
(no model), in a few recognisable first-person forms:

| form        | fires on                                                                                          |
|-------------|---------------------------------------------------------------------------------------------------|
| name        | "my name is Sam", "I'm called Sam", "call me Sam" (a capitalised name)                            |
| age         | "I'm 44", "I am 44 years old" (then the clause ends), "I'm a 44-year-old …"                       |
| work        | "I work as / at / for / in …", "my job is …", "my profession is …", "I'm employed as / at / by …" |
| place       | "I live in …", "I'm from …", "I'm based in …", "I grew up in …", "I was born in …"                |
| role        | "I'm a / I am a / as a [NN-year-old] <role>": the noun phrase's head names a person (teacher,     |
|             | colour technologist, nurse, mum, student, …), never a quantity or a mood ("a bit", "a little")    |

A clause runs from its cue to the next comma, stop, "and", "but", "so", "who", "because" or line end (at most
twelve words).  "as a …" reads "I'm a …" so the note says what the person is.  Hypotheticals ("if I were a",
"imagine I'm a", "pretend") and negations ("I'm not a") are not self-descriptions; code is not read.
"""

from __future__ import annotations

import re

from narrative.text import patterns as P
from narrative.text.statements import blank_code

__all__ = ["self_descriptions"]

_I_AM = r"(?:i'm|i\s+am|im)"
_NAME = r"[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?"
#: "I … as a mentor" says what the speaker is only after a verb of taking a role ("I'm using it as a buffer" does not)
_AS_VERBS = r"(?:volunteer|serv|train|qualifi|start|began|begin|retir|join|enlist|practi[cs])[a-z]*"
_FORMS = re.compile(
    rf"\b(?:(?i:my\s+name\s+is|{_I_AM}\s+called|call\s+me)\s+{_NAME}"
    rf"|(?i:{_I_AM}\s+\d{{1,2}}(?:\s+years?\s+old|\s+y/?o)?(?=\s*(?:[,.;:!?)]|and\b|but\b|so\b|$)))"
    rf"|(?i:i\s+work\s+(?:as|at|for|in)|my\s+(?:job|profession|occupation)\s+is|{_I_AM}\s+employed\s+(?:as|at|by))\s"
    rf"|(?i:i\s+live\s+in|{_I_AM}\s+(?:from|based\s+in)|i\s+grew\s+up\s+in|i\s+was\s+born\s+in)\s"
    rf"|(?i:{_I_AM}\s+an?)\s"
    rf"|(?i:(?:\bmy\s+(?:[a-z]+\s+){{1,4}}|\bme\s+|\bi(?:'m|\s+am|\s+was|\s+have\s+been|'ve\s+been)?\s+{_AS_VERBS}\s+)(?P<as>as\s+an?)\s))",
)
_ROLE_START = re.compile(r"(?i:" + _I_AM + r"\s+an?\s)")
_HYPOTHETICAL = re.compile(r"(?i:\b(?:if|imagine|pretend|suppose|as\s+if|as\s+though|were)\W+(?:\w+\W+){0,3}$)")
_END = re.compile(
    r"\s*(?:[,.;:!?()\n\"]|->|\s-\s|\s\u2014|\b(?:and|but|so|who|which|because|since|though|although|while|"
    r"when|where|trying|looking|wondering|working\s+on|with\s+(?:a|an|the|my|some)|can|could|would|will|"
    r"should|i|i'm|i've|i'd|lol|haha|lmao)\b)",
    re.IGNORECASE,
)
#: Heads that name a person: a role (teacher, nurse, student), a relation (mum, wife), or one who does something
#: (-er, -or, -ist, -ian, -ant, -ent, -eer, -ee).  A quantity, a mood or a thing ("a bit", "a fan of", "a mess")
#: does not.
_PERSON_HEADS = P.lex(
    """nurse student parent mum mom dad father mother wife husband partner son daughter sister brother grandma
    grandpa grandmother grandfather woman man person girl guy boy kid teen teenager adult child doctor chef cook
    vet veteran retiree grad graduate undergrad intern nanny midwife surgeon dentist pilot clerk judge coach
    freelancer entrepreneur founder ceo cto cfo vp mp monk nun priest rabbi imam widow widower mama papa
    beginner novice newbie expert pro native citizen immigrant refugee local athlete model architect mechanic
    paramedic medic cashier barista poet actress academic scholar postdoc cop detective executive creative
    representative housewife homemaker diplomat bureaucrat chemist programmer dev"""
)
_ROLE_SUFFIX = re.compile(r"(?:er|or|ist|ian|ant|ent|eer|ee|ologist|smith|wright|man|woman|person)$")
_NOT_HEADS = P.lex(
    """bit lot little tad kind sort type bunch couple number matter question answer result letter paper computer
    order corner center centre winner loser mess disaster wreck total dinner water weather another other summer
    winter monster career character chapter layer parameter filter folder server browser header footer router
    counter buffer marker pointer wrapper trigger printer scanner timer tracker handler helper builder loader
    parser compiler component element segment moment argument document comment statement requirement fragment
    percent""",
)
_TRAILING = P.lex("now too also again anyway here there today nowadays currently yet still myself")
_CHILDHOOD = P.lex("kid child teen teenager boy girl baby toddler youngster youth")
_NP_STOP = P.lex("of in at for from with to on by about like than into over under as")
_AGE = re.compile(r"\b\d{1,3}-year-old\b", re.IGNORECASE)


def self_descriptions(text: str) -> tuple[str, ...]:
    """The clauses of ``text`` in which the speaker says who they are, each as a short first-person statement,
    in order, without repeats ("I'm a colour technologist from Port Michael", "I'm 44 years old")."""
    if "i" not in text.lower():
        return ()
    plain = P.normalize(blank_code(text))
    found: list[str] = []
    said_to = 0  # where the last clause ended: a cue inside it ("I work at X as an engineer") is part of it
    for match in _FORMS.finditer(plain):
        if match.start() < said_to or _HYPOTHETICAL.search(plain[max(0, match.start() - 40) : match.start()]):
            continue
        start = match.start("as") if match.group("as") else match.start()
        clause = _clause(plain, start, match.end())
        role = bool(match.group("as")) or _ROLE_START.match(match.group(0)) is not None
        if clause is None or (role and not _names_a_person(clause, then=bool(match.group("as")))):
            continue
        said_to = start + len(clause)
        if clause.lower().startswith("as "):
            clause = "I'm " + clause[3:]
        clause = clause[0].upper() + clause[1:]
        if clause.lower() not in {c.lower() for c in found}:
            found.append(clause)
    return tuple(found)


def _clause(text: str, start: int, cue_end: int) -> str | None:
    """From ``start`` to the clause's end (see the module docstring), or None when nothing follows the cue."""
    end = _END.search(text, cue_end)
    stop = len(text) if end is None else end.start()
    words = text[start:stop].split()[:12]
    clause = " ".join(words).strip(" '-")
    return clause if len(clause) > len(text[start:cue_end].strip()) or not clause.endswith(("a", "an")) else None


def _names_a_person(clause: str, then: bool = False) -> bool:
    """Whether "I'm a …" / "as a …" names a person: the noun phrase's head (its last word before a preposition)
    is a role, a relation or one who does something, or the phrase gives an age ("a 44-year-old …").  After
    "as" (``then``) a childhood ("as a kid", "as a teenager") is a time of life, not who the speaker is."""
    words = clause.split()[2:]  # after "I'm a" / "as a"
    phrase: list[str] = []
    for word in words:
        bare = word.lower().strip("'\"")
        if bare in _NP_STOP and phrase:
            break
        phrase.append(bare)
    while phrase and phrase[-1] in _TRAILING:
        phrase.pop()
    if not phrase:
        return False
    if _AGE.search(" ".join(phrase)) and len(phrase) > 1:
        return True
    head = phrase[-1]
    if then and head in _CHILDHOOD:
        return False
    if not head.isalpha() or head in _NOT_HEADS or len(phrase) > 5:
        return False
    return head in _PERSON_HEADS or (bool(_ROLE_SUFFIX.search(head)) and len(head) > 4)
