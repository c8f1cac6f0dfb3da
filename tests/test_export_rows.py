"""The memories as rows: ``export("jsonl")`` (one JSON object a line) and ``export("csv")`` (a header, then one
line per memory), read back with the standard library's readers, on both stores."""

from __future__ import annotations

import csv
import io
import json

import narrative
from narrative.read.export import MEMORY_COLUMNS


def _two(mem: narrative.Memory) -> tuple[int, int]:
    first = mem.add_memory('She said "no, thanks",\nthen left.', metadata={"who": "Lena", "n": 2})
    second = mem.add_memory("Decided: the blue tiles.", stream="decision", importance=4, emotions=["relief"])
    return first.id, second.id


def test_jsonl_has_one_memory_a_line(mem: narrative.Memory) -> None:
    a, b = _two(mem)
    lines = mem.export("jsonl").splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["id"] for r in rows] == [a, b] and all(list(r) == list(MEMORY_COLUMNS) for r in rows)
    assert rows[0]["content"] == 'She said "no, thanks",\nthen left.' and rows[0]["metadata"] == {"who": "Lena", "n": 2}
    assert rows[1]["stream"] == "decision" and rows[1]["emotions"] == ["relief"] and rows[1]["current"] is True


def test_csv_reads_back_with_the_csv_module(mem: narrative.Memory) -> None:
    a, b = _two(mem)
    text = mem.export("csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert text.splitlines()[0] == ",".join(MEMORY_COLUMNS)
    assert [int(r["id"]) for r in rows] == [a, b]
    assert rows[0]["content"] == 'She said "no, thanks",\nthen left.'
    assert json.loads(rows[0]["metadata"]) == {"n": 2, "who": "Lena"} and rows[0]["storyline_id"] == ""
    assert rows[1]["importance"] == "4" and rows[1]["current"] == "true"


def test_an_empty_memory_exports_empty_rows(mem: narrative.Memory) -> None:
    mem.add_message("hello")
    assert mem.export("jsonl") == ""
    assert mem.export("csv") == ",".join(MEMORY_COLUMNS) + "\n"
