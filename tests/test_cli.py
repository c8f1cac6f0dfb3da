"""The command line as a user meets it (issue 16): options after the command, reads that create nothing and
name the file's users, storylines and conversations, JSON errors, progress only on a terminal, help that
matches behaviour, whole-word previews, indented multi-line text, and the LLM flags.  Real SQLite files;
``main`` is the console script's own entry point."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from llm_server import ScriptedLLMServer, scripted_llm_server
from narrative.config import Settings
from narrative.engine import Memory
from narrative.interfaces.cli import main
from narrative.interfaces.cli.progress import progress
from narrative.interfaces.cli.text import clip

llm_server = pytest.fixture(scripted_llm_server)

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Run:
    """``run(*args, input=None)`` → (exit code, stdout, stderr) of ``narrative ARGS`` (keyword-only search)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # the default database's folder
    for name in ("NARRATIVE_DB", "NARRATIVE_USER", "NARRATIVE_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)

    def invoke(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
        capsys.readouterr()
        if stdin is not None:
            monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        code = 0
        try:
            main(["--embedder", "none", *args])
        except SystemExit as stop:
            code = int(stop.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


def ok(run: Run, *args: str) -> str:
    code, out, err = run(*args)
    assert code == 0, out + err
    return out


# --- options after the command --------------------------------------------------------------------


def test_db_user_and_json_work_after_the_command(run: Run, tmp_path: Path) -> None:
    ok(run, "add", "message", "Sam will send the bed measurements on Friday.", "--db", "notes.db", "--user", "maya")
    hits = json.loads(ok(run, "search", "measurements", "--db", "notes.db", "--user", "maya", "--json"))
    assert hits[0]["content"] == "Sam will send the bed measurements on Friday."
    assert "id" in hits[0] and "memory_id" not in hits[0]  # one id key name: "id"
    before = json.loads(ok(run, "--db", "notes.db", "--user", "maya", "--json", "search", "measurements"))
    assert [h["id"] for h in before] == [h["id"] for h in hits]
    assert (tmp_path / "notes.db").is_file() and not (tmp_path / "narrative.db").exists()


# --- reads create nothing, and say whose data the file holds -----------------------------------------


def test_a_read_of_a_missing_file_creates_no_file_or_folder(run: Run, tmp_path: Path) -> None:
    for args in (
        ["search", "foo"],
        ["memories"],
        ["narratives"],
        ["storylines"],
        ["conversations"],
        ["threads"],
        ["greet"],
        ["export"],
        ["status"],
        ["conversation", "status"],
    ):
        code, _, err = run("--db", "nodir/x.db", *args)
        assert code == 1 and "no database at nodir/x.db" in err, args
    assert list(tmp_path.iterdir()) == []


def test_a_read_for_an_unknown_user_names_the_users_and_creates_none(run: Run, tmp_path: Path) -> None:
    ok(run, "--db", "notes.db", "--user", "maya", "add", "message", "Sam will send the bed measurements.")
    code, _, err = run("--db", "notes.db", "search", "measurements")
    assert code == 1
    assert "user 'default' has no data in notes.db; it holds data of maya" in err and "--user NAME" in err
    code, out, _ = run("--db", "notes.db", "search", "measurements", "--json")
    assert code == 1 and json.loads(out)["error"] == "not_found" and "maya" in json.loads(out)["message"]
    with Memory(tmp_path / "notes.db", embedder="none", env={}) as mem:
        assert list(mem.users()) == ["maya"]  # no 'default' was made by reading


def test_a_user_name_that_would_not_read_as_itself_is_quoted(run: Run) -> None:
    """ "user 'maya' has no data in notes.db; it holds data of  maya " named the padded user as if it were maya."""
    ok(run, "--db", "notes.db", "--user", " maya ", "add", "memory", "A padded name.")
    ok(run, "--db", "notes.db", "--user", "a\tb", "add", "memory", "A tab in the name.")
    code, _, err = run("--db", "notes.db", "--user", "maya", "memories")
    assert code == 1 and "it holds data of ' maya ', 'a\\tb' (choose" in err, err
    code, _, err = run("--db", "notes.db", "--user", "sam", "add", "memory", "Sam's note.")
    assert code == 0 and "it holds data of ' maya ', 'a\\tb' (--user" in err, err


def test_a_write_for_a_new_user_notes_the_others(run: Run) -> None:
    ok(run, "--db", "notes.db", "--user", "maya", "add", "message", "Sam will send the bed measurements.")
    code, _, err = run("--db", "notes.db", "--user", "sam", "add", "message", "I measured the bed.")
    assert code == 0 and "note: user 'sam' has nothing stored in notes.db yet; it holds data of maya" in err
    code, _, err = run("--db", "notes.db", "--user", "sam", "add", "message", "It is 160 wide.")
    assert code == 0 and "note:" not in err


# --- storylines and conversations ----------------------------------------------------------------------


def test_storylines_list_show_create_rename_archive(run: Run) -> None:
    base = ("--db", "notes.db", "--user", "maya")
    ok(run, *base, "add", "message", "Hello there!")
    listed = ok(run, *base, "storylines")
    assert "#1 Your Story (your_story; 0 messages)" in listed and "Small talk" in listed
    assert ok(run, *base, "storylines", "list") == listed
    made = json.loads(ok(run, *base, "storylines", "create", "Kitchen", "--keyword", "oven", "--json"))
    sid = made["id"]
    assert made["name"] == "Kitchen" and made["keywords"] == ["oven"]
    assert f"renamed #{sid} Kitchen plans" in ok(run, *base, "storylines", "rename", str(sid), "Kitchen plans")
    assert f"#{sid} Kitchen plans" in ok(run, *base, "storylines", "show", str(sid))
    assert "archived" in ok(run, *base, "storylines", "archive", str(sid))
    assert "Kitchen plans" not in ok(run, *base, "storylines")
    assert "Kitchen plans (user, archived" in ok(run, *base, "storylines", "list", "--all")
    code, out, _ = run(*base, "storylines", "rename", "1", "Mine", "--json")
    assert code == 1 and json.loads(out)["error"] == "invalid_transition"


def test_conversations_list(run: Run) -> None:
    base = ("--db", "notes.db", "--user", "maya")
    ok(run, *base, "add", "message", "We decided to paint the hall green.")
    ok(run, *base, "close")
    ok(run, *base, "conversation", "start")
    listed = ok(run, *base, "conversations").splitlines()
    assert listed[0].startswith("#2 active") and listed[1].startswith("#1 ready_to_close")
    waiting = json.loads(ok(run, *base, "conversations", "list", "--status", "ready_to_close", "--json"))
    assert [c["id"] for c in waiting] == [1]


# --- --json errors ---------------------------------------------------------------------------------------


def test_json_errors_are_json_with_the_http_envelope(run: Run) -> None:
    base = ("--db", "notes.db", "--user", "maya")
    ok(run, *base, "add", "message", "Hello there!")
    code, out, err = run(*base, "chain", "999", "--json")
    assert code == 1 and err == ""
    assert json.loads(out) == {"error": "not_found", "message": json.loads(out)["message"]}
    code, out, _ = run(*base, "add", "memory", "x", "--importance", "9", "--json")
    body = json.loads(out)
    assert code == 1 and body["error"] == "validation_error" and body["field"] == "importance"
    code, out, _ = run(*base, "--json", "search")  # a usage error
    assert code == 2 and json.loads(out)["error"] == "usage_error"
    code, out, err = run(*base, "chain", "999")  # without --json: a plain message on stderr
    assert code == 1 and out == "" and err.startswith("error: ")


# --- the review step from the shell ---------------------------------------------------------------------


def test_preview_shows_the_commands_and_resume_warns_before_discarding_edits(run: Run) -> None:
    base = ("--db", "notes.db", "--user", "maya")
    ok(run, *base, "add", "message", "We decided to paint the hall green because it is calm.")
    ok(run, *base, "add", "message", "I'm waiting on Dana to send the paint samples.")
    shown = ok(run, *base, "close")
    assert "narrative confirm" in shown and "narrative redirect STORYLINE_ID" in shown and "[confirm]" not in shown
    code, _, err = run(*base, "add", "message", "One more thing.")
    assert code == 1 and "waiting for review" in err and "narrative resume" in err
    assert "resumed" in ok(run, *base, "resume")  # nothing edited: no question
    ok(run, *base, "close")
    ok(run, *base, "edit", "--narrative", "The hall goes green.")
    code, _, err = run(*base, "resume", stdin="n\n")
    assert code == 1 and "discards your edits of the preview: the memory's wording" in err
    assert "The hall goes green." in ok(run, *base, "preview")  # still there
    code, out, _ = run(*base, "conversation", "resume", stdin="y\n")
    assert code == 0 and "resumed" in out
    code, _, err = run(*base, "split", "--part", ":only one")
    assert code == 1 and "use `narrative confirm` for one" in err


def memories_of(run: Run, *base: str) -> list[dict[str, object]]:
    listed: list[dict[str, object]] = json.loads(ok(run, *base, "memories", "--limit", "500", "--json"))
    return listed


def test_split_stores_the_parts_and_nothing_else(run: Run) -> None:
    """The review is the gate: a split stores exactly the parts you wrote, no machine summary beside them."""
    base = ("--db", "notes.db", "--user", "maya")
    ok(run, *base, "add", "message", "We decided to paint the hall green because it is calm.")
    ok(run, *base, "add", "message", "I'm waiting on Dana to send the paint samples.")
    ok(run, *base, "add", "message", "Also my sister Lena wants to help with the seed swap in May.")
    before = {m["id"] for m in memories_of(run, *base)}
    ok(run, *base, "close")
    home = json.loads(ok(run, *base, "storylines", "create", "Home", "--json"))["id"]
    done = json.loads(
        ok(
            run,
            *base,
            "split",
            "--part",
            f"{home}:The hall goes green; Dana sends samples.",
            "--part",
            ":Lena helps in May.",
            "--json",
        )
    )
    made = {m["id"]: m["content"] for m in done["memories"]}
    assert sorted(made.values()) == ["Lena helps in May.", "The hall goes green; Dana sends samples."]
    after = memories_of(run, *base)
    assert {m["id"] for m in after} - before == set(made)
    assert [m["id"] for m in after if m["stream"] in ("narrative", "reflection")] == sorted(made, reverse=True)


def test_memories_lists_each_fact_once(run: Run) -> None:
    base = ("--db", "notes.db", "--user", "maya")
    said = [
        "We decided to paint the hall green because it is calm.",
        "Which green, though?",
        "Sage green, like the door.",
    ]
    for i, text in enumerate(said):
        ok(
            run,
            *base,
            "add",
            "message",
            text,
            "--role",
            "user" if i != 1 else "assistant",
            "--speaker",
            "maya" if i != 1 else "rook",
        )
    shown = ok(run, *base, "memories")
    assert all(shown.count(text) == 1 for text in said), shown
    listed = memories_of(run, *base)
    assert any(m["folded_into"] for m in listed) and all("text" in m for m in listed)


def test_narratives_forward_prints_every_branch_as_a_tree(run: Run, tmp_path: Path) -> None:
    with Memory(tmp_path / "notes.db", user="maya", embedder="none", env={}) as mem:
        n1 = mem.narrative_update("Chose SQLite", [], None, "storage")
        n2 = mem.narrative_update("Tuned SQLite", [], n1.id, "storage")
        b1 = mem.narrative_update("A side branch", [], n1.id, "storage")
    lines = ok(run, "--db", "notes.db", "--user", "maya", "narratives", "--forward", str(n1.id)).splitlines()
    assert lines[0].startswith(f"#{n2.id} ") and lines[1].startswith(f"#{b1.id} ")
    assert f"← #{n1.id}" in lines[0] and f"← #{n1.id}" in lines[1]


# --- how text is shown --------------------------------------------------------------------------------------


def test_previews_are_clipped_at_a_word_and_multi_line_text_is_indented(run: Run) -> None:
    base = ("--db", "notes.db", "--user", "maya")
    assert clip("We decided to go with SQLite instead of Firebase", 30) == "We decided to go with SQLite…"
    assert clip("Maya: hello\nRook: hi", 40) == "Maya: hello / Rook: hi"
    ok(run, *base, "add", "memory", "Maya: the kitchen\nRook: noted, the kitchen")
    shown = ok(run, *base, "memories")
    head = "#1 [fact] [★★] "
    assert shown.splitlines()[:2] == [head + "Maya: the kitchen", " " * len(head) + "Rook: noted, the kitchen"]
    long = "We decided that the new kitchen cabinets will be made of solid oak because it lasts for decades " * 2
    written = ok(run, *base, "add", "message", long.strip())
    memory_line = next(line for line in written.splitlines() if line.startswith("  memory #"))
    assert memory_line.endswith("…") and memory_line.removesuffix("…").split()[-1] in long.split()


def test_help_matches_behaviour(run: Run) -> None:
    def helped_for(*args: str) -> str:
        return " ".join(ok(run, *args, "--help").split())  # as one line: help wraps

    assert "(default: the newest one waiting for review)" in helped_for("confirm")
    assert "(default: the active one)" in helped_for("close")
    helped = helped_for()
    for flag in ("--llm", "--llm-url", "--llm-model", "--llm-key", "--llm-timeout", "NARRATIVE_USER"):
        assert flag in helped
    for command in ("storylines", "conversations"):
        assert command in helped


# --- progress -------------------------------------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_on_a_terminal_and_is_silent_when_piped() -> None:
    screen = Terminal()
    with progress("reindex", stream=screen) as report:
        report(1, 4)
        report(4, 4)
    assert screen.getvalue().endswith("\rreindex [" + "#" * 30 + "] 4/4\n")
    assert "] 1/4" in screen.getvalue()
    piped = io.StringIO()
    with progress("reindex", stream=piped) as report:
        report(1, 4)
    with progress("reindex", stream=Terminal(), enabled=False) as report:  # --json
        report(1, 4)
    assert piped.getvalue() == ""


def test_reindex_reports_progress_per_batch(tmp_path: Path) -> None:
    with Memory(tmp_path / "x.db", user="maya", embedder="hashing", env={}) as mem:
        for i in range(5):
            mem.add_memory(f"fact number {i}")
        seen: list[tuple[int, int]] = []
        mem.reindex(batch_size=2, force=True, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(2, 5), (4, 5), (5, 5)]


# --- the LLM flags --------------------------------------------------------------------------------------------


def test_llm_flags_reach_the_model(run: Run, llm_server: ScriptedLLMServer) -> None:
    base = ("--db", "notes.db", "--user", "maya")
    ok(run, *base, "add", "message", "We decided to paint the hall green because it is calm.")
    llm = (
        "--llm",
        "openai",
        "--llm-url",
        llm_server.url,
        "--llm-model",
        "qwen2.5:1.5b",
        "--llm-key",
        "sk-test",
        "--llm-timeout",
        "5",
    )
    ok(run, *llm, *base, "close")  # the scripted server has no replies: every pass falls back to the rules
    assert llm_server.requests, "the close path asked the model"
    first = llm_server.requests[0]
    assert first.path == "/v1/chat/completions" and first.headers["authorization"] == "Bearer sk-test"
    assert first.body is not None and first.body["model"] == "qwen2.5:1.5b"


def test_every_setting_is_documented_in_one_place() -> None:
    documented = (Path(__file__).parent.parent / "docs" / "cli.md").read_text("utf-8")
    for name in Settings.__dataclass_fields__:
        assert f"`NARRATIVE_{name.upper()}`" in documented, name


def test_held_rows_is_read_from_the_environment_and_a_negative_bound_is_refused() -> None:
    from narrative.errors import ValidationError

    assert Settings.resolve({}).held_rows == 1_000_000
    assert Settings.resolve({"NARRATIVE_HELD_ROWS": "0"}).held_rows == 0  # no bound
    with pytest.raises(ValidationError) as error:
        Settings.resolve({"NARRATIVE_HELD_ROWS": "-5"})
    assert error.value.field == "held_rows" and "0 (no bound) or more" in str(error.value)


# --- import reads a bounded, checked file (issue 24, F7) --------------------------------------------


def test_import_refuses_what_is_not_an_export_without_a_traceback(run: Run, tmp_path: Path) -> None:
    (tmp_path / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    (tmp_path / "latin1.json").write_bytes('{"user": "sé"}'.encode("latin-1"))
    (tmp_path / "zeros.json").write_bytes(b"{" + b"\0" * 100)
    (tmp_path / "empty.json").write_bytes(b"")
    (tmp_path / "folder").mkdir()
    for source, words in (
        ("missing.json", "no file at missing.json"),
        ("photo.png", "not a JSON export"),
        ("latin1.json", "not UTF-8"),
        ("zeros.json", "binary"),
        ("empty.json", "empty"),
        ("folder", "folder"),
    ):
        code, _, err = run("import", source, "--db", "notes.db")
        assert code != 0 and words in err and "Traceback" not in err, (source, err)
    assert not (tmp_path / "notes.db").exists()  # refused before the database was opened


def test_import_reads_a_bounded_amount_of_an_endless_stream(tmp_path: Path) -> None:
    """``import -`` fed zeros without end (as ``import /dev/zero``): refused after its first chunk, not read on."""
    import subprocess
    import sys

    process = subprocess.Popen(
        [sys.executable, "-m", "narrative.interfaces.cli", "--db", str(tmp_path / "n.db"), "import", "-"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
    )
    assert process.stdin is not None and process.stderr is not None
    written, piece = 0, b"\0" * 65_536
    try:
        while written < 64 << 20:  # far more than a bounded reader takes before it gives up
            process.stdin.write(piece)
            written += len(piece)
        process.stdin.close()
    except BrokenPipeError:
        pass  # the reader stopped reading: what we want
    err = process.stderr.read().decode()
    process.wait()
    process.stderr.close()
    with contextlib.suppress(BrokenPipeError):
        process.stdin.close()
    assert written < 64 << 20, "the whole stream was read"
    assert process.returncode == 1 and "not a JSON export" in err and "Traceback" not in err


def test_an_export_file_is_readable_by_its_owner_only(run: Run, tmp_path: Path) -> None:
    ok(run, "add", "memory", "the spare key is under the third flowerpot", "--db", "notes.db")
    ok(run, "export", "-o", "mine.json", "--db", "notes.db")
    assert (tmp_path / "mine.json").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "notes.db").stat().st_mode & 0o777 == 0o600


# --- issue 25: what users of memory libraries expect ----------------------------------------------------


def test_the_default_database_lives_in_the_data_directory(run: Run, tmp_path: Path) -> None:
    where = tmp_path / "data" / "narrative" / "narrative.db"
    assert ok(run, "path").strip() == str(where)
    code, _, err = run("memories")  # a read creates nothing, not even the folder
    assert code == 1 and "no database at" in err and not where.parent.exists()
    ok(run, "add", "memory", "The spare key is under the blue pot.")
    assert where.is_file() and not (tmp_path / "narrative.db").exists()
    assert json.loads(ok(run, "path", "--json")) == {"db": str(where), "default": True, "exists": True}
    assert ok(run, "path", "--db", "other.db").strip() == "other.db"


def test_memory_show_edit_delete_and_metadata(run: Run) -> None:
    db = ("--db", "m.db", "--user", "maya")
    ok(run, *db, "add", "memory", "Water the tomatoes every morning.", "--metadata", "project=garden",
       "--metadata", "priority=3")  # fmt: skip
    ok(run, *db, "add", "memory", "Renew the car insurance in May.", "--metadata", '{"project": "home"}')
    shown = ok(run, *db, "memory", "show", "1")
    assert shown.startswith("#1 [fact] [★★] Water the tomatoes every morning.")
    assert '  metadata: {"priority": 3, "project": "garden"}' in shown
    edited = ok(run, *db, "memory", "edit", "1", "--importance", "4", "--metadata", "done=true")
    assert edited.startswith("edited #1 [fact] [★★★★]")
    assert json.loads(ok(run, *db, "memory", "show", "1", "--json"))["metadata"] == {
        "done": True, "priority": 3, "project": "garden"}  # fmt: skip
    assert "(fields: importance, metadata)" in ok(run, *db, "memory", "history", "1")
    listed = ok(run, *db, "memories", "--metadata", "project=home")
    assert listed.startswith("#2 [fact]") and "tomatoes" not in listed
    assert ok(run, *db, "memories", "--filter", '{"importance": {"gte": 5}}').strip() == "no memories match"
    code, _, err = run(*db, "memory", "edit", "1")
    assert code == 2 and "nothing to change" in err
    assert ok(run, *db, "memory", "delete", "--filter", '{"metadata.project": "home"}', "--yes").strip() == (
        "deleted 1 memory: #2"
    )
    code, _, err = run(*db, "memory", "delete", "1", "99", "--yes")
    assert code == 1 and "no memory 99: nothing was deleted" in err
    assert ok(run, *db, "memory", "delete", "1", "--yes").strip() == "deleted 1 memory: #1"


def test_search_is_a_read_unless_record_and_takes_the_filters(run: Run) -> None:
    db = ("--db", "s.db", "--user", "maya")
    ok(run, *db, "add", "message", "We decided to use SQLite because it works offline.")
    ok(run, *db, "search", "SQLite")
    assert ok(run, *db, "uses").strip() == "no uses yet"
    ok(run, *db, "search", "SQLite", "--record")
    assert "recall" in ok(run, *db, "uses")
    decisions = json.loads(ok(run, *db, "search", "SQLite", "--source", "extraction", "--json"))
    assert decisions and all(h["source"] == "extraction" for h in decisions)
    assert json.loads(ok(run, *db, "search", "SQLite", "--entity-type", "task", "--json")) == []
    assert json.loads(ok(run, *db, "search", "SQLite", "--since", "2999-01-01", "--json")) == []
    # a time with an offset or Z is read as written (it was a usage error); without one it is UTC
    assert json.loads(ok(run, *db, "search", "SQLite", "--since", "2999-01-01T00:00:00+02:00", "--json")) == []
    assert json.loads(ok(run, *db, "search", "SQLite", "--until", "2000-01-01T00:00:00Z", "--json")) == []
    assert json.loads(ok(run, *db, "search", "SQLite", "--since", "2000-01-01T09:30:00.5-05:00", "--json"))
    assert json.loads(ok(run, *db, "search", "SQLite", "--as-of", "2999-01-01T00:00:00+02:00", "--json"))
    code, _, err = run(*db, "search", "SQLite", "--as-of", "yesterday")
    assert code == 2 and "is not a time" in err
    assert ok(run, *db, "search", "SQLite", "--limit", "1", "--json").count('"id"') == 1
    code, _, err = run(*db, "search", "SQLite", "--filter", '{"strem": "decision"}')
    assert code == 1 and "no field 'strem'" in err


def test_limits_counts_and_deletes_read_as_words(run: Run) -> None:
    db = ("--db", "c.db", "--user", "maya")
    ok(run, *db, "add", "message", "Sam will send the bed measurements on Friday.")
    for bad in ("0", "-1"):
        code, _, err = run(*db, "memories", "--limit", bad)
        assert code == 2 and "--limit" in err
    status = ok(run, *db, "conversation", "status")
    assert status.count("#1 ") == 1 and "1 message ·" in status
    assert "(detected; 1 message)" in ok(run, *db, "storylines")
    said = ok(run, *db, "delete", "memory", "1", "--yes")
    assert said.startswith("deleted memory #1: 1 memory") and "{" not in said


def test_delete_user_takes_the_user_from_user(run: Run) -> None:
    ok(run, "--db", "u.db", "--user", "sam", "add", "memory", "Sam's note.")
    ok(run, "--db", "u.db", "--user", "maya", "add", "memory", "Maya's note.")
    code, _, err = run("--db", "u.db", "delete", "user", "sam", "--user", "maya", "--yes")
    assert code == 2 and "name different users" in err
    assert ok(run, "--db", "u.db", "--user", "sam", "delete", "user", "--yes").startswith("deleted user sam: 1 memory")
    code, _, err = run("--db", "u.db", "delete", "user", "--yes")
    assert code == 2 and "name the user" in err


def test_keys_create_says_what_the_key_is(run: Run) -> None:
    code, out, err = run("--db", "k.db", "--user", "maya", "keys", "create")
    assert code == 0 and out.strip().startswith("nk_") and len(out.strip().splitlines()) == 1
    assert "API key for user 'maya'" in err and "shown only this once" in err


def test_export_the_memories_as_jsonl_and_csv(run: Run) -> None:
    import csv

    db = ("--db", "x.db", "--user", "maya")
    ok(run, *db, "add", "memory", "Water the tomatoes every morning.", "--metadata", "project=garden")
    first = json.loads(ok(run, *db, "export", "--format", "jsonl").splitlines()[0])
    assert first["content"] == "Water the tomatoes every morning." and first["metadata"] == {"project": "garden"}
    [row] = list(csv.DictReader(io.StringIO(ok(run, *db, "export", "--format", "csv"))))
    assert row["id"] == str(first["id"]) and json.loads(row["metadata"]) == {"project": "garden"}


def test_a_long_message_is_exported_and_shown_whole(run: Run, tmp_path: Path) -> None:
    import csv

    end = "The last line says: the heron key is under the red bucket."
    paragraph = " ".join(["The garden plan covers beds, soil, watering and the order of planting."] * 4)
    reply = "\n\n".join([paragraph] * 17) + "\n\n    indented = True\n\n" + end  # about 5,000 characters
    with Memory(tmp_path / "x.db", user="maya", env={}) as mem:  # the real local model
        mem.remember("How should I plan the garden?")
        made = mem.remember(reply, "assistant").memories[0]
    assert 4_800 <= len(reply) <= 5_200 and end not in made.content  # the memory quotes the first passage
    db = ("--db", "x.db", "--user", "maya")
    whole = f"How should I plan the garden?\n{reply}"
    rows = {r["id"]: r for r in map(json.loads, ok(run, *db, "export", "--format", "jsonl").splitlines())}
    assert rows[made.id]["text"] == whole and rows[made.id]["content"] == made.content
    cells = {int(r["id"]): r for r in csv.DictReader(io.StringIO(ok(run, *db, "export", "--format", "csv")))}
    assert cells[made.id]["text"] == whole and cells[made.id]["content"] == made.content
    shown = ok(run, *db, "memory", "show", str(made.id))
    head = f"#{made.id} [conversation] [{'★' * made.importance}] "
    assert shown.startswith(head + "How should I plan the garden?\n") and end in shown and "…" not in shown
    pad = " " * len(head)
    assert f"\n\n{pad}{paragraph}\n" in shown and f"\n{pad}    indented = True\n" in shown  # kept as written
    assert shown.index(end) < shown.index("  time: ")
    assert json.loads(ok(run, *db, "memory", "show", str(made.id), "--json"))["text"] == whole


def test_importing_a_chat_log_draws_a_progress_bar_on_a_terminal(
    run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rows = [{"content": "I planted basil on the balcony today."}, {"content": "Basil likes sun.", "role": "assistant"}]
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), "utf-8")
    screen = Terminal()
    monkeypatch.setattr("sys.stderr", screen)
    said = ok(run, "--db", "p.db", "--user", "maya", "import", "log.jsonl")
    assert said.strip() == "imported 1 conversation (2 messages) from a JSONL log: 2 memories for maya"
    assert screen.getvalue().startswith("\rimport [") and "] 2/2" in screen.getvalue()


# --- saying plainly what went wrong or what was done (a new user's probe) -------------------------------------
# A full disk is an error message, not a traceback; ``add message -`` reads standard input (a long message cannot
# be an argument); a reversed date range is an error, not "no memories match"; ``--db ""`` is refused, not the
# default file; restoring a memory that nothing superseded says there was nothing to restore.


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
