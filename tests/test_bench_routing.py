"""The routing bench: its measures by hand, then a run over the tiny LoCoMo-format file and the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from narrative.bench import routing
from narrative.bench.locomo import sessions
from narrative.errors import ValidationError

FIXTURE = Path(__file__).parent / "data" / "locomo_tiny.json"


def test_nmi_by_hand() -> None:
    left, right = ["a", "a", "b", "b"], ["x", "x", "x", "y"]
    h_left = math.log(2)
    h_right = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    mutual = 0.5 * math.log(0.5 / (0.5 * 0.75)) + 0.25 * math.log(0.25 / (0.5 * 0.75)) + 0.25 * math.log(2)
    assert routing.nmi(left, right) == pytest.approx(mutual / ((h_left + h_right) / 2))
    assert routing.nmi(["a", "b", "a", "b"], ["x", "x", "y", "y"]) == pytest.approx(0.0, abs=1e-12)  # independent
    assert routing.nmi([1, 1, 2, 2], ["p", "p", "q", "q"]) == pytest.approx(1.0)  # the same partition
    with pytest.raises(ValidationError):
        routing.nmi([1], [1, 2])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=30))
def test_nmi_is_symmetric_bounded_and_blind_to_label_names(pairs: list[tuple[int, int]]) -> None:
    left, right = [a for a, _ in pairs], [b for _, b in pairs]
    value = routing.nmi(left, right)
    assert 0.0 <= value <= 1.0
    assert value == pytest.approx(routing.nmi(right, left))
    assert routing.nmi(left, [f"renamed-{b}" for b in right]) == pytest.approx(value)
    assert routing.nmi(left, left) == pytest.approx(1.0)


def test_purity_and_storylines_per_session_by_hand() -> None:
    storyline = [1, 1, 1, 2, 2, 3]
    source = ["a", "a", "b", "b", "b", "a"]
    assert routing.purity(storyline, source) == pytest.approx((2 + 2 + 1) / 6)
    session = ["s1", "s1", "s2", "s2", "s2", "s3"]
    assert routing.storylines_per_session(storyline, session) == pytest.approx((1 + 2 + 1) / 3)


def test_the_timeline_interleaves_every_conversations_sessions_by_date() -> None:
    samples: list[dict[str, Any]] = json.loads(FIXTURE.read_text("utf-8"))
    order = routing.timeline(samples)
    assert len(order) == sum(len(sessions(s)) for s in samples)
    assert [row[0] for row in order] == sorted(row[0] for row in order)
    assert {row[1] for row in order} == {str(s["sample_id"]) for s in samples}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return routing.run_routing(FIXTURE, embedder="hashing", keep=str(tmp_path_factory.mktemp("routing")))


def test_the_run_labels_every_turn_and_reports_each_measure(report: dict[str, Any]) -> None:
    samples: list[dict[str, Any]] = json.loads(FIXTURE.read_text("utf-8"))
    turns = sum(len(t) for s in samples for _, _, t in sessions(s))
    one = report["one_user"]
    assert one["turns"] == turns
    assert one["sessions"] == sum(len(sessions(s)) for s in samples)
    assert 0.0 < one["purity"] <= 1.0 and 0.0 <= one["nmi"] <= 1.0
    assert one["storylines_per_session"] >= 1.0
    assert report["nmi_normalisation"] == "arithmetic"
    assert set(report["per_conversation"]) == {str(s["sample_id"]) for s in samples}
    assert all(row["storylines_per_session"] >= 1.0 for row in report["per_conversation"].values())
    printed = routing.format_routing(report)
    assert "purity" in printed and "NMI (arithmetic mean)" in printed and "storylines per session" in printed


def test_the_cli_prints_the_report_and_json(tmp_path: Path) -> None:
    from narrative.interfaces.cli import _register, cli

    _register()
    args = ["--embedder", "hashing", "bench", "routing", str(FIXTURE), "--json", "--keep", str(tmp_path)]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)
    assert {"one_user", "per_conversation", "per_conversation_mean"} <= set(printed)
    assert {p.name for p in tmp_path.glob("*.db")} == {"one-user.db", "tiny-1.db", "tiny-2.db"}
