"""A progress bar for long commands (reindex, bench): drawn on standard error when it is a terminal, and not
with ``--json``; silent when piped or redirected, so scripts and logs see only the result."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

WIDTH = 30

Report = Callable[[int, int], None]


def _quiet(_done: int, _total: int) -> None:
    """The reporter when nobody watches: it does nothing."""


@contextmanager
def progress(label: str, *, enabled: bool = True, stream: TextIO | None = None) -> Iterator[Report]:
    """Yield ``report(done, total)``; on a terminal each call redraws ``label [####······] done/total``
    in place, and the bar's line is ended when the block exits."""
    out = sys.stderr if stream is None else stream
    if not enabled or not out.isatty():
        yield _quiet
        return
    drawn = False

    def report(done: int, total: int) -> None:
        nonlocal drawn
        filled = WIDTH if total <= 0 else min(WIDTH, WIDTH * done // total)
        out.write(f"\r{label} [{'#' * filled}{'·' * (WIDTH - filled)}] {done}/{total}")
        out.flush()
        drawn = True

    try:
        yield report
    finally:
        if drawn:
            out.write("\n")
            out.flush()
