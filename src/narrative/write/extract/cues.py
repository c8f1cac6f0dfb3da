"""Shared by the extractors: case-blind expressions, the cheap substring pre-checks, clipping."""

from __future__ import annotations

import re

IGNORE_CASE = re.IGNORECASE


def caseless(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, IGNORE_CASE)


# Cheap substring pre-checks: a family's expressions run only when one of its keys is in the turn.
HINTS: dict[str, tuple[str, ...]] = {
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


def hint(lower: str, family: str) -> bool:
    return any(map(lower.__contains__, HINTS[family]))


def clip(text: str, max_words: int = 16) -> str:
    """At most ``max_words`` words, trimmed of edge punctuation (a question keeps its "?")."""
    toks = text.strip(" ,;:.!-\u2013\u2014\"'").split()
    return " ".join(toks[:max_words]) + ("\u2026" if len(toks) > max_words else "")
