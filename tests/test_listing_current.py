"""A list of memories that shows each fact once never shows a corrected statement as a current one.

Found by a new user: after "I live in Berlin." and "Actually, I moved: I live in Lisbon now, not Berlin.", the
current memories listed the exchange holding both turns as "I live in Berlin." (the correction's turn was shown by
its own note above it, so the exchange showed the rest: the very sentence the correction superseded).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import narrative
from conftest import FakeClock
from narrative.interfaces.cli import main


def _corrected(mem: narrative.Memory) -> tuple[int, int]:
    first = mem.remember("I live in Berlin.")
    second = mem.remember("Actually, I moved: I live in Lisbon now, not Berlin.")
    return first.message.id, second.message.id


def test_a_current_memory_does_not_show_the_turn_it_corrected(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="alice", clock=clock, env={}) as mem:
        old, new = _corrected(mem)
        listed = mem.list_memories(current_only=True)
        shown = [item for item in mem.one_fact_once([m.id for m in listed]) if item.folded_into is None]
        assert shown and all("Berlin." not in item.text.replace("not Berlin", "") for item in shown)
        assert any("Lisbon" in item.text for item in shown)
        exchange = next(m for m in listed if set(m.message_ids) == {old, new})
        holder = next(item for item in shown if exchange.id in item.also)  # folded in, still named
        assert "Lisbon" in holder.text


def test_a_superseded_memory_listed_with_the_rest_still_shows_what_it_said(db: str, clock: FakeClock) -> None:
    """Listing everything (not only the current memories), a superseded memory is listed as itself: it is one of
    the memories, marked superseded; only current ones leave the corrected turn out."""
    with narrative.Memory(db, user="alice", clock=clock, env={}) as mem:
        _corrected(mem)
        listed = mem.list_memories()
        shown = {item.memory.id: item for item in mem.one_fact_once([m.id for m in listed])}
        superseded = [m for m in listed if not m.is_current]
        assert superseded
        visible = [shown[m.id] for m in superseded if shown[m.id].folded_into is None]
        assert visible and all("Berlin" in item.text for item in visible)


def test_the_cli_lists_the_correction_and_marks_what_it_superseded(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("NARRATIVE_DB", "NARRATIVE_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NARRATIVE_USER", "maya")

    def ok(*args: str) -> str:
        capsys.readouterr()
        main(["--db", "notes.db", *args])  # the default embedder: the real local model
        return capsys.readouterr().out

    ok("add", "message", "I live in Berlin.")
    ok("add", "message", "Actually, I moved: I live in Lisbon now, not Berlin.")
    current = ok("memories", "--current")
    assert "Lisbon" in current and not any(line.endswith("] I live in Berlin.") for line in current.splitlines())
    listed = ok("memories").splitlines()
    berlin = [line for line in listed if "I live in Berlin" in line and "Lisbon" not in line]
    assert berlin and all("[superseded by #" in line for line in berlin)
    assert not any("[superseded" in line for line in listed if "Lisbon" in line)
