"""Telling what was said in the third person, as sentences a person would write.

``retold("I hate public speaking", "Maya")`` → "Maya hates public speaking";
:func:`decision_clause` says what was decided, instead of what, and why.  Used by
the closing memory, the narrative links and the reflections (no model needed).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from narrative.text import patterns as P

_VERB_START = P.lex(
    "go use build start ship keep move drop switch write prioritize prioritise focus store adopt try skip make put "
    "add buy hire launch wait stick cut postpone defer delay finish stop rewrite split merge publish release"
)
_PRONOUNS = re.compile(r"\b(I'm|I've|I'll|I'd|I|my|me|myself|mine)\b", re.IGNORECASE)


_ADVERBS = r"(?:just|also|still|always|never|often|even|already|sometimes|[a-z]+ly)"
_I_VERB = re.compile(rf"\bI((?:\s+{_ADVERBS})*)\s+([a-z]+)\b(?!')")
_KEEP_VERB = P.lex(
    "was were had did could would should will shall might must may can cannot not went got made said took came saw "
    "knew thought told found gave felt left kept began bought brought wrote ran met sent spent built heard lost paid "
    "read sat stood understood won chose drove ate fell flew forgot grew hid hurt let put set shut quit cut became "
    "taught caught sold held meant slept woke wore"
)
_IRREGULAR = {"am": "is", "have": "has", "do": "does", "go": "goes", "don": "doesn"}


def _third_person(verb: str) -> str:
    """ "hate" → "hates", "try" → "tries", "watch" → "watches"; past forms and modals unchanged."""
    if verb in _IRREGULAR:
        return _IRREGULAR[verb]
    past = verb.endswith("ed") and not verb.endswith("eed")
    if verb in _KEEP_VERB or past or verb.endswith("s") or len(verb) < 2:
        return verb
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + ("es" if verb.endswith(("sh", "ch", "x", "z", "o")) else "s")


def retold(text: str, name: str) -> str:
    """A user's first-person sentence retold: "I finally called Mum" → "Maya finally called Mum", "I hate
    speeches" → "Maya hates speeches"."""
    you = name == "You"
    text = P.normalize(text).strip()
    if not you:
        text = re.sub(r"\bI don't\b", "I doesn't", text)
        text = _I_VERB.sub(lambda m: f"I{m.group(1)} {_third_person(m.group(2))}", text)
    table = {
        "i'm": "you're" if you else f"{name} is",
        "i've": "you've" if you else f"{name} has",
        "i'll": "you'll" if you else f"{name} will",
        "i'd": "you'd" if you else f"{name} would",
        "i": "you" if you else name,
        "my": "your" if you else f"{name}'s",
        "me": "you" if you else name,
        "myself": "yourself" if you else name,
        "mine": "yours" if you else f"{name}'s",
    }
    return _PRONOUNS.sub(lambda m: table[m.group(1).lower()], text)


def as_sentence(text: str) -> str:
    """Capitalised, ending in punctuation (a closing quote after ?/! counts)."""
    text = text.strip().rstrip(",;:")
    text = text[:1].upper() + text[1:]
    return text if text.rstrip("\"'”’").endswith((".", "!", "?", "…")) else text + "."


def listing(items: Sequence[str], limit: int = 3) -> str:
    shown = list(items[:limit]) + ([f"{len(items) - limit} more"] if len(items) > limit else [])
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


_FUNCTION_WORDS = P.lex(
    "the a an our my your their his her its this that these those it them him us me up out off on in at to with "
    "for from into over back down some all every each more less both"
)
_DETERMINERS = P.lex("the a an our my your their his her its this that these those some all every each both")
_PAST_CHOICE = P.lex("picked chose opted settled agreed went preferred prioritized prioritised switched selected")


def _action(what: str) -> bool:
    """Whether ``what`` starts with a verb: a known one, or a lowercase word that a function word or a name
    follows ("host the launch party", "rotate the shifts weekly"), not a determiner or a describing word."""
    words = what.split()
    first = words[0].lower() if words else ""
    if first in _VERB_START:
        return True
    if len(words) < 2 or not first.isalpha() or not words[0].islower() or first in _DETERMINERS:
        return False
    second = words[1].strip(",;:")
    return second.lower() in _FUNCTION_WORDS or second[:1].isupper() or second[:1].isdigit()


def decision_clause(what: str, why: str, alternatives: Sequence[str], name: str, form: str = "") -> str:
    """ "decided to go with SQLite instead of Firebase, because it works offline" (what was decided and why).

    ``form`` is how the decision was said (``to``, ``that``, ``on``, ``go with``, ``verb``, ``not``: see
    ``narrative.write.extract.decisions.find_decision_form``); without it the words decide: the speaker's own
    past choice verb is kept ("picked Postgres over MySQL"), an action is "decided to …", a clause "decided that
    …", a thing "settled on …".
    """
    from narrative.write.extract.decisions import clause_like

    what = retold(what, name).strip().rstrip(".")
    first = what.split()[0].lower() if what.split() else ""
    if first.endswith("ing") and what[:1].isupper():  # "Adopting Gadamer's terms …" opened the sentence
        what = what[:1].lower() + what[1:]
    if form == "not" and first == "not":
        clause = f"decided against {what[4:].strip()}"
    elif form == "verb" or (not form and first in _PAST_CHOICE):
        clause = what
    elif form == "go with":
        clause = f"decided to go with {what}"
    elif form == "that" or (form != "to" and clause_like(what) and not _action(what)):
        clause = f"decided that {what}"
    elif form == "to" or _action(what):
        clause = f"decided to {what}"
    else:
        clause = f"settled on {what}"
    named = [a for a in alternatives if a and a.casefold() not in what.casefold()]
    said_against = re.search(r"\b(?:instead of|rather than|over|versus|vs\.?|against)\b", what, re.I)
    if named and not said_against and len(named) == len([a for a in alternatives if a]):
        clause += f" instead of {listing(named)}"
    why = retold(why, name).strip().rstrip(".")
    return clause + (f", because {why}" if why else "")
