"""The LoCoMo retrieval harness on a tiny hand-written LoCoMo-format file (tests/data/locomo_tiny.json):
parsing, ingestion through the real write path, evidence mapped back through provenance, recall tables, the CLI.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import narrative
from narrative.bench import hits as search_hits
from narrative.bench import locomo
from narrative.bench import turns as shown_turns
from narrative.engine import Turn

FIXTURE = Path(__file__).parent / "data" / "locomo_tiny.json"
CATEGORY_NAMES = {"multi-hop", "temporal", "open-domain", "single-hop", "adversarial", "overall"}


def samples() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(FIXTURE.read_text("utf-8"))
    return data


def question(sample: dict[str, Any], starts: str) -> tuple[int, dict[str, Any]]:
    """The index among questions with evidence (the rows ``evaluate`` returns) and the question itself."""
    with_evidence = [qa for qa in sample["qa"] if qa.get("evidence")]
    for index, qa in enumerate(with_evidence):
        if qa["question"].startswith(starts):
            return index, qa
    raise LookupError(starts)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return locomo.run(FIXTURE, embedder="hashing", keep=str(tmp_path_factory.mktemp("locomo")))


@pytest.fixture
def ingested(tmp_path: Path) -> Iterator[tuple[narrative.Memory, dict[str, Any]]]:
    sample = samples()[1]
    with narrative.Memory(tmp_path / "tiny-2.db", user="tiny-2", embedder="hashing", env={}) as mem:
        locomo.ingest(mem, sample)
        yield mem, sample


# --- the format ----------------------------------------------------------------------------------------


def test_the_fixture_is_locomo_shaped() -> None:
    data = samples()
    assert len(data) == 2
    for sample in data:
        conversation = sample["conversation"]
        sessions = locomo.sessions(sample)
        assert 2 <= len(sessions) <= 3
        assert [n for n, _, _ in sessions] == list(range(1, len(sessions) + 1))
        for number, _date, turns in sessions:
            assert all(t["dia_id"].startswith(f"D{number}:") for t in turns)
            assert {t["speaker"] for t in turns} <= {conversation["speaker_a"], conversation["speaker_b"]}
    categories = {qa["category"] for sample in data for qa in sample["qa"]}
    assert categories == {1, 2, 3, 4, 5}


def test_session_dates_in_locomo_format() -> None:
    assert locomo.parse_session_date("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert locomo.parse_session_date("10:15 am on 21 May, 2023") == datetime(2023, 5, 21, 10, 15, tzinfo=UTC)
    assert locomo.parse_session_date(" 7:40 pm  on 2 Jun, 2023") == datetime(2023, 6, 2, 19, 40, tzinfo=UTC)
    dates = [d for _, d, _ in locomo.sessions(samples()[0])]
    assert dates == sorted(dates)


def test_evidence_with_several_ids_in_one_string_is_split() -> None:
    assert locomo.evidence_ids(["D1:3; D2:1"]) == {"D1:3", "D2:1"}
    assert locomo.evidence_ids(["D1:3; D2:1", "D2:4", "D2:4"]) == {"D1:3", "D2:1", "D2:4"}
    assert locomo.evidence_ids(["D3:1 D3:2", " "]) == {"D3:1", "D3:2"}
    _, qa = question(samples()[0], "Who teaches")
    assert qa["evidence"] == ["D1:3; D2:1"]


def test_an_image_turn_keeps_its_caption_as_text() -> None:
    turn = next(t for t in locomo.sessions(samples()[0])[1][2] if "blip_caption" in t)
    text = locomo.turn_text(turn)
    assert turn["text"] in text and turn["blip_caption"] in text
    assert locomo.turn_text({"blip_caption": "a photo of a kite"}) == "[shares a photo: a photo of a kite]"
    assert locomo.turn_text({"text": "  "}) == "[no text]"


# --- ingestion and provenance ----------------------------------------------------------------------------


def test_every_turn_becomes_a_message_with_its_dia_id(ingested: tuple[narrative.Memory, dict[str, Any]]) -> None:
    mem, sample = ingested
    expected = [t["dia_id"] for _, _, turns in locomo.sessions(sample) for t in turns]
    dia_of = locomo.dia_map(mem)
    assert sorted(dia_of.values()) == sorted(expected)
    conversations = mem.list_conversations()
    assert len(conversations) == len(locomo.sessions(sample))
    first = min(c.started_at for c in conversations)
    assert first == datetime(2023, 3, 3, 9, 5, tzinfo=UTC)


def test_memories_map_back_to_dia_ids_through_provenance(
    ingested: tuple[narrative.Memory, dict[str, Any]],
) -> None:
    mem, _ = ingested
    dia_of = locomo.dia_map(mem)
    hits = mem.search("allotment committee plot", 5, streams=locomo.TURN_STREAMS, record=False)
    assert hits
    assert "D1:1" in {dia_of[i] for i in hits[0].memory.message_ids}
    for hit in hits:
        assert hit.memory.message_ids and all(dia_of[i] for i in hit.memory.message_ids)


@pytest.mark.parametrize("mode", locomo.MODES)
def test_a_trivially_found_question_has_full_recall_at_5(
    ingested: tuple[narrative.Memory, dict[str, Any]], mode: str
) -> None:
    mem, sample = ingested
    rows = locomo.evaluate(mem, sample, modes=[mode])
    index, qa = question(sample, "Which plot number")
    assert len(rows) == len([q for q in sample["qa"] if q["evidence"]])  # questions without evidence skipped
    assert rows[index]["category"] == qa["category"] == 4
    assert rows[index]["recall"][mode][5] == 1.0


def test_the_caption_is_searchable(tmp_path: Path) -> None:
    sample = samples()[0]
    with narrative.Memory(tmp_path / "tiny-1.db", user="tiny-1", embedder="hashing", env={}) as mem:
        locomo.ingest(mem, sample)
        dia_of = locomo.dia_map(mem)
        hits = mem.search("ceramic", 5, mode="keyword", streams=locomo.TURN_STREAMS, record=False)  # caption only
        assert any("D2:4" in {dia_of[i] for i in h.memory.message_ids} for h in hits)
        rows = locomo.evaluate(mem, sample, modes=["keyword"])
    index, _ = question(sample, "What colour")
    assert rows[index]["recall"]["keyword"][5] == 1.0
    multi, _ = question(sample, "Who teaches")
    assert {rows[multi]["recall"]["keyword"][k] for k in locomo.KS} <= {0.0, 0.5, 1.0}  # two evidence ids


# --- the report ------------------------------------------------------------------------------------------


def test_run_reports_recall_per_category_and_overall_for_three_modes(report: dict[str, Any]) -> None:
    assert report["conversations"] == 2
    assert report["questions"] == sum(1 for s in samples() for qa in s["qa"] if qa["evidence"])
    assert report["ingest"]["turns"] == sum(len(t) for s in samples() for _, _, t in locomo.sessions(s))
    assert set(report["ingest"]["per_conversation"]) == {"tiny-1", "tiny-2"}
    assert set(report["recall"]) == set(locomo.MODES)
    for mode, table in report["recall"].items():
        assert set(table) == CATEGORY_NAMES, mode
        assert table["overall"]["n"] == report["questions"]
        assert sum(row["n"] for name, row in table.items() if name != "overall") == report["questions"]
        for row in table.values():
            values = [row[f"R@{k}"] for k in locomo.KS]
            assert all(0.0 <= v <= 1.0 for v in values)
            assert values == sorted(values)  # more results never find less
    assert report["recall"]["hybrid"]["single-hop"]["R@50"] == 1.0
    assert report["search_ms"]["default"]["p50"] is not None and report["search_ms"]["hybrid"]["p50"] is not None
    assert report["duplicates_top10"]["default"] == 0.0
    assert set(report["restated_top10"]) == {"default", "tuned"}
    assert all(0.0 <= value <= 1.0 for value in report["restated_top10"].values())
    keys_t = [f"T@{k}" for k in shown_turns.TURN_KS]
    keys_b = [f"B@{b}" for b in shown_turns.BUDGETS]
    for path in ("default", "tuned", *shown_turns.BASELINES):
        overall = report["turns"][path]["overall"]
        for keys in (keys_t, keys_b):
            assert [overall[key] for key in keys] == sorted(overall[key] for key in keys)  # more never finds less
    assert set(report["ratios"]["default"]) == set(keys_t) | set(keys_b)


def test_the_text_report_has_one_line_per_mode_and_category(report: dict[str, Any]) -> None:
    text = locomo.format_report(report)
    assert "2 conversations, 9 questions" in text
    for mode in locomo.MODES:
        rows = [line.split() for line in text.splitlines() if line.split()[:1] == [mode]]
        assert {row[1] for row in rows if row[1] in CATEGORY_NAMES} == CATEGORY_NAMES
    assert "hybrid vs keyword-only" in text and "hybrid vs vector-only" in text
    assert "restated in the top 10" in text


def test_the_cli_prints_the_report_as_json(tmp_path: Path, report: dict[str, Any]) -> None:
    from narrative.interfaces.cli import _register, cli

    _register()
    args = ["--embedder", "hashing", "bench", "locomo", str(FIXTURE), "--json", "--keep", str(tmp_path)]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)
    assert printed["questions"] == report["questions"]
    assert printed["recall"]["keyword"] == report["recall"]["keyword"]  # BM25 is deterministic
    assert {p.name for p in tmp_path.glob("*.db")} == {"tiny-1.db", "tiny-2.db"}


def test_a_baseline_ranks_deep_enough_to_fill_the_largest_budget() -> None:
    """Short turns: 50 of them are far below 2,000 tokens, so a baseline cut at 50 would be scored at a budget it
    never got to spend; it must rank on until the largest k and the largest budget are both filled."""
    from narrative.providers.embed import HashingEmbedder

    turns = [shown_turns.Turn(f"D1:{i}", f"Ann: plan {i} for the garden") for i in range(600)]
    baselines = shown_turns.Baselines(turns, HashingEmbedder())
    for name, ranked in baselines.rankings("garden plan").items():
        spent = sum(item.tokens for item in ranked)
        assert len(ranked) > 50, name
        assert spent > max(shown_turns.BUDGETS), name
        assert len(ranked) >= max(shown_turns.TURN_KS), name
        assert spent - ranked[-1].tokens <= max(shown_turns.BUDGETS), name  # and stops once it has
    assert all(len(ranked) == 7 for ranked in baselines.rankings("garden plan", depth=7).values())


def test_the_budget_measures_ask_for_more_when_fifty_short_results_do_not_fill_the_budget(tmp_path: Path) -> None:
    with narrative.Memory(tmp_path / "short.db", user="short", embedder="hashing", env={}) as mem:
        mem.remember_many(Turn(f"garden note {i}", "user", speaker="Ann" if i % 2 else "Bo") for i in range(600))
        turn_of = locomo.turn_map(mem)
        first = mem.search("garden note", search_hits.DEPTH, record=False)
        assert len(first) == search_hits.DEPTH
        assert sum(item.tokens for item in search_hits.shown(first, turn_of)) < max(shown_turns.BUDGETS)
        filled = search_hits.filled(mem, "garden note", first, turn_of)
        assert len(filled) > search_hits.DEPTH
        assert sum(item.tokens for item in filled) > max(shown_turns.BUDGETS)
