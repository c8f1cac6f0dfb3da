"""The Koshi narrative chain: narrative_update, the three search modes, walks, stamping, recall.

A narrative is a small immutable link {summary, memory_ids, previous link, topic};
memories are stamped with the link that was active when they were stored, so one
memory is a door into the whole thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

import narrative
from narrative.errors import InvalidTransition, NotFound, SealedNarrative, ValidationError
from narrative.model import MemoryItem, Narrative
from narrative.read import chain
from narrative.write import narrate

Snap = Callable[[Any], dict[str, list[tuple[Any, ...]]]]


@dataclass
class Thread:
    """A storage-design thread: three links, each connecting the memories made under the one before."""

    first_memory: MemoryItem  # stored before any link: narrative_id is None
    n1: Narrative
    under_n1: tuple[MemoryItem, MemoryItem]
    n2: Narrative
    under_n2: MemoryItem
    n3: Narrative


@pytest.fixture
def thread(mem: narrative.Memory) -> Thread:
    a = mem.add_memory("We will store everything in one SQLite file.", stream="decision")
    n1 = mem.narrative_update("Chose SQLite as the embedded store", [a.id], None, "storage")
    b1 = mem.add_memory("WAL mode lets readers run beside the writer.")
    b2 = mem.add_memory("FTS5 gives BM25 keyword search for free.")
    n2 = mem.narrative_update("Tuned SQLite with WAL and FTS5", [b1.id, b2.id], n1.id, "storage")
    c = mem.add_memory("Reciprocal rank fusion merges keyword and vector lists.")
    n3 = mem.narrative_update("Ranking fuses BM25 with vectors", [c.id, b2.id], n2.id, "search")
    return Thread(a, n1, (b1, b2), n2, c, n3)


# --- narrative_update ---------------------------------------------------------------------------


def test_narrative_update_appends_a_sealed_link(mem: narrative.Memory) -> None:
    fact = mem.add_memory("The launch is on Friday.")
    link = mem.narrative_update("  Settled the launch date  ", [fact.id, fact.id], None, " launch ")
    assert link.summary == "Settled the launch date"
    assert link.topic == "launch"
    assert link.memory_ids == (fact.id,)  # duplicates collapse, order kept
    assert link.previous_narrative_id is None
    assert link.sealed and link.sealed_at is not None
    assert link.user_id == "alice"
    follow = mem.narrative_update("Moved it to Monday", [], link.id, "launch")
    assert follow.previous_narrative_id == link.id


def test_narrative_update_inherits_the_storyline_of_its_previous_link(mem: narrative.Memory) -> None:
    mem.your_story()  # makes alice (a read no longer does)
    story = mem.store.your_story("alice")
    assert story is not None
    first = mem.narrative_update("Began", [], None, "t", storyline_id=story.id)
    second = mem.narrative_update("Went on", [], first.id, "t")
    assert second.storyline_id == story.id


@pytest.mark.parametrize("summary", ["", "   ", "x" * 2001])
def test_narrative_update_refuses_a_bad_summary(mem: narrative.Memory, snapshot: Snap, summary: str) -> None:
    mem.your_story()  # makes alice (a read no longer does)
    before = snapshot(mem.store)
    with pytest.raises(ValidationError) as caught:
        mem.narrative_update(summary, [], None, "t")
    assert caught.value.field == "summary"
    assert snapshot(mem.store) == before


def test_narrative_update_refuses_an_unknown_memory(mem: narrative.Memory, snapshot: Snap) -> None:
    fact = mem.add_memory("Real")
    before = snapshot(mem.store)
    with pytest.raises(NotFound):
        mem.narrative_update("Mentions a ghost", [fact.id, 999], None, "t")
    assert snapshot(mem.store) == before
    assert mem.store.count_rows("narratives") == 0


def test_narrative_update_refuses_another_users_memory(mem: narrative.Memory, snapshot: Snap) -> None:
    bobs = mem.add_memory("Bob's fact", user="bob")
    mem.your_story()  # makes alice (a read no longer does)
    before = snapshot(mem.store)
    with pytest.raises(NotFound):
        mem.narrative_update("Borrowing bob's fact", [bobs.id], None, "t")
    assert snapshot(mem.store) == before


def test_narrative_update_refuses_another_users_previous_link(mem: narrative.Memory, snapshot: Snap) -> None:
    bobs = mem.narrative_update("Bob's thread", [], None, "t", user="bob")
    mem.your_story()  # makes alice (a read no longer does)
    before = snapshot(mem.store)
    with pytest.raises(NotFound):
        mem.narrative_update("Continuing bob's thread", [], bobs.id, "t")
    with pytest.raises(NotFound):
        mem.narrative_update("Continuing nothing", [], 999, "t")
    assert snapshot(mem.store) == before


@pytest.mark.parametrize("ids", [["1"], [True], [1.5]])
def test_narrative_update_refuses_non_integer_ids(mem: narrative.Memory, snapshot: Snap, ids: list[Any]) -> None:
    mem.add_memory("one")
    before = snapshot(mem.store)
    with pytest.raises(ValidationError):
        mem.narrative_update("bad ids", ids, None, "t")
    assert snapshot(mem.store) == before


def test_narrative_update_pipeline_can_leave_a_link_open(mem: narrative.Memory) -> None:
    """The write path keeps a running link unsealed; narrative_update's default seals."""
    mem.your_story()  # makes alice (a read no longer does)
    running = narrate.narrative_update(mem.store, "alice", "Running", [], None, "t", mem.clock(), sealed=False)
    assert not running.sealed
    updated = mem.store.update_narrative("alice", running.id, summary="Running, updated")
    assert updated.summary == "Running, updated"


# --- narrative_search: three modes, newest first ---------------------------------------------------


def test_search_by_id(mem: narrative.Memory, thread: Thread) -> None:
    assert mem.narrative_search(thread.n2.id) == [thread.n2]
    with pytest.raises(NotFound):
        mem.narrative_search(999)


def test_search_by_keyword_is_newest_first(mem: narrative.Memory, thread: Thread) -> None:
    found = mem.narrative_search(query="sqlite")
    assert [n.id for n in found] == [thread.n2.id, thread.n1.id]
    assert [n.created_at for n in found] == sorted((n.created_at for n in found), reverse=True)
    assert [n.id for n in mem.narrative_search(query="search")] == [thread.n3.id]  # the topic is searched too
    assert mem.narrative_search(query="kubernetes") == []
    assert [n.id for n in mem.narrative_search(query="storage OR search")] == [thread.n3.id, thread.n2.id, thread.n1.id]


def test_search_with_no_parameters_is_the_latest_link(mem: narrative.Memory, thread: Thread) -> None:
    assert mem.narrative_search() == [thread.n3]  # session recovery: "where was I?"
    assert mem.narrative_search(query="  ") == [thread.n3]
    newest = mem.narrative_update("Started on the web UI", [], None, "ui")
    assert mem.narrative_search() == [newest]


def test_search_with_no_links_is_empty(mem: narrative.Memory) -> None:
    assert mem.narrative_search() == []
    assert mem.narrative_search(query="anything") == []


def test_search_refuses_both_id_and_query(mem: narrative.Memory, thread: Thread) -> None:
    with pytest.raises(ValidationError):
        mem.narrative_search(thread.n1.id, "sqlite")


def test_search_results_carry_summary_and_memory_ids(mem: narrative.Memory, thread: Thread) -> None:
    (latest,) = mem.narrative_search()
    assert latest.summary == "Ranking fuses BM25 with vectors"
    assert latest.memory_ids == (thread.under_n2.id, thread.under_n1[1].id)


def test_search_never_sees_another_users_links(mem: narrative.Memory, thread: Thread) -> None:
    assert mem.narrative_search(user="bob") == []
    assert mem.narrative_search(query="sqlite", user="bob") == []
    with pytest.raises(NotFound):
        mem.narrative_search(thread.n1.id, user="bob")


# --- forward and backward traversal -------------------------------------------------------------------


def test_narratives_after_is_forward_traversal(mem: narrative.Memory, thread: Thread) -> None:
    assert mem.narratives_after(thread.n1.id) == [thread.n2]
    assert mem.narratives_after(thread.n3.id) == []
    branch = mem.narrative_update("A side branch from the SQLite decision", [], thread.n1.id, "storage")
    assert [n.id for n in mem.narratives_after(thread.n1.id)] == [branch.id, thread.n2.id]  # newest first
    with pytest.raises(NotFound):
        mem.narratives_after(thread.n1.id, user="bob")


def test_walk_forward(mem: narrative.Memory, thread: Thread) -> None:
    assert mem.walk_forward(thread.n1.id) == [thread.n2, thread.n3]  # oldest first
    assert mem.walk_forward(thread.n1.id, depth=1) == [thread.n2]
    assert mem.walk_forward(thread.n3.id) == []
    with pytest.raises(NotFound):
        mem.walk_forward(999)


@pytest.mark.parametrize(("depth", "expected"), [(None, 3), (1, 1), (2, 2), (3, 3), (10, 3)])
def test_walk_back_to_any_depth(mem: narrative.Memory, thread: Thread, depth: int | None, expected: int) -> None:
    full = [thread.n3, thread.n2, thread.n1]  # newest first, starting with the link itself
    assert mem.walk_back(thread.n3.id, depth) == full[:expected]


def test_walk_back_from_the_middle_and_the_start(mem: narrative.Memory, thread: Thread) -> None:
    assert mem.walk_back(thread.n2.id) == [thread.n2, thread.n1]
    assert mem.walk_back(thread.n1.id) == [thread.n1]


@pytest.mark.parametrize("depth", [0, -1])
def test_walk_back_refuses_a_bad_depth(mem: narrative.Memory, thread: Thread, depth: int) -> None:
    with pytest.raises(ValidationError):
        mem.walk_back(thread.n3.id, depth)


def test_walk_back_of_another_users_link_is_not_found(mem: narrative.Memory, thread: Thread) -> None:
    with pytest.raises(NotFound):
        mem.walk_back(thread.n3.id, user="bob")


def test_a_long_chain_walks_both_ways(mem: narrative.Memory) -> None:
    links: list[Narrative] = []
    for i in range(12):
        previous = links[-1].id if links else None
        links.append(mem.narrative_update(f"Step {i} of the migration", [], previous, "migration"))
    assert mem.walk_back(links[-1].id) == links[::-1]
    assert mem.walk_forward(links[0].id) == links[1:]
    assert [n.id for n in mem.walk_back(links[7].id, 3)] == [links[7].id, links[6].id, links[5].id]


# --- stamping ------------------------------------------------------------------------------------


def test_memory_is_stamped_with_the_active_link(mem: narrative.Memory, thread: Thread) -> None:
    assert thread.first_memory.narrative_id is None  # before any link
    assert {m.narrative_id for m in thread.under_n1} == {thread.n1.id}
    assert thread.under_n2.narrative_id == thread.n2.id
    later = mem.add_memory("Written after the third link.")
    assert later.narrative_id == thread.n3.id
    assert mem.get_memory(later.id).narrative_id == thread.n3.id  # it is stored, not only returned


def test_stamping_prefers_the_running_link_of_the_storyline(mem: narrative.Memory, thread: Thread) -> None:
    mem.your_story()  # makes alice (a read no longer does)
    story = mem.store.your_story("alice")
    assert story is not None
    running = narrate.narrative_update(
        mem.store, "alice", "Writing the docs", [], None, "docs", mem.clock(), storyline_id=story.id, sealed=False
    )
    newer = mem.narrative_update("A newer sealed link elsewhere", [], thread.n3.id, "search")
    assert mem.add_memory("Docs go in README.md", storyline_id=story.id).narrative_id == running.id
    assert mem.add_memory("No storyline given").narrative_id == newer.id


def test_stamping_is_per_user(mem: narrative.Memory, thread: Thread) -> None:
    assert mem.add_memory("Bob's first memory", user="bob").narrative_id is None


# --- the recall chain: memory → narrative → siblings → earlier links ----------------------------------------


def test_full_recall_chain(mem: narrative.Memory, thread: Thread) -> None:
    recall = mem.recall_chain(thread.under_n2.id)
    assert recall.memory == mem.get_memory(thread.under_n2.id)
    assert recall.narrative == thread.n2
    assert [m.id for m in recall.siblings] == [m.id for m in thread.under_n1]  # n2's memories
    assert recall.earlier == (thread.n1,)
    assert recall.to_dict() == {
        "memory_id": thread.under_n2.id,
        "narrative": {"id": thread.n2.id, "summary": thread.n2.summary, "topic": "storage"},
        "sibling_ids": [m.id for m in thread.under_n1],
        "earlier": [{"id": thread.n1.id, "summary": thread.n1.summary, "topic": "storage"}],
        "linked": [],  # no research or decision links here (test_research.py opens them)
    }


def test_recall_chain_depth(mem: narrative.Memory, thread: Thread) -> None:
    later = mem.add_memory("Stamped with the third link.")
    assert mem.recall_chain(later.id).earlier == (thread.n2, thread.n1)
    assert mem.recall_chain(later.id, depth=1).earlier == (thread.n2,)
    assert mem.recall_chain(later.id, depth=0).earlier == ()
    recall = mem.recall_chain(later.id)
    assert recall.narrative == thread.n3
    assert [m.id for m in recall.siblings] == [thread.under_n2.id, thread.under_n1[1].id]


def test_recall_chain_of_a_pre_narrative_memory(mem: narrative.Memory, thread: Thread) -> None:
    recall = chain.recall_chain(mem.store, "alice", thread.first_memory.id)
    assert (recall.narrative, recall.siblings, recall.earlier) == (None, (), ())
    assert recall.to_dict()["narrative"] is None


def test_recall_chain_skips_deleted_siblings(mem: narrative.Memory, thread: Thread) -> None:
    mem.store.delete_memories("alice", [thread.under_n1[0].id])
    later = mem.add_memory("Stamped with the third link.")
    assert [m.id for m in mem.recall_chain(later.id).siblings] == [thread.under_n2.id, thread.under_n1[1].id]
    assert [m.id for m in mem.recall_chain(thread.under_n2.id).siblings] == [thread.under_n1[1].id]


def test_recall_chain_of_another_users_memory_is_not_found(mem: narrative.Memory, thread: Thread) -> None:
    with pytest.raises(NotFound):
        mem.recall_chain(thread.under_n2.id, user="bob")


# --- immutability ---------------------------------------------------------------------------------


def test_sealed_links_are_immutable_through_the_store(mem: narrative.Memory, thread: Thread) -> None:
    with pytest.raises(SealedNarrative):
        mem.store.update_narrative("alice", thread.n2.id, summary="Rewritten history")
    with pytest.raises(SealedNarrative):
        mem.store.update_narrative("alice", thread.n2.id, memory_ids=[])
    with pytest.raises(InvalidTransition):  # SealedNarrative is an InvalidTransition
        mem.store.update_narrative("alice", thread.n2.id, topic="other")
    assert mem.narrative_search(thread.n2.id) == [thread.n2]
    assert [n.id for n in mem.narrative_search(query="rewritten")] == []


def test_list_narratives_is_newest_first(mem: narrative.Memory, thread: Thread) -> None:
    assert mem.list_narratives() == [thread.n3, thread.n2, thread.n1]
    assert mem.list_narratives(limit=1, offset=1) == [thread.n2]
    assert mem.list_narratives(user="bob") == []
