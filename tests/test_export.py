"""Export (lossless JSON, readable Markdown) and import: export → import → export is byte-identical."""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import narrative
from conftest import CLOCK_START, DemoBuilder, FakeClock, copy_db
from narrative.errors import InvalidTransition, ValidationError
from narrative.providers.embed import HashingEmbedder

Snap = Callable[[Any], dict[str, list[tuple[Any, ...]]]]


@pytest.fixture(scope="module")
def demo_template(build_demo: DemoBuilder, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo with vectors (deterministic hashing embedder), plus a use, a key and an open conversation."""
    path = copy_db(build_demo(embedder="hashing"), tmp_path_factory.mktemp("export") / "demo.db")
    later = FakeClock(CLOCK_START + timedelta(hours=1))
    with narrative.Memory(path, user="maya", embedder="hashing", clock=later, env={}) as mem:
        mem.search("garden app", k=3)  # a recorded use, so uses and use_references have rows
        decision = mem.list_memories(stream="decision", limit=1)[0]
        mem.review_decision(decision.id, "kept", note="still right")  # an answer to the decision audit
        mem.create_api_key(label="laptop")
        mem.start_conversation("open")  # an active conversation with a pending message too
        mem.remember("I need to buy compost.", speaker="maya")
    return path


@pytest.fixture
def maya(demo_template: Path, tmp_path: Path, clock: FakeClock) -> Iterator[narrative.Memory]:
    path = tmp_path / "source.db"
    shutil.copy(demo_template, path)
    memory = narrative.Memory(path, user="maya", embedder="hashing", clock=clock, env={})
    yield memory
    memory.close()


def fresh(tmp_path: Path, clock: FakeClock, name: str = "restored.db", **kw: Any) -> narrative.Memory:
    options: dict[str, Any] = {"embedder": "hashing", **kw}
    return narrative.Memory(tmp_path / name, user="maya", clock=clock, env={}, **options)


def test_export_import_export_is_byte_identical(maya: narrative.Memory, tmp_path: Path, clock: FakeClock) -> None:
    first = maya.export("json")
    with fresh(tmp_path, clock) as restored:
        result = restored.import_data(first)
        assert result["reembedded"] == {"memories": 0, "storylines": 0, "passages": 0}
        second = restored.export("json")
    assert second == first
    document = json.loads(first)
    assert all(
        document["counts"][t] > 0
        for t in (
            "conversations",
            "messages",
            "memories",
            "memory_vectors",
            "entities",
            "state_deltas",
            "narratives",
            "uses",
            "use_references",
            "routing_decisions",
            "storyline_vectors",
            "storyline_bindings",
            "memory_links",
            "decision_reviews",
        )
    )
    assert result["rows"] == document["counts"]


def test_the_restored_memory_works(maya: narrative.Memory, tmp_path: Path, clock: FakeClock) -> None:
    with fresh(tmp_path, clock) as restored:
        restored.import_data(maya.export("json"))
        assert [c.id for c in restored.list_conversations()] == [c.id for c in maya.list_conversations()]
        hits = restored.search("SQLite Firebase", k=3, mode="keyword", record=False)  # full-text rebuilt
        originals = maya.search("SQLite Firebase", k=3, mode="keyword", record=False)
        assert hits and hits[0].memory.id == originals[0].memory.id
        assert restored.search("measurements of the beds", k=3, mode="vector", record=False)  # vectors restored
        assert restored.greet().text == maya.greet().text
        assert restored.active_conversation() is not None  # lifecycle state kept
        restored.remember("Compost ordered.", speaker="maya")  # and the write path carries on


def test_the_json_follows_the_documented_schema(maya: narrative.Memory) -> None:
    document = json.loads(maya.export("json"))
    assert document["format"] == "narrative-export" and document["schema_version"] == 1
    assert document["user"] == "maya" and document["migrations"]
    assert set(document) == {"format", "schema_version", "user", "migrations", "embedding_models", "counts", "tables"}
    tables = document["tables"]
    assert tables["users"] == [{"id": "maya", "created_at": tables["users"][0]["created_at"]}]
    vector = tables["memory_vectors"][0]
    assert vector["model"] == "hashing-v1:256" and len(base64.b64decode(vector["vector"])) == 256 * 4
    assert document["embedding_models"] == {
        "hashing-v1:256": len(tables["memory_vectors"])
        + len(tables["storyline_vectors"])
        + len(tables["passage_vectors"])
    }
    memory = next(m for m in tables["memories"] if m["stream"] == "research")
    assert isinstance(memory["details"], dict) and isinstance(memory["user_reviewed"], bool)
    assert [r["id"] for r in tables["memories"]] == sorted(r["id"] for r in tables["memories"])
    assert all(r["user_id"] == "maya" for t in tables.values() for r in t if "user_id" in r)
    doc = (Path(__file__).resolve().parents[1] / "docs" / "export-format.md").read_text()
    assert all(f"`{name}`" in doc for name in tables)  # every table is documented


def test_markdown_is_readable_and_links_to_the_archive(maya: narrative.Memory) -> None:
    text = maya.export("markdown")
    assert text.startswith("# The narrative memory of maya")
    assert "## Your Story" in text and "## Open threads" in text and "## Archived conversations" in text
    for conversation in maya.list_conversations():
        assert f'<a id="conversation-{conversation.id}"></a>' in text
    assert "(#conversation-1)" in text
    assert "Maya decided to go with SQLite instead of Firebase" in text
    assert "waiting on: Sam to send the measurements of the beds — resolved 2026-03-12" in text
    assert "- **maya** (09:15): Morning! I want to start the community garden app this week." in text


FENCE_LEFT_OPEN = "The start of some code:\n```python\nprint('hi')\n\nprint('never closed')"
MESSAGES = [
    "Here is the plan:\n\n- beds first\n- then water\n\nSecond paragraph, after a blank line.",
    "```python\nprint('a message that opens with a fence')\n```",
    FENCE_LEFT_OPEN,
    "After the fence: an item of its own.",
    "One line.",
]


def _items(section: list[str]) -> list[list[str]]:
    """The top-level list items of a Markdown section: each a ``- `` line and the lines after it up to the next
    line at the left margin (an unindented line ends the item in CommonMark, whatever it says)."""
    items: list[list[str]] = []
    for line in section:
        if line.startswith("- "):
            items.append([line])
        elif items and (not line or line.startswith("  ")):
            items[-1].append(line)
        elif items:
            break
    while items and items[-1][-1] == "":
        items[-1].pop()
    return items


def _said(item: list[str], head: str) -> str:
    """What an item says after ``head``: its first line's rest and its later lines with the item's indent taken
    off (every later line must carry it, so a blank line, a list or a fence stays in the item)."""
    assert item[0].startswith(head), item
    assert all(not line or line.startswith("  ") for line in item[1:]), item
    first = item[0].removeprefix(head).removeprefix(" ")
    later = [line.removeprefix("  ") for line in item[1:]]
    return "\n".join([first, *later] if first else later)


def test_markdown_keeps_every_message_in_its_list_item(mem: narrative.Memory) -> None:
    """A message of several paragraphs, a list or a code fence is one list item of the transcript, its words
    whole; a fence it leaves open is closed inside the item, so the next message is an item of its own.  The same
    for a note of several lines under "Also remembered"."""
    for text in MESSAGES:
        mem.remember(text, speaker="Maya")
    mem.add_memory("A note\n\n```\nits fence left open", stream="decision")
    mem.add_memory("The next note.", stream="decision")
    lines = mem.export("markdown").splitlines()
    transcript = _items(lines[lines.index("## Archived conversations") :])
    assert len(transcript) == len(MESSAGES)
    said = [_said(item, item[0][: item[0].index("):") + 2]) for item in transcript]
    assert said[:2] == MESSAGES[:2] and said[3:] == MESSAGES[3:]
    assert said[2] == FENCE_LEFT_OPEN + "\n```"  # closed within its item: the words are the message's
    assert transcript[1][0].endswith("):") and transcript[1][1] == "  ```python"  # a fence opens a line
    assert transcript[3][0].endswith("): After the fence: an item of its own.")
    notes = _items(lines[lines.index("Also remembered:") :])
    assert [_said(item, item[0][: item[0].index("]") + 1]) for item in notes] == [
        "A note\n\n```\nits fence left open\n```",
        "The next note.",
    ]


def test_import_refuses_a_user_with_data(maya: narrative.Memory, snapshot: Snap) -> None:
    text = maya.export("json")
    before = snapshot(maya.store)
    with pytest.raises(InvalidTransition, match="already has data"):
        maya.import_data(text)
    assert snapshot(maya.store) == before


def test_import_refuses_a_user_whose_default_storyline_was_renamed(
    maya: narrative.Memory, tmp_path: Path, clock: FakeClock
) -> None:
    """ "Chit-chat" (once "Small talk") is the person's: an import would silently make it "Small talk" again."""
    text = maya.export("json")
    with fresh(tmp_path, clock) as target:
        target.your_story()  # makes maya with her default storylines (a read would make nothing)
        [small_talk] = [s for s in target.list_storylines() if s.name == "Small talk"]
        target.rename_storyline(small_talk.id, "Chit-chat")
        with pytest.raises(InvalidTransition, match=r"already has data \(1 storylines\)"):
            target.import_data(text)
        assert "Chit-chat" in [s.name for s in target.list_storylines()]


def test_a_copy_under_another_name_in_the_same_file_gets_fresh_ids(maya: narrative.Memory) -> None:
    text = maya.export("json")
    maya.your_story(user="bob")
    result = maya.import_data(text, user="bob")
    assert result["rows"] == json.loads(text)["counts"]
    copy = json.loads(maya.export("json", user="bob"))
    original = json.loads(text)
    assert not {m["id"] for m in copy["tables"]["memories"]} & {m["id"] for m in original["tables"]["memories"]}
    assert canonical(copy) == canonical(original)  # the same rows, renumbered
    maya.delete_user("bob")  # the copy is independent: deleting it leaves the original whole
    assert maya.export("json") == text


def canonical(document: dict[str, Any]) -> dict[str, Any]:
    """An export with ids renumbered from 1 in order and the user renamed: equal for copies of one user."""
    from narrative.store.dump_rows import remap_row, renumber

    tables = document["tables"]
    ids = renumber(tables, lambda _table: 1)
    return {
        t: [
            {k: v for k, v in remap_row(t, r, ids, n).items() if k != "user_id" and t != "users"}
            for n, r in enumerate(rows, 1)
        ]
        for t, rows in tables.items()
    }


def test_delete_then_import_into_the_same_file(maya: narrative.Memory) -> None:
    text = maya.export("json")
    maya.delete_user("maya")
    result = maya.import_data(text)
    assert result["user"] == "maya" and maya.export("json") == text


def test_import_under_another_name(maya: narrative.Memory, tmp_path: Path, clock: FakeClock) -> None:
    with fresh(tmp_path, clock) as restored:
        result = restored.import_data(maya.export("json"), user="ines")
        assert (result["user"], result["exported_user"]) == ("ines", "maya")
        assert json.loads(restored.export("json", user="ines"))["user"] == "ines"
        assert restored.list_memories(user="ines") and not restored.list_memories(user="maya")


def test_import_reembeds_when_the_model_differs(maya: narrative.Memory, tmp_path: Path, clock: FakeClock) -> None:
    document = json.loads(maya.export("json"))
    with fresh(tmp_path, clock, embedder=HashingEmbedder(dims=64)) as restored:
        result = restored.import_data(json.dumps(document))
        assert result["reembedded"] == {
            "memories": len(document["tables"]["memory_vectors"]),
            "storylines": len(document["tables"]["storyline_vectors"]),
            "passages": len(document["tables"]["passage_vectors"]),
        }
        again = json.loads(restored.export("json"))
        assert again["embedding_models"] == {"hashing-v1:64": sum(result["reembedded"].values())}
        assert restored.search("measurements of the beds", k=3, mode="vector", record=False)
        assert again["tables"]["memories"] == document["tables"]["memories"]  # only the vectors changed


def test_import_reports_its_re_embedding_progress(
    maya: narrative.Memory, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from narrative.write import restore

    monkeypatch.setattr(restore, "REEMBED_CHUNK", 7)
    seen: list[tuple[int, int]] = []
    with fresh(tmp_path, clock, embedder=HashingEmbedder(dims=64)) as restored:
        result = restored.import_data(maya.export("json"), progress=lambda done, total: seen.append((done, total)))
    total = result["reembedded"]["memories"]
    assert total > 7 and seen[-1] == (total, total)
    assert [done for done, _ in seen] == [*range(7, total, 7), total]


def test_keyword_only_import_keeps_the_vectors(maya: narrative.Memory, tmp_path: Path, clock: FakeClock) -> None:
    text = maya.export("json")
    with fresh(tmp_path, clock, embedder="none") as restored:
        assert restored.import_data(text)["reembedded"] == {"memories": 0, "storylines": 0, "passages": 0}
        assert restored.export("json") == text


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[]",
        json.dumps({"format": "something-else", "schema_version": 1, "user": "x", "tables": {}}),
        json.dumps({"format": "narrative-export", "schema_version": 99, "user": "x", "tables": {}}),
        json.dumps({"format": "narrative-export", "schema_version": 1, "user": "x", "tables": {"memories": [1]}}),
        json.dumps({"format": "narrative-export", "schema_version": 1, "user": "", "tables": {}}),
        json.dumps(
            {"format": "narrative-export", "schema_version": 1, "user": "x", "tables": {"planets": [{"id": 1}]}}
        ),
        json.dumps(
            {
                "format": "narrative-export",
                "schema_version": 1,
                "user": "x",
                "tables": {"users": [{"id": "x", "created_at": "2026-01-01", "mood": "good"}]},
            }
        ),
    ],
)
def test_malformed_exports_are_refused(mem: narrative.Memory, snapshot: Snap, text: str) -> None:
    mem.your_story()
    before = snapshot(mem.store)
    with pytest.raises(ValidationError):
        mem.import_data(text)
    assert snapshot(mem.store) == before


def test_unknown_format_is_refused(mem: narrative.Memory) -> None:
    with pytest.raises(ValidationError):
        mem.export("xml")


def test_cli_export_and_import(maya: narrative.Memory, tmp_path: Path) -> None:
    from narrative.interfaces.cli import _register, cli

    _register()
    maya.close()
    source, target, out = tmp_path / "source.db", tmp_path / "cli.db", tmp_path / "maya.json"
    runner = CliRunner()
    base = ["--db", str(source), "--user", "maya", "--embedder", "hashing"]
    done = runner.invoke(cli, [*base, "export", "--format", "json", "-o", str(out), "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["file"] == str(out)
    markdown = runner.invoke(cli, [*base, "export", "--format", "markdown"])
    assert markdown.output.startswith("# The narrative memory of maya")
    restored = runner.invoke(cli, ["--db", str(target), "--user", "maya", "--embedder", "hashing", "import", str(out)])
    assert restored.exit_code == 0, restored.output
    again = runner.invoke(cli, ["--db", str(target), "--user", "maya", "--embedder", "hashing", "export"])
    assert again.output == out.read_text()
