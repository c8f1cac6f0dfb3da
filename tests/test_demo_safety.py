"""``narrative demo`` never deletes or fills a database it did not make (issue 24, item 1).

The demo marks what it makes (``store_meta``); it refuses, with the file's name and what to do, any existing
file that is not marked: someone's narrative database (named by --db or by NARRATIVE_DB), a SQLite file of
another program, a text file.  Checking opens the file read-only: no byte changes, no migration runs, no
-wal/-shm file appears.  ``--fresh`` replaces only a marked demo file.  On PostgreSQL nothing is ever dropped.
The demo says whose data it loaded and the commands to run next.  Real SQLite files, the real PostgreSQL.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

import narrative
from conftest import take_snapshot
from narrative.interfaces.cli import main
from narrative.store.opening import DEMO_KEY, database_kind, open_store

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Run:
    """``run(*args, env={})`` → (exit code, stdout, stderr) of ``narrative --embedder hashing ARGS``."""
    monkeypatch.chdir(tmp_path)
    for name in ("NARRATIVE_DB", "NARRATIVE_USER", "NARRATIVE_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)

    def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        capsys.readouterr()
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        code = 0
        try:
            main(["--embedder", "hashing", *args])
        except SystemExit as stop:
            code = int(stop.code or 0)
        finally:
            for name in env or {}:
                monkeypatch.delenv(name)
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


def someones_file(path: Path) -> Path:
    with narrative.Memory(path, user="sam", embedder="none", env={}) as mem:
        mem.add_memory("Sam's only copy of the allotment rota")
        mem.create_api_key(label="sam's laptop")
    return path


def sidecars(path: Path) -> list[Path]:
    return [p for p in (Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()]


@pytest.mark.parametrize("through_env", [False, True])
def test_the_demo_refuses_a_narrative_database_it_did_not_make(run: Run, tmp_path: Path, through_env: bool) -> None:
    path = someones_file(tmp_path / "notes.db")
    before = path.read_bytes()
    args = ("demo",) if through_env else ("--db", str(path), "demo")
    code, out, err = run(*args, env={"NARRATIVE_DB": str(path)} if through_env else None)
    assert code == 1 and out == ""
    assert str(path) in err and "did not make" in err and "narrative --db narrative-demo.db demo" in err
    assert ("NARRATIVE_DB" in err) is through_env
    assert path.read_bytes() == before and not sidecars(path)  # read-only: not a byte, no -wal/-shm
    with narrative.Memory(path, user="sam", embedder="none", env={}) as mem:
        assert [m.content for m in mem.list_memories()] == ["Sam's only copy of the allotment rota"]
        assert mem.list_api_keys() and set(mem.users()) == {"sam"}


def test_the_demo_refuses_files_of_other_programs(run: Run, tmp_path: Path) -> None:
    text = tmp_path / "thesis.txt"
    text.write_text("three years of work\n")
    other = tmp_path / "photos.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE photos (name TEXT)")
        conn.execute("INSERT INTO photos VALUES ('beach.jpg')")
    conn.close()
    for path in (text, other, tmp_path):  # a folder, too
        before = path.read_bytes() if path.is_file() else None
        code, _, err = run("--db", str(path), "demo")
        assert code == 1 and str(path) in err and "never deletes or loads into it" in err
        if before is not None:
            assert path.read_bytes() == before and not sidecars(path)
    assert database_kind(other) == "foreign"
    with sqlite3.connect(other) as conn:  # no migration ran on it
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["photos"]
    conn.close()


def test_no_command_opens_a_file_of_another_program(run: Run, tmp_path: Path) -> None:
    """``add message`` on another program's SQLite file added our hundred tables to it (a new user's probe); any
    command now refuses it and leaves it as it was.  An empty file, or a SQLite file without tables, is used."""
    text = tmp_path / "thesis.txt"
    text.write_text("three years of work\n")
    other = tmp_path / "photos.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE photos (name TEXT)")
    conn.close()
    for path in (text, other):
        before = path.read_bytes()
        code, _, err = run("--db", str(path), "--user", "maya", "add", "message", "hello")
        assert code == 1 and "is not a narrative database" in err and "nothing was changed" in err
        assert path.read_bytes() == before and not sidecars(path)
    empty = tmp_path / "empty.db"
    empty.touch()
    blank = tmp_path / "blank.db"
    sqlite3.connect(blank).close()
    for path in (empty, blank):
        code, _, err = run("--db", str(path), "--user", "maya", "add", "message", "hello there")
        assert code == 0, err


def test_an_older_narrative_file_is_checked_without_migrating_it(tmp_path: Path) -> None:
    """A narrative file from before ``store_meta`` existed is someone's data: checking it adds no table."""
    path = someones_file(tmp_path / "old.db")
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE store_meta")
        conn.execute("DELETE FROM schema_migrations WHERE name = '0005_store_meta.sql'")
    conn.close()
    before = path.read_bytes()
    assert database_kind(path) == "data"
    assert path.read_bytes() == before and not sidecars(path)


def test_fresh_replaces_only_a_file_the_demo_made(run: Run, tmp_path: Path) -> None:
    code, _out, err = run("demo")
    assert code == 0, err
    demo_file = tmp_path / "narrative-demo.db"
    assert database_kind(demo_file) == "demo"
    with narrative.Memory(demo_file, user="maya", embedder="none", env={}) as mem:
        mem.add_memory("a note added while trying the demo")
        count = mem.store.count_rows("memories")
        assert mem.store.get_meta(DEMO_KEY)
    code, _, err = run("demo", "--keep")  # loads again into the same file
    assert code == 0, err
    with narrative.Memory(demo_file, user="maya", embedder="none", env={}) as mem:
        assert mem.store.count_rows("memories") > count
    code, _, err = run("demo")  # --fresh (the default): made again from nothing
    assert code == 0, err
    with narrative.Memory(demo_file, user="maya", embedder="none", env={}) as mem:
        assert mem.store.count_rows("memories") == count - 1
        assert not [m for m in mem.list_memories(limit=1000) if m.content == "a note added while trying the demo"]


def test_the_demo_says_whose_data_it_loaded_and_what_to_run_next(run: Run, tmp_path: Path) -> None:
    code, out, err = run("--user", "robin", "demo")
    assert code == 0, err
    first = out.splitlines()[0]
    assert "as user 'robin'" in first and "narrative-demo.db" in first and "Maya" in first
    assert "narrative --db narrative-demo.db --user robin search 'why SQLite instead of Firebase'" in out
    report = json.loads(run("--db", "again.db", "demo", "--json")[1])
    assert report["user"] == "maya" and report["db"] == "again.db"
    assert report["next"][0].startswith("narrative --db again.db --user maya search ")
    code, out, err = run(*report["next"][0].split()[1:5], "memories")  # its --db and --user find the sample
    assert code == 0 and out.strip(), err


def test_on_postgres_the_demo_never_drops_anything(run: Run, databases: object, backend: str) -> None:
    if backend != "postgres":
        pytest.skip("the PostgreSQL rules")
    url = databases.fresh()  # type: ignore[attr-defined]
    code, _out, err = run("--db", url, "demo", "--json")
    assert code == 0, err
    assert database_kind(url) == "demo"
    store = open_store(url)
    try:
        loaded = take_snapshot(store)
        code, _, err = run("--db", url, "demo")  # --fresh would need a delete: refused
        assert code == 1 and "never deletes" in err and "--keep" in err
        assert take_snapshot(store) == loaded
        code, _, err = run("--db", url, "--user", "robin", "demo")  # another user: loads beside
        assert code == 0, err
    finally:
        store.close()
    other = databases.fresh()  # type: ignore[attr-defined]
    with narrative.Memory(other, user="sam", embedder="none", env={}) as mem:
        mem.add_memory("Sam's only copy of the allotment rota")
        before = take_snapshot(mem.store)
        code, _, err = run("--db", other, "demo")
        assert code == 1 and "did not make" in err
        assert take_snapshot(mem.store) == before
