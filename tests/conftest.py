"""Shared fixtures for the whole suite.

Sections (add new fixtures to the section they belong to, or start a new one):

* time     — ``FakeClock`` and the ``clock`` fixture: deterministic, strictly increasing timestamps
* database — ``db_path`` (a fresh SQLite file per test), ``backend`` ("sqlite" or "postgres": every test that
             uses ``store`` or ``mem`` runs on both), ``db`` (the SQLite file or a fresh PostgreSQL schema),
             ``store`` (the migrated store on it), ``snapshot`` (every row of every table, to assert "the database
             is unchanged").  ``@pytest.mark.sqlite_only`` keeps a test that reads the SQLite file itself off
             PostgreSQL.  ``module_db`` is one database per module and backend (for costly shared setups);
             ``databases.fresh()`` gives more databases of the test's backend.  PostgreSQL 18 + pgvector is
             started once per session (tests/pg_server.py).
* engine   — ``mem``: ``narrative.Memory`` for user "alice", keyword-only (no model), on the fake clock
* demo     — ``build_demo``: the bundled sample written once per run for each (embedder, user, clock) asked for;
             tests copy the file (``copy_db``) before they write to it.  ``DEMO_NOW`` is the morning after its last
             session.

Everything runs against real SQLite files in ``tmp_path`` and a real PostgreSQL; nothing here mocks our own code.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import narrative
from narrative import demo
from narrative.store.opening import open_store
from narrative.store.protocol import Store
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


_PG_STATE: dict[str, Any] = {}
BACKENDS = ("sqlite", "postgres")


def pg_server() -> Any:
    """The session's PostgreSQL server, started on first use; skips (or fails on CI) when it cannot start."""
    if "server" not in _PG_STATE:
        if "error" in _PG_STATE:
            _skip_or_fail(_PG_STATE["error"])
        try:
            from pg_server import PgServer

            _PG_STATE["server"] = PgServer()
        except Exception as error:  # no wheel on this platform, no unprivileged user...
            _PG_STATE["error"] = f"PostgreSQL could not be started: {type(error).__name__}: {error}"
            _skip_or_fail(_PG_STATE["error"])
    return _PG_STATE["server"]


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(reason)  # on CI the PostgreSQL run is part of the suite
    pytest.skip(reason)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    server = _PG_STATE.pop("server", None)
    if server is not None:
        server.stop()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Which store the test runs on: every test using ``store`` or ``mem`` runs once per backend."""
    name = str(request.param)
    if name == "postgres" and request.node.get_closest_marker("sqlite_only") is not None:
        pytest.skip("reads the SQLite file itself")
    return name


@pytest.fixture
def db(backend: str, db_path: Path) -> Iterator[str]:
    """A fresh database for this test: the SQLite file's path, or the URL of a new PostgreSQL schema."""
    if backend == "sqlite":
        yield str(db_path)
        return
    server = pg_server()
    url = server.fresh_schema()
    yield url
    server.release(url)


@pytest.fixture(scope="module", params=BACKENDS)
def module_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One database shared by a module's tests, on each backend in turn (for costly module-wide setups)."""
    if request.param == "sqlite":
        yield str(tmp_path_factory.mktemp("module") / "shared.db")
        return
    server = pg_server()
    url = server.fresh_schema()
    yield url
    if _PG_STATE.get("server") is server:  # the last module's teardown may come after the server stopped
        server.release(url)  # type: ignore[union-attr]


class Databases:
    """Fresh databases of one backend on demand (``fresh()``), each given back with ``release``."""

    def __init__(self, backend: str, tmp_path_factory: pytest.TempPathFactory) -> None:
        self.backend, self._paths, self._taken = backend, tmp_path_factory, set[str]()

    def fresh(self) -> str:
        if self.backend == "sqlite":
            return str(self._paths.mktemp("fresh") / "narrative.db")
        url = str(pg_server().fresh_schema())
        self._taken.add(url)
        return url

    def release(self, name: str) -> None:
        if name in self._taken:
            self._taken.discard(name)
            pg_server().release(name)

    def release_all(self) -> None:
        for name in list(self._taken):
            self.release(name)


@pytest.fixture
def databases(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Databases]:
    """``databases.fresh()`` → a new database of this test's backend (for tests that need several)."""
    made = Databases(backend, tmp_path_factory)
    yield made
    made.release_all()


@pytest.fixture
def store(db: str) -> Iterator[Store]:
    """A migrated store on a fresh database (SQLite file or PostgreSQL), closed after the test."""
    opened = open_store(db)
    yield opened
    opened.close()


def take_snapshot(target: Store) -> Snapshot:
    """Every row of every ordinary table (FTS shadow tables excluded: they follow via triggers)."""
    if target.backend == "postgres":
        return _pg_snapshot(target)
    assert isinstance(target, SqliteStore)
    tables = target.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    names = [
        name
        for (name,) in tables
        if not name.startswith("sqlite_") and not name.endswith("_fts") and "_fts_" not in name
    ]
    return {name: sorted((tuple(r) for r in target.conn.execute(f"SELECT * FROM {name}")), key=repr) for name in names}


def _pg_snapshot(target: Any) -> Snapshot:
    rows = target._all(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        " AND table_type = 'BASE TABLE' ORDER BY table_name"
    )
    names = [r[0] for r in rows]
    return {name: sorted((tuple(r) for r in target._all(f"SELECT * FROM {name}")), key=repr) for name in names}


@pytest.fixture
def snapshot() -> Callable[[Store], Snapshot]:
    """``snapshot(store)`` → all rows; compare two snapshots to prove a refused call changed nothing."""
    return take_snapshot


# --- engine -----------------------------------------------------------------------------


@pytest.fixture
def mem(db: str, clock: FakeClock) -> Iterator[narrative.Memory]:
    """Alice's memory on a fresh database (each backend): keyword-only, fake clock, empty environment."""
    memory = narrative.Memory(db, user="alice", embedder="none", clock=clock, env={})
    yield memory
    memory.close()


# --- reporting --------------------------------------------------------------------------

# --- the demo -------------------------------------------------------------------------

DEMO_NOW = datetime(2026, 3, 13, 9, 0, tzinfo=UTC)  # the morning after the demo's last session
DemoBuilder = Callable[..., Path]


@pytest.fixture(scope="session")
def build_demo(tmp_path_factory: pytest.TempPathFactory) -> DemoBuilder:
    """``build_demo(embedder=None, user="maya", loaded_at=CLOCK_START)``: the path of the demo database.

    Each combination is written once per run through the real engine (closed and confirmed session by session,
    the database closed so its WAL is checkpointed); ``embedder=None`` is the default model (MiniLM), and
    ``loaded_at=None`` loads on the real clock.  Copy the file before writing to it.
    """
    built: dict[tuple[str | None, str, datetime | None], Path] = {}

    def build(embedder: str | None = None, user: str = "maya", loaded_at: datetime | None = CLOCK_START) -> Path:
        key = (embedder, user, loaded_at)
        if key not in built:
            path = tmp_path_factory.mktemp("demo") / "demo.db"
            options: dict[str, Any] = {} if embedder is None else {"embedder": embedder}
            if loaded_at is not None:
                options["clock"] = FakeClock(loaded_at)
            with narrative.Memory(path, user=user, env={}, **options) as mem:
                demo.load(mem)
            built[key] = path
        return built[key]

    return build


def copy_db(source: Path, target: Path) -> Path:
    """Copy a SQLite database file (with its ``-wal``/``-shm`` files when present) to ``target``."""
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{source}{suffix}").exists():
            shutil.copyfile(f"{source}{suffix}", f"{target}{suffix}")
    return target


_RAN: Counter[str] = Counter()
_ON_POSTGRES: set[str] = set()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        on_postgres = "postgres" in (params.get("backend"), params.get("module_db"))
        if on_postgres or item.get_closest_marker("postgres") is not None:
            _ON_POSTGRES.add(item.nodeid)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or (report.when == "setup" and report.skipped):
        backend_name = "postgres" if report.nodeid in _ON_POSTGRES else "sqlite"
        outcome = "skipped" if report.skipped else "ran"
        _RAN[f"{backend_name} {outcome}"] += 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """How many tests ran on each store (tests without a store count as SQLite: the default)."""
    terminalreporter.write_line(
        f"tests per store: sqlite {_RAN['sqlite ran']} ran ({_RAN['sqlite skipped']} skipped), "
        f"postgres {_RAN['postgres ran']} ran ({_RAN['postgres skipped']} skipped)"
    )


# --- a long message -----------------------------------------------------------------------------------------

LONG_END = "The last line says: the heron key is under the red bucket."


def long_reply() -> str:
    """About 5,000 characters in paragraphs (several passages), a sentence found nowhere else at the end."""
    paragraph = "The garden plan covers beds, soil, watering and the order of planting for the season ahead. " * 3
    text = "\n\n".join(paragraph.strip() for _ in range(18)) + "\n\n" + LONG_END
    assert 4_800 <= len(text) <= 5_200
    return text


@pytest.fixture(scope="module")
def minilm() -> Any:
    """The real local MiniLM model, loaded once per module (a module may define its own)."""
    from narrative.providers.embed import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    embedder.embed_batch(["warm up"])
    return embedder


@pytest.fixture
def smem(db: str, clock: FakeClock, minilm: Any) -> Iterator[narrative.Memory]:
    """Alice's memory with the real MiniLM model, on each backend."""
    memory = narrative.Memory(db, user="alice", embedder=minilm, clock=clock, env={})
    yield memory
    memory.close()
