"""Consolidation of the research stream and source popularity (ITSERR): which items the rules link and why, that
links never merge, that a hit opens its linked items, a model's links (and the fallback), and which sources were
most used over a period (cited, annotated, recalled) — through the API and in the "sources" reflection."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import narrative
from conftest import FakeClock
from llm_server import Reply, ScriptedLLMServer, scripted_llm_server
from narrative.errors import NotFound
from narrative.model import LinkKind, LinkOrigin, MemoryItem, ResearchDetails

llm_server = pytest.fixture(scripted_llm_server)


def item(mem: narrative.Memory, text: str, kind: str = "note", **details: Any) -> MemoryItem:
    return mem.add_memory(text, stream="research", details=ResearchDetails(source_type=kind, **details))


def links(mem: narrative.Memory, memory_id: int) -> dict[tuple[int, LinkKind], str]:
    return {(k.linked_id, k.kind): k.reason for k in mem.store.memory_links("alice", [memory_id])}


# --- consolidation by rule ------------------------------------------------------------------------------------------


def test_items_about_one_work_or_author_are_linked_never_merged(mem: narrative.Memory) -> None:
    cite = item(
        mem, "Meadows on stocks and flows", "citation", work_title="Thinking in Systems", author="Donella Meadows"
    )
    quote = item(
        mem, "“A system is more than the sum of its parts.”", "quote", source_reference="Thinking in Systems, p. 12"
    )
    other = item(mem, "Meadows on leverage points", "citation", work_title="Leverage Points", author="D. Meadows")
    unrelated = item(mem, "Ostrom on the commons", "citation", work_title="Governing the Commons", author="Ostrom")
    assert links(mem, quote.id) == {
        (cite.id, LinkKind.SAME_WORK): "both name the work “Thinking in Systems (Donella Meadows)”"
    }
    assert links(mem, other.id) == {(cite.id, LinkKind.SAME_AUTHOR): "both are by Donella Meadows"}
    assert links(mem, unrelated.id) == {}
    assert mem.get_memory(quote.id).content == "“A system is more than the sum of its parts.”"  # untouched
    assert mem.consolidate()["links"] == 0  # running it again adds nothing


def test_an_untitled_annotation_belongs_to_the_citation_just_before_it(mem: narrative.Memory) -> None:
    mem.remember("I've been reading Thinking in Systems by Donella Meadows.", speaker="alice")
    turn = mem.remember("On p. 45 she says a system's behaviour comes from its structure.", speaker="alice")
    [annotation] = [m for m in turn.memories if m.stream.value == "research"]
    [(linked, kind)] = links(mem, annotation.id)
    assert kind is LinkKind.SAME_WORK and mem.get_memory(linked).content.startswith("I've been reading")
    reason = links(mem, annotation.id)[(linked, kind)]
    assert reason.startswith("an item without a title of its own, right after “Thinking in Systems")


def test_deleting_the_item_that_joined_two_others_keeps_them_one_source(mem: narrative.Memory) -> None:
    """The citation an annotation was linked to is deleted: the annotation stays with the later item naming the
    same work (one source), and no source is named by a page alone ("p. 45")."""
    first = mem.remember("I'm reading “Thinking in Systems” by Donella Meadows — great on feedback loops.")
    mem.remember("On p. 45 she says feedback loops drive the watering schedule.")
    mem.remember("I also started „Die Welt als Wille“ by Arthur Schopenhauer.")
    mem.remember("Reading “Thinking in Systems” again: feedback loops and stocks.")
    [cite] = [m for m in first.memories if m.stream.value == "research"]
    before = {s.source: set(s.memory_ids) for s in mem.source_popularity(days=0)}
    [joined] = [ids for ids in before.values() if cite.id in ids]
    assert len(joined) == 3
    mem.delete_memory(cite.id)
    after = {s.source: set(s.memory_ids) for s in mem.source_popularity(days=0)}
    assert joined - {cite.id} in after.values()
    assert "p. 45" not in after
    [(annotation, later)] = [
        (k.linked_id, k.memory_id) for k in mem.store.memory_links("alice", sorted(joined - {cite.id}))
    ]
    assert links(mem, later)[(annotation, LinkKind.SAME_WORK)] == (
        "both belong to “Thinking in Systems”: an item since deleted joined them"
    )


def test_a_source_is_never_named_by_a_page_alone(mem: narrative.Memory) -> None:
    note = item(mem, "She says feedback loops drive the schedule.", "annotation", source_reference="p. 45")
    [source] = mem.source_popularity(days=0)
    assert source.memory_ids == (note.id,) and source.source == "She says feedback loops drive the schedule."


def test_items_sharing_enough_words_are_about_one_idea(mem: narrative.Memory) -> None:
    a = item(mem, "Feedback loops keep a watering schedule honest when volunteers change.")
    b = item(mem, "Without feedback loops the watering schedule drifts as volunteers change.")
    c = item(mem, "The herb spiral needs gravel at the bottom.")
    assert (a.id, LinkKind.SAME_IDEA) in links(mem, b.id)
    assert "they share the words" in links(mem, b.id)[(a.id, LinkKind.SAME_IDEA)]
    assert links(mem, c.id) == {}


def test_a_new_item_is_compared_with_the_newest_items_only(
    mem: narrative.Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from narrative.write import consolidate

    monkeypatch.setattr(consolidate, "POOL", 2)  # so an import of n items costs n × POOL, not n²
    oldest = item(mem, "Feedback loops keep a watering schedule honest when volunteers change.")
    for topic in ("The herb spiral needs gravel at the bottom.", "Comfrey makes a quick liquid fertiliser."):
        item(mem, topic)
    late = item(mem, "Without feedback loops the watering schedule drifts as volunteers change.")
    assert links(mem, late.id) == {}  # the item it repeats is older than the newest two
    monkeypatch.setattr(consolidate, "POOL", 2_000)
    again = item(mem, "Feedback loops keep the watering schedule honest whenever volunteers change.")
    assert (oldest.id, LinkKind.SAME_IDEA) in links(mem, again.id)


def test_a_hit_opens_its_linked_items(mem: narrative.Memory) -> None:
    cite = item(
        mem, "Meadows on stocks and flows", "citation", work_title="Thinking in Systems", author="Donella Meadows"
    )
    quote = item(mem, "A quote about bathtubs and stocks", "quote", work_title="Thinking in Systems")
    [opened] = mem.linked_memories(cite.id)
    assert (opened.memory.id, opened.direction, opened.link.kind) == (quote.id, "later", LinkKind.SAME_WORK)
    assert opened.why()["origin"] == "rule" and opened.to_dict()["content"] == quote.content
    [(hit, chain)] = mem.recall("bathtubs", k=1)
    assert hit.memory.id == quote.id and [o.memory.id for o in chain.linked] == [cite.id]
    linked = chain.to_dict()["linked"]
    assert isinstance(linked, list) and linked[0]["direction"] == "earlier"
    assert mem.linked_memories(cite.id, kinds=["same_idea"]) == []
    with pytest.raises(NotFound):
        mem.linked_memories(cite.id, user="bob")


def test_consolidate_links_what_arrived_before_it_was_there(mem: narrative.Memory) -> None:
    """Items stored without the follow-up work (a bulk import of rows) are linked by a full pass."""
    first = item(mem, "Meadows on stocks", "citation", work_title="Thinking in Systems")
    second = item(mem, "Meadows on flows", "citation", work_title="Thinking in Systems")
    mem.store.delete_memory_link("alice", second.id, first.id, LinkKind.SAME_WORK)
    result = mem.consolidate()
    assert (result["items"], result["links"], result["by_kind"], result["by_origin"]) == (
        2,
        1,
        {"same_work": 1},
        {"rule": 1},
    )


# --- source popularity ----------------------------------------------------------------------------------------------


def test_the_most_used_sources_of_a_period(mem: narrative.Memory, clock: FakeClock) -> None:
    old = item(mem, "Ostrom on commons", "citation", work_title="Governing the Commons", author="Elinor Ostrom")
    clock.advance(days=40)
    item(mem, "Meadows on stocks", "citation", work_title="Thinking in Systems", author="Donella Meadows")
    item(mem, "stocks change slowly", "annotation", work_title="Thinking in Systems", page_reference="p. 20")
    item(mem, "“bathtubs”", "quote", work_title="Thinking in Systems")
    mem.search("commons Ostrom", record=True)  # the old source recalled in the period
    mem.search("Ostrom", record=True)
    found = mem.source_popularity()  # the last 30 days
    assert [s.source for s in found] == [
        "Thinking in Systems (Donella Meadows)",
        "Governing the Commons (Elinor Ostrom)",
    ]
    meadows, ostrom = found
    assert meadows.counts == {"cited": 1, "annotated": 1, "quoted": 1} and meadows.score == 6
    assert ostrom.counts == {"recalled": 2} and ostrom.score == 2 and old.id in ostrom.memory_ids
    assert "2·cited" in meadows.why()["rule"] and meadows.to_dict()["annotated"] == 1
    assert meadows.summary() == "Thinking in Systems (Donella Meadows): cited 1, annotated 1, quoted 1"
    every = {s.source: s for s in mem.source_popularity(days=0)}  # all time: Ostrom was cited too
    assert every["Governing the Commons (Elinor Ostrom)"].counts == {"cited": 1, "recalled": 2}
    before = mem.source_popularity(until=clock.now - timedelta(days=30), days=0)
    assert [s.source for s in before] == ["Governing the Commons (Elinor Ostrom)"]
    assert mem.source_popularity(user="bob") == []


def test_the_sources_reflection_names_the_most_used_first(db_path: Path) -> None:
    with narrative.Memory(db_path, user="maya", embedder="none", clock=FakeClock(), env={}, reflect_every=3) as mem:
        mem.remember("I've been reading Thinking in Systems by Donella Meadows.", speaker="maya")
        mem.remember("On p. 45 she says a system's behaviour comes from its structure.", speaker="maya")
        mem.remember("Ostrom (1990) shows that commons can be governed by their users.", speaker="maya")
        reflections = mem.list_memories(stream="reflection")
        [sources] = [m for m in reflections if getattr(m.details, "reflection_type", "") == "sources"]
        assert sources.content == (
            "The sources in play were Thinking in Systems (cited, annotated) and Ostrom (1990) (cited)."
        )


# --- with a model ---------------------------------------------------------------------------------------------------


@pytest.fixture
def model_mem(db_path: Path, llm_server: ScriptedLLMServer) -> Iterator[narrative.Memory]:
    llm_server.set_fallback(Reply.json({}))
    memory = narrative.Memory(
        db_path, user="alice", embedder="none", clock=FakeClock(), env={}, llm="ollama", llm_url=llm_server.url,
        llm_model="t",
    )  # fmt: skip
    yield memory
    memory.close()


def test_a_model_links_items_no_rule_could(model_mem: narrative.Memory, llm_server: ScriptedLLMServer) -> None:
    bathtub = item(model_mem, "A bathtub fills and drains: stocks change only through flows.")
    llm_server.set_fallback(
        Reply.json({"links": [{"id": bathtub.id, "kind": "same_idea", "reason": "both are about stocks and flows"}]})
    )
    delays = item(model_mem, "Inventories buffer the gap between production and demand.")
    [link] = model_mem.store.memory_links("alice", [delays.id])
    assert (link.linked_id, link.kind, link.origin, link.reason) == (
        bathtub.id,
        LinkKind.SAME_IDEA,
        LinkOrigin.LLM,
        "both are about stocks and flows",
    )
    asked = [r.body for r in llm_server.chat_requests if r.body and "You consolidate" in str(r.body["messages"][0])]
    assert asked and asked[-1] is not None and "bathtub" in asked[-1]["messages"][1]["content"]


def test_a_models_same_work_link_joins_two_names_of_one_source(
    model_mem: narrative.Memory, llm_server: ScriptedLLMServer
) -> None:
    """Popularity is better with a model: a work cited under two names counts as one source once linked."""
    title = item(model_mem, "Meadows on stocks", "citation", work_title="Thinking in Systems", author="Donella Meadows")
    assert [s.source for s in model_mem.source_popularity(days=0)] == ["Thinking in Systems (Donella Meadows)"]
    llm_server.set_fallback(
        Reply.json({"links": [{"id": title.id, "kind": "same_work", "reason": "Meadows 2008 is Thinking in Systems"}]})
    )
    year = item(model_mem, "Leverage in stocks and flows", "citation", source_reference="Meadows (2008)")
    [source] = model_mem.source_popularity(days=0)
    assert source.memory_ids == (title.id, year.id) and source.counts == {"cited": 2}


def test_a_bad_answer_leaves_the_rules_links(model_mem: narrative.Memory, llm_server: ScriptedLLMServer) -> None:
    cite = item(model_mem, "Meadows on stocks", "citation", work_title="Thinking in Systems")
    llm_server.set_fallback(Reply.json({"links": [{"id": 999999, "kind": "same_idea", "reason": "made up"}]}))
    quote = item(model_mem, "“bathtubs”", "quote", work_title="Thinking in Systems")
    assert links_of(model_mem, quote.id) == [(cite.id, LinkKind.SAME_WORK, LinkOrigin.RULE)]


def links_of(mem: narrative.Memory, memory_id: int) -> list[tuple[int, LinkKind, LinkOrigin]]:
    return [(k.linked_id, k.kind, k.origin) for k in mem.store.memory_links("alice", [memory_id])]
