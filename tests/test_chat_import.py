"""Chat logs into an existing user: JSONL of messages, ChatGPT's and Claude's exports, through the write path
(``remember_many``), checked whole before anything is stored, each conversation all or nothing; from Python
on both stores, and from the CLI as a subprocess (progress bar, summary, a bad line named by its number)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import narrative
from narrative.errors import InvalidTransition, StoreError, ValidationError
from narrative.validate import MAX_MESSAGE

DATA = Path(__file__).parent / "data"
CLI = [sys.executable, "-m", "narrative.interfaces.cli"]


def jsonl(*rows: dict[str, Any]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def test_jsonl_into_a_user_that_has_data(mem: narrative.Memory) -> None:
    mem.remember("Sam will send the bed measurements on Friday.")
    mem.close_conversation()
    mem.confirm_memory()
    log = jsonl(
        {"content": "I want to plant garlic in October.", "at": "2025-09-01T08:00:00Z", "meta": {"source": "notes"}},
        {"content": "Garlic likes loose soil; plant the cloves 5 cm deep.", "role": "assistant"},
        {"content": "We decided on the purple garlic because it keeps longest.", "conversation": "b", "title": "Seeds"},
    )
    seen: list[tuple[int, int]] = []
    summary = mem.import_chat(log, progress=lambda done, total: seen.append((done, total)))
    assert summary["format"] == "jsonl" and summary["conversations"] == 2 and summary["messages"] == 3
    assert summary["memories"] > 0 and seen[-1] == (3, 3)
    first, second = (mem.get_conversation(i) for i in summary["conversation_ids"])
    assert first.status.value == second.status.value == "archived" and second.title == "Seeds"
    assert first.started_at.isoformat().startswith("2025-09-01T08:00")
    assert next(m.content for m in mem.messages(first.id)) == "I want to plant garlic in October."
    assert mem.search("garlic", filters={"metadata.source": "notes"})
    assert len(mem.list_conversations()) == 3  # the user's own conversation stays


def test_chatgpt_export_follows_the_current_branch(mem: narrative.Memory) -> None:
    summary = mem.import_chat((DATA / "chatgpt-conversations.json").read_text("utf-8"))
    assert summary["format"] == "chatgpt" and summary["conversations"] == 2
    assert summary["skipped"] == 2  # the hidden system message and the empty last answer
    tomatoes = mem.messages(summary["conversation_ids"][0])
    assert [m.role.value for m in tomatoes] == ["user", "assistant", "user"]
    assert "regenerated away" not in " ".join(m.content for m in tomatoes)
    assert tomatoes[0].created_at.isoformat() == "2024-05-01T10:00:00+00:00"
    assert mem.get_conversation(summary["conversation_ids"][0]).title == "Balcony tomatoes"
    hits = mem.search("Sungold", filters={"metadata.imported_from": "chatgpt"})
    assert hits and "Sungold" in hits[0].text


def test_claude_export(mem: narrative.Memory) -> None:
    summary = mem.import_chat((DATA / "claude-conversations.json").read_text("utf-8"), format="claude")
    assert summary["conversations"] == 1 and summary["messages"] == 2 and summary["skipped"] == 1
    said = mem.messages(summary["conversation_ids"][0])
    assert said[1].content.startswith("Alcântara") and said[1].role.value == "assistant"


@pytest.mark.parametrize(
    ("log", "said"),
    [
        (jsonl({"content": "fine"}) + "{not json\n", "line 2: not JSON"),
        (jsonl({"content": "fine"}, {"content": "x", "role": "narrator"}), "line 2: role must be one of"),
        (jsonl({"content": "fine"}, {"content": "x", "at": "yesterday"}), "line 2: at must be a time"),
        ("\n" + jsonl({"content": "fine"}, {"text": "x", "mood": "ok"}), "line 3: unknown keys mood"),
        (jsonl({"content": "   "}), "line 1: content must be non-empty text"),
        ('[{"mapping": 3}]', "conversation 1: a ChatGPT conversation has a mapping"),
        # a speaker or title is checked as remember checks a speaker: stored, it broke the user's own export
        (jsonl({"content": "fine"}, {"content": "x", "speaker": "Ann\u0000"}), "line 2: speaker holds a NUL"),
        (jsonl({"content": "x", "title": "Party\ud800", "conversation": 1}), "line 1: title is not valid Unicode"),
        (jsonl({"content": "x", "title": "Party\uffff", "conversation": 1}), "line 1: title is not valid Unicode"),
    ],
)
def test_a_bad_line_is_named_and_nothing_is_stored(mem: narrative.Memory, log: str, said: str) -> None:
    with pytest.raises(ValidationError, match=said):
        mem.import_chat(log)
    assert mem.list_conversations() == [] and mem.messages() == []


def test_a_message_without_a_time_in_a_dated_log_takes_the_time_before_it(mem: narrative.Memory) -> None:
    log = jsonl(
        {"content": "We chose oak cabinets for the kitchen.", "at": "2024-05-29T16:26:40Z"},
        {"content": "Oak is a durable choice for cabinets.", "role": "assistant"},
        {"content": "The contractor Bruno starts on June 10.", "at": "2024-05-29T16:28:20Z"},
        {"content": "An undated note in a conversation of its own.", "conversation": "b"},
    )
    summary = mem.import_chat(log)
    dated = mem.messages(summary["conversation_ids"][0])
    assert [m.created_at.isoformat() for m in dated] == [
        "2024-05-29T16:26:40+00:00",
        "2024-05-29T16:26:40+00:00",
        "2024-05-29T16:28:20+00:00",
    ]
    assert not mem.search("durable oak cabinets", filters={"time": {"gte": "2026-01-01T00:00:00Z"}}, record=False)
    [undated] = mem.messages(summary["conversation_ids"][1])  # no time at all: stamped when stored, stored last
    assert undated.created_at.year >= 2026


def test_conversations_are_stored_in_the_order_they_began(mem: narrative.Memory) -> None:
    """ChatGPT's export lists the newest conversation first: stored in file order, the chain ran backwards and
    the oldest conversation was taken for where the user left off."""
    log = jsonl(
        {"content": "We chose oak cabinets for the kitchen.", "conversation": "new", "at": "2024-05-29T16:26:40Z"},
        {"content": "My bike chain keeps slipping on third gear.", "conversation": "old", "at": "2023-03-28T10:40:00Z"},
    )
    summary = mem.import_chat(log)
    first, second = (mem.get_conversation(i) for i in summary["conversation_ids"])
    assert first.started_at.year == 2023 and second.started_at.year == 2024
    assert "oak cabinets" in mem.context("where was I?", record=False).text.split("<recent_messages")[1]


def test_a_conversation_held_already_is_not_imported_again(mem: narrative.Memory) -> None:
    old = jsonl(
        {"content": "My budget for the Portugal trip is 2000 euros.", "at": "2025-04-01T10:00:00Z"},
        {"content": "Noted: 2000 euros.", "role": "assistant", "at": "2025-04-01T10:00:10Z"},
    )
    first = mem.import_chat(old)
    again = mem.import_chat(old)
    assert again["conversations"] == again["messages"] == 0 and again["already_imported"] == 1
    newer = old + jsonl({"content": "The flight is booked for May 3.", "conversation": 2, "at": "2025-04-20T09:00:00Z"})
    grown = mem.import_chat(newer)  # a newer export that still holds the old conversation
    assert grown["conversations"] == 1 and grown["already_imported"] == 1 and grown["messages"] == 1
    assert len(mem.list_conversations()) == 2
    hits = mem.search("Portugal budget", record=False)
    assert sum(1 for h in hits if "2000 euros" in h.text and "Portugal" in h.text) == 1
    changed = old.replace("2000 euros.", "2500 euros.")  # not the same conversation: imported
    assert mem.import_chat(changed)["conversations"] == 1
    assert first["already_imported"] == 0


def test_a_conversation_twice_in_one_log_is_stored_once(mem: narrative.Memory) -> None:
    turn = {"content": "The caterer is Luigi.", "at": "2025-04-01T10:00:00Z", "title": "Party"}
    summary = mem.import_chat(jsonl({**turn, "conversation": 1}, {**turn, "conversation": 2}))
    assert summary["conversations"] == 1 and summary["already_imported"] == 1


def test_a_message_over_five_million_characters_is_refused_with_its_line(mem: narrative.Memory) -> None:
    log = jsonl({"content": "A short note."}, {"content": "x" * (MAX_MESSAGE + 1)})
    with pytest.raises(ValidationError, match=r"line 2: content has 5,000,001 characters; a message holds at most"):
        mem.import_chat(log)
    assert mem.messages() == []


def test_an_active_conversation_is_not_mixed_with_an_import(mem: narrative.Memory) -> None:
    mem.remember("Still talking here.")
    with pytest.raises(InvalidTransition, match="is active: close and confirm it"):
        mem.import_chat(jsonl({"content": "From the log."}))
    assert len(mem.messages()) == 1


@pytest.mark.sqlite_only
def test_a_failure_while_storing_keeps_what_came_before_and_nothing_after(mem: narrative.Memory) -> None:
    mem.store.conn.execute(  # type: ignore[attr-defined]
        "CREATE TEMP TRIGGER refuse BEFORE INSERT ON messages WHEN NEW.content LIKE '%disk full%'"
        " BEGIN SELECT RAISE(ABORT, 'the disk is full'); END"
    )
    log = jsonl(
        {"content": "First conversation, first turn.", "conversation": 1},
        {"content": "First conversation, second turn.", "conversation": 1},
        {"content": "Second conversation starts well.", "conversation": 2},
        {"content": "Then the disk full message.", "conversation": 2},
        {"content": "Third conversation.", "conversation": 3},
    )
    with pytest.raises(StoreError, match=r"line 3: .*the disk is full.*1 conversation \(2 messages\) before it"):
        mem.import_chat(log)
    assert [c.message_count for c in mem.list_conversations()] == [2]
    assert [m.content for m in mem.messages()] == [
        "First conversation, first turn.",
        "First conversation, second turn.",
    ]
    assert all(m.conversation_id == mem.list_conversations()[0].id for m in mem.list_memories(limit=100))
    mem.store.conn.execute("DROP TRIGGER refuse")  # type: ignore[attr-defined]
    again = mem.import_chat(jsonl({"content": "After the failure, a new import works."}))
    assert again["conversations"] == 1


# --- the command line ---------------------------------------------------------------------------------


def run(tmp_path: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NARRATIVE_")}
    env["PYTHONPATH"] = str(Path(narrative.__file__).parent.parent)
    command = [*CLI, "--db", str(tmp_path / "n.db"), "--user", "maya", "--embedder", "none", *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, env=env, timeout=300, check=False)


def test_cli_imports_a_chat_log_with_a_summary(tmp_path: Path) -> None:
    done = run(tmp_path, "import", str(DATA / "chatgpt-conversations.json"))
    assert done.returncode == 0, done.stderr
    assert "imported 2 conversations (5 messages, 2 skipped) from a chatgpt export: " in done.stdout
    listed = run(tmp_path, "conversations")
    assert "Balcony tomatoes" in listed.stdout and "archived" in listed.stdout
    as_json = run(tmp_path, "import", "-", "--format", "jsonl", "--json", stdin=jsonl({"content": "One more."}))
    assert json.loads(as_json.stdout)["conversations"] == 1


def test_cli_names_the_bad_line(tmp_path: Path) -> None:
    bad = tmp_path / "log.jsonl"
    bad.write_text(jsonl({"content": "fine"}) + '{"content": "x", "role": 7}\n', "utf-8")
    done = run(tmp_path, "import", str(bad))
    assert done.returncode == 1
    assert done.stderr.startswith("error: line 2: role must be one of")
    assert "Traceback" not in done.stderr
    assert not list(tmp_path.glob("n.db*"))  # refused before the database was opened: no file made for it


def _long_log(conversations: int, each: int) -> str:
    return jsonl(
        *(
            {
                "content": f"Note {c}.{i}: the {['garden', 'budget', 'kayak'][i % 3]} plan needs step {i}.",
                "role": "user" if i % 2 == 0 else "assistant",
                "conversation": c,
                "at": 1_700_000_000 + c * 100_000 + i * 60,
            }
            for c in range(conversations)
            for i in range(each)
        )
    )


def test_a_long_conversation_is_imported_without_a_savepoint_a_turn(mem: narrative.Memory) -> None:
    """PostgreSQL gives every savepoint that writes a subtransaction id, and past 64 in one transaction every
    statement slows down (it reads the subtransaction log to decide what is visible): a 1,000-message
    conversation, one transaction, imported at 35 messages a second instead of 58.  Its turns take no savepoint
    each, and neither do the store's own statements inside a turn."""
    if mem.store.backend != "postgres":
        pytest.skip("savepoints cost nothing that grows on SQLite")
    store: Any = mem.store
    made: list[str] = []
    control = store._control

    def counted(sql: str, *rest: Any) -> Any:
        if sql.startswith("SAVEPOINT"):
            made.append(sql)
        return control(sql, *rest)

    store._control = counted
    try:
        summary = mem.import_chat(_long_log(1, 150))
    finally:
        store._control = control
    assert summary["messages"] == 150 and summary["memories"] >= 150
    assert len(made) < 64


def test_a_turn_that_fails_inside_an_import_leaves_that_conversation_out(
    mem: narrative.Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn has no savepoint of its own inside an import: its failure undoes its whole conversation (and only
    that), the import says how far it got, and the store takes the next write (PostgreSQL's aborted transaction
    is rolled back, not left to fail the next statement)."""
    import narrative.write.turn as turn_module

    real = turn_module.store_passages  # type: ignore[attr-defined]  # the name the write path calls
    calls = {"n": 0}

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 20:  # the second conversation's fifth turn
            raise StoreError("the disk is full")
        return real(*args, **kwargs)

    monkeypatch.setattr(turn_module, "store_passages", failing)
    with pytest.raises(StoreError, match="1 conversation \\(15 messages\\) before it are stored"):
        mem.import_chat(_long_log(3, 15))
    monkeypatch.setattr(turn_module, "store_passages", real)
    [kept] = mem.list_conversations()
    assert len(mem.store.list_messages("alice", conversation_id=kept.id)) == 15
    assert mem.store.count_rows("messages", "alice") == 15
    mem.remember("The store still takes a turn.")
    assert mem.store.count_rows("messages", "alice") == 16
