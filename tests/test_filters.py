"""Metadata on memories and filters over it and every field (mem0's grammar: AND/OR/NOT, in, ranges), on
search and lists, on both stores; a misspelt filter is refused, never read as "everything"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import narrative
from narrative.errors import ValidationError
from narrative.store.filter_tree import AllOf, Condition, Not, parse_filters
from narrative.store.protocol import Store
from narrative.store.sqlite.base import unicode_lower


@pytest.fixture
def notes(mem: narrative.Memory) -> dict[str, int]:
    """Five facts with metadata, of three projects, two importances, one of them a list of tags."""
    made = {
        "tomatoes": mem.add_memory(
            "The tomatoes need watering every morning.",
            importance=4,
            metadata={"project": "garden", "priority": 3, "tags": ["daily", "urgent"], "done": False},
        ),
        "basil": mem.add_memory(
            "Basil grows best next to the tomatoes.", metadata={"project": "garden", "priority": 1, "done": True}
        ),
        "invoice": mem.add_memory(
            "Send the invoice to Lena by Friday.",
            stream="decision",
            importance=5,
            metadata={"project": "work", "priority": 5, "owner": "Lena Ortiz"},
        ),
        "plain": mem.add_memory("The cat sleeps on the sofa."),
        "nulled": mem.add_memory("Pick a name for the app.", metadata={"project": None, "priority": 2.5}),
    }
    return {name: m.id for name, m in made.items()}


def ids(mem: narrative.Memory, filters: Any, **options: Any) -> set[int]:
    return {m.id for m in mem.list_memories(filters=filters, limit=100, **options)}


def test_metadata_is_stored_read_back_edited_and_in_history(mem: narrative.Memory, notes: dict[str, int]) -> None:
    tomato = mem.get_memory(notes["tomatoes"])
    assert tomato.metadata == {"project": "garden", "priority": 3, "tags": ["daily", "urgent"], "done": False}
    assert mem.get_memory(notes["plain"]).metadata == {}
    edited = mem.edit_memory(notes["tomatoes"], metadata={"project": "garden", "priority": 4})
    assert edited.metadata == {"project": "garden", "priority": 4} and edited.content == tomato.content
    last = mem.history(notes["tomatoes"])[-1]
    assert last.kind.value == "edited" and last.detail == {"fields": ["metadata"]}


def test_field_equality_operators_and_logic(mem: narrative.Memory, notes: dict[str, int]) -> None:
    n = notes
    assert ids(mem, {"metadata": {"project": "garden"}}) == {n["tomatoes"], n["basil"]}
    assert ids(mem, {"metadata.project": "work"}) == {n["invoice"]}
    assert ids(mem, {"metadata.priority": {"gte": 3}}) == {n["tomatoes"], n["invoice"]}
    assert ids(mem, {"metadata.priority": {"gt": 1, "lt": 5}}) == {n["tomatoes"], n["nulled"]}
    assert ids(mem, {"metadata.project": {"in": ["work", "garden"]}}) == {n["tomatoes"], n["basil"], n["invoice"]}
    # ne and nin include memories without the key (a reader's "not garden")
    assert ids(mem, {"metadata.project": {"ne": "garden"}}) == {n["invoice"], n["plain"], n["nulled"]}
    assert ids(mem, {"metadata.project": {"nin": ["garden"]}}) == {n["invoice"], n["plain"], n["nulled"]}
    assert ids(mem, {"metadata.project": None}) == {n["nulled"]}
    assert ids(mem, {"metadata.done": True}) == {n["basil"]}
    assert ids(mem, {"metadata.done": False}) == {n["tomatoes"]}
    assert ids(mem, {"metadata.owner": "*"}) == {n["invoice"]}
    assert ids(mem, {"metadata.owner": {"exists": False}}) == set(n.values()) - {n["invoice"]}
    assert ids(mem, {"metadata.tags": {"contains": "urgent"}}) == {n["tomatoes"]}
    assert ids(mem, {"metadata.owner": {"contains": "Ortiz"}}) == {n["invoice"]}
    assert ids(mem, {"metadata.owner": {"contains": "ortiz"}}) == set()
    assert ids(mem, {"metadata.owner": {"icontains": "ortiz"}}) == {n["invoice"]}
    assert ids(mem, {"stream": "decision"}) == {n["invoice"]}
    assert ids(mem, {"importance": {"gte": 4}}) == {n["tomatoes"], n["invoice"]}
    assert ids(mem, {"content": {"icontains": "TOMATOES"}}) == {n["tomatoes"], n["basil"]}
    either = {"OR": [{"metadata.project": "work"}, {"metadata.priority": 1}]}
    assert ids(mem, either) == {n["invoice"], n["basil"]}
    both = {"AND": [{"metadata.project": "garden"}, {"NOT": {"metadata.done": True}}]}
    assert ids(mem, both) == {n["tomatoes"]}
    assert ids(mem, {"NOT": {"metadata.project": "garden"}}) == {n["invoice"], n["plain"], n["nulled"]}
    assert ids(mem, {"stream": "fact", "metadata.project": "garden"}) == {n["tomatoes"], n["basil"]}
    assert mem.count_memories(filters={"metadata.project": "garden"}) == 2


def test_time_ranges_and_ids(mem: narrative.Memory, notes: dict[str, int]) -> None:
    first = mem.get_memory(notes["tomatoes"]).created_at
    later = {m for m in notes.values() if mem.get_memory(m).created_at > first}
    assert ids(mem, {"created_at": {"gt": first.isoformat()}}) == later
    assert ids(mem, {"time": {"lte": first.isoformat()}}) == {notes["tomatoes"]}
    day = (first - timedelta(days=1)).date().isoformat()
    assert ids(mem, {"created_at": {"gte": day}}) == set(notes.values())
    assert ids(mem, {"id": {"in": [notes["plain"], notes["basil"]]}}) == {notes["plain"], notes["basil"]}


def test_search_takes_filters_with_its_own(mem: narrative.Memory, notes: dict[str, int]) -> None:
    hits = mem.search("tomatoes", filters={"metadata": {"project": "garden", "priority": {"gte": 2}}})
    assert [h.memory.id for h in hits] == [notes["tomatoes"]]
    assert mem.search("tomatoes", filters={"metadata.project": "work"}) == []
    hits = mem.search("invoice Lena", streams=["decision"], filters={"metadata.owner": "*"})
    assert [h.memory.id for h in hits] == [notes["invoice"]]


def test_turn_meta_is_the_metadata_of_its_memories(mem: narrative.Memory) -> None:
    result = mem.remember(
        "We decided to keep the garden app offline because the plots have no signal.",
        meta={"channel": "slack", "thread": 12, "not a key": 1},
    )
    assert result.memories and all(m.metadata == {"channel": "slack", "thread": 12} for m in result.memories)
    hits = mem.search("garden offline", filters={"metadata.channel": "slack"})
    assert hits and all(h.memory.metadata["channel"] == "slack" for h in hits)
    assert mem.search("garden offline", filters={"metadata.channel": "email"}) == []


def test_icontains_ignores_case_in_every_alphabet(mem: narrative.Memory) -> None:
    """Umlauts, accents, Greek and Cyrillic fold on both stores (SQLite's own lower() folds A-Z only)."""
    made = {
        "upper": mem.add_memory("Meeting in MÜNCHEN next week.", metadata={"city": "MÜNCHEN"}),
        "lower": mem.add_memory("Dinner in münchen on Friday.", metadata={"city": "münchen"}),
        "cafe": mem.add_memory("Café ÉCLAIR opens at nine.", metadata={"place": "CAFÉ ÉCLAIR"}),
        "greek": mem.add_memory("ΣΟΦΊΑ wrote about the ΟΔΟΣΤΡΩΣΗ in ΑΘΉΝΑ.", metadata={"city": "ΑΘΉΝΑ"}),
        "russian": mem.add_memory("Flight to МОСКВА and İSTANBUL on Monday.", metadata={"city": "Москва"}),
        "odds": mem.add_memory("100% of the_plan is done.", metadata={"city": None, "count": 5}),
    }
    n = {name: m.id for name, m in made.items()}
    munich = {n["upper"], n["lower"]}
    assert ids(mem, {"content": {"icontains": "münchen"}}) == munich
    assert ids(mem, {"content": {"icontains": "MÜNCHEN"}}) == munich
    assert ids(mem, {"content": {"icontains": "éclair"}}) == {n["cafe"]}
    assert ids(mem, {"content": {"icontains": "CAFÉ"}}) == {n["cafe"]}
    assert ids(mem, {"content": {"icontains": "σοφία"}}) == {n["greek"]}
    assert ids(mem, {"content": {"icontains": "αθήνα"}}) == {n["greek"]}
    assert ids(mem, {"content": {"icontains": "москва"}}) == {n["russian"]}
    # letter by letter, as PostgreSQL lowers: a capital sigma ending the needle is σ (str.lower makes it ς,
    # which misses the longer word), and İ is a plain i (str.lower adds a combining dot)
    assert ids(mem, {"content": {"icontains": "ΟΔΟΣ"}}) == {n["greek"]}
    assert ids(mem, {"content": {"icontains": "istanbul"}}) == {n["russian"]}
    assert ids(mem, {"metadata.city": {"icontains": "münchen"}}) == munich
    assert ids(mem, {"metadata.city": {"icontains": "αθήνα"}}) == {n["greek"]}
    assert ids(mem, {"metadata.city": {"icontains": "МОСКВА"}}) == {n["russian"]}
    assert ids(mem, {"metadata.place": {"icontains": "café éclair"}}) == {n["cafe"]}
    assert ids(mem, {"metadata.city": {"contains": "münchen"}}) == {n["lower"]}  # contains keeps the case
    # a needle's % and _ are plain characters; null, a number or no key at all never holds the text
    assert ids(mem, {"content": {"icontains": "100%"}}) == {n["odds"]}
    assert ids(mem, {"content": {"icontains": "e_p"}}) == {n["odds"]}
    assert ids(mem, {"content": {"icontains": "%"}}) == {n["odds"]}
    assert ids(mem, {"metadata.count": {"icontains": "5"}}) == set()
    assert ids(mem, {"NOT": {"metadata.city": {"icontains": "münchen"}}}) == set(n.values()) - munich
    hits = mem.search("meeting dinner", filters={"metadata.city": {"icontains": "MÜNCHEN"}})
    assert {h.memory.id for h in hits} == munich


def test_a_storyline_is_found_by_its_name_in_any_case_of_any_alphabet(mem: narrative.Memory) -> None:
    """Names are matched ignoring case as PostgreSQL's lower() does (SQLite's NOCASE folds A-Z only)."""
    made = mem.create_storyline("Über Reisen nach Ελλάδα")
    for asked in ("über reisen nach ελλάδα", "ÜBER REISEN NACH ΕΛΛΆΔΑ"):
        found = mem.store.find_storyline(mem.user, asked)
        assert found is not None and found.id == made.id
    assert mem.store.find_storyline(mem.user, "uber reisen nach ελλάδα") is None


def test_both_stores_lower_text_alike(store: Store) -> None:
    """Every character lowers the same on SQLite (unicode_lower, on the connection) as PostgreSQL's lower()."""
    lower = "lower" if store.backend == "postgres" else "unicode_lower"
    every = [chr(c) for c in range(1, 0x110000) if not 0xD800 <= c < 0xE000]  # no NUL, no lone surrogate
    for start in range(0, len(every), 100_000):
        text = "".join(every[start : start + 100_000])
        row = store._one(f"SELECT {lower}(?)", (text,))  # type: ignore[attr-defined]
        ours = unicode_lower(text)
        assert row is not None and len(row[0]) == len(ours)
        assert [(hex(ord(c)), a, b) for c, a, b in zip(text, row[0], ours, strict=True) if a != b] == []
    for text in ("ΟΔΟΣ ΣΑΣ.", "İSTANBUL", "Straße", "MÜNCHEN"):
        row = store._one(f"SELECT {lower}(?)", (text,))  # type: ignore[attr-defined]
        assert row is not None and row[0] == unicode_lower(text)
    assert store._one(f"SELECT {lower}(NULL)")[0] is None  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ({"storyline": 3}, "no field 'storyline'"),
        ({"project": "garden"}, "metadata.project"),
        ({"importance": {"bigger": 3}}, "takes the operators"),
        ({"stream": "decisions"}, "must be one of"),
        ({"and": [{"stream": "fact"}]}, "capitals"),
        ({"OR": []}, "non-empty list"),
        ({"metadata": {"bad key": 1}}, "metadata key"),
        ({"metadata.tags": {"in": []}}, "list of 1 to"),
        ({"time": {"gte": "last tuesday"}}, "ISO 8601"),
        ([{"stream": "fact"}], "filters must be a"),
    ],
)
def test_a_bad_filter_is_refused_saying_what_is_allowed(mem: narrative.Memory, bad: Any, said: str) -> None:
    with pytest.raises(ValidationError, match=said) as raised:
        mem.list_memories(filters=bad)
    assert raised.value.field == "filters"
    with pytest.raises(ValidationError, match=said):
        mem.search("anything", filters=bad)


@pytest.mark.parametrize(
    "bad",
    [
        {"bad key": 1},
        {f"k{i}": i for i in range(65)},
        {"big": "x" * 20_000},
        {"deep": {"a": {"b": {"c": {"d": 1}}}}},
        {"nan": float("nan")},
        {"obj": object()},
        "not a dict",
    ],
)
def test_metadata_is_validated_and_bounded(mem: narrative.Memory, bad: Any) -> None:
    with pytest.raises(ValidationError) as raised:
        mem.add_memory("A note.", metadata=bad)
    assert str(raised.value.field).startswith("metadata")
    assert mem.list_memories() == []


def test_the_parser_builds_the_tree() -> None:
    tree = parse_filters({"AND": [{"stream": "fact"}, {"NOT": {"metadata.x": {"in": [1, "a"]}}}]})
    assert tree == AllOf((Condition("stream", "eq", "fact"), Not(Condition("metadata", "in", (1, "a"), key="x"))))
    assert parse_filters({}) is None and parse_filters(None) is None
    when = parse_filters({"time": {"gte": datetime(2026, 3, 2, tzinfo=UTC)}})
    assert when == Condition("time", "gte", "2026-03-02T00:00:00+00:00")
