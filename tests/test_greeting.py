"""The startup greeting in both states, and gentle idle awareness."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

import narrative
from conftest import DEMO_NOW, DemoBuilder, FakeClock, copy_db
from narrative.interfaces.serialize import plain
from narrative.read.greeting import IDLE_INVITATION


@pytest.fixture
def maya(build_demo: DemoBuilder, tmp_path: Path, clock: FakeClock) -> Iterator[narrative.Memory]:
    path = copy_db(build_demo(embedder="none"), tmp_path / "demo.db")
    clock.now = DEMO_NOW
    memory = narrative.Memory(path, user="maya", embedder="none", clock=clock, env={})
    yield memory
    memory.close()


def test_an_empty_memory_says_hello(mem: narrative.Memory) -> None:
    hello = mem.greet()
    assert hello.kind == "fresh" and hello.text == "Hello. Nothing is open yet."
    assert not (hello.open_threads or hello.waiting_ons or hello.stale or hello.recent_decisions)


def test_fresh_greeting_after_the_demo(maya: narrative.Memory) -> None:
    hello = maya.greet()
    assert hello.kind == "fresh" and hello.conversation is None
    text = hello.text
    # where was I: the memory of the last closed conversation
    assert hello.latest_memory is not None and hello.latest_memory.content in text
    assert text.index("Where you left off (2026-03-12)") < text.index("Open threads:")
    # open threads newer than five days; older ones are stale; Sam's measurements are settled
    assert [e.name for e in hello.open_threads] == ["Open question: how do we handle two volunteers sharing one plot?"]
    stale = {e.name for e in hello.stale}
    assert "draw the plot map before anything else" in stale
    assert "Gone quiet (open longer than 5 days):" in text and "open since 2026-03-02" in text
    assert not hello.waiting_ons and "Sam to send" not in text.split("Where you left off")[0]
    # decisions of the last seven days: the beds table (12 March) and the badge (9 March), not SQLite (2 March)
    assert [e.data["what"] for e in hello.recent_decisions] == [
        "keep each bed as a row in a beds table, with its row and position",
        "a 'last watered' badge on each plot",
    ]
    assert "Decided in the last 7 days:" in text
    json.dumps(plain(hello))  # serialisable for the CLI, MCP and HTTP
    assert hello.to_dict()["latest_memory"]["conversation_id"] == maya.list_conversations()[0].id


def test_fresh_greeting_mentions_a_conversation_waiting_for_review(maya: narrative.Memory) -> None:
    maya.start_conversation("loose ends")
    maya.remember("I need to order seeds by Friday.", speaker="maya")
    maya.close_conversation()
    hello = maya.greet()
    assert hello.pending_review is not None and "“loose ends” is waiting for your review" in hello.text
    assert any(e.name == "order seeds by Friday" for e in hello.open_threads)
    assert "due Friday" in hello.text


def test_resume_greeting_when_a_conversation_is_active(maya: narrative.Memory, clock: FakeClock) -> None:
    maya.start_conversation("Seeds")
    maya.remember("I need to order tomato seeds for the beds.", speaker="maya")
    maya.remember("Which varieties do you want?", "assistant", speaker="Rook")
    maya.remember("Cherry tomatoes and San Marzano.", speaker="maya")
    clock.advance(hours=3)
    hello = maya.greet()
    assert hello.kind == "resume" and hello.conversation is not None and hello.conversation.title == "Seeds"
    assert [m.content for m in hello.recent_messages][-1] == "Cherry tomatoes and San Marzano."
    assert hello.running_narrative is not None and not hello.running_narrative.sealed
    text = hello.text
    assert text.startswith("Welcome back. We were in the middle of “Seeds” (3 messages; the last one 3 hours ago)")
    assert f"Where we were: {hello.running_narrative.summary}" in text
    assert "maya: Cherry tomatoes and San Marzano." in text
    maya.pause_conversation()
    assert "You paused it" in maya.greet().text
    assert maya.greet().to_dict()["conversation"]["is_paused"] is True


def test_idle_invitation_once_per_quiet_spell(mem: narrative.Memory, clock: FakeClock) -> None:
    assert mem.idle_check() is None  # nothing active
    mem.add_message("Let me think about the budget.", speaker="alex")
    assert mem.idle_check() is None  # not quiet yet
    clock.advance(minutes=31)  # Settings.idle_after_minutes == 30
    assert mem.idle_check() == IDLE_INVITATION
    active = mem.active_conversation()
    assert active is not None and active.idle_notified_at is not None
    clock.advance(minutes=60)
    assert mem.idle_check() is None  # never twice in one spell
    mem.add_message("Back: the budget is fine.", speaker="alex")  # a message ends the spell
    active = mem.active_conversation()
    assert active is not None and active.idle_notified_at is None
    clock.advance(minutes=45)
    assert mem.idle_check() == IDLE_INVITATION


def test_a_paused_conversation_is_never_nudged(mem: narrative.Memory, clock: FakeClock) -> None:
    mem.add_message("Sitting with this one.", speaker="alex")
    mem.pause_conversation()
    clock.advance(days=2)
    assert mem.idle_check() is None
    mem.unpause_conversation()
    assert mem.idle_check() == IDLE_INVITATION


def test_idle_threshold_comes_from_settings(db_path: Path, clock: FakeClock) -> None:
    with narrative.Memory(db_path, user="alice", embedder="none", clock=clock, env={}, idle_after_minutes=5) as mem:
        mem.add_message("Hm.", speaker="alex")
        clock.advance(minutes=6)
        assert mem.idle_check() == IDLE_INVITATION
    with narrative.Memory(
        db_path, user="alice", embedder="none", clock=clock, env={"NARRATIVE_STALE_AFTER_DAYS": "1"}
    ) as mem:
        mem.store.update_conversation("alice", mem.active_conversation().id, idle_notified_at=None)  # type: ignore[union-attr]
        clock.advance(timedelta(minutes=10))
        assert mem.idle_check() is None  # 30 minutes by default
        assert mem.settings.stale_after_days == 1


def test_cli_greet_threads_resolve_and_idle(maya: narrative.Memory, clock: FakeClock) -> None:
    from click.testing import CliRunner

    from narrative.interfaces.cli import _register, cli

    _register()
    path = maya.settings.db
    task = maya.open_threads("task")[0]
    maya.close()
    runner = CliRunner()
    base = ["--db", path, "--user", "maya", "--embedder", "none"]

    def run(*args: str) -> str:
        done = runner.invoke(cli, [*base, *args])
        assert done.exit_code == 0, done.output
        return done.output

    assert run("greet").startswith("Welcome back.")
    assert json.loads(run("greet", "--json"))["kind"] == "fresh"
    assert f"#{task.id} [task]" in run("threads")
    assert all(t["entity_type"] == "task" for t in json.loads(run("threads", "--type", "task", "--json")))
    assert "draw the plot map" in run("threads", "--stale")
    assert "resolved" in run("resolve", str(task.id))
    assert f"#{task.id} " not in run("threads")
    assert json.loads(run("idle", "--json")) == {"invitation": None}
