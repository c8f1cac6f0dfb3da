"""Decisions: "I/we decided", "let's go with", "X instead of Y"; their rationale, alternatives, confidence."""

from __future__ import annotations

import re

from narrative.model import DecisionDetails
from narrative.text import patterns as P
from narrative.write.extract.cues import IGNORE_CASE, caseless, clip

_SUBJ = (
    r"\b(?!you\b)(?:i|we|he|she|they|[a-z]+)(?:'ve|'d)?(?:\s+(?:have|had|finally|just|now|already|officially|"
    r"eventually|ultimately|both|all|then|also|recently|today|yesterday))*\s+"
)
_DECIDED = caseless(
    _SUBJ + r"(?:(?P<np>chose|chosen|opted\s+for|settled\s+on|agreed\s+on|picked(?!\s+up))|decided|opted\s+to|"
    r"made\s+(?:the|a|my|our)\s+(?:decision|call|choice)(?:\s+to)?|made\s+up\s+(?:my|our)\s+minds?(?:\s+to)?)\b"
)
_LETS_GO = caseless(r"\b(?:let'?s|(?:i|we)'ll|(?:i|we)\s+will)\s+go\s+with\b")
_DECISION_IS = caseless(r"\b(?:the|our|my)\s+(?:final\s+)?decision\s+(?:is|was)\s+(?:to|that)\b")
#: "Decided: the speech opens with …", "Decision - Postgres.", "Final decision: …" (a note's label)
_DECIDED_LABEL = caseless(r"^\W*(?:(?:our|my|the|final)\s+)?(?:decided|decision|verdict)\s*(?::|-|–|—)\s*")
#: what the words right after "decided" say about the decided thing's shape
_AFTER_DECIDED = (("to ", "to"), ("on ", "on"), ("upon ", "on"), ("that ", "that"), ("against ", "not"))
_PAST_CHOICE = frozenset("picked chose opted settled agreed went preferred prioritized prioritised switched".split())
_DETERMINER = r"(?:the|a|an|our|my|your|their|his|her|its|this|that|these|those|every|each|all|both)"
_FUNCTION = frozenset(
    "the a an our my your their his her its this that these those and or but of in on at to with by for from into "
    "over under after before is are was were".split()
)
_AFTER_VERB = frozenset(
    "in on at to with by for from into over under after before the a an our my first last next early late together "
    "home away out up down off back".split()
)
#: a subject (a determiner and up to three words, or one to three bare words) and then a finite verb
_CLAUSE = caseless(
    r"^(?:(?:we|i|they|he|she|you|it)\s+(?!to\b)[a-z']+\b|"
    rf"(?:{_DETERMINER}\s+)?(?:[\w'-]+\s+){{0,3}}?(?:is|are|was|were|will|would|should|can|must|has|have|"
    r"comes?|goes|opens|starts?|stays?|gets|runs|moves|happens|begins|ends|closes|leads|wins)\b)"
)
_CHOICE_VERB = (
    r"(?:use|using|adopt|adopting|stick(?:ing)?\s+with|switch(?:ing)?\s+to|prioriti[sz](?:e|ing)|pick(?:ing)?|"
    r"choos(?:e|ing)|go(?:ing)?\s+with|went\s+with|prefer|focus(?:ing)?\s+on)"
)
_INSTEAD = caseless(r"\b" + _CHOICE_VERB + r"\b(?=[^.!?;]{1,90}?\b(?:instead\s+of|rather\s+than)\b)")
_OVER = caseless(r"\b(?:prefer(?:red)?|prioriti[sz]e[ds]?|chose|choose|picked)\b(?=[^.!?;]{1,60}?\bover\b)")
_FIRST_PERSON = caseless(r"\b(?:i|we|let's|i'm|we're|i'll|we'll|i've|we've|our|my)\b")
_NOT_DECIDED = caseless(
    r"\b(?:haven't|have\s+not|hasn't|didn't|not|never|undecided|can't|couldn't|yet\s+to|trying\s+to|still)\s+"
    r"(?:\w+\s+)?(?:decided|decide|chose|choose|chosen|made\s+up)"
)
_RATIONALE = caseless(
    r"(?:\bbecause\b|\bsince\b(?!\s+(?:then|last|\d|yesterday|we\s+last|i\s+last))|\bso\s+that\b|'cause\b|"
    r"\bcuz\b|\bgiven\s+that\b|\bdue\s+to\b|\bas\s+(?:it|they|this|that)\b|\bin\s+order\s+to\b|"
    r"\bthe\s+reason\s+(?:is|being)\b)\s*(?P<why>[^.!?]+)"
)
_NEXT_RATIONALE = caseless(
    r"^(?:because|since|that's\s+because|the\s+reason\s+(?:is|was)|it's\s+because|this\s+is\s+because)\b[,:]?\s*"
)
_ALTERNATIVE = caseless(r"\b(?:instead\s+of|rather\s+than|vs\.?|versus|decided\s+against)\s+(?P<alt>[^.!?;,]+)")
_ALT_STOP = caseless(r"\s+(?:because|since|so\s+that|'cause|cuz|given|due\s+to|as\s+it|which|but|for)\b.*$")
_ALT_SPLIT = caseless(r"\s*(?:,|/|\bor\b|\band\b)\s*")
DECISION_END = caseless(
    r"\s*(?:\b(?:because|since|so\s+that|given\s+that|due\s+to|instead\s+of|rather\s+than|vs\.?|versus|"
    r"in\s+order\s+to|even\s+though|although)\b|'cause\b|\bcuz\b|[!?;]|\.\s*$|\s-\s|,\s*which\b).*$"
)
_PARENS = re.compile(r"\s*\([^()]*\)")
_HEDGES = caseless(
    r"\b(?:maybe|probably|i\s+think|for\s+now|tentatively|might|perhaps|leaning|not\s+sure|i\s+guess|"
    r"kind\s+of|sort\s+of|for\s+the\s+time\s+being|unless|possibly|for\s+the\s+moment)\b"
)
_EMPHATIC = caseless(r"\b(?:definitely|final|for\s+sure|firmly|certain|absolutely|no\s+doubt|100%)")
_IRREVERSIBLE = caseless(
    r"\b(?:final|permanent(?:ly)?|for\s+good|irreversibl[ey]|no\s+going\s+back|once\s+and\s+for\s+all|"
    r"can(?:'t|not)\s+be\s+undone|forever)\b"
)
_DECISION_TYPES = (  # the type with the most keyword hits wins; ties go to the earlier one; none → scope
    (
        "methodological",
        caseless(
            r"\b(?:method\w*|approach\w*|process\w*|technique|tool\w*|framework|librar\w+|database|format|workflow|"
            r"strateg\w+|structur\w+|pipeline|test\w*|analys\w+|implement\w*|architecture|design|algorithm|use|using|"
            r"model|measur\w+|protocol|schema|sqlite|postgres\w*|code|api)\b"
        ),
    ),
    (
        "interpretive",
        caseless(
            r"\b(?:interpret\w*|reading|meaning|understand\w*|view|position|terminology|concept\w*|fram\w+|perspective|"
            r"lens|sense|theor\w+|argument|claim|horizon|language|hermeneutic\w*|read\s+as)\b"
        ),
    ),
    (
        "scope",
        caseless(
            r"\b(?:scope|focus\w*|include|exclude|limit\w*|skip|drop|cut|only|prioriti\w+|priority|first|later|defer|"
            r"postpone|chapter|section|deadline|budget|timeline|plan|goal\w*)\b"
        ),
    ),
)


# --- decisions ---------------------------------------------------------------------------------


def _decision_start(sentence: str) -> tuple[int, float, str] | None:
    """Where the decided thing starts in ``sentence``, the base confidence and how it was said (the ``form``
    :func:`find_decision_form` describes), or None."""
    label = _DECIDED_LABEL.match(sentence)
    if label:
        return label.end(), 0.8, "label"
    for rx, base in ((_DECIDED, 0.8), (_DECISION_IS, 0.8), (_LETS_GO, 0.7)):
        m = rx.search(sentence)
        if m and not P.negated_before(sentence.lower(), m.start() + 1):
            if rx is _DECIDED and m.group("np"):
                return m.start("np"), base, "verb"
            if rx is _LETS_GO:
                return m.end(), base, "go with"
            if rx is _DECISION_IS:
                return m.end(), base, "to" if m.group(0).lower().endswith("to") else "that"
            after = sentence[m.end() :].lstrip().lower()
            form = next((f for w, f in _AFTER_DECIDED if after.startswith(w)), "that")
            if re.search(r"\sto$", m.group(0).lower()):  # "opted to", "made the call to"
                form = "to"
            return m.end(), base, form
    for rx in (_INSTEAD, _OVER):
        m = rx.search(sentence)
        if m and (m.start() <= 2 or _FIRST_PERSON.search(sentence[: m.start()])):
            verb = m.group(0).lower()
            form = "on" if verb.endswith("ing") else "verb" if verb.split()[0] in _PAST_CHOICE else "to"
            return m.start(), 0.7, form
    return None


def _alternatives(sentence: str, start: int) -> tuple[str, ...]:
    alts: list[str] = []
    tail = sentence[start:]
    for m in _ALTERNATIVE.finditer(sentence):
        alts.extend(_ALT_SPLIT.split(_ALT_STOP.sub("", m.group("alt"))))
    over = re.search(r"\bover\s+(?P<alt>[^.!?;,]+)", tail, IGNORE_CASE)
    if over and _OVER.search(sentence):
        alts.extend(_ALT_SPLIT.split(_ALT_STOP.sub("", over.group("alt"))))
    out: list[str] = []
    for alt in alts:
        a = clip(re.sub(r"^[Tt]o\s+|^(?:[Tt]he|[Aa]n?)\s+(?=[A-Z])", "", alt.strip()), 8)  # keep "the green one"
        if a and a.lower() not in (o.lower() for o in out):
            out.append(a)
    return tuple(out)


def _decision_type(text: str) -> str:
    counts = [(len(rx.findall(text)), -i, name) for i, (name, rx) in enumerate(_DECISION_TYPES)]
    best = max(counts)
    return best[2] if best[0] else "scope"


def find_decision(sentence: str, following: str | None = None) -> DecisionDetails | None:
    """Parse one statement sentence into ``DecisionDetails`` (see the module table), or None."""
    found = find_decision_form(sentence, following)
    return None if found is None else found[0]


def find_decision_form(sentence: str, following: str | None = None) -> tuple[DecisionDetails, str] | None:
    """The decision of one statement sentence and how it was said, which is how it is retold:

    ``to`` (a verb phrase: "we decided to host the party"), ``that`` (a clause: "we decided the speech opens
    with …", "Decided: …" when what follows reads as one), ``on`` (a thing: "we decided on the blue one", "let's
    go with …"), ``verb`` (the speaker's own verb starts the decision: "we picked Postgres over MySQL"),
    ``not`` ("we decided against …").
    """
    if _NOT_DECIDED.search(sentence):
        return None
    found = _decision_start(sentence)
    if found is None:
        return None
    start, confidence, form = found
    obj = re.sub(r"^\s*(?:to|on|upon|that|with|for|,)\s+", "", _PARENS.sub("", sentence[start:]), flags=IGNORE_CASE)
    against = re.match(r"\s*against\s+", sentence[start:], IGNORE_CASE)
    what = clip(DECISION_END.sub("", obj), 16)
    if against:
        what, form = "not " + clip(DECISION_END.sub("", sentence[start + against.end() :]), 14), "not"
    if form == "label":
        form = "that" if clause_like(what) else "on"
    if not what:
        return None
    why_m = _RATIONALE.search(sentence, start)
    why = clip(why_m.group("why"), 25) if why_m else ""
    if not why and following and _NEXT_RATIONALE.match(following):
        why = clip(_NEXT_RATIONALE.sub("", following), 25)
    hedges = len(_HEDGES.findall(sentence))
    confidence = confidence - 0.15 * hedges + (0.1 if _EMPHATIC.search(sentence) else 0.0)
    details = DecisionDetails(
        decision=what,
        rationale=why,
        alternatives_considered=_alternatives(sentence, start),
        decision_type=_decision_type(sentence),
        confidence=round(min(0.95, max(0.3, confidence)), 2),
        reversible=not _IRREVERSIBLE.search(sentence),
    )
    return details, form


def clause_like(text: str) -> bool:
    """Whether ``text`` reads as a clause with its own verb ("the speech opens with …", "recurring events come
    first", "the kids sleep in the loft") rather than a thing ("the blue logo", "the party at the office") or
    an action ("host the party").  Without a lexicon of verbs, agreement tells: a plural subject and a bare verb
    ("kids sleep"), or a singular subject and a verb in -s ("the speech opens"), followed by what follows a verb
    (a preposition, an article, an adverb)."""
    text = text.strip()
    if _CLAUSE.match(text):
        return True
    words = [w.lower().strip(",;:") for w in text.split()]
    start = 1 if words and re.fullmatch(_DETERMINER, words[0]) else 0
    for at in range(start + 1, min(len(words) - 1, start + 4)):
        subject, verb, after = words[at - 1], words[at], words[at + 1]
        if verb in _FUNCTION or after not in _AFTER_VERB or not verb.isalpha():
            continue
        if subject.endswith("s") != verb.endswith("s"):
            return True
    return False


def rationale_of(sentence: str) -> str:
    """The reason a sentence gives when it opens with one ("Because the team knows it." → "the team knows
    it"): a reply to "why?" a turn after the decision; "" otherwise."""
    if not _NEXT_RATIONALE.match(sentence.strip()):
        return ""
    return clip(_NEXT_RATIONALE.sub("", sentence.strip()), 25).rstrip(".!")
