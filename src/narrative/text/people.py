"""People and things in what was said: which capitalised names are persons, which are tools or products.

Split from :mod:`narrative.text.patterns` (whose lexicons and expressions it reads).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from narrative.text import patterns as P

__all__ = ["find_people", "find_things"]


def _left_word(sentence: str, start: int) -> tuple[str, str]:
    left = sentence[max(0, start - 40) : start].lower().split()
    a = left[-1].strip(",.;:!?\"'") if left else ""
    b = left[-2].strip(",.;:!?\"'") if len(left) > 1 else ""
    return a, b


def _vocative(sentence: str, start: int, end: int, first_at: int) -> bool:
    """A name used to address someone: followed by , . ! ? or the end, and preceded by a comma or only
    by interjections ("Thanks, Joanna!", "Totally agree, Mel.", "Yeah Mel, let's …", "Caroline, …")."""
    if sentence[end : end + 1] not in ("", ",", ".", "!", "?"):
        return False
    before = sentence[first_at:start].rstrip()
    if before.endswith(",") or all(w.strip(",.!").lower() in P.INTERJECTIONS for w in before.split()):
        return True
    return before.rsplit(" ", 1)[-1].lower() not in P.MENTION_LEFT


def _is_person_run(sentence: str, start: int, toks: Sequence[str], initial: bool, vocative: bool) -> bool:
    """Decide whether a cleaned capitalised run names a person (see ``find_people``)."""
    if len(toks) > 1:
        if toks[-1].lower() in P.PLACE_SUFFIXES or toks[0].lower() in P.PLACE_PREFIXES:
            return False
        left, _ = _left_word(sentence, start)
        return not initial and left not in ("the", "a", "an", "in", "at", "to", "from", "of")
    if vocative:
        return True
    if P.PRODUCT_TAIL.match(sentence, start + len(toks[0])):
        return False  # "Scene UI", "Windows 11"
    if initial:
        tail = sentence[start + len(toks[0]) : start + len(toks[0]) + 1]
        return tail == "," and toks[0].lower() not in P.STOPWORDS
    left, left2 = _left_word(sentence, start)
    if left == "to":
        return left2 in P.COMMUNICATION_VERBS
    if left == "with" and left2 in P.CHOICE_WITH:
        return False
    return left not in P.NON_PERSON_LEFT


_RELATION_RANK = {"addressee": 0, "": 1}


def find_people(sentences: Sequence[str]) -> list[tuple[str, str, str]]:
    """``(name, relation, sentence)`` for each person mentioned, first mention first, deduplicated.

    ``relation`` is "addressee" for a name only ever used to address someone ("Thanks, Joanna!"), ""
    for a plain mention, or the cue word ("friend", "colleague", "author", …).

    Cues, strongest first: "my friend/colleague/… X" (relation recorded), "named/called X",
    "Dr./Mr./Prof. X", "by Author".  Otherwise a Title-case run (1–4 words) counts when it is not at the
    sentence start (unless it is a vocative: "Hey Mel!", "Thanks, Joanna", "Caroline, that's …"), is not
    a stopword, pronoun, weekday, month, holiday or demonym, is not inside double quotes (titles), is not
    preceded by a place/thing word ("in", "at", "the", "visited", "using", "playing", "picked", "over"…; "to"
    only after "talked/said/sent…", "with" not after "went/stick…"), is not joined by "and"/"or" to a name
    that is a thing ("about Postgres and Redis"), and, for multi-word runs, does not end like a place
    ("… Canyon", "… Park") or start like one ("New …", "San …").
    """
    seen: dict[str, tuple[str, str, str]] = {}

    def add(name: str, relation: str, sentence: str) -> None:
        key = name.lower()
        if key not in seen:
            seen[key] = (name, relation, sentence)
        elif _RELATION_RANK.get(relation, 2) > _RELATION_RANK.get(seen[key][1], 2):
            seen[key] = (seen[key][0], relation, sentence)

    for sentence in sentences:
        for m in P.RELATION_CUE.finditer(sentence) if P.POSSESSIVE_HINT.search(sentence) else ():
            if P.name_ok(m.group(2)):
                add(m.group(2), m.group(1), sentence)
        for rx in (P.NAMED_CUE, P.TITLE_CUE):
            for m in rx.finditer(sentence) if P.CUE_HINT.search(sentence) else ():
                if P.name_ok(m.group(1)):
                    add(m.group(1), "", sentence)
        for m in P.BY_AUTHOR.finditer(sentence) if "by " in sentence else ():
            toks = P.clean_run(m.group(1))
            if toks:
                add(" ".join(toks), "author", sentence)
        for name, person, relation in _capitalised_runs(sentence):
            if person:
                add(name, relation, sentence)
    return list(seen.values())


def find_things(sentences: Sequence[str]) -> set[str]:
    """Lowercase names the sentences use as things, not people (read together: one conversation's sentences).

    A thing is a capitalised word after a thing word ("picked Postgres", "using Figma", "over MySQL",
    "switched to Linear") or joined to one by "and"/"or"; or a name the sentences only ever put where a person
    does not go ("about Postgres and Redis", "in Lisbon") and never where only a person goes (doing what people
    do: "Priya thinks", "Sam said"; met, told or talked to: "talked to Priya"; a relation: "my colleague Priya").
    """
    things: set[str] = set()
    elsewhere: set[str] = set()
    personal: set[str] = set()
    for sentence in sentences:
        for m in P.RELATION_CUE.finditer(sentence) if P.POSSESSIVE_HINT.search(sentence) else ():
            personal.add(m.group(2).lower())
        for name, _, relation, start, end in _runs(sentence):
            key = name.lower()
            if relation == "thing":
                things.add(key)
            elif relation == "elsewhere":
                elsewhere.add(key)
            if _acts_as_person(sentence, start, end):
                personal.add(key)
    return things | (elsewhere - personal)


def _acts_as_person(sentence: str, start: int, end: int) -> bool:
    """A name doing what people do ("Priya thinks", "Sam said"), or met, told or talked to ("talked to Priya")."""
    after = sentence[end : end + 30].lower().split()
    following = after[0].strip(",.;:!?") if after else ""
    left, left2 = _left_word(sentence, start)
    spoken_to = left == "to" and left2 in P.COMMUNICATION_VERBS
    return following in P.PERSON_VERBS or left in P.SOCIAL_VERBS or spoken_to


_JOINED = re.compile(r"^\s+(?:and|or|&)\s+$|^\s*,\s*$")


def _capitalised_runs(sentence: str) -> Iterator[tuple[str, bool, str]]:
    """``(name, is a person, relation)`` for each cleaned Title-case run of ``sentence`` (see :func:`find_people`)."""
    for name, person, relation, _, _ in _runs(sentence):
        yield name, person, relation


def _runs(sentence: str) -> Iterator[tuple[str, bool, str, int, int]]:
    """``(name, is a person, relation, start, end)`` for each cleaned Title-case run of ``sentence``; the relation
    of a run that is not a person is "thing" when a thing word or a joined thing made it so, "elsewhere" when
    another word before it did ("about", "in", "the", …)."""
    bare = P.QUOTED_ANY.sub(lambda q: " " * len(q.group(0)), sentence)
    first = P.FIRST_LETTER.search(bare)
    first_at = first.start() if first else 0
    previous: tuple[int, bool, bool] | None = None  # where the last run ended; it was no person; it was a thing
    for m in P.CAP_RUN.finditer(bare):
        toks = P.clean_run(m.group(0))
        if not toks:
            continue
        start = m.start() + m.group(0).find(toks[0])
        end = start + len(" ".join(toks))
        initial = start == first_at
        thing = not initial and len(toks) == 1 and _thing_left(bare, start)
        vocative = not thing and _vocative(bare, start, end, first_at)
        joined = previous is not None and previous[1] and bool(_JOINED.match(bare[previous[0] : start]))
        thing = thing or (joined and previous is not None and previous[2])
        person = not (joined or thing) and _is_person_run(bare, start, toks, initial, vocative)
        placed = not person and not initial and not vocative
        previous = (end, placed, thing)
        relation = "addressee" if person and (vocative or initial) else "thing" if thing else ""
        yield " ".join(toks), person, relation or ("elsewhere" if placed and len(toks) == 1 else ""), start, end


def _thing_left(sentence: str, start: int) -> bool:
    left, left2 = _left_word(sentence, start)
    if left == "with":
        return left2 in P.CHOICE_WITH
    return left in P.THING_LEFT or (left == "to" and left2 in P.SWITCH_TO)
