"""How a research item names its source: the keys two items share when they are about one work or one author.

A research memory (ITSERR's research stream) carries ``ResearchDetails``: a work title, an author, a
bibliographic reference, a page.  Consolidation links two items whose keys match; source popularity counts
the items of one work together.  Keys are lowercase, without quotes, punctuation, leading articles or page
references, so "Thinking in Systems", ``"thinking in systems,"`` and ``Thinking in Systems, p. 45`` agree.
"""

from __future__ import annotations

import re

from narrative.model import MemoryItem, ResearchDetails

__all__ = ["author_key", "research_details", "source_label", "work_key"]

_PAGES = re.compile(r"\b(?:pp?\.|pages?)\s*\d+(?:\s*(?:[-\u2013]|to)\s*\d+)?", re.IGNORECASE)
_YEAR = re.compile(r"\(?\b\d{4}[a-z]?\)?")
_PUNCT = re.compile(r"[\"“”‘’'.,;:!?()\[\]]+")
_ARTICLE = re.compile(r"^(?:the|a|an)\s+")
_AUTHOR_SPLIT = re.compile(r"\s+(?:and|&)\s+|\s+et\s+al\.?|,", re.IGNORECASE)


def research_details(memory: MemoryItem) -> ResearchDetails | None:
    details = memory.details
    return details if isinstance(details, ResearchDetails) else None


def _normal(text: str) -> str:
    text = _PAGES.sub(" ", text)
    text = _PUNCT.sub(" ", text.lower())
    return _ARTICLE.sub("", " ".join(text.split()))


def work_key(details: ResearchDetails) -> str | None:
    """The work an item is about: its title, else its reference without pages; None when it names no work."""
    if details.work_title and _normal(details.work_title):
        return _normal(details.work_title)
    reference = details.source_reference or ""
    if details.page_reference:
        reference = reference.replace(details.page_reference, " ")
    key = _normal(reference)
    if not key or (details.author and key == _normal(details.author)):
        return None  # a page alone, or an author alone, names no work
    return key


def author_key(details: ResearchDetails) -> str | None:
    """The first author's surname (lowercase), or None."""
    if not details.author:
        return None
    first = _AUTHOR_SPLIT.split(_YEAR.sub(" ", details.author))[0]
    words = _normal(first).split()
    return words[-1] if words else None


def source_label(details: ResearchDetails | None, content: str = "") -> str:
    """How a source reads to a person: "Thinking in Systems (Donella Meadows)", a reference, or the item."""
    if details is not None and details.work_title:
        return f"{details.work_title} ({details.author})" if details.author else details.work_title
    if details is not None and details.source_reference and _normal(details.source_reference):
        return details.source_reference  # a reference, not a page alone ("p. 45" names no source)
    words = content.split()
    return " ".join(words[:10]) + ("…" if len(words) > 10 else "")
