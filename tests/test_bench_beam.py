"""The BEAM retrieval bench on a tiny hand-written BEAM-format chat (tests/data/beam_tiny): the format, the replay
through the real write path, the measures on constructed rankings, and the whole run through the CLI with the real
model.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

import narrative
from narrative.bench import beam, beam_report, replay, updates
from narrative.bench import turns as shown_text
from narrative.bench.hits import shown
from narrative.engine import Turn

FIXTURE = Path(__file__).parent / "data" / "beam_tiny"
NOON = 12


def chat() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads((FIXTURE / "1" / "chat.json").read_text("utf-8"))
    return data


def item(turns: tuple[str, ...] = (), tokens: int = 100, text: str = "", conflicts: bool = False) -> shown_text.Shown:
    return shown_text.Shown(turns, frozenset(turns), tokens, text, conflicts)


# --- the format ----------------------------------------------------------------------------------------------


def test_anchors_are_read_as_noon_of_their_day() -> None:
    assert beam.parse_anchor("March-15-2024") == datetime(2024, 3, 15, NOON, tzinfo=UTC)
    assert beam.parse_anchor(" Mar-05-2024 ") == datetime(2024, 3, 5, NOON, tzinfo=UTC)
    assert beam.parse_anchor("January 10, 2024") == datetime(2024, 1, 10, NOON, tzinfo=UTC)
    assert beam.parse_anchor(None) is None
    assert beam.parse_anchor("") is None
    assert beam.parse_anchor("soon") is None


def test_each_batch_starts_at_its_time_and_messages_follow_a_minute_apart() -> None:
    found = beam.sessions(chat())
    assert [s.start for s in found] == [
        datetime(2024, 6, 2, NOON, tzinfo=UTC),  # the first message's anchor (the batch has none)
        datetime(2024, 6, 20, NOON, tzinfo=UTC),
        datetime(2024, 7, 5, NOON, tzinfo=UTC),  # the batch's own anchor
    ]
    first = found[0]
    assert [m["id"] for m, _ in first.messages] == [0, 1, 2, 3, 4, 5]
    assert [at - first.start for _, at in first.messages] == [timedelta(minutes=i) for i in range(1, 7)]
    assert first.end == first.messages[-1][1] + timedelta(minutes=1)


def test_time_never_runs_backwards_and_a_chat_without_anchors_starts_at_a_fixed_day() -> None:
    earlier = [
        {"turns": [[{"role": "user", "id": 0, "content": "a", "time_anchor": "May-01-2024"}]]},
        {"turns": [[{"role": "user", "id": 1, "content": "b", "time_anchor": "April-01-2024"}]]},
    ]
    first, second = beam.sessions(earlier)
    assert second.start == first.end + beam.STEP
    assert second.messages[0][1] > second.start
    [bare] = beam.sessions([{"turns": [[{"role": "user", "id": 0, "content": "a"}]]}])
    assert bare.start == beam.START


def test_chat_folders_come_in_numeric_order(tmp_path: Path) -> None:
    for name in ("10", "2", "1", "notes"):
        (tmp_path / name).mkdir()
    for name in ("10", "2", "1"):
        (tmp_path / name / "chat.json").write_text("[]")
    assert [p.name for p in beam.chat_folders(tmp_path)] == ["1", "2", "10"]


def test_evidence_per_ability() -> None:
    update = beam.evidence("knowledge_update", {"original_info": [4], "updated_info": [6]})
    assert update == beam.Evidence(frozenset({"6"}), (frozenset({"4"}), frozenset({"6"})))
    conflict = beam.evidence("contradiction_resolution", {"first_statement": [2, 3], "second_statement": [8]})
    assert conflict is not None and conflict.wanted == {"2", "3", "8"}
    assert conflict.sides == (frozenset({"2", "3"}), frozenset({"8"}))
    temporal = beam.evidence("temporal_reasoning", {"first_event": [5], "second_event": [5]})
    assert temporal is not None and temporal.wanted == {"5"}
    nested = beam.evidence("event_ordering", [116, [136, 138], 116])
    assert nested is not None and nested.wanted == {"116", "136", "138"} and nested.sides is None
    assert beam.evidence("abstention", [3]) is None
    assert beam.evidence("information_extraction", None) is None
    assert beam.evidence("information_extraction", []) is None


# --- the replay --------------------------------------------------------------------------------------------------


def test_a_refused_message_is_left_out_and_the_rest_stored_in_order(mem: narrative.Memory) -> None:
    mem.start_conversation()
    texts = ["first", "second", "   ", "fourth", "fifth", "sixth", "seventh"]
    turns = [Turn(text, "user", meta={"beam_id": i}) for i, text in enumerate(texts)]
    refused: list[replay.Refusal] = []
    assert replay.remember(mem, turns, refused, "beam_id") == 6
    assert [m.content for m in mem.messages()] == ["first", "second", "fourth", "fifth", "sixth", "seventh"]
    assert [(r.key, r.characters) for r in refused] == [("2", 3)]
    assert refused[0].error == "content must be non-empty text"


# --- the mapping of hits -----------------------------------------------------------------------------------------


def hit(message_ids: tuple[int, ...], text: str, **more: Any) -> SimpleNamespace:
    return SimpleNamespace(memory=SimpleNamespace(message_ids=message_ids, content=text), text=text, **more)


def test_a_hit_shows_the_messages_it_names_else_its_single_source_or_its_verbatim_sources() -> None:
    turn_of = {1: shown_text.Turn("10", "the question"), 2: shown_text.Turn("11", "the answer")}
    named, single, verbatim, summary = shown(
        [
            hit((1, 2), "the answer", shown=(2,)),
            hit((1,), "a decision taken from the question", shown=()),
            hit((1, 2), "the question\nthe answer"),
            hit((1, 2), "They talked it over.", shown=(), conflicts=(7,)),
        ],
        turn_of,
    )
    assert named.turns == ("11",) and named.sources == {"10", "11"}
    assert single.turns == ("10",)
    assert verbatim.turns == ("10", "11")
    assert summary.turns == () and summary.tokens > 0 and summary.conflicts
    assert not named.conflicts and named.text == "the answer"


# --- the measures ------------------------------------------------------------------------------------------------


def test_current_and_stale() -> None:
    old, new = {"4"}, {"6"}
    assert updates.current([item(("4",)), item(("6",))], new)
    assert updates.stale([item(("4",)), item(("6",))], old, new)  # the old fact first
    assert not updates.stale([item(("6",)), item(("4",))], old, new)
    assert not updates.stale([item(("4", "6"))], old, new)  # shown together: not before it
    assert updates.stale([item(("4",))], old, new) and not updates.current([item(("4",))], new)  # alone
    assert not updates.stale([item(("9",), tokens=950), item(("4",))], old, new)  # beyond 1,000 tokens
    past = [item(("4",)), item(("9",), tokens=950), item(("6",))]
    assert updates.stale(past, old, new) and not updates.current(past, new)  # the update beyond 1,000 tokens
    assert not updates.stale([], old, new) and not updates.current([], new)


def test_both_sides_and_said() -> None:
    assert updates.both_sides([item(("2",)), item(("8",))], {"2"}, {"8"})
    assert not updates.both_sides([item(("2",)), item(("9",), tokens=1950), item(("8",))], {"2"}, {"8"})
    assert updates.both_sides([item(("5",))], {"5"}, {"5"})  # one message stating both sides
    assert updates.said([item(("2",)), item((), conflicts=True)])
    assert not updates.said([item(("2",), tokens=2100), item((), conflicts=True)])
    assert not updates.said([item(("2",)), item(("8",))])


def test_restated_counts_hits_whose_words_were_shown_above() -> None:
    said = "the cat sat on the mat today"
    assert shown_text.restated([item(text=said), item(text=said)]) == 0.5
    four_of_five = "the cat sat on the mat yesterday"  # 4 of its 5 word 3-grams shown above: 80 %
    assert shown_text.restated([item(text=said), item(text=four_of_five)]) == 0.5
    three_of_five = "the cat sat on a mat yesterday"
    assert shown_text.restated([item(text=said), item(text=three_of_five)]) == 0.0
    assert shown_text.restated([item(text="The CAT sat, on the mat!"), item(text="the cat sat on the mat")]) == 0.5


def test_restated_counts_summaries_and_short_texts_only_when_whole() -> None:
    summary = item((), text="Sam will send the bed measurements on Friday.")
    turn = item(("3",), text="Sam will send the bed measurements on Friday")
    assert shown_text.restated([summary, turn]) == 0.5
    assert shown_text.restated([turn, summary]) == 0.5
    assert shown_text.restated([item(text="thanks a lot"), item(text="Thanks!")]) == 0.5
    assert shown_text.restated([item(text="okay then"), item(text="ok")]) == 0.0
    assert shown_text.restated([item(text="a b"), item(text="")]) == 0.0
    assert shown_text.restated([]) == 0.0
    repeats = [item(text=f"entry number {i} of the list") for i in range(3)] * 6  # 18 hits, top 10 read
    assert shown_text.restated(repeats) == pytest.approx(7 / 10)


# --- the whole run -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """``narrative bench beam tests/data/beam_tiny --json`` with the real model."""
    from narrative.interfaces.cli import _register, cli

    _register()
    keep = tmp_path_factory.mktemp("beam")
    result = CliRunner().invoke(cli, ["bench", "beam", str(FIXTURE), "--json", "--keep", str(keep)])
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.output)
    return report, keep


def test_the_cli_reports_every_measure_as_json(printed: tuple[dict[str, Any], Path]) -> None:
    report, _ = printed
    assert (report["chats"], report["questions"], report["questions_without_evidence"]) == (1, 5, 1)
    ingest = report["ingest"]
    assert ingest["messages"] == 14 and ingest["refused"] == []
    assert ingest["passages"] > ingest["messages"]  # the long reply is read in several passages
    assert ingest["messages_per_s"] > 0 and ingest["model"]["passages_per_s"] > 0 and ingest["ratio"] > 0
    assert ingest["per_chat"]["1"]["messages"] == 14
    abilities = {"information_extraction", "knowledge_update", "contradiction_resolution", "temporal_reasoning"}
    for path in ("default", *shown_text.BASELINES):
        table = report["turns"][path]
        assert abilities | {"multi_session_reasoning", "overall"} == set(table)
        assert table["overall"]["n"] == 5
        assert set(table["overall"]) == {"n", *shown_text.MEASURES}
        assert set(report["knowledge_update"][path]) == {"n", "current", "stale"}
        assert report["knowledge_update"][path]["n"] == report["contradiction"][path]["n"] == 1
        assert 0.0 <= report["contradiction"][path]["said"] <= 1.0
    for path in shown_text.BASELINES:  # the whole chat fits in 2,000 tokens: every baseline shows every message
        assert report["turns"][path]["overall"]["B@2000"] == report["turns"][path]["overall"]["T@20"] == 1.0
        assert report["knowledge_update"][path]["current"] == report["contradiction"][path]["both"] == 1.0
        assert report["contradiction"][path]["said"] == 0.0  # a single message says nothing about conflicts
    assert set(report["ratios"]) == set(report["turns"]["default"])
    assert 0.0 <= report["restated_top10"]["default"] <= 1.0
    evidence = {row["ability"]: row["evidence"] for row in report["rows"]}
    assert evidence["knowledge_update"] == ["6"]
    assert evidence["contradiction_resolution"] == ["2", "8"] and evidence["temporal_reasoning"] == ["0", "10"]
    assert evidence["multi_session_reasoning"] == ["6", "10"]


def test_the_chat_is_stored_through_the_write_path(printed: tuple[dict[str, Any], Path]) -> None:
    report, keep = printed
    with narrative.Memory(keep / "chat-1.db", user="chat-1", embedder="none") as mem:
        messages = mem.messages()
        passages = beam.embedded_passages(mem, messages)
        assert len(passages) == report["ingest"]["passages"]
        long_reply = next(m.content for m in messages if m.meta["beam_id"] == 1)
        assert sum(text in long_reply for text in passages) == len(passages) - 13 > 1  # its passages, in it
        assert [m.meta["beam_id"] for m in messages] == list(range(14))
        assert [m.role.value for m in messages[:4]] == ["user", "assistant", "user", "assistant"]
        conversations = sorted(mem.list_conversations(), key=lambda c: c.started_at)
        assert [c.status.value for c in conversations] == ["archived"] * 3
        assert [c.started_at.date().isoformat() for c in conversations] == ["2024-06-02", "2024-06-20", "2024-07-05"]


def test_the_printed_report(printed: tuple[dict[str, Any], Path]) -> None:
    report, _ = printed
    text = beam_report.format_report(report)
    assert "1 chats, 5 questions (1 without evidence not scored)" in text
    assert "14 messages in" in text and "bare model on the same passages" in text
    for line in ("knowledge updates (n=1)", "contradictions (n=1)", "restated in the top 10", "duplicates in"):
        assert line in text
    rows = [line.split() for line in text.splitlines()]
    assert {row[1] for row in rows if row[:1] == ["default"] and len(row) > 3} >= {"overall", "knowledge_update"}
    assert any(row[:1] == ["overall"] and len(row) == 7 for row in rows)  # the ratio table's overall line


def test_a_folder_without_chats_is_refused_with_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from narrative.interfaces.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["bench", "beam", str(tmp_path)])
    assert stop.value.code == 1
    assert "holds no BEAM chat: expected folders with chat.json" in capsys.readouterr().err
