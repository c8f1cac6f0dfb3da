"""History (issue 23 item 6): every change to a memory is an event, kept (without text) after a delete.

Through the Python API on both stores: each kind the engine makes (created on every write path, edited,
confirmed by the review, deleted as a tombstone), the kinds the supersession step records through
``narrative.write.history.record`` (superseded, restored), ids that are never given twice, export and import
carrying the events, the migration and old exports giving earlier memories a history, and the CLI.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import narrative
from conftest import CLOCK_START, DemoBuilder, FakeClock, copy_db
from narrative.errors import NotFound
from narrative.interfaces.cli import main
from narrative.model import EventKind, MemoryEvent
from narrative.store.dump_rows import remap_row, renumber
from narrative.store.sqlite import SqliteStore
from narrative.write import history

TURNS = [
    ("user", "We decided to use zinnias instead of marigolds because bees love them."),
    ("assistant", "Zinnias it is. What comes next?"),
    ("user", "I'm waiting on Tomas to send the seed catalogue."),
]


def kinds(events: list[MemoryEvent]) -> list[str]:
    return [e.kind.value for e in events]


def session(mem: narrative.Memory, turns: list[tuple[str, str]], title: str = "garden") -> int:
    conversation = mem.start_conversation(title)
    for role, text in turns:
        mem.remember(text, role, speaker="alice" if role == "user" else "rook")
    mem.close_conversation()
    return conversation.id


# --- the kinds the engine makes ---------------------------------------------------------------------------


def test_an_added_memory_is_created_then_edited_with_old_and_new_text(mem: narrative.Memory) -> None:
    made = mem.add_memory("I live in Berlin.")
    [created] = mem.history(made.id)
    assert (created.kind, created.old_text, created.new_text) == (EventKind.CREATED, "", "I live in Berlin.")
    assert created.created_at == made.created_at and created.memory_id == made.id and created.detail == {}

    mem.edit_memory(made.id, content="I live in Lisbon now.")
    mem.edit_memory(made.id, importance=4)  # no new text: the event keeps the text as it was
    mem.edit_memory(made.id, content="I live in Lisbon now.")  # changes nothing: no event
    events = mem.history(made.id)
    assert kinds(events) == ["created", "edited", "edited"]
    assert (events[1].old_text, events[1].new_text, events[1].detail) == (
        "I live in Berlin.",
        "I live in Lisbon now.",
        {"fields": ["content"]},
    )
    assert (events[2].old_text, events[2].new_text) == ("I live in Lisbon now.", "I live in Lisbon now.")
    assert events[2].detail == {"fields": ["importance"]}
    assert events[0].created_at < events[1].created_at < events[2].created_at


def test_every_write_path_stores_a_created_event_first(mem: narrative.Memory) -> None:
    session(mem, TURNS)
    result = mem.confirm_memory()
    mem.add_memories([{"content": "Tomas grows beans."}, {"content": "The shed is blue.", "stream": "decision"}])
    mem.start_conversation("more")
    mem.remember("I need to order the zeppelin tomato seeds.", speaker="alice")
    made = mem.list_memories(limit=1000)
    streams = {m.stream.value for m in made}
    assert {"conversation", "decision", "narrative", "fact"} <= streams
    for memory in made:
        first = mem.history(memory.id)[0]
        assert first.kind is EventKind.CREATED and first.new_text == memory.content, memory
        assert first.created_at == memory.created_at
    assert result.memories and all(kinds(mem.history(m.id)) == ["created", "confirmed"] for m in result.memories)


def test_the_review_confirms_and_keeps_the_proposal_it_reworded(mem: narrative.Memory) -> None:
    cid = session(mem, TURNS)
    proposal = mem.get_memory_preview(cid).narrative
    mem.edit_preview(cid, "Zinnias, not marigolds: the bees love them. Tomas owes us the catalogue.")
    [stored] = mem.confirm_memory(cid).memories
    created, confirmed = mem.history(stored.id)
    assert created.new_text == stored.content == confirmed.new_text
    assert confirmed.kind is EventKind.CONFIRMED and confirmed.old_text == proposal
    assert confirmed.detail == {"conversation_id": cid}

    plain = session(mem, [("user", "The watering can leaks; I will buy a new one.")], "can")
    [kept] = mem.confirm_memory(plain).memories
    assert mem.history(kept.id)[1].old_text == ""  # confirmed as proposed: nothing reworded


def test_a_split_confirms_each_part(mem: narrative.Memory) -> None:
    cid = session(mem, TURNS)
    story = mem.your_story().id
    parts: list[dict[str, Any]] = [
        {"narrative": "Zinnias beat marigolds.", "storyline_id": story},
        {"narrative": "Tomas owes a catalogue."},
    ]
    stored = mem.split_memory(cid, parts).memories
    assert len(stored) == 2
    for memory, part in zip(stored, parts, strict=True):
        events = mem.history(memory.id)
        assert kinds(events) == ["created", "confirmed"] and events[1].new_text == part["narrative"]


# --- deletes: a tombstone without text -------------------------------------------------------------------


def test_a_deleted_memory_keeps_its_events_without_any_text(mem: narrative.Memory) -> None:
    made = mem.add_memory("The locker code is 4711.")
    mem.edit_memory(made.id, content="The locker code is 8812.")
    before = mem.history(made.id)
    mem.delete_memory(made.id)
    with pytest.raises(NotFound):
        mem.get_memory(made.id)
    events = mem.history(made.id)
    assert kinds(events) == ["created", "edited", "deleted"]
    assert [e.created_at for e in events[:2]] == [e.created_at for e in before]  # when it happened stays
    assert all(e.old_text == "" and e.new_text == "" for e in events)
    assert [e.detail for e in events] == [{}, {}, {"with": "memory"}]  # an edit's detail goes too
    assert "4711" not in repr(events) and "8812" not in repr(events)
    with pytest.raises(NotFound):
        mem.history(made.id, user="bob")  # another user's tombstone is not there for bob


def test_deleting_a_conversation_or_a_storyline_leaves_tombstones(mem: narrative.Memory) -> None:
    cid = session(mem, TURNS)
    confirmed = mem.confirm_memory(cid).memories[0]
    ids = [m.id for m in mem.list_memories(conversation_id=cid, limit=500)]
    mem.delete_conversation(cid)
    assert kinds(mem.history(confirmed.id)) == ["created", "confirmed", "deleted"]
    for memory_id in ids:
        last = mem.history(memory_id)[-1]
        assert last.kind is EventKind.DELETED and last.detail == {"with": "conversation"}
        assert all(not (e.old_text or e.new_text or e.detail.get("conversation_id")) for e in mem.history(memory_id))

    storyline = mem.create_storyline("Bikes")
    bike = mem.add_memory("The bike needs a new chain.", storyline_id=storyline.id)
    mem.delete_storyline(storyline.id, move_to_your_story=False)
    assert mem.history(bike.id)[-1].detail == {"with": "storyline"}


def test_a_deleted_users_events_go_with_the_user(mem: narrative.Memory) -> None:
    made = mem.add_memory("Bob keeps the spare key under the pot.", user="bob")
    mem.delete_memory(made.id, user="bob")
    mem.add_memory("Bob again.", user="bob")
    assert mem.store.count_rows("memory_events", "bob") == 3
    mem.add_memory("Alice's own note.")
    mem.delete_user("bob")
    assert mem.store.count_rows("memory_events", "bob") == 0
    with pytest.raises(NotFound):
        mem.history(made.id, user="bob")
    assert mem.store.count_rows("memory_events", "alice") == 1


def test_an_id_is_never_given_twice(mem: narrative.Memory) -> None:
    first = mem.add_memory("first")
    newest = mem.add_memory("newest")
    mem.delete_memory(newest.id)  # the highest id: SQLite would give it again without the events
    after = mem.add_memory("after the delete")
    assert after.id > newest.id > first.id
    assert kinds(mem.history(after.id)) == ["created"] and kinds(mem.history(newest.id)) == ["created", "deleted"]


# --- superseded and restored: what the supersession step records ------------------------------------------


def test_record_appends_superseded_and_restored(mem: narrative.Memory, clock: FakeClock) -> None:
    berlin = mem.add_memory("I live in Berlin.")
    lisbon = mem.add_memory("The trams in Lisbon are yellow.")  # no correction: the events below are made by hand
    store = mem.store
    history.record(
        store, "alice", berlin.id, "superseded", berlin.content, berlin.content, clock(), {"superseded_by": lisbon.id}
    )
    history.record(
        store,
        "alice",
        berlin.id,
        EventKind.RESTORED,
        berlin.content,
        berlin.content,
        clock(),
        {"superseded_by": lisbon.id},
    )
    events = mem.history(berlin.id)
    assert kinds(events) == ["created", "superseded", "restored"]
    assert events[1].detail == {"superseded_by": lisbon.id}
    with pytest.raises(ValueError):
        history.record(store, "alice", berlin.id, "forgotten", "", "", clock())


# --- export and import --------------------------------------------------------------------------------------


def _with_history(mem: narrative.Memory, clock: FakeClock) -> dict[str, int]:
    """Every kind of event, a tombstone in the middle of the ids and one at the top."""
    cid = session(mem, TURNS)
    mem.edit_preview(cid, "Zinnias over marigolds, for the bees.")
    confirmed = mem.confirm_memory(cid).memories[0]
    berlin = mem.add_memory("I live in Berlin.")
    lisbon = mem.add_memory("I live in Lisbon now.")  # supersedes Berlin: a superseded event
    mem.edit_memory(lisbon.id, content="I live in Lisbon, by the river.")
    gone = mem.add_memory("A note that goes.")
    mem.add_memory("A note that stays.")
    mem.delete_memory(gone.id)
    top = mem.add_memory("The newest note, deleted too.")
    mem.delete_memory(top.id)
    return {"confirmed": confirmed.id, "berlin": berlin.id, "lisbon": lisbon.id, "gone": gone.id, "top": top.id}


def test_export_import_carries_the_history(mem: narrative.Memory, databases: Any, clock: FakeClock) -> None:
    ids = _with_history(mem, clock)
    first = mem.export("json")
    tables = json.loads(first)["tables"]
    events = tables["memory_events"]
    assert {e["kind"] for e in events} == {"created", "edited", "confirmed", "superseded", "deleted"}
    assert {ids["gone"], ids["top"]} <= {e["memory_id"] for e in events} - {m["id"] for m in tables["memories"]}
    with narrative.Memory(databases.fresh(), user="alice", embedder="none", clock=clock, env={}) as restored:
        result = restored.import_data(first)
        assert result["rows"]["memory_events"] == len(events)
        second = restored.export("json")
        if mem.store.backend == "sqlite":  # a fresh file gives the same ids: the same bytes
            assert second == first
        assert canonical(json.loads(second)) == canonical(json.loads(first))  # PostgreSQL: ids from its sequences
        new = memory_ids(json.loads(second)["tables"])
        mapped = dict(zip(memory_ids(tables), new, strict=True))
        assert kinds(restored.history(mapped[ids["gone"]])) == ["created", "deleted"]
        assert restored.history(mapped[ids["berlin"]])[1].detail == {
            "superseded_by": mapped[ids["lisbon"]],
            "reason": "now: lisbon, was berlin",
        }
        assert restored.add_memory("made after the import").id > max(new)  # above the tombstones too


def memory_ids(tables: dict[str, list[dict[str, Any]]]) -> list[int]:
    """Every memory id an export names, sorted: its memories' and its tombstones'."""
    return sorted({m["id"] for m in tables["memories"]} | {e["memory_id"] for e in tables["memory_events"]})


def canonical(document: dict[str, Any]) -> dict[str, Any]:
    """An export with every id renumbered from 1 in order: equal for copies of one user's rows."""
    tables = document["tables"]
    ids = renumber(tables, lambda _table: 1)
    return {
        t: [
            {k: v for k, v in remap_row(t, r, ids, n).items() if k != "user_id" and t != "users"}
            for n, r in enumerate(rows, 1)
        ]
        for t, rows in tables.items()
    }


def test_a_copy_in_the_same_file_renumbers_tombstones_too(mem: narrative.Memory, clock: FakeClock) -> None:
    ids = _with_history(mem, clock)
    text = mem.export("json")
    mem.your_story(user="bob")
    mem.import_data(text, user="bob")
    copy = json.loads(mem.export("json", user="bob"))["tables"]
    original = json.loads(text)["tables"]
    assert not {e["memory_id"] for e in copy["memory_events"]} & {e["memory_id"] for e in original["memory_events"]}
    berlin = next(e for e in copy["memory_events"] if e["kind"] == "superseded")
    assert berlin["detail"]["superseded_by"] in {m["id"] for m in copy["memories"]}
    assert [e["kind"] for e in copy["memory_events"]] == [e["kind"] for e in original["memory_events"]]
    assert mem.export("json") == text
    assert kinds(mem.history(ids["gone"])) == ["created", "deleted"]  # alice's own history is untouched


def test_an_export_from_before_history_gets_one_on_import(mem: narrative.Memory, databases: Any) -> None:
    cid = session(mem, TURNS)
    mem.edit_preview(cid, "Zinnias over marigolds.")
    confirmed = mem.confirm_memory(cid).memories[0]
    note = mem.add_memory("The shed is green.")
    mem.edit_memory(note.id, content="The shed is blue.")
    document = json.loads(mem.export("json"))
    del document["tables"]["memory_events"], document["counts"]["memory_events"]
    with narrative.Memory(databases.fresh(), user="alice", embedder="none", env={}) as restored:
        restored.import_data(json.dumps(document))
        edited = restored.history(note.id)
        assert kinds(edited) == ["created", "edited"]
        assert (edited[0].new_text, edited[1].old_text, edited[1].new_text) == (
            "The shed is green.",
            "The shed is green.",
            "The shed is blue.",
        )
        assert all(e.detail == {"from": "before history"} and e.created_at == note.created_at for e in edited)
        reviewed = restored.history(confirmed.id)
        assert kinds(reviewed) == ["created", "confirmed"] and reviewed[1].old_text == confirmed.original_content
        for memory in restored.list_memories(limit=1000):
            assert restored.history(memory.id)[0].kind is EventKind.CREATED


# --- the migration gives earlier memories a history (SQLite file) ---------------------------------------------


def test_the_migration_gives_a_files_memories_a_history(tmp_path: Path) -> None:
    path = tmp_path / "older.db"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    older = [n for n in _migration_names() if n < "0009"]
    for name in older:
        raw.executescript(_migration_sql(name))
        raw.execute("INSERT INTO schema_migrations VALUES (?, ?)", (name, CLOCK_START.isoformat()))
    stamp = CLOCK_START.isoformat()
    raw.execute("INSERT INTO users VALUES ('alice', ?)", (stamp,))
    rows = [
        (1, "fact", "agent", "A plain note.", None, 0),
        (2, "fact", "agent", "Edited text.", "First text.", 0),
        (3, "narrative", "narrative", "Reviewed text.", "The proposal.", 1),
    ]
    for mid, stream, source, content, original, reviewed in rows:
        raw.execute(
            "INSERT INTO memories(id, user_id, stream, source, content, original_content, user_reviewed, created_at)"
            " VALUES (?, 'alice', ?, ?, ?, ?, ?, ?)",
            (mid, stream, source, content, original, reviewed, stamp),
        )
    raw.close()
    store = SqliteStore(path)
    try:
        got = {
            mid: [(e.kind.value, e.old_text, e.new_text) for e in store.memory_events("alice", mid)]
            for mid in (1, 2, 3)
        }
        assert got == {
            1: [("created", "", "A plain note.")],
            2: [("created", "", "First text."), ("edited", "First text.", "Edited text.")],
            3: [("created", "", "Reviewed text."), ("confirmed", "The proposal.", "Reviewed text.")],
        }
        assert all(e.created_at == CLOCK_START for e in store.memory_events("alice", 2))
    finally:
        store.close()


@pytest.mark.postgres
def test_the_migration_gives_a_databases_memories_a_history(monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    from conftest import pg_server
    from narrative.store.postgres import PostgresStore
    from narrative.store.postgres import base as pg_base

    server = pg_server()
    url = server.bare_schema()
    names = pg_base.migration_names()
    with monkeypatch.context() as patch:
        patch.setattr(pg_base, "migration_names", lambda: [n for n in names if n < "0007"])
        PostgresStore(url).close()
    stamp = CLOCK_START.isoformat()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO users VALUES ('alice', %s)", (stamp,))
        conn.execute(
            "INSERT INTO memories(user_id, stream, source, content, original_content, user_reviewed, created_at)"
            " VALUES ('alice', 'narrative', 'narrative', 'Reviewed text.', 'The proposal.', 1, %s) RETURNING id",
            (stamp,),
        )
    store = PostgresStore(url)
    try:
        [made] = store.list_memories("alice")
        got = [(e.kind.value, e.old_text, e.new_text) for e in store.memory_events("alice", made.id)]
        assert got == [("created", "", "Reviewed text."), ("confirmed", "The proposal.", "Reviewed text.")]
    finally:
        store.close()
        server.drop(url)


def _migration_names() -> list[str]:
    from narrative.store.sqlite.base import migration_names

    return migration_names()


def _migration_sql(name: str) -> str:
    from importlib import resources

    return resources.files("narrative.store.migrations.sqlite").joinpath(name).read_text("utf-8")


def test_every_memory_of_the_demo_has_a_history(build_demo: DemoBuilder, tmp_path: Path) -> None:
    path = copy_db(build_demo(embedder="hashing"), tmp_path / "demo.db")
    with narrative.Memory(path, user="maya", embedder="hashing", clock=FakeClock(datetime(2026, 4, 1)), env={}) as mem:
        made = mem.list_memories(limit=10_000)
        assert len(made) > 20
        for memory in made:
            events = mem.history(memory.id)
            assert events[0].kind is EventKind.CREATED
            assert (EventKind.CONFIRMED in {e.kind for e in events}) == memory.user_reviewed


# --- the CLI ------------------------------------------------------------------------------------------------


def test_cli_memory_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "cli.db")

    def run(*args: str) -> str:
        capsys.readouterr()
        main(["--db", db, "--user", "maya", "--embedder", "none", *args])
        return capsys.readouterr().out

    made = json.loads(run("add", "memory", "I live in Berlin.", "--json"))
    run("delete", "memory", str(made["id"]), "--yes")
    again = json.loads(run("add", "memory", "My favourite colour is blue.", "--json"))
    mem_id = str(again["id"])
    with narrative.Memory(db, user="maya", embedder="none", env={}) as mem:
        mem.edit_memory(again["id"], content="My favourite colour is green.")
    text = run("memory", "history", mem_id)
    assert text.splitlines()[0] == f"memory #{mem_id} (2 events)"
    assert '"My favourite colour is blue." → "My favourite colour is green."' in text and "(fields: content)" in text
    data = json.loads(run("memory", "history", mem_id, "--json"))
    assert [e["kind"] for e in data["events"]] == ["created", "edited"] and data["deleted"] is False
    gone = run("memory", "history", str(made["id"]))
    assert gone.splitlines()[0] == f"memory #{made['id']} (deleted)"
    assert "Berlin" not in gone and "nothing of its text is kept" in gone
    with pytest.raises(SystemExit):
        run("memory", "history", "999")
    assert "memory 999 not found" in capsys.readouterr().err
