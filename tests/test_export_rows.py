"""The memories as rows: ``export("jsonl")`` (one JSON object a line) and ``export("csv")`` (a header, then one
line per memory), read back with the standard library's readers, on both stores."""

from __future__ import annotations

import csv
import io
import json

import narrative
from conftest import LONG_END as END
from conftest import long_reply
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


# --- a long message: the rows carry it whole -----------------------------------------------------------------


def _long_exchange(mem: narrative.Memory) -> tuple[int, str]:
    """A question and a long reply; the reply's memory (an excerpt of it) and its whole text."""
    mem.remember("How should I plan the garden?")
    reply = long_reply()
    made = mem.remember(reply, "assistant", speaker="Aria").memories[0]
    assert END not in made.content and made.content.endswith(" …")  # the memory quotes the first passage only
    return made.id, f"How should I plan the garden?\nAria: {reply}"


def test_jsonl_rows_carry_the_whole_of_a_long_message(mem: narrative.Memory) -> None:
    memory_id, whole = _long_exchange(mem)
    rows = {r["id"]: r for r in map(json.loads, mem.export("jsonl").splitlines())}
    row = rows[memory_id]
    assert row["text"] == whole and END in row["text"]
    assert row["content"] == mem.get_memory(memory_id).content  # the memory's own text, as before
    assert all(r["text"] == r["content"] for i, r in rows.items() if i != memory_id)  # nothing cut: the same


def test_csv_rows_carry_the_whole_of_a_long_message(mem: narrative.Memory) -> None:
    memory_id, whole = _long_exchange(mem)
    rows = {int(r["id"]): r for r in csv.DictReader(io.StringIO(mem.export("csv")))}
    assert rows[memory_id]["text"] == whole and END in rows[memory_id]["text"]
    assert rows[memory_id]["content"] == mem.get_memory(memory_id).content


def test_the_whole_text_of_a_memory(mem: narrative.Memory) -> None:
    memory_id, whole = _long_exchange(mem)
    assert mem.memory_text(memory_id) == whole
    short = mem.add_memory("Decided: the blue tiles … or the green ones.", stream="decision")
    assert mem.memory_text(short.id) == short.content
    edited = mem.edit_memory(memory_id, content="Aria explained the garden plan … in detail.")
    assert mem.memory_text(memory_id) == edited.content  # edited by hand: the person's words are the memory
    row = next(r for r in map(json.loads, mem.export("jsonl").splitlines()) if r["id"] == memory_id)
    assert row["text"] == row["content"] == edited.content
