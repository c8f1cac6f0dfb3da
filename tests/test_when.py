"""The time a query names (``narrative.text.when``): which phrases name a period, and what the period is."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import narrative
from conftest import FakeClock
from narrative.text.when import Period, named_period

NOW = datetime(2026, 11, 24, 15, 30, tzinfo=UTC)  # a Tuesday


def day(year: int, month: int, number: int) -> datetime:
    return datetime(year, month, number, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "start", "end", "label"),
    [
        ("What did Gina find on 1 February, 2023?", day(2023, 2, 1), day(2023, 2, 2), "1 February, 2023"),
        ("What did she show on October 13, 2023?", day(2023, 10, 13), day(2023, 10, 14), "October 13, 2023"),
        ("notes from the 23rd of May, 2023", day(2023, 5, 23), day(2023, 5, 24), "23rd of May, 2023"),
        ("the 2023-05-23 review", day(2023, 5, 23), day(2023, 5, 24), "2023-05-23"),
        ("Which class did Maria start in December 2023?", day(2023, 12, 1), day(2024, 1, 1), "December 2023"),
        ("what did we ship in dec 2023", day(2023, 12, 1), day(2024, 1, 1), "dec 2023"),
        ("How many trips in 2023?", day(2023, 1, 1), day(2024, 1, 1), "2023"),
        ("what did we decide yesterday", day(2026, 11, 23), day(2026, 11, 24), "yesterday"),
        ("anything today?", day(2026, 11, 24), day(2026, 11, 25), "today"),
        ("what did we decide last week", day(2026, 11, 16), day(2026, 11, 23), "last week"),
        ("this week's plans", day(2026, 11, 23), day(2026, 11, 25), "this week"),
        ("the past week", day(2026, 11, 17), day(2026, 11, 25), "past week"),
        ("what happened last month", day(2026, 10, 1), day(2026, 11, 1), "last month"),
        ("Last year we said", day(2025, 1, 1), day(2026, 1, 1), "Last year"),
    ],
)
def test_a_named_time_is_a_period(query: str, start: datetime, end: datetime, label: str) -> None:
    period = named_period(query, NOW)
    assert period is not None
    assert (period.start, period.end, period.label) == (start, end, label)
    assert period.relative == (not any(ch.isdigit() for ch in label))  # counted from now: no date in its words


def test_so_long_ago_is_a_span_around_then() -> None:
    period = named_period("what did I say two weeks ago", NOW)
    assert period is not None
    assert period.distance_days(NOW - timedelta(days=14)) == 0
    assert period.distance_days(NOW - timedelta(days=30)) > 10
    assert named_period("3 days ago", NOW) is not None


def test_a_month_without_a_year_is_that_month_in_the_nearest_year() -> None:
    period = named_period("When did Melanie go camping in July?", NOW)
    assert period is not None and period.yearly and period.label == "July"
    assert period.distance_days(datetime(2023, 7, 15, tzinfo=UTC)) == 0
    assert period.distance_days(datetime(2019, 7, 31, tzinfo=UTC)) == 0
    assert period.distance_days(datetime(2023, 8, 11, tzinfo=UTC)) == pytest.approx(10)
    assert period.distance_days(datetime(2024, 1, 1, tzinfo=UTC)) > 150  # the nearest July is half a year away


@pytest.mark.parametrize(
    "query",
    [
        "why SQLite instead of Firebase",
        "it may be fine in may",  # "may" in lower case is a verb
        "February 30, 2023",  # names no day
        "the 2023-13-01 build",  # no 13th month
        "what did Jan say in the meeting",  # a name, not a month
        "the 1990s",
        "",
    ],
)
def test_no_time_is_read_where_none_is_named(query: str) -> None:
    assert named_period(query, NOW) is None


def test_distance_is_zero_inside_and_grows_outside() -> None:
    period = Period(day(2023, 5, 1), day(2023, 6, 1), "May 2023")
    assert period.distance_days(day(2023, 5, 1)) == 0
    assert period.distance_days(day(2023, 5, 31)) == 0
    assert period.distance_days(day(2023, 6, 1)) == 0  # the end is exclusive: the distance starts at 0 there
    assert period.distance_days(day(2023, 6, 11)) == pytest.approx(10)
    assert period.distance_days(day(2023, 4, 21)) == pytest.approx(10)
    assert period.distance_days(datetime(2023, 5, 10)) == 0  # a naive time is read as UTC


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_either_names_a_period_or_none(text: str) -> None:
    period = named_period(text, NOW)
    if period is not None:
        assert period.start < period.end
        assert period.distance_days(period.start) == 0
        assert period.label and period.label.lower() in text.lower()


@settings(max_examples=200, deadline=None)
@given(
    st.dates(min_value=date(1900, 1, 1), max_value=date(2099, 12, 31)),
    st.sampled_from(["{B} {d}, {Y}", "{d} {B} {Y}", "{d} {B}, {Y}", "{Y}-{m:02d}-{d:02d}", "{b} {d} {Y}"]),
    st.sampled_from(["what happened on {}?", "{} notes", "On {}, we met"]),
)
def test_a_written_date_names_its_day(written_day: date, form: str, sentence: str) -> None:
    when = datetime(written_day.year, written_day.month, written_day.day, tzinfo=UTC)
    written = form.format(B=when.strftime("%B"), b=when.strftime("%b"), d=when.day, Y=when.year, m=when.month)
    period = named_period(sentence.format(written), NOW)
    assert period is not None
    assert (period.start, period.end) == (when, when + timedelta(days=1))


def test_a_relative_time_is_cut_from_the_words_a_date_is_not() -> None:
    last_week = named_period("what did we decide last week", NOW)
    assert last_week is not None and last_week.relative
    assert last_week.cut_from("what did we decide last week") == "what did we decide"
    assert last_week.cut_from("last week") == "last week"  # nothing else left: the query stays as it was
    may = named_period("the plan for May 23, 2023", NOW)
    assert may is not None and not may.relative


@pytest.mark.parametrize(
    ("query", "day"),
    [
        ("what did we agree on 16.01.2024?", date(2024, 1, 16)),
        ("the meeting on 3.4.2023", date(2023, 4, 3)),  # dots: day first, always
        ("on 16/01/2024", date(2024, 1, 16)),  # the day is the number above 12
        ("on 01/16/2024", date(2024, 1, 16)),  # the US order, told apart the same way
    ],
)
def test_day_first_numeric_dates_are_read(query: str, day: date) -> None:
    period = named_period(query, NOW)
    assert period is not None and period.start.date() == day
    assert period.spelled == f"{day.strftime('%B')} {day.day} {day.year}"


@pytest.mark.parametrize("query", ["on 05/06/2024", "on 31.02.2024", "on 12.13.2024"])
def test_an_ambiguous_or_impossible_numeric_date_names_no_day(query: str) -> None:
    assert named_period(query, NOW) is None


def test_a_day_first_date_finds_the_day_written_out(db_path: Path, clock: FakeClock) -> None:
    with narrative.Memory(db_path, user="alice", embedder="none", clock=clock, env={}) as mem:
        mem.remember("We signed the lease on January 16, 2024.")
        mem.remember("The plumber came on March 3, 2024.")
        [hit, *_] = mem.search("what happened on 16.01.2024?", 5, record=False)
        assert "lease" in hit.text
