"""A progress bar for long work (imports, benchmarks) on a terminal; silent when stderr is not one.

No dependency: one line on stderr, redrawn in place (``\\r``) at most every
``interval`` seconds and at the end, showing done/total, the rate and the time
left.  Call it as ``bar(done, total)``, the shape of the engine's ``progress``
callbacks; ``close()`` ends the line.  Output to a pipe or a file stays clean:
when the stream is not a TTY the bar writes nothing.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


class ProgressBar:
    def __init__(
        self, label: str, *, stream: TextIO | None = None, enabled: bool | None = None, width: int = 28,
        interval: float = 0.2,
    ) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_terminal(self.stream) if enabled is None else enabled
        self.width = width
        self.interval = interval
        self._started = time.monotonic()
        self._drawn_at = 0.0
        self._drawn = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self._drawn_at < self.interval:
            return
        self._drawn_at = now
        self.stream.write("\r" + self.line(done, total, now - self._started))
        self.stream.flush()
        self._drawn = True

    def line(self, done: int, total: int, elapsed: float) -> str:
        """The bar as text: ``label [#####.....] done/total pct rate left``."""
        share = 0.0 if total <= 0 else min(1.0, done / total)
        filled = round(share * self.width)
        rate = done / elapsed if elapsed > 0 else 0.0
        left = (total - done) / rate if rate > 0 and done < total else 0.0
        tail = f" {rate:.1f}/s" + (f", {_duration(left)} left" if done < total and rate > 0 else "")
        return f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} {share:4.0%}{tail}  "

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds + 0.5), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
