"""What a person changes by hand reaches what an agent is told: an edited memory's text, a deleted memory's
message (found by a new user's probe: the context kept saying "April 1" after the edit to "April 8", and a
deleted memory's sentence stayed in the context, the greeting and the storyline card, while ``check`` then
reported its message as missing passages, which ``reindex`` could not give it)."""

from __future__ import annotations

import narrative
from conftest import FakeClock


def test_an_edited_memory_is_in_the_context_and_the_storyline_card_quotes_the_edit(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="maya", embedder="none", clock=clock, env={}) as mem:
        mem.remember("The launch is on April 1.")
        mem.close_conversation()
        [memory] = mem.confirm_memory().memories
        mem.edit_memory(memory.id, content="The launch is on April 8.")
        block = mem.context("when is the launch?", record=False)
        assert any(r.memory.id == memory.id for r in block.memories)
        card = block.text.split("</storyline>")[0]
        assert "April 8" in card and "April 1" not in card


def test_a_deleted_memory_s_message_leaves_the_context_the_greeting_the_card_and_check(
    db: str, clock: FakeClock
) -> None:
    with narrative.Memory(db, user="maya", clock=clock, env={}) as mem:  # the model: check looks at passages
        result = mem.remember("My bike is a blue Gazelle.")
        mem.delete_memory(result.memories[0].id)
        assert "Gazelle" not in mem.context("what bike do I have?", record=False).text
        assert "Gazelle" not in str(mem.greet())
        assert all("Gazelle" not in s.summary for s in mem.list_storylines())
        assert _checked(mem)
        assert mem.store.count_rows("messages") == 1  # the conversation's record keeps it


def test_a_message_whose_own_memory_stays_is_still_shown(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="maya", clock=clock, env={}) as mem:
        mem.remember("My bike is a blue Gazelle.")
        second = mem.remember("The garden needs water on Fridays.")
        mem.delete_memory(second.memories[0].id)
        block = mem.context("what bike do I have?", record=False).text
        assert "Gazelle" in block and "garden" not in block
        assert _checked(mem)


def _checked(mem: narrative.Memory) -> bool:
    report = mem.check()
    assert {c["check"]: c["status"] for c in report["checks"]}["embedder"] == "ok", report
    return bool(report["ok"])


def test_an_edit_is_quoted_by_the_open_narrative_link(db: str, clock: FakeClock) -> None:
    """The link of a conversation still going on quotes the edit (a sealed link stays as it was: history)."""
    with narrative.Memory(db, user="maya", embedder="none", clock=clock, env={}) as mem:
        result = mem.remember("The launch is on April 1.")
        [link] = mem.list_narratives()
        assert not link.sealed and "April 1" in link.summary
        mem.edit_memory(result.memories[0].id, content="The launch is on April 8.")
        [again] = mem.list_narratives()
        assert "April 8" in again.summary and "April 1" not in again.summary
