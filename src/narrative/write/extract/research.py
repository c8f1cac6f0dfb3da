"""Research: citations, quotes, page references, titles and their authors."""

from __future__ import annotations

import re

from narrative.model import ResearchDetails
from narrative.text import patterns as P
from narrative.write.extract.cues import IGNORE_CASE, caseless, clip

# research
_NAME = r"[A-Z][A-Za-z'\-]+"
_AUTHORS = _NAME + r"(?:\s+(?:and|&)\s+" + _NAME + r"|\s+et\s+al\.?)?"
_PAGES = r"(?:pp?\.|pages?)\s*\d+(?:\s*(?:[-\u2013]|to)\s*\d+)?"
_AUTHOR_YEAR = re.compile(r"\b(?P<a>" + _AUTHORS + r")\s*\((?P<y>\d{4})[a-z]?(?:,\s*(?P<p>" + _PAGES + r"))?\)")
_PAREN_CITE = re.compile(r"\((?P<a>" + _AUTHORS + r"),?\s+(?P<y>\d{4})[a-z]?(?:,\s*(?P<p>" + _PAGES + r"))?\)")
_PAGE = re.compile(r"\b" + _PAGES, IGNORE_CASE)
_PERSON_NAME = r"(?:[A-Z][a-z'\-]+|[A-Z]\.)(?:\s+(?:[A-Z][a-z'\-]+|[A-Z]\.)){0,3}"
_TITLE_BY = re.compile(r"\"(?P<t>[^\"]{2,120}?)[,.]?\"\s*,?\s+by\s+(?P<a>" + _PERSON_NAME + ")")
_IN_TITLE_BY = re.compile(
    r"\b(?:in|of|reading|read|from)\s+(?P<t>[A-Z][\w'\-]*(?:\s+(?:[A-Z][\w'\-]*|of|the|and|a|an|in|on|for|to)){0,8}?)\s+by\s+(?P<a>"
    + _PERSON_NAME
    + ")"
)
_POSSESSIVE_TITLE = re.compile(
    r"\b(?P<a>[A-Z][a-z'\-]+)'s\s+(?P<t>[A-Z][\w\-]*(?:\s+(?:(?:of|the|and|in|on|for|a|an)\s+)*[A-Z][\w\-]*)*)"
)
_BEFORE_PAGE = re.compile(r"(?P<w>[A-Z][\w'\-]*(?:\s+(?:[A-Z][\w'\-]*|of|the|and)){0,6}?)(?:'s)?,?\s+$")
_READING = caseless(
    r"\b(?:read|reading|reread|book|books|novel|paper|article|essay|study|chapter|monograph|journal|thesis|"
    r"dissertation|poem|memoir|author|wrote|written|cite[sd]?|citing|quote[sd]?|argues?|according\s+to|"
    r"published|edition|volume|translation)\b"
)
_MENTION = caseless(
    r"\b(?:reading|read|rereading|finished|started|citing|annotating|studying|wrote|writing|published)\s+"
    r"(?:a|an|the|this|that|his|her|their|my|your)?\s*(?:\w+\s+){0,2}?(?:book|novel|paper|article|essay|study|"
    r"chapter|monograph|poem|memoir)s?\b|\b(?:book|novel|paper|article|essay|study|chapter)s?\s+(?:by|on|about)\s+"
    r"|\b(?:this|that|the)\s+(?:book|novel|paper|article|essay)\s+(?:i|you|we)\s+(?:read|recommended|cited)\b"
)
_QUOTE_AUTHOR = re.compile(
    r"\b(?:according\s+to|by|as)\s+(?P<a>" + _PERSON_NAME + r")|(?P<b>" + _PERSON_NAME + r")\s+"
    r"(?:says|said|writes|wrote|argues|argued|notes|noted|puts\s+it)\b"
)
_MINOR = P.lex("a an the of and in on for to at by with from or")


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
    for q in P.QUOTED.finditer(sentence):
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
            ref = " ".join(P.drop_leading_stopwords(before.group("w").split()))
            title, author = (ref, None) if len(ref.split()) > 1 else (None, ref or None)
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
        note = clip(re.sub(r"^[\s,;:\-\u2013\u2014]*(?:on\s+)?", "", sentence[page_match.end() :]), 30) or None
    elif kind == "quote" and quote:
        rest = re.sub(r"\s+([,.;:!?])", r"\1", P.QUOTED.sub(" ", sentence)).strip(" ,.;:")
        note = clip(rest, 30) if len(P.words(rest)) >= 3 else None
    return ResearchDetails(
        source_type=kind,
        source_reference=reference,
        author=author,
        work_title=title,
        page_reference=page,
        user_annotation=note,
    )
