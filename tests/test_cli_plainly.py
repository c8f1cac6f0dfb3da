"""The CLI says plainly what went wrong or what it did (found by a new user's probe): a full disk is an error
message, not a traceback; ``add message -`` reads standard input (a long message cannot be an argument); a
reversed date range is an error, not "no memories match"; ``--db ""`` is refused, not the default file; restoring
a memory that nothing superseded says there was nothing to restore."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from narrative.interfaces.cli import main

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Run:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NARRATIVE_DB", str(tmp_path / "notes.db"))
    monkeypatch.setenv("NARRATIVE_USER", "maya")
    monkeypatch.setenv("NARRATIVE_EMBEDDER", "none")
    monkeypatch.delenv("NARRATIVE_LLM_PROVIDER", raising=False)

    def invoke(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
        capsys.readouterr()
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = 0
        try:
            main(list(args))
        except SystemExit as stop:
            code = int(stop.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_an_export_to_a_full_disk_is_an_error_message(run: Run) -> None:
    assert run("add", "message", "The launch is on April 1.")[0] == 0
    code, out, err = run("export", "-o", "/dev/full")
    assert code == 1 and "No space left on device (/dev/full)" in err and "Traceback" not in err
    code, out, _ = run("--json", "export", "-o", "/dev/full")
    assert code == 1 and json.loads(out)["error"] == "io_error"


def test_a_message_and_a_memory_read_from_standard_input(run: Run) -> None:
    long = "word " * 40_000 + "The last sentence is about zebras."
    assert run("add", "message", "-", stdin=long)[0] == 0
    assert run("add", "memory", "-", stdin="A note about herons.")[0] == 0
    code, out, _ = run("--json", "search", "zebras")
    assert code == 0 and "zebras" in out
    assert "herons" in run("search", "herons")[1]


def test_a_reversed_date_range_is_an_error(run: Run) -> None:
    assert run("add", "message", "The launch is on April 1.")[0] == 0
    code, _, err = run("search", "launch", "--since", "2024-01-16", "--until", "2023-01-01")
    assert code == 1 and "is after until" in err


def test_an_empty_db_is_refused(run: Run, tmp_path: Path) -> None:
    for args in (("--db", "", "status"), ("status", "--db", "")):
        code, _, err = run(*args)
        assert code == 2 and "--db" in err and "is empty" in err


def test_restoring_a_current_memory_says_there_was_nothing_to_restore(run: Run) -> None:
    assert run("add", "message", "The launch is on April 1.")[0] == 0
    code, out, _ = run("memory", "restore", "1")
    assert code == 0 and out.startswith("nothing to restore: #1 is current")
