"""The progress bar of long work: drawn on a terminal, silent when piped."""

from __future__ import annotations

import io

from narrative.interfaces.progress import ProgressBar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_silent_when_the_stream_is_not_a_terminal() -> None:
    piped = io.StringIO()
    with ProgressBar("ingest", stream=piped) as bar:
        for done in range(0, 101, 10):
            bar(done, 100)
    assert piped.getvalue() == ""


def test_drawn_in_place_on_a_terminal_and_ended_with_a_newline() -> None:
    terminal = Terminal()
    with ProgressBar("ingest", stream=terminal, interval=0) as bar:
        bar(1, 4)
        bar(4, 4)
    out = terminal.getvalue()
    assert out.startswith("\ringest [") and out.endswith("\n")
    assert out.count("\r") == 2 and "1/4" in out and "4/4 100%" in out


def test_redraws_at_most_every_interval_but_always_the_end() -> None:
    terminal = Terminal()
    bar = ProgressBar("x", stream=terminal, interval=60)
    for done in range(1, 50):
        bar(done, 50)
    bar(50, 50)
    bar.close()
    assert terminal.getvalue().count("\r") == 2  # the first draw and the end


def test_the_line_shows_share_rate_and_time_left() -> None:
    bar = ProgressBar("import", enabled=False, width=10)
    assert bar.line(25, 100, 5.0) == "import [##........] 25/100  25% 5.0/s, 15s left  "
    assert bar.line(100, 100, 50.0).startswith("import [##########] 100/100 100% 2.0/s")
    assert "left" not in bar.line(0, 0, 0.0)
