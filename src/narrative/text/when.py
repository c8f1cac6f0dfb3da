"""The time a query names ("in May 2023", "on 1 February, 2023", "last week"), as a period to measure closeness to.

Search scales a match by how recent the memory is.  When the query itself names a time, "recent" is the wrong
reference: a date belongs with its event, and what happened then was said around then.  :func:`named_period` finds
the first calendar reference in a query and returns the period it covers; search then measures each memory's
distance to that period instead of its age.

Recognised, case-insensitively (the first that matches wins, in this order):

* a day: ``May 23, 2023``, ``23 May 2023``, ``23rd of May, 2023``, ``2023-05-23``, and numeric dates written day
  first as much of the world writes them: ``16.01.2024`` (dots: always day, month, year) and ``16/01/2024`` where the
  order is unambiguous (a first number above 12 is the day; a second one above 12 makes it month first, as in the
  US; ``05/06/2024`` names no day);
* a month of a year: ``May 2023``, ``May of 2023``;
* a day or a period relative to ``now``: ``today``, ``yesterday``, ``this``/``last``/``past``
  ``week``/``month``/``year`` (weeks start on Monday; "past" is the span just before today),
  ``N days``/``weeks``/``months`` ``ago`` (N in digits or one to ten, or "a");
* a month without a year (written out in full) after ``in``, ``during``, ``since``, ``until``, ``by``,
  ``early``/``mid``/``late``: that month in whichever year is nearest (``in July``); "may" in lower case is not
  one ("in may be");
* a year after ``in``, ``during``, ``of``, ``since``: ``in 2023``.

Nothing else is read: no weekday names, seasons or holidays (too vague to anchor a period).  A relative period's
words are not matched as words (:meth:`Period.cut_from`): "last week" in a memory said months ago meant another week.
A date's words are: a memory that says "May 23" matches a question about May 23.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): number for number, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_YEAR = r"((?:19|20)\d\d)"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5}
_NUMBERS.update({"six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10})

_MONTH_DAY_YEAR = re.compile(rf"\b({_MONTH})\.?\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE)
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY}\s+(?:of\s+)?({_MONTH})\.?,?\s+{_YEAR}\b", re.IGNORECASE)
_ISO_DAY = re.compile(r"\b((?:19|20)\d\d)-(\d\d)-(\d\d)\b")
_NUMERIC_DAY = re.compile(r"(?<![\d.\/])(\d{1,2})([./])(\d{1,2})\2((?:19|20)\d\d)\b")
_MONTH_YEAR = re.compile(rf"\b({_MONTH})\.?,?\s+(?:of\s+)?{_YEAR}\b", re.IGNORECASE)
_RELATIVE = re.compile(r"\b(today|yesterday|(?:this|last|past)\s+(?:week|month|year))\b", re.IGNORECASE)
_AGO = re.compile(rf"\b(\d{{1,3}}|{'|'.join(_NUMBERS)})\s+(day|week|month)s?\s+ago\b", re.IGNORECASE)
_FULL_MONTH = "|".join(name.lower() for name in calendar.month_name if name)
_LONE_MONTH = re.compile(rf"\b(?:in|during|since|until|by|early|late|mid)\s+({_FULL_MONTH})\b(?!\s+\d)", re.IGNORECASE)
_LONE_YEAR = re.compile(rf"\b(?:in|during|of|since)\s+{_YEAR}\b", re.IGNORECASE)


@dataclass(frozen=True)
class Period:
    """A span of time a query names: ``[start, end)``; ``yearly`` when a month was named without its year."""

    start: datetime
    end: datetime
    label: str  # as the query put it ("May 2023", "last week")
    spelled: str = ""  # a numeric day written out ("16.01.2024" → "January 16 2024"), so its words can match too
    yearly: bool = False
    relative: bool = False  # counted from now ("yesterday", "last week", "two weeks ago")

    def cut_from(self, query: str) -> str:
        """The query without the words that named the period, or the query itself if nothing else is left."""
        rest = " ".join(query.replace(self.label, " ").split())
        return rest if any(ch.isalnum() for ch in rest) else query

    def distance_days(self, when: datetime) -> float:
        """Days from ``when`` to the period (0 inside it); a yearly month is that month in the nearest year."""
        moment = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
        if not self.yearly:
            return _outside(moment, self.start, self.end)
        spans = (_month_span(moment.year + shift, self.start.month) for shift in (-1, 0, 1))
        return min(_outside(moment, start, end) for start, end in spans)


def named_period(query: str, now: datetime) -> Period | None:
    """The first time ``query`` names, as a period (see the module's docstring), or ``None``."""
    now = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    for finder in (_day, _month_of_year, _relative, _ago, _lone_month, _lone_year):
        found = finder(query, now)
        if found is not None:
            return found
    return None


def _outside(moment: datetime, start: datetime, end: datetime) -> float:
    if start <= moment < end:
        return 0.0
    gap = start - moment if moment < start else moment - end
    return gap.total_seconds() / 86400.0


def _month_span(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def _day_period(year: int, month: int, day: int, label: str) -> Period | None:
    try:
        start = datetime(year, month, day, tzinfo=UTC)
    except ValueError:  # "February 30, 2023" names no day
        return None
    return Period(start, start + timedelta(days=1), label)


def _day(query: str, now: datetime) -> Period | None:
    if match := _MONTH_DAY_YEAR.search(query):
        return _day_period(int(match[3]), _MONTHS[match[1].lower()], int(match[2]), match[0])
    if match := _DAY_MONTH_YEAR.search(query):
        return _day_period(int(match[3]), _MONTHS[match[2].lower()], int(match[1]), match[0])
    if (match := _ISO_DAY.search(query)) and 1 <= int(match[2]) <= 12:
        return _day_period(int(match[1]), int(match[2]), int(match[3]), match[0])
    if match := _NUMERIC_DAY.search(query):
        return _numeric_day(match)
    return None


def numeric_date(text: str) -> tuple[int, int, int] | None:
    """(year, month, day) of the first numeric date in ``text`` read as :func:`named_period` reads it, or None."""
    match = _NUMERIC_DAY.search(text)
    period = _numeric_day(match) if match else None
    return None if period is None else (period.start.year, period.start.month, period.start.day)


def _numeric_day(match: re.Match[str]) -> Period | None:
    first, mark, second, year = int(match[1]), match[2], int(match[3]), int(match[4])
    if mark == "." or first > 12:
        day, month = first, second
    elif second > 12:
        day, month = second, first
    else:
        return None  # 05/06/2024: May 6 or 5 June, nobody can tell
    if not 1 <= month <= 12:
        return None
    period = _day_period(year, month, day, match[0])
    if period is None:
        return None
    return Period(period.start, period.end, period.label, spelled=f"{calendar.month_name[month]} {day} {year}")


def _month_of_year(query: str, now: datetime) -> Period | None:
    match = _MONTH_YEAR.search(query)
    if match is None:
        return None
    start, end = _month_span(int(match[2]), _MONTHS[match[1].lower()])
    return Period(start, end, match[0])


def _relative(query: str, now: datetime) -> Period | None:
    match = _RELATIVE.search(query)
    if match is None:
        return None
    phrase = " ".join(match[1].lower().split())
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if phrase == "today":
        return Period(today, today + timedelta(days=1), match[0], relative=True)
    if phrase == "yesterday":
        return Period(today - timedelta(days=1), today, match[0], relative=True)
    which, unit = phrase.split()
    length = {"week": timedelta(days=7), "month": timedelta(days=30), "year": timedelta(days=365)}[unit]
    if which == "past":  # the past week: the days just before today, and today
        return Period(today - length, today + timedelta(days=1), match[0], relative=True)
    if unit == "week":
        start = today - timedelta(days=today.weekday())  # weeks start on Monday (ISO 8601)
    elif unit == "month":
        start = datetime(today.year, today.month, 1, tzinfo=UTC)
    else:
        start = datetime(today.year, 1, 1, tzinfo=UTC)
    if which == "this":
        return Period(start, today + timedelta(days=1), match[0], relative=True)
    before = start - timedelta(days=1)
    if unit == "week":
        return Period(start - timedelta(days=7), start, match[0], relative=True)
    if unit == "month":
        return Period(datetime(before.year, before.month, 1, tzinfo=UTC), start, match[0], relative=True)
    return Period(datetime(before.year, 1, 1, tzinfo=UTC), start, match[0], relative=True)


def _ago(query: str, now: datetime) -> Period | None:
    match = _AGO.search(query)
    if match is None:
        return None
    count = int(match[1]) if match[1].isdigit() else _NUMBERS[match[1].lower()]
    unit = {"day": 1, "week": 7, "month": 30}[match[2].lower()]
    centre = now - timedelta(days=count * unit)
    half = timedelta(days=max(1, unit // 2))  # "two weeks ago" is roughly then, not to the day
    return Period(centre - half, centre + half, match[0], relative=True)


def _lone_month(query: str, now: datetime) -> Period | None:
    for match in _LONE_MONTH.finditer(query):
        if _is_month(match[1]):
            start, end = _month_span(now.year, _MONTHS[match[1].lower()])
            return Period(start, end, match[1], yearly=True)
    return None


def _lone_year(query: str, now: datetime) -> Period | None:
    match = _LONE_YEAR.search(query)
    if match is None:
        return None
    year = int(match[1])
    return Period(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC), match[1])


def _is_month(word: str) -> bool:
    """A month named alone: "may" in lower case is not one, else "in may be" would be."""
    return word != "may"
