"""Property tests over the public Python API (issue 12), bounded for CI.

1. Any public method of ``Memory``, called with type-correct but hostile arguments (ids beyond 64
   bits, booleans as ids, negative numbers, lone surrogates, huge text, year-1 times, …), either
   works or raises a :class:`~narrative.errors.NarrativeError`: never anything else.
2. Export → import → export gives the same rows (ids renumbered), and importing that export again
   gives the same bytes.

``NARRATIVE_PROPERTY_COUNT=1`` collects unexpected exceptions instead of failing on the first, and
prints how many calls ran and how many crashed (how the closing note of issue 12 was counted).
"""

from __future__ import annotations

import inspect
import json
import os
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import narrative
from conftest import Databases, FakeClock
from narrative.engine.turns import Turn

CALLS = int(os.environ.get("NARRATIVE_PROPERTY_EXAMPLES", "400"))
COUNT_ONLY = bool(os.environ.get("NARRATIVE_PROPERTY_COUNT"))
SKIPPED = {"close"}
WORDS = [
    "hybrid",
    "keyword",
    "vector",
    "json",
    "markdown",
    "user",
    "assistant",
    "fact",
    "decision",
    "research",
    "recall",
    "context",
    "active",
    "archived",
    "task",
    "person",
    "helpful",
    "alice",
    "garden",
    "bicycle",
]

surrogate_text = st.one_of(
    st.text(alphabet=st.characters(categories=["L", "N", "Zs", "Cs", "P"]), max_size=12),
    st.builds(lambda a, b: f"{a}\ud800{b}", st.sampled_from(["", "garden ", "bicycle "]), st.text(max_size=5)),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3),
)
texts = st.one_of(
    st.sampled_from(WORDS),
    st.text(max_size=20),
    surrogate_text,
    st.just(""),
    st.just("\x00"),
    st.just("x" * 100_001),
    st.just("s" * 5_000_001),
)
ints = st.one_of(
    st.integers(-3, 40),
    st.booleans(),
    st.sampled_from([0, -1, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63) - 1]),
    st.integers(-(2**80), 2**80),
)
times = st.one_of(
    st.none(),
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)),
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)),
)
dicts = st.dictionaries(
    st.sampled_from(["content", "narrative", "name", "type", "importance", "stream", "note"]),
    st.one_of(texts, ints),
    max_size=3,
)
turns = st.builds(
    Turn,
    content=texts,
    role=st.sampled_from(["user", "assistant", "robot"]) | texts,
    speaker=texts,
    at=times,
    meta=st.dictionaries(st.text(max_size=5), texts, max_size=2),
)
users = st.one_of(st.just("alice"), st.just("alice"), st.just("bob"), texts)


def strategy(annotation: str) -> st.SearchStrategy[Any]:
    """Values of the annotated type, hostile ones included."""
    optional = "None" in annotation
    base = annotation.replace(" | None", "")
    table: dict[str, st.SearchStrategy[Any]] = {
        "int": ints,
        "str": texts,
        "bool": st.booleans(),
        "datetime": times,
        "float": st.one_of(st.floats(), ints),
        "Sequence[int]": st.lists(ints, max_size=3),
        "Iterable[int]": st.lists(ints, max_size=3),
        "Sequence[str]": st.lists(texts, max_size=3),
        "tuple[str, ...]": st.lists(texts, max_size=3).map(tuple),
        "dict[str, Any]": dicts,
        "Mapping[str, Any]": dicts,
        "Sequence[Mapping[str, Any]]": st.lists(dicts, max_size=2),
        "Sequence[dict[str, Any]]": st.lists(dicts, max_size=2),
        "Iterable[dict[str, Any]]": st.lists(dicts, max_size=2),
        "Iterable[Turn]": st.lists(turns, max_size=2),
        "Iterable[object]": st.lists(st.one_of(ints, dicts), max_size=2),
    }
    found = table.get(base, st.none())
    return st.one_of(st.none(), found) if optional else found


def methods() -> dict[str, inspect.Signature]:
    found = {}
    for name in sorted(dir(narrative.Memory)):
        attr = inspect.getattr_static(narrative.Memory, name)
        if not name.startswith("_") and name not in SKIPPED and inspect.isfunction(attr):
            found[name] = inspect.signature(attr)
    return found


METHODS = methods()


@st.composite
def calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(sorted(METHODS)))
    kwargs: dict[str, Any] = {}
    for parameter in list(METHODS[name].parameters.values())[1:]:
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        required = parameter.default is inspect.Parameter.empty
        if not required and not draw(st.booleans()):
            continue
        kwargs[parameter.name] = draw(users if parameter.name == "user" else strategy(str(parameter.annotation)))
    return name, kwargs


@pytest.fixture(scope="module")
def world(module_db: str) -> Iterator[narrative.Memory]:
    mem = narrative.Memory(module_db, user="alice", embedder="hashing", clock=FakeClock(), env={})
    for text in ("I ride my bicycle to the garden.", "We decided to plant tomatoes.", "Waiting on Sam for seeds."):
        mem.remember(text, speaker="alice")
    mem.add_memory("The market opens at nine.", importance=3)
    mem.search("garden", record=True)
    yield mem
    mem.close()


RAN: Counter[str] = Counter()
CRASHES: list[str] = []


@settings(max_examples=CALLS, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(call=calls())
def test_public_calls_raise_only_narrative_errors(world: narrative.Memory, call: tuple[str, dict[str, Any]]) -> None:
    name, kwargs = call
    RAN["calls"] += 1
    try:
        getattr(world, name)(**kwargs)
    except narrative.NarrativeError:
        pass
    except Exception as error:
        if not COUNT_ONLY:
            raise
        CRASHES.append(f"{name}: {type(error).__name__}: {str(error)[:120]}")
    finally:
        conn = getattr(world.store, "conn", None)  # the SQLite store's connection (PostgreSQL: per thread)
        if conn.in_transaction if conn is not None else getattr(world.store, "in_transaction", False):
            CRASHES.append(f"{name}: left a transaction open")  # a crash must not leave a transaction open either
            if conn is not None:
                conn.execute("ROLLBACK")


# --- export → import → export ------------------------------------------------------------------------

plain_text = st.text(alphabet=st.characters(categories=["L", "N", "Zs", "P"]), min_size=1, max_size=60).filter(
    lambda s: s.strip() != ""
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("remember"), plain_text),
        st.tuples(st.just("memory"), plain_text),
        st.tuples(st.just("search"), plain_text),
        st.tuples(st.just("narrative"), plain_text),
        st.tuples(st.just("close"), st.just("")),
        st.tuples(st.just("bind"), plain_text),
        st.tuples(st.just("decision"), plain_text),
    ),
    min_size=1,
    max_size=8,
)


def play(mem: narrative.Memory, history: list[tuple[str, str]]) -> None:
    for kind, text in history:
        if kind == "remember":
            mem.remember(text, speaker="alice")
        elif kind == "memory":
            mem.add_memory(text, importance=3)
        elif kind == "search":
            mem.search(text, record=True)
        elif kind == "narrative":
            ids = [m.id for m in mem.list_memories(limit=2)]
            mem.narrative_update(text, ids)
        elif kind == "bind":  # a goal with a payload of the caller's (carried verbatim), then history
            bound = mem.bind(mem.your_story().id, "goal", text, payload={"note": text, "memory_id": 10**9})
            mem.complete_binding(bound.id)
            mem.bind(mem.your_story().id, "job", text, status="running")
        elif kind == "decision":  # a decision linked to the one before it, and reviewed
            earlier = mem.list_memories(stream="decision", limit=1)
            made = mem.add_memory(text, stream="decision")
            if earlier:
                mem.link_decision(made.id, earlier[0].id, "builds_on", reason=text)
            mem.review_decision(made.id, "kept", note=text)
        elif mem.active_conversation() is not None:
            mem.close_conversation()
            mem.confirm_memory()


EXPORTS: Counter[str] = Counter()


@settings(
    max_examples=int(os.environ.get("NARRATIVE_EXPORT_EXAMPLES", "15")),
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
@given(history=steps)
def test_export_import_export_is_identical(databases: Databases, history: list[tuple[str, str]]) -> None:
    from test_export import canonical

    names = [databases.fresh() for _ in range(3)]
    try:
        _round_trip(names, history, canonical)
    finally:
        for name in names:
            databases.release(name)
    EXPORTS["cases"] += 1


def _round_trip(names: list[str], history: list[tuple[str, str]], canonical: Callable[[Any], Any]) -> None:
    with narrative.Memory(names[0], user="alice", embedder="hashing", clock=FakeClock(), env={}) as mem:
        mem.your_story(user="bob")  # another user first, so ids in the copy cannot simply repeat
        play(mem, history)
        first = mem.export("json")
        mem.import_data(first, user="carol")  # a copy in the same file
        copied = mem.export("json", user="carol")
    with narrative.Memory(names[1], user="alice", embedder="hashing", clock=FakeClock(), env={}) as other:
        other.import_data(first)
        second = other.export("json")
    with narrative.Memory(names[2], user="alice", embedder="hashing", clock=FakeClock(), env={}) as third:
        third.import_data(second)
        assert third.export("json") == second  # a restored export is a fixed point, byte for byte
    assert canonical(json.loads(second)) == canonical(json.loads(first))
    assert canonical(json.loads(copied)) == canonical(json.loads(first))


def _annotation_names() -> set[str]:
    """Every parameter annotation of the public API (a new one needs a strategy above)."""
    return {str(p.annotation) for s in METHODS.values() for p in list(s.parameters.values())[1:]}


def test_every_annotation_has_a_strategy() -> None:
    known = {
        "int",
        "str",
        "bool",
        "datetime",
        "Sequence[int]",
        "Iterable[int]",
        "Sequence[str]",
        "tuple[str, ...]",
        "dict[str, Any]",
        "Mapping[str, Any]",
        "Sequence[Mapping[str, Any]]",
        "Sequence[dict[str, Any]]",
        "Iterable[dict[str, Any]]",
        "Iterable[Turn]",
        "Iterable[object]",
        "np.ndarray",
        "model.Details",
        "object",
        "float",
        "Callable[[int, int], None]",
    }
    missing = {a for a in _annotation_names() if a.replace(" | None", "") not in known}
    assert not missing, missing


def test_report_the_count() -> None:
    """Prints what the property ran (visible with -s); fails when a crash was only collected."""
    kinds = Counter(c.split(":")[0] + ": " + c.split(":")[1].strip() for c in CRASHES)
    print(f"\nproperty calls: {RAN['calls']}, crashes: {len(CRASHES)}; export round trips: {EXPORTS['cases']}")
    for kind, n in kinds.most_common():
        print(f"  {n:4d}  {kind}")
    assert not CRASHES
