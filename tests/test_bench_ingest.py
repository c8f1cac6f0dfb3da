"""The ingest bench: a LoCoMo-like history through the write path, against the bare model on the same calls."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from narrative.bench import ingest


def test_the_history_is_sessions_of_two_people_talking() -> None:
    sessions = ingest.history(45, session_turns=20)
    assert [len(turns) for _, turns in sessions] == [20, 20, 5]
    assert [t.speaker for t in sessions[0][1][:3]] == ["Caroline", "Melanie", "Caroline"]
    dates = [date for date, _ in sessions]
    assert dates == sorted(dates) and len(set(dates)) == 3
    lengths = [len(t.content) for _, turns in sessions for t in turns]
    assert 60 < sum(lengths) / len(lengths) < 200  # chat turns about as long as LoCoMo's
    assert ingest.history(45) == ingest.history(45)  # the same history every run


def test_the_report_counts_texts_and_compares_with_the_bare_model(tmp_path: Path) -> None:
    steps: list[tuple[int, int]] = []
    report = ingest.measure(tmp_path, turns=24, progress=lambda done, total: steps.append((done, total)))
    assert steps == [(20, 24), (24, 24)]
    assert report["turns"] == 24 and report["sessions"] == 2
    assert report["texts_embedded"] >= 24 and report["calls"] >= 2
    assert report["texts_per_turn"] == round(report["texts_embedded"] / 24, 3)
    assert report["write_texts_per_turn"] <= report["texts_per_turn"]
    assert 0 < report["assistant_texts_per_turn"] < report["texts_per_turn"]  # an assistant's reply: one text
    assert report["bare_texts_per_s"] > 0 and report["minilm"]["turns_per_s"] > 0
    rate = 24 / report["minilm"]["total_s"]
    assert abs(report["ratio"] - rate / report["bare_texts_per_s"]) < 0.05
    text = ingest.format_report(report)
    assert "texts embedded per turn" in text and "bare model" in text and "ratio" in text
    assert "second speaker an assistant" in text


def test_bench_latency_can_run_the_ingest_part_alone() -> None:
    from narrative.interfaces.cli import _register, cli

    _register()
    args = ["bench", "latency", "--memories", "", "--ingest-turns", "4", "--json"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["sizes"] == [] and report["ingest"]["turns"] == 4
