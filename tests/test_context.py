"""``Memory.context``: the layout on the demo, the budget, truncation order, JSON shape, recorded uses, the CLI."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import narrative
from conftest import DEMO_NOW, DemoBuilder, FakeClock, copy_db
from narrative.errors import ValidationError
from narrative.interfaces.cli import main as cli_main
from narrative.model import OPEN_ENTITY_TYPES, InfluenceType, Retention, UseKind
from narrative.providers.tokens import ApproxTokenCounter
from narrative.read.context import LAYOUT, ContextBlock, LineCachedCounter
from narrative.read.scene import CURRENT_SCENE_SIZE, LEADING_UP_SIZE

COUNTER = ApproxTokenCounter()


# --- fixtures: the bundled demo, written once per module with the real MiniLM model -----------------------


@pytest.fixture
def maya(build_demo: DemoBuilder, tmp_path: Path) -> Iterator[narrative.Memory]:
    """A copy of the demo for one test (MiniLM, a clock the day after the last session)."""
    copy = copy_db(build_demo(loaded_at=DEMO_NOW), tmp_path / "demo.db")
    memory = narrative.Memory(copy, user="maya", env={}, clock=FakeClock(DEMO_NOW))
    yield memory
    memory.close()


def section_names(text: str) -> list[str]:
    return [m for m in re.findall(r"^<([a-z_]+)[ >]", text, flags=re.MULTILINE) if m != "context"]


# --- the block on the demo -----------------------------------------------------------------------------------


def test_demo_block_has_every_section_in_the_documented_order(maya: narrative.Memory) -> None:
    block = maya.context("what did we decide about notifications for the garden app?", 2000)
    text = block.text
    assert text.startswith("<context>\n") and text.endswith("\n</context>")
    assert section_names(text) == [name for name in LAYOUT if name != "about_you"]  # Maya never says who she is
    last = maya.messages(limit=1)[0]
    assert last.position == 32 and block.chat_length == 32
    assert "(Current chat has 32 messages)" in text
    # the current storyline is the one of the latest message, with its rolling summary
    assert block.storyline is not None and block.storyline.id == last.storyline_id
    assert f'<storyline name="{block.storyline.name}">' in text
    assert block.storyline.summary.splitlines()[-1].strip() in text
    # the recent messages are the latest conversation's, in order, newest last
    assert block.conversation is not None and block.conversation.title == "The map arrives"
    recent = text.split("<recent_messages", 1)[1]
    assert "maya: Sam sent the measurements yesterday, so the plot map is unblocked." in recent
    assert recent.rstrip().endswith(
        "Rook: Then the first story for Lena's speech is found. Two more to go.\n</recent_messages>\n</context>"
    )
    # open threads: the active questions, waiting-ons and tasks, newest first
    threads = maya.store.list_entities("maya", entity_types=sorted(OPEN_ENTITY_TYPES), active=True)
    assert threads and [e.id for e in block.threads] == [e.id for e in threads][: len(block.threads)]
    assert "- question: Open question: how do we handle two volunteers sharing one plot?" in text
    # the decision that answers the question is recalled; nothing in the scene repeats a shown message
    scene = text.split("<scene_memory>", 1)[1].split("</scene_memory>", 1)[0]
    assert "a 'last watered' badge on each plot" in scene
    assert "Sam sent the measurements yesterday, so the plot map is unblocked.\n" not in scene
    assert "<latest_narrative topic=" in text and "<other_storylines>" in text
    # what the demo bound to the current storyline, and the garden goal that went quiet (read/agenda.py)
    assert f'<bindings storyline="{block.storyline.name}">' in text
    assert "- goal: Find three stories for Lena's speech (ongoing)" in text
    reminders = text.split("<reminders>", 1)[1].split("</reminders>", 1)[0]
    assert "- stale goal: Launch the garden app before the spring planting" in reminders
    assert block.agenda is not None and [g.goal.name for g in block.agenda.stale_goals] == [
        "Launch the garden app before the spring planting"
    ]


def test_scene_positions_come_from_the_source_messages(maya: narrative.Memory) -> None:
    block = maya.context("Lena's wedding speech and the stories", 2000)
    assert block.memories
    for recalled in block.memories:
        memory = recalled.memory
        expected = memory.positions[-1] if memory.positions else block.chat_length
        assert recalled.position == expected
    entries = [e for b in block.to_dict()["scene_memory"]["buckets"] for e in b["entries"]]
    assert sorted(e["position"] for e in entries) == sorted(r.position for r in block.memories)
    assert [e["position"] for e in entries] == sorted(e["position"] for e in entries)


def test_nothing_is_said_twice(maya: narrative.Memory) -> None:
    block = maya.context("the plot map and the bed layout", 2000)
    shown = {m.id for m in block.recent}
    assert shown
    for recalled in block.memories:
        if recalled.memory.stream.value == "conversation":
            assert not set(recalled.memory.message_ids) <= shown
    texts = [r.text for r in block.memories]
    assert len(texts) == len(set(texts))
    for message in block.recent:
        assert f"] {message.content}\n" not in block.text


@pytest.mark.parametrize("budget", [1000, 2000, 8000])
def test_the_budget_is_respected_and_counted_with_the_same_counter(maya: narrative.Memory, budget: int) -> None:
    block = maya.context("what is still open for the garden app and the wedding?", budget)
    assert block.tokens == COUNTER.count(block.text) <= budget
    assert block.counter == COUNTER.identity
    assert sum(s.tokens for s in block.sections) <= budget
    for info in block.sections:
        assert info.tokens <= info.limit


@pytest.mark.parametrize("budget", [50, 120, 300])
def test_tiny_budgets_are_respected_too(maya: narrative.Memory, budget: int) -> None:
    block = maya.context("garden", budget, record=False)
    assert block.tokens == COUNTER.count(block.text) <= budget


def test_a_small_budget_cuts_small_sections_to_their_share(maya: narrative.Memory) -> None:
    wide = maya.context("garden", 8000, record=False)
    narrow = maya.context("garden", 1000, record=False)
    assert narrow.tokens <= 1000 < wide.tokens
    by_name = {s.name: s for s in narrow.sections}
    assert by_name["open_threads"].limit == 100 and by_name["open_threads"].tokens <= 100
    assert by_name["open_threads"].dropped > 0  # the oldest threads went first
    shown = [e.name for e in narrow.threads]
    assert shown == [e.name for e in wide.threads][: len(shown)]


def test_line_cached_counter_is_exact() -> None:
    cached = LineCachedCounter()
    for text in ["", "\n", "a\n\n  b", "<x>\n[★★] Hi there.\n    ⤷ IMMEDIATELY AFTER\n\n...Later...\n", "💔 a  b\t\n"]:
        assert cached.count(text) == COUNTER.count(text) == cached.count(text)


# --- truncation order on a long chat --------------------------------------------------------------------------


def long_chat(mem: narrative.Memory, positions: dict[str, list[int]], words: int = 60) -> int:
    """700 raw messages; memories about 'compost' made from the given positions (~120 tokens each)."""
    messages = [mem.add_message(f"message number {i} about nothing in particular") for i in range(1, 701)]
    syllables = ("ka", "lo", "mi", "nu", "pe", "ra", "so", "ti")
    lexicon = [a + b + "ism" for a in syllables for b in ("ban", "dor", "fel", "gim", "hov", "jut", "kes", "lum")]
    for bucket, where in positions.items():
        for p in where:
            filler = " ".join(random.Random(p).sample(lexicon, words))  # distinct texts: none repeats another
            mem.add_memory(
                f"compost note from {bucket} at {p}: {filler}", message_ids=[messages[p - 1].id], importance=3
            )
    return len(messages)


def buckets_of(block: ContextBlock) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for r in block.memories:
        age = block.chat_length - r.position
        name = "current" if age < CURRENT_SCENE_SIZE else "leading" if age < LEADING_UP_SIZE else "story"
        found.setdefault(name, []).append(r.position)
    return found


def test_truncation_drops_story_so_far_first_then_leading_up(mem: narrative.Memory) -> None:
    positions = {"story": [10, 40, 80], "leading": [300, 400], "current": [690, 695]}  # 7 = the hits asked for
    long_chat(mem, positions)
    full = mem.context("compost note", 8000, record=False)
    assert sorted(buckets_of(full)["story"]) == positions["story"]
    block = mem.context("compost note", 1000, record=False)
    assert block.tokens <= 1000
    kept = buckets_of(block)
    assert sorted(kept.get("current", [])) == positions["current"]  # Current Scene is kept
    if kept.get("story"):
        assert sorted(kept.get("leading", [])) == positions["leading"]  # Leading Up is cut only after Story So Far
    assert len(block.memories) < len(full.memories)
    dropped_story = [p for p in positions["story"] if p not in kept.get("story", [])]
    assert dropped_story == positions["story"][: len(dropped_story)]  # oldest first


def test_an_oversized_current_scene_loses_its_least_relevant_memories(mem: narrative.Memory) -> None:
    long_chat(mem, {"current": list(range(660, 700, 2))}, words=60)
    block = mem.context("compost note", 1000, record=False)
    assert block.tokens <= 1000
    assert block.memories
    ranks = sorted(r.rank for r in block.memories)
    assert ranks == list(range(1, len(ranks) + 1))  # the best ranked survive


def test_key_points_stand_in_for_compressed_memories(mem: narrative.Memory) -> None:
    message = mem.add_message("We talked at length about the compost bins and the rota for turning them.")
    memory = mem.add_memory(
        "A long exchange on compost bins: who turns them, how often, and the weekly rota.", message_ids=[message.id]
    )
    mem.store.update_memory("alice", memory.id, retention=Retention.KEY_POINTS, key_points="compost rota agreed")
    mem.add_message("unrelated")
    block = mem.context("compost bins", 2000, record=False)
    recalled = [r for r in block.memories if r.memory.id == memory.id]
    assert recalled and recalled[0].text == "compost rota agreed"
    assert "[★★] compost rota agreed" in block.text


# --- structure, uses, edge cases --------------------------------------------------------------------------------


def test_to_dict_is_json_with_every_section(maya: narrative.Memory) -> None:
    data = json.loads(json.dumps(maya.context("watering schedule", 2000).to_dict()))
    assert data["layout"] == list(LAYOUT)
    assert set(data["sections"]) == set(LAYOUT)
    assert {"query", "budget", "tokens", "counter", "use_id", "chat_length", "text"} <= set(data)
    assert data["storyline"]["participants"] and data["recent_messages"]["conversation"]["id"]
    assert data["recent_messages"]["messages"][-1]["position"] == 32
    scene = data["scene_memory"]
    assert scene["chat_length"] == 32 and scene["buckets"]
    first = scene["memories"][0]
    assert {"memory_id", "rank", "origin", "score", "why", "position", "text", "retention"} <= set(first)
    assert data["open_threads"][0]["entity_type"] in {"question_opened", "waiting_on", "task"}
    assert data["recent_messages"]["messages"][-1]["content"].startswith("Then the first story")
    assert [b["name"] for b in data["bindings"]] == ["Find three stories for Lena's speech"]
    assert data["stale_goals"][0]["why"]["quiet_days"] == 10 and data["decisions_to_review"] == []


def test_context_records_a_use_naming_each_memory_shown(maya: narrative.Memory) -> None:
    block = maya.context("SQLite or Firebase?", 2000)
    assert block.use_id is not None
    use = maya.get_use(block.use_id)
    assert use.kind is UseKind.CONTEXT and use.query == "SQLite or Firebase?"
    assert [r.memory_id for r in use.references] == [r.memory.id for r in block.memories]
    assert {r.influence_type for r in use.references} == {InfluenceType.RETRIEVAL}
    assert [r.reasoning for r in use.references] == [r.why for r in block.memories]
    searched = [r for r in block.memories if r.origin == "search"]
    assert searched and all("recency" in r.why for r in searched)


def test_record_false_stores_no_use(maya: narrative.Memory) -> None:
    before = len(maya.list_uses(500))
    block = maya.context("SQLite or Firebase?", 2000, record=False)
    assert block.use_id is None and len(maya.list_uses(500)) == before


def test_an_empty_memory_gives_an_empty_frame(mem: narrative.Memory) -> None:
    block = mem.context("anything at all", 1000)
    assert block.text == "<context>\n</context>"
    assert block.memories == () and block.use_id is None  # nobody wrote for alice: nothing is recorded
    mem.add_memory("Water the tomatoes.")
    assert mem.context("anything at all", 1000).use_id is not None  # now she exists: her use is recorded


@pytest.mark.parametrize(("query", "budget"), [("", 2000), ("ok", 49), ("ok", 2_000_000), ("ok", "many"), ("ok", True)])
def test_bad_input_is_refused_and_records_nothing(mem: narrative.Memory, query: str, budget: object) -> None:
    with pytest.raises(ValidationError):
        mem.context(query, budget)  # type: ignore[arg-type]
    assert mem.list_uses() == []


def test_cli_prints_the_block(maya: narrative.Memory, capsys: pytest.CaptureFixture[str]) -> None:
    db = maya.settings.db
    maya.close()
    cli_main(["--db", db, "--user", "maya", "context", "what did we decide about notifications?", "--budget", "2000"])
    out = capsys.readouterr().out
    assert out.startswith("<context>\n") and "</context>\n-- " in out and "/2000 tokens" in out
    cli_main(["--db", db, "--user", "maya", "--embedder", "none", "context", "plot map", "--no-record", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["use_id"] is None and data["layout"] == list(LAYOUT)


def test_overlapping_exchanges_say_each_sentence_once_in_the_scene(mem: narrative.Memory) -> None:
    """Exchanges overlap (a turn with the one before, then that turn with the next); compressed older ones read
    as key points of both: the scene says each sentence once, and the chat's length is a count."""
    said = [
        ("I want to plant tomatoes on the balcony.", "user"),
        ("Tomatoes need six hours of sun on the balcony.", "assistant"),
        ("The balcony faces south, so tomatoes get sun all day.", "user"),
        ("South-facing balconies are ideal for tomatoes.", "assistant"),
    ]
    for text, role in said:
        mem.remember(text, role)
    for i in range(30):
        mem.remember(f"Unrelated chat number {i} about the weather and trains.", "user" if i % 2 == 0 else "assistant")
    text = mem.context("tomatoes balcony sun", 1500).text
    scene = text[text.index("<scene_memory>") : text.index("</scene_memory>")]
    assert "(Current chat has 34 messages)" in scene
    for sentence, _ in said:
        assert scene.count(sentence) == 1, (sentence, scene)
