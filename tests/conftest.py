"""Shared fixtures for the whole suite.

Sections (add new fixtures to the section they belong to, or start a new one):

* time     — ``FakeClock`` and the ``clock`` fixture: deterministic, strictly increasing timestamps
* database — ``db_path`` (a fresh SQLite file per test), ``store`` (a SqliteStore on it),
             ``snapshot`` (every row of every table, to assert "the database is unchanged")
* engine   — ``mem``: ``narrative.Memory`` for user "alice", keyword-only (no model), on the fake clock

Everything runs against real SQLite files in ``tmp_path``; nothing here mocks our own code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import narrative
from narrative.store.sqlite import SqliteStore

# --- time -----------------------------------------------------------------------------

CLOCK_START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


class FakeClock:
    """A clock for ``Memory(clock=...)``: each call returns ``now`` and then moves it on by ``step``.

    Every call therefore yields a distinct, strictly later time, so rows ordered by
    ``created_at`` come back in the order they were written.  ``advance`` jumps ahead
    on demand (for recency, idle and "days later" scenarios).
    """

    def __init__(self, start: datetime = CLOCK_START, step: timedelta = timedelta(seconds=1)) -> None:
        self.now = start
        self.step = step
        self.calls = 0

    def __call__(self) -> datetime:
        current = self.now
        self.now = current + self.step
        self.calls += 1
        return current

    def advance(self, delta: timedelta | None = None, **units: float) -> datetime:
        """Move ahead by ``delta`` or by keyword units (``days=3``, ``minutes=45``); returns the new now."""
        self.now += (delta or timedelta()) + timedelta(**units)
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# --- database ---------------------------------------------------------------------------

Snapshot = dict[str, list[tuple[Any, ...]]]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A path for a fresh SQLite file (created on first open)."""
    return tmp_path / "narrative.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SqliteStore]:
    """A migrated SqliteStore on a fresh file, closed after the test."""
    opened = SqliteStore(db_path)
    yield opened
    opened.close()


def take_snapshot(target: SqliteStore) -> Snapshot:
    """Every row of every ordinary table (FTS shadow tables excluded: they follow via triggers)."""
    tables = target.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    names = [
        name
        for (name,) in tables
        if not name.startswith("sqlite_") and not name.endswith("_fts") and "_fts_" not in name
    ]
    return {name: sorted((tuple(r) for r in target.conn.execute(f"SELECT * FROM {name}")), key=repr) for name in names}


@pytest.fixture
def snapshot() -> Callable[[SqliteStore], Snapshot]:
    """``snapshot(store)`` → all rows; compare two snapshots to prove a refused call changed nothing."""
    return take_snapshot


# --- engine -----------------------------------------------------------------------------


@pytest.fixture
def mem(db_path: Path, clock: FakeClock) -> Iterator[narrative.Memory]:
    """Alice's memory on a fresh file: keyword-only (``embedder="none"``), fake clock, empty environment."""
    memory = narrative.Memory(db_path, user="alice", embedder="none", clock=clock, env={})
    yield memory
    memory.close()
