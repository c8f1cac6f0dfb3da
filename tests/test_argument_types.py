"""Arguments of the wrong type get a ValidationError naming them (issue 24, F5).

A fuzzer sent 13,201 calls through the public API and 213 ended in ``TypeError`` or ``AttributeError`` (for
instance ``search("x", since=date(2020, 1, 1))``, ``create_api_key(label=None)``, ``remember_many(["hello"])``).
Now ``narrative.validate`` checks each argument against the method's annotation before anything runs:

1. every parameter of every public method, given a value of a wrong type, is refused with a ValidationError
   whose ``field`` names it (the signatures are read, so a new method or parameter is covered too);
2. hypothesis calls random methods with values of any type in any position: only NarrativeError comes out,
   and no transaction is left open (bounded by ``NARRATIVE_TYPE_EXAMPLES``, 300).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import narrative
from conftest import FakeClock
from narrative.engine.turns import Turn

EXAMPLES = int(os.environ.get("NARRATIVE_TYPE_EXAMPLES", "300"))
SKIPPED = {"close"}

#: A value of the right type for each annotation (to fill the other required arguments of a call).
GOOD: dict[str, Any] = {
    "str": "garden",
    "int": 1,
    "float": 0.5,
    "Sequence[int]": [1],
    "Sequence[Mapping[str, Any]]": [{"content": "a note"}],
    "Sequence[dict[str, Any]]": [{"storyline_id": None, "text": "a part"}],
    "Iterable[Turn]": [Turn("hello")],
}

#: Values of a wrong type for each annotation (``X | None`` takes the wrong values of ``X`` except None).
WRONG: dict[str, list[Any]] = {
    "str": [12345, b"bytes", ["a"], None],
    "int": ["3", 2.5, None, [1]],
    "float": ["0.5", None, [0.5]],
    "bool": ["yes", 1, None],
    "datetime": [date(2020, 1, 1), "2020-01-01", 1_600_000_000],
    "Sequence[str]": [5, [1], {"a": "b"}],
    "Sequence[int]": [5, ["a"], "12", [1.5]],
    "Iterable[int]": [5, ["a"], "12"],
    "dict[str, Any]": [["x"], "text", {1: "x"}],
    "Mapping[str, Any]": [["x"], "text", {1: "x"}],
    "Sequence[Mapping[str, Any]]": [["hello"], 5, {"content": "x"}],
    "Sequence[dict[str, Any]]": [["hello"], 5],
    "Iterable[dict[str, Any]]": [[1], 5, "text"],
    "Iterable[Turn]": [["hello"], 5, [{"content": "hello"}]],
    "Iterable[object]": [5, None],
    "tuple[str, ...]": [5, [1]],
    "np.ndarray": [[[0.1, 0.2]], "vectors"],
    "model.Details": [{"kind": "decision"}, "details"],
    "Callable[[int, int], None]": [5, "print"],
}


def methods() -> dict[str, inspect.Signature]:
    found = {}
    for name in sorted(dir(narrative.Memory)):
        attr = inspect.getattr_static(narrative.Memory, name)
        if not name.startswith("_") and name not in SKIPPED and inspect.isfunction(attr):
            found[name] = inspect.signature(inspect.unwrap(attr))
    return found


METHODS = methods()


def wrong_values(annotation: str) -> list[Any]:
    optional = annotation.endswith(" | None")
    base = annotation.removesuffix(" | None")
    values = WRONG.get(base)
    assert values is not None, f"add wrong values for {annotation!r} to WRONG"
    return [v for v in values if not (optional and v is None)]


CASES = [
    (name, parameter.name, value)
    for name, signature in METHODS.items()
    for parameter in list(signature.parameters.values())[1:]
    if parameter.kind is not inspect.Parameter.VAR_KEYWORD and str(parameter.annotation) not in ("object", "Any")
    for value in wrong_values(str(parameter.annotation))
]


@pytest.fixture(scope="module")
def world(module_db: str) -> Iterator[narrative.Memory]:
    mem = narrative.Memory(module_db, user="alice", embedder="hashing", clock=FakeClock(), env={})
    for text in ("I ride my bicycle to the garden.", "We decided to plant tomatoes.", "Waiting on Sam for seeds."):
        mem.remember(text, speaker="alice")
    mem.add_memory("The market opens at nine.", importance=3)
    mem.search("garden", record=True)
    yield mem
    mem.close()


def test_the_issues_examples(world: narrative.Memory) -> None:
    for call, field in (
        (lambda: world.search("x", since=date(2020, 1, 1)), "since"),  # type: ignore[arg-type]
        (lambda: world.create_api_key(label=None), "label"),  # type: ignore[arg-type]
        (lambda: world.remember_many(["hello"]), "turns"),  # type: ignore[list-item]
        (lambda: world.recall("x", since="2020-01-01"), "since"),
        (lambda: world.recall("x", colour="blue"), "colour"),
    ):
        with pytest.raises(narrative.ValidationError) as refused:
            call()
        assert refused.value.field == field


@pytest.mark.parametrize(("method", "parameter", "value"), CASES, ids=[f"{m}.{p}={v!r:.20}" for m, p, v in CASES])
def test_a_wrong_type_is_refused_by_name(world: narrative.Memory, method: str, parameter: str, value: Any) -> None:
    signature = METHODS[method]
    kwargs = {
        p.name: None if str(p.annotation).endswith(" | None") else GOOD[str(p.annotation)]
        for p in list(signature.parameters.values())[1:]
        if p.default is inspect.Parameter.empty and p.kind is not inspect.Parameter.VAR_KEYWORD
    }
    kwargs[parameter] = value
    with pytest.raises(narrative.ValidationError) as refused:
        getattr(world, method)(**kwargs)
    assert refused.value.field == parameter, str(refused.value)


anything = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 50),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.binary(max_size=4),
    st.just(date(2020, 1, 1)),
    st.just(datetime(2026, 3, 2, tzinfo=UTC)),
    st.just(object()),
    st.just(np.zeros((1, 3), dtype=np.float32)),
    st.just(Turn("hello")),
    st.lists(st.one_of(st.integers(-2, 5), st.text(max_size=4), st.none()), max_size=3),
    st.dictionaries(st.sampled_from(["content", "text", "storyline_id", 3]), st.integers(0, 3) | st.text(max_size=3)),
)


@st.composite
def calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(sorted(METHODS)))
    kwargs: dict[str, Any] = {}
    for parameter in list(METHODS[name].parameters.values())[1:]:
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        if parameter.default is inspect.Parameter.empty or draw(st.booleans()):
            kwargs[parameter.name] = draw(anything)
    return name, kwargs


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(call=calls())
def test_any_value_anywhere_gives_only_narrative_errors(
    world: narrative.Memory, call: tuple[str, dict[str, Any]]
) -> None:
    name, kwargs = call
    try:
        getattr(world, name)(**kwargs)
    except narrative.NarrativeError:
        pass
    finally:
        conn = getattr(world.store, "conn", None)
        assert not (conn.in_transaction if conn is not None else getattr(world.store, "in_transaction", False))
