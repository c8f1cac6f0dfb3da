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
    over = re.search(r"\bover\s+(?P<alt>[^.!?;,]+)", tail, IGNORE_CASE)
    if over and _OVER.search(sentence):
        alts.extend(_ALT_SPLIT.split(_ALT_STOP.sub("", over.group("alt"))))
    out: list[str] = []
    for alt in alts:
        a = clip(re.sub(r"^(?:the|a|an|to)\s+", "", alt.strip(), flags=IGNORE_CASE), 8)
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
    obj = re.sub(r"^\s*(?:to|on|that|with|for|,)\s+", "", _PARENS.sub("", sentence[start:]), flags=IGNORE_CASE)
    against = re.match(r"\s*against\s+", sentence[start:], IGNORE_CASE)
    what = clip(DECISION_END.sub("", obj), 16)
    if against:
        what = "not " + clip(DECISION_END.sub("", sentence[start + against.end() :]), 14)
    if not what:
        return None
    why_m = _RATIONALE.search(sentence, start)
    why = clip(why_m.group("why"), 25) if why_m else ""
    if not why and following and _NEXT_RATIONALE.match(following):
        why = clip(_NEXT_RATIONALE.sub("", following), 25)
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
