"""``narrative check``: an integrity command a user can run after a crash (issue 24, item 13).

A whole database passes every check on both stores (text and ``--json``, exit 0).  Each kind of damage, made
with the database's own tools behind the engine's back, is found and named, and the command exits 1: the
schema against the migrations, SQLite's pages and indexes against their rows, a full-text index against its
text, vectors against memories (another user, the wrong length, a NaN), orphan rows and references across
users, and vectors the current embedder cannot search.  A turn left unprocessed is a note (exit 0), with the
command that finishes it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import narrative
from conftest import pg_server
from narrative.interfaces.cli import main

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Run:
    monkeypatch.chdir(tmp_path)
    for name in ("NARRATIVE_DB", "NARRATIVE_USER"):
        monkeypatch.delenv(name, raising=False)

    def invoke(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = 0
        try:
            main(["--embedder", "hashing", *args])
        except SystemExit as stop:
            code = int(stop.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


@pytest.fixture
def own_db(backend: str, tmp_path: Path) -> Iterator[str]:
    """A database of this test's own: these tests damage the schema, so a PostgreSQL schema is never reused."""
    if backend == "sqlite":
        yield str(tmp_path / "check.db")
        return
    server = pg_server()
    url = server.bare_schema()
    yield url
    server.drop(url)


@pytest.fixture
def filled(own_db: str) -> Iterator[str]:
    """Alice and bob with turns, memories, vectors and a recorded use (hashing embedder)."""
    db = own_db
    with narrative.Memory(db, user="alice", embedder="hashing", env={}) as mem:
        mem.remember("We decided to plant the tomatoes beside the shed.", speaker="Alice")
        mem.remember("The bicycle needs new brakes before the trip.", speaker="Alice")
        mem.add_memory("The market opens at nine.")
        mem.search("tomatoes", record=True)
        mem.remember("Bob waters the beans on Sundays.", user="bob", speaker="Bob")
    yield db


def statuses(report: dict[str, Any]) -> dict[str, str]:
    return {item["check"]: item["status"] for item in report["checks"]}


def check(db: str) -> dict[str, Any]:
    with narrative.Memory(db, user="alice", embedder="hashing", env={}) as mem:
        return mem.check()


def raw(db: str, backend: str, *statements: str) -> None:
    """Change the database behind the engine's back."""
    if backend == "sqlite":
        conn = sqlite3.connect(db, isolation_level=None)
        try:
            for statement in statements:
                conn.execute(statement)
        finally:
            conn.close()
        return
    import psycopg

    with psycopg.connect(db, autocommit=True) as pg:
        for statement in statements:
            pg.execute(statement.encode())


def test_a_whole_database_passes(filled: str, backend: str, run: Run) -> None:
    report = check(filled)
    assert report["ok"] and report["problems"] == 0 and report["backend"] == backend
    expected = {"schema", "pages", "full-text", "vectors", "references", "metadata", "pending", "embedder"}
    assert set(statuses(report)) == expected
    skipped = {"pages", "full-text"} if backend == "postgres" else set()
    assert {name for name, status in statuses(report).items() if status != "ok"} <= skipped
    code, out, err = run("--db", filled, "check")
    assert code == 0 and "no problem found" in out, err
    assert json.loads(run("--db", filled, "check", "--json")[1])["ok"] is True


DAMAGE: dict[str, tuple[str, list[str], str]] = {
    # name: (the check that finds it, statements, words in its detail)
    "an index dropped": ("schema", ["DROP INDEX memories_user_created"], "memories_user_created"),
    "vectors of another embedder": ("embedder", ["UPDATE memory_vectors SET model = 'other-model:256'"], "reindex"),
    "a trigger dropped": ("schema", ["DROP TRIGGER narratives_sealed_immutable ON narratives"], "trigger"),
    "metadata that is not an object": ("metadata", ["UPDATE memories SET metadata = '[1, 2]' WHERE id = 1"], "memory"),
    "metadata with a key filters cannot name": (
        "metadata",
        ["UPDATE memories SET metadata = '{\"no spaces\": 1}' WHERE id = 1"],
        "must be 1-64 letters",
    ),
}
#: Damage only SQLite lets happen: PostgreSQL's foreign keys carry the user (a reference across users is refused),
#: it checks its own pages and keeps no full-text index, and pgvector refuses NaN.
SQLITE_DAMAGE: dict[str, tuple[str, list[str], str]] = {
    "a source joining two users' rows": (
        "references",
        [
            "UPDATE memory_sources SET message_id = (SELECT MIN(id) FROM messages WHERE user_id = 'bob')"
            " WHERE memory_id = (SELECT MIN(memory_id) FROM memory_sources s JOIN memories m ON m.id = s.memory_id"
            " WHERE m.user_id = 'alice')"
        ],
        "join two users",
    ),
    "a memory filed under another user's storyline": (
        "references",
        [
            "UPDATE memories SET storyline_id = (SELECT MIN(id) FROM storylines WHERE user_id = 'bob')"
            " WHERE id = (SELECT MIN(id) FROM memories WHERE user_id = 'alice')"
        ],
        "another user's storylines",
    ),
    "a vector under another user": (
        "vectors",
        ["UPDATE memory_vectors SET user_id = 'bob' WHERE memory_id = (SELECT MIN(memory_id) FROM memory_vectors)"],
        "another user",
    ),
    "text changed without its full-text entry": (
        "full-text",
        ["DROP TRIGGER memories_fts_au", "UPDATE memories SET content = 'entirely different words' WHERE id = 1"],
        "memories_fts",
    ),
    "an index that disagrees with its rows": (
        "pages",
        [
            "PRAGMA writable_schema = ON",
            "UPDATE sqlite_master SET sql = replace(sql, '(user_id, created_at)', '(user_id, importance)')"
            " WHERE name = 'memories_user_created'",
        ],
        "memories_user_created",
    ),
    "a vector holding a NaN": (
        "vectors",
        ["UPDATE memory_vectors SET vector = CAST(X'0000C07F' || substr(vector, 5) AS BLOB) WHERE memory_id = 1"],
        "NaN",
    ),
    "a vector too short": ("vectors", ["UPDATE memory_vectors SET vector = zeroblob(40) WHERE memory_id = 1"], "10"),
    "an orphan row": (
        "references",
        ["PRAGMA foreign_keys = OFF", "INSERT INTO memory_sources(memory_id, message_id) VALUES (1, 999999)"],
        "messages",
    ),
}


@pytest.mark.parametrize("damage", [*DAMAGE, *SQLITE_DAMAGE])
def test_each_kind_of_damage_is_found(filled: str, backend: str, run: Run, damage: str) -> None:
    if damage in SQLITE_DAMAGE and backend != "sqlite":
        pytest.skip("SQLite's own structures")
    found_by, statements, words = {**DAMAGE, **SQLITE_DAMAGE}[damage]
    if backend == "sqlite":
        statements = [s.replace(" ON narratives", "") if s.startswith("DROP TRIGGER") else s for s in statements]
    raw(filled, backend, *statements)
    report = check(filled)
    assert not report["ok"] and report["problems"] >= 1
    item = next(i for i in report["checks"] if i["check"] == found_by)
    assert item["status"] == "problem" and words in item["detail"], item
    code, out, _ = run("--db", filled, "check")
    assert code == 1 and "PROBLEM" in out and "problem" in out.splitlines()[-1]
    assert json.loads(run("--db", filled, "check", "--json")[1])["ok"] is False


def test_an_unprocessed_turn_is_a_note_with_the_command_that_finishes_it(filled: str, run: Run) -> None:
    with narrative.Memory(filled, user="alice", embedder="hashing", env={}) as mem:
        mem.add_message("stored, but its derived work never ran")  # as a turn interrupted by a crash
    report = check(filled)
    pending = next(i for i in report["checks"] if i["check"] == "pending")
    assert report["ok"] and pending["status"] == "note" and "alice (1)" in pending["detail"]
    code, out, _ = run("--db", filled, "check")
    assert code == 0 and "process-pending" in out
    code, out, err = run("--db", filled, "--user", "alice", "process-pending")
    assert code == 0 and "processed 1 pending messages" in out, err
    assert statuses(check(filled))["pending"] == "ok"


def test_a_keyword_only_file_checked_with_an_embedder_is_not_a_problem(run: Run, tmp_path: Path) -> None:
    """A file written with embedder 'none' has no vectors by choice: check with the default embedder says how to
    set up search by meaning instead of reporting a problem (exit 0)."""
    db = str(tmp_path / "keywords.db")
    with narrative.Memory(db, user="maya", embedder="none", env={}) as mem:
        mem.remember("I like green tea in the morning.")
    code, out, _ = run("--db", db, "check")
    assert code == 0, out
    assert "skipped  embedder" in out and "narrative reindex" in out
