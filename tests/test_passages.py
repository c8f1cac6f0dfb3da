"""Passages: a long message is stored in parts that the model reads whole, each searchable on its own, and a hit
shows the passage that answers (issue 28); a short message is one passage, found on its own.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import narrative
from conftest import FakeClock
from narrative.model import Stream
from narrative.providers.embed import MiniLMEmbedder
from narrative.store.filters import MemoryFilter
from narrative.text.passages import (
    _PIECES,
    ONE_PASSAGE_TOKENS,
    TARGET_TOKENS,
    _Costs,
    approx_tokens,
    more_tokens_than,
    split_passages,
)


def long_reply(paragraphs: int = 30) -> str:
    topics = ["watering", "compost", "seedlings", "pruning", "mulch", "trellis", "aphids", "harvest"]
    return "Here is the plan for the garden.\n\n" + "\n\n".join(
        f"Step {i}: for the {topics[i % len(topics)]} work, check the beds on the north side, note what the "
        f"soil looks like after rain, and write down how long each task took so the next season is easier."
        for i in range(paragraphs)
    )


# --- splitting ----------------------------------------------------------------------------------------------


def test_a_short_message_is_one_passage_covering_it() -> None:
    text = "  Sam will send the bed measurements on Friday.  "
    [span] = split_passages(text)
    assert text[span.start : span.end] == text.strip()


def test_a_long_message_is_cut_on_its_structure_into_pieces_that_fit() -> None:
    code = "```python\n" + "\n".join(f"value_{i} = compute({i})  # step {i}" for i in range(12)) + "\n```"
    text = long_reply(12) + "\n\n" + code + "\n\n- first item\n- second item\n- third item"
    spans = split_passages(text)
    assert len(spans) > 3
    for span in spans:
        assert approx_tokens(text[span.start : span.end]) <= TARGET_TOKENS
        assert text[span.start : span.end] == text[span.start : span.end].strip()
    assert all(a.end <= b.start for a, b in itertools.pairwise(spans))  # in order, no overlap
    assert any(text[s.start : s.end].startswith("```python") for s in spans)  # the code block kept whole


@settings(max_examples=150, deadline=None)
@given(st.text(min_size=0, max_size=4000))
def test_passages_cover_every_word_in_order_within_the_size(text: str) -> None:
    spans = split_passages(text)
    assert spans
    covered = "".join(text[s.start : s.end] for s in spans)
    assert "".join(covered.split()) == "".join(text.split())  # nothing lost, nothing added, order kept
    if len(spans) > 1:
        assert all(approx_tokens(text[s.start : s.end]) <= TARGET_TOKENS for s in spans)
    elif text.strip():
        assert approx_tokens(text.strip()) <= ONE_PASSAGE_TOKENS or len(spans) == 1


# --- storing and searching ----------------------------------------------------------------------------------


PROSE = st.text(
    alphabet=st.sampled_from(list("ab xyz 09.,!?-*#`~\n\t é😀—()\"'")) | st.characters(), min_size=0, max_size=600
)


@settings(max_examples=200, deadline=None)
@given(PROSE, st.data())
def test_a_span_between_two_pieces_costs_what_counting_it_alone_says(text: str, data: st.DataObject) -> None:
    """The splitter prices spans from the text's pieces read once; a span read on its own must agree (and a span
    that starts or ends inside a piece is read on its own)."""
    costs = _Costs(text)
    edges = sorted({0, len(text), *(m.start() for m in _PIECES.finditer(text))})
    for _ in range(20):
        a = data.draw(st.sampled_from(edges) | st.integers(0, len(text)))
        b = data.draw(st.sampled_from(edges) | st.integers(0, len(text)))
        a, b = min(a, b), max(a, b)
        assert costs(a, b) == approx_tokens(text[a:b])
    for limit in (0, 1, 5, 80, 10_000):
        assert more_tokens_than(text, limit) == (approx_tokens(text) > limit)


def test_every_processed_message_has_passages_with_vectors(smem: narrative.Memory) -> None:
    smem.remember("How should I plan the garden this year?")
    reply = smem.remember(long_reply(), role="assistant", speaker="Rook")
    store = smem.store
    passages = store.passages_of_messages("alice", [reply.message.id])[reply.message.id]
    assert len(passages) > 3
    assert all(p.memory_id == reply.memories[0].id for p in passages)
    vectors = store.passage_vectors_by_id("alice", smem.embedder.identity, [p.id for p in passages])  # type: ignore[union-attr]
    assert set(vectors) == {p.id for p in passages}


def test_a_hit_on_a_long_reply_shows_the_passage_that_answers(smem: narrative.Memory) -> None:
    smem.remember("How should I plan the garden this year?")
    text = long_reply() + "\n\nFinally: the blue watering can lives behind the greenhouse door, next to the rake."
    reply = smem.remember(text, role="assistant", speaker="Rook")
    hits = smem.search("where is the blue watering can?", 3)
    assert hits
    top = hits[0]
    assert "behind the greenhouse door" in top.text
    assert len(top.text) < len(text) / 3  # a passage, not the whole reply
    assert f"message #{reply.message.id}" in top.text  # a pointer to the whole message
    why = top.why()
    passages = list(why["shown_passages"] or [why["passage"]])  # type: ignore[call-overload]
    assert any(p and p["message_id"] == reply.message.id for p in passages)


def test_a_hit_on_an_assistant_reply_shows_the_question_it_answers(smem: narrative.Memory) -> None:
    asked = smem.remember("My budget is 300 euros this year. How should I plan the garden?", speaker="Maya")
    text = long_reply() + "\n\nFinally: the blue watering can lives behind the greenhouse door, next to the rake."
    reply = smem.remember(text, role="assistant", speaker="Rook")
    top = smem.search("where is the blue watering can?", 3)[0]
    assert top.shown == (asked.message.id, reply.message.id)  # the person's turn, then the reply's passage
    assert top.text.startswith("Maya: My budget is 300 euros") and "behind the greenhouse door" in top.text
    assert len(top.text) < len(text) / 3
    # Between people, a turn found by its own passage is shown alone (see the next test).


def test_a_short_turn_is_found_on_its_own(smem: narrative.Memory) -> None:
    smem.remember("We finally tried the new sushi place downtown on Friday.", speaker="Ana")
    said = smem.remember("Nah it gave me food poisoning lol", speaker="Ben")
    smem.remember("Anyway, are you coming to the climbing gym on Sunday?", speaker="Ana")
    hits = smem.search("did anyone get sick after eating out?", 5)
    own = [h for h in hits if h.shown == (said.message.id,)]
    assert own, [h.why()["summary"] for h in hits]  # the turn itself matched, not only an exchange holding it
    assert own[0].text == "Ben: Nah it gave me food poisoning lol"


def test_a_document_is_searchable_by_a_sentence_from_its_end(smem: narrative.Memory) -> None:
    body = "\n\n".join(
        f"Section {i}. The committee reviewed item {i} of the budget and agreed to revisit it next quarter."
        for i in range(10_000)
    )
    document = body + "\n\nClosing note: the archive key is kept by Priya in the red folder."
    assert len(document) > 1_000_000
    smem.remember(document, speaker="Priya")
    [hit] = smem.search("who keeps the archive key?", 1)
    assert "red folder" in hit.text
    assert len(hit.text) < 2_000


def test_a_message_over_the_limit_gets_the_documented_error(mem: narrative.Memory) -> None:
    from narrative.checks import MAX_MESSAGE

    with pytest.raises(narrative.ValidationError, match="at most"):
        mem.remember("x" * (MAX_MESSAGE + 1))
    assert mem.messages() == []


def test_reindex_gives_old_messages_their_passages(db_path: Path, clock: FakeClock, minilm: MiniLMEmbedder) -> None:
    with narrative.Memory(db_path, user="alice", embedder=minilm, clock=clock, env={}) as memory:
        memory.remember("The spare key is under the blue flowerpot.")
        store = memory.store
        with store.transaction():
            store._exec("DELETE FROM passages")  # type: ignore[attr-defined]  # as a file from before passages
        assert memory.embedding_status()["reindex_needed"]
        done = memory.reindex()
        assert done["messages_given_passages"] == 1 and done["passages"] == 1
        assert not memory.embedding_status()["reindex_needed"]
        [hit] = memory.search("where is the spare key?", 1)
        assert "flowerpot" in hit.text


def test_one_keyword_read_gives_what_the_two_searches_give(mem: narrative.Memory) -> None:
    """A search reads the memories' and the passages' keyword lists together (one catch-up of the index, one
    round trip on PostgreSQL): the same lists, filtered or not."""
    reply = "\n\n".join(f"Step {i}: water the tomatoes at dawn, then check the basil for aphids." for i in range(60))
    mem.remember("How should I look after the garden this week?")
    mem.remember(reply + "\n\nFinally, the compost wants turning on Sunday.", role="assistant")
    mem.add_memory("The basil came from the market on the square.", stream="fact")
    store, user = mem.store, mem.settings.user
    for query in ("basil aphids", "compost Sunday", "market square", "nothing matches this"):
        for where in (None, MemoryFilter(streams=[Stream.CONVERSATION])):
            both = store.keyword_search_memories_and_passages(user, query, where, limit=20)
            assert both == (
                store.keyword_search_memories(user, query, where, limit=20),
                store.keyword_search_passages(user, query, where, limit=20),
            )
    assert store.keyword_search_memories_and_passages(user, "compost Sunday", limit=20)[1]  # the reply's end
