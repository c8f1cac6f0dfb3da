"""The batched write path: one write transaction per batch (a savepoint per turn), and the vectors a turn embeds.

``exchange_vector="compose"`` embeds each message once and makes the conversation memory's vector the
normalised sum of its two messages' vectors, each weighted by the square root of its text's length;
``"embed"`` embeds the exchange's own text.
The deterministic hashing embedder (a real provider) makes the vectors exact to compare.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import narrative
from conftest import FakeClock
from narrative.bench import ingest
from narrative.config import Settings
from narrative.engine import Turn
from narrative.errors import ValidationError
from narrative.model import MemoryItem, Role, StorylineKind, StorylineStatus
from narrative.providers.embed import HashingEmbedder
from narrative.write import lifecycle
from narrative.write.embedding import composed_summary
from narrative.write.turn_types import TurnContext

GARDEN = [
    Turn("I'm planning a garden app with a plot map for the community garden.", speaker="maya"),
    Turn("Should the plot map use MapLibre or Leaflet?", role="assistant", speaker="rook"),
    Turn("We decided to use MapLibre instead of Leaflet because it is free.", speaker="maya"),
    Turn("Good choice. The legend can list every bed.", role="assistant", speaker="rook"),
]


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += list(texts)
        return super().embed_batch(texts)


def line(turn: Turn) -> str:
    return f"{turn.speaker}: {turn.content}" if turn.speaker else turn.content


def unit(vector: np.ndarray) -> np.ndarray:
    normed: np.ndarray = vector / np.linalg.norm(vector)
    return normed


def composed(first: str, first_vector: np.ndarray, second: str, second_vector: np.ndarray) -> np.ndarray:
    return unit(len(first) ** 0.5 * first_vector + len(second) ** 0.5 * second_vector)


def vectors_of(mem: narrative.Memory) -> dict[int, np.ndarray]:
    ids, _, _, matrix = mem.store.memory_vectors(mem.settings.user)
    return dict(zip(ids, matrix, strict=True))


def open_memory(path: Path, mode: str, embedder: HashingEmbedder | None = None) -> narrative.Memory:
    return narrative.Memory(
        path, user="maya", embedder=embedder or HashingEmbedder(), clock=FakeClock(), env={}, exchange_vector=mode
    )


# --- compose ----------------------------------------------------------------------------------------------------


def test_compose_weighs_the_two_messages_vectors_by_length(tmp_path: Path) -> None:
    embedder = HashingEmbedder()
    with open_memory(tmp_path / "c.db", "compose", embedder) as mem:
        results = mem.remember_many(GARDEN)
        stored = vectors_of(mem)
    lines = embedder.embed_batch([line(t) for t in GARDEN])
    assert np.allclose(stored[results[0].memories[0].id], lines[0])  # the first turn answers nothing
    for i in range(1, len(GARDEN)):
        exchange = results[i].memories[0]
        assert exchange.content == f"{line(GARDEN[i - 1])}\n{line(GARDEN[i])}"
        expected = composed(line(GARDEN[i - 1]), lines[i - 1], line(GARDEN[i]), lines[i])
        assert np.allclose(stored[exchange.id], expected, atol=1e-6)
        assert np.isclose(np.linalg.norm(stored[exchange.id]), 1.0)


def test_compose_works_across_remember_calls_and_reopening(tmp_path: Path) -> None:
    """The answered message's vector is kept between calls, and embedded again by a fresh instance."""
    embedder = HashingEmbedder()
    path = tmp_path / "c.db"
    with open_memory(path, "compose") as mem:
        first = mem.remember(GARDEN[0].content, speaker="maya")
        second = mem.remember(GARDEN[1].content, role="assistant", speaker="rook")
    with open_memory(path, "compose") as mem:
        third = mem.remember(GARDEN[2].content, speaker="maya")
        stored = vectors_of(mem)
    lines = embedder.embed_batch([line(t) for t in GARDEN[:3]])
    assert np.allclose(stored[first.memories[0].id], lines[0])
    texts = [line(t) for t in GARDEN[:3]]
    assert np.allclose(stored[second.memories[0].id], composed(texts[0], lines[0], texts[1], lines[1]), atol=1e-6)
    assert np.allclose(stored[third.memories[0].id], composed(texts[1], lines[1], texts[2], lines[2]), atol=1e-6)


def test_compose_embeds_each_message_once(tmp_path: Path) -> None:
    counted = {}
    for mode in ("embed", "compose"):
        embedder = CountingEmbedder()
        with open_memory(tmp_path / f"{mode}.db", mode, embedder) as mem:
            mem.remember_many(GARDEN[:2])
            mem.remember(GARDEN[2].content, speaker="maya")  # its answered message's vector is kept
            mem.remember(GARDEN[3].content, role="assistant", speaker="rook")
        counted[mode] = embedder.texts
    assert counted["compose"][:2] == [line(GARDEN[0]), line(GARDEN[1])]
    assert line(GARDEN[1]) not in counted["compose"][2:]
    assert len([t for t in counted["compose"] if "\n" not in t]) == len(counted["compose"])  # no exchange texts
    assert len(counted["compose"]) < len(counted["embed"])


def test_a_derived_memory_with_an_embedded_text_is_not_embedded_twice(tmp_path: Path) -> None:
    text = "We decided to use MapLibre instead of Leaflet because it is free."
    for mode in ("embed", "compose"):
        embedder = CountingEmbedder()
        with open_memory(tmp_path / f"{mode}.db", mode, embedder) as mem:
            result = mem.remember(text)  # no speaker: the decision's text is the message's text
            stored = vectors_of(mem)
        assert [m.stream.value for m in result.memories] == ["conversation", "decision"]
        assert [m.content for m in result.memories] == [text, text]
        assert embedder.texts.count(text) == 1
        assert np.array_equal(stored[result.memories[0].id], stored[result.memories[1].id])


def test_exchange_vector_setting() -> None:
    assert Settings.resolve({}).exchange_vector == "embed"
    assert Settings.resolve({"NARRATIVE_EXCHANGE_VECTOR": "compose"}).exchange_vector == "compose"
    with pytest.raises(ValidationError) as error:
        Settings.resolve({"NARRATIVE_EXCHANGE_VECTOR": "average"})
    assert error.value.field == "exchange_vector"


# --- an assistant's reply is embedded once -------------------------------------------------------------------


def test_an_assistant_reply_costs_two_texts_and_drifts_the_storyline_with_its_exchange(tmp_path: Path) -> None:
    """An assistant's reply stays with the turn it answers without a vector for routing, but it is found on its
    own (issue 28): its passage (the reply alone) and its exchange are embedded once each, in a batch and in a
    single ``remember`` alike, and the exchange's vector is the conversation memory's."""
    for batched in (True, False):
        embedder = CountingEmbedder()
        with open_memory(tmp_path / f"{batched}.db", "embed", embedder) as mem:
            if batched:
                results = mem.remember_many(GARDEN[:2])
            else:
                results = [mem.remember(t.content, t.role, speaker=t.speaker) for t in GARDEN[:2]]
            stored = vectors_of(mem)
        reply = results[1]
        assert reply.decision == "continue" and reply.storyline.id == results[0].storyline.id
        assert embedder.texts.count(line(GARDEN[1])) == 1  # its passage
        exchange = f"{line(GARDEN[0])}\n{line(GARDEN[1])}"
        assert embedder.texts.count(exchange) == 1
        assert np.allclose(stored[reply.memories[0].id], HashingEmbedder().embed_batch([exchange])[0])


@pytest.mark.parametrize(
    "reply", ["Thanks!", "By the way, the legend could list every bed.", "The legend can list every bed."]
)
def test_every_assistant_reply_is_embedded_alone_once(tmp_path: Path, reply: str) -> None:
    """Every reply is its own passage (what finds it on its own, issue 28), embedded once."""
    embedder = CountingEmbedder()
    with open_memory(tmp_path / "r.db", "embed", embedder) as mem:
        mem.remember_many([GARDEN[0], Turn(reply, role="assistant", speaker="rook")])
    assert embedder.texts.count(f"rook: {reply}") == 1


def test_a_reply_between_two_people_is_still_embedded_alone(tmp_path: Path) -> None:
    """Two people talking (both users): a reply may open a topic of its own, so routing needs its message alone."""
    embedder = CountingEmbedder()
    turns = [Turn(GARDEN[0].content, speaker="maya"), Turn("Leaflet is lighter for the plot map.", speaker="sam")]
    with open_memory(tmp_path / "p.db", "embed", embedder) as mem:
        mem.remember_many(turns)
    assert {line(t) for t in turns} <= set(embedder.texts)


def test_a_turn_given_only_its_exchange_that_leaves_is_embedded_alone_for_its_memory(tmp_path: Path) -> None:
    """The writer's safety net for a turn handed only its exchange's vector: should it end up outside the
    storyline of the turn it answers, its memory gets the message's own vector, never one that holds the other
    storyline's turn."""
    moved = "Completely different topic: my sister's wedding in Porto is in May."
    with open_memory(tmp_path / "w.db", "embed") as mem:
        [first] = mem.remember_many([GARDEN[0]])
        [message] = lifecycle.add_messages(mem.store, "maya", [(moved, mem.clock(), Role.USER, "maya", None)])
        extraction = mem._turns.extractor().extract_turn(moved, speaker="maya", previous=GARDEN[0].content)
        exchange = HashingEmbedder().embed_batch([f"{line(GARDEN[0])}\nmaya: {moved}"])[0]
        runtime = mem._runtime
        result = mem._turns.writer().process(
            message, exchange, extraction, None, runtime.default_ids("maya"), runtime.your_story_id("maya")
        )
        stored = vectors_of(mem)
    assert result.storyline.id != first.storyline.id
    assert result.memories[0].message_ids == (message.id,)
    assert np.allclose(stored[result.memories[0].id], HashingEmbedder().embed_batch([f"maya: {moved}"])[0])


def test_a_batch_reads_the_users_storylines_once_and_keeps_them_current(tmp_path: Path) -> None:
    with open_memory(tmp_path / "s.db", "embed") as mem:
        store, now = mem.store, mem.clock()
        store.ensure_user("maya", now)
        garden = store.insert_storyline("maya", "Garden", StorylineKind.DETECTED, now)
        old = store.insert_storyline("maya", "Old", StorylineKind.DETECTED, now)
        store.update_storyline("maya", old.id, status=StorylineStatus.ARCHIVED)
        context = TurnContext()
        assert {s.name for s in context.all_storylines(store, "maya")} >= {"Garden"}
        assert "Old" not in {s.name for s in context.all_storylines(store, "maya")}  # archived ones are not listed
        context.remember(store.update_storyline("maya", garden.id, name="Plot map"))  # what the batch writes
        context.remember(store.insert_storyline("maya", "Porto", StorylineKind.DETECTED, now))
        store.insert_storyline("maya", "Elsewhere", StorylineKind.DETECTED, now)  # not this batch's: not read again
        names = {s.name for s in context.all_storylines(store, "maya")}
    assert {"Plot map", "Porto"} <= names and not {"Garden", "Old", "Elsewhere"} & names


@pytest.mark.parametrize("assistant", [False, True], ids=["two people", "user and assistant"])
def test_an_import_leaves_what_the_same_turns_said_live_leave(tmp_path: Path, assistant: bool) -> None:
    """``remember_many`` (one call per session, as an import does) and ``remember`` turn by turn store the same
    routing, the same memories from the same messages, and the same memory and storyline vectors: the batch
    only changes how the model is asked, never what the engine decides."""
    sessions = ingest.history(60, session_turns=12)
    if assistant:
        sessions = ingest.with_an_assistant(sessions)

    def rounded(vector: np.ndarray | None) -> tuple[float, ...] | None:
        return None if vector is None else tuple(np.round(vector, 5))

    def replay(path: Path, batched: bool) -> dict[str, object]:
        with open_memory(path, "embed") as mem:
            for date, turns in sessions:
                mem.start_conversation(at=date)
                if batched:
                    mem.remember_many(turns)
                else:
                    for t in turns:
                        mem.remember(t.content, t.role, speaker=t.speaker, at=t.at)
                mem.close_conversation(at=turns[-1].at)
                mem.confirm_memory(at=turns[-1].at)
            stored = vectors_of(mem)
            memories = mem.list_memories(limit=10_000)
            storylines = mem.list_storylines(include_archived=True)
            assert mem.embedder is not None
            model = mem.embedder.identity
            return {
                "routing": [(m.position, m.storyline_id) for m in mem.messages()],
                "memories": sorted(
                    (m.stream.value, m.content, m.message_ids, m.storyline_id, rounded(stored.get(m.id)))
                    for m in memories
                ),
                "storylines": sorted((s.id, s.name, s.interaction_count, tuple(s.keywords)) for s in storylines),
                "storyline vectors": {
                    s.id: rounded(mem.store.storyline_vector("maya", s.id, model)) for s in storylines
                },
            }

    batch, live = replay(tmp_path / "batch.db", True), replay(tmp_path / "live.db", False)
    for part in batch:
        assert batch[part] == live[part], part


# --- one write transaction per batch ----------------------------------------------------------------------------


def test_a_turn_failing_inside_a_batch_keeps_the_turns_before_it(tmp_path: Path) -> None:
    """Turns run as savepoints of one batch transaction: the failing turn rolls back alone, the turns before
    it stay stored, it and the rest stay pending and are processed again later."""
    turns = [
        Turn(f"In bed {i} of the community garden we planted row {i} of beans.", speaker="maya") for i in range(14)
    ]
    turns[0] = Turn("The first bed will explode the key points step.", speaker="maya")
    with narrative.Memory(tmp_path / "b.db", user="maya", embedder="none", clock=FakeClock(), env={}) as mem:
        writer = mem._turns.writer()
        working = writer.key_points

        def key_points(text: str) -> str:  # a failing plug-in: retention reads the first exchange at turn 11
            if "explode" in text:
                raise RuntimeError("key points crashed")
            return working(text)

        writer.key_points = key_points
        with pytest.raises(RuntimeError, match="key points crashed"):
            mem.remember_many(turns)
        pending = mem.pending_messages()
        assert [m.position for m in pending] == [11, 12, 13, 14]
        assert len(mem.store.list_memories("maya")) == 10 + 1  # ten exchanges and the reflection of turn 10
        writer.key_points = working
        results = mem.process_pending()
        assert [r.message.position for r in results] == [11, 12, 13, 14]
        assert results[0].memories[0].message_ids == (pending[0].id - 1, pending[0].id)
        assert mem.pending_messages() == []


# --- one model call per batch -----------------------------------------------------------------------------------


def test_a_batch_embeds_every_turn_text_in_one_call_before_routing(tmp_path: Path) -> None:
    """The message and exchange texts do not depend on routing: one call makes them all, first.  Every message is
    embedded alone too (its passage, issue 28)."""
    for mode in ("embed", "compose"):
        embedder = CallsEmbedder()
        with open_memory(tmp_path / f"{mode}.db", mode, embedder) as mem:
            mem.remember_many(GARDEN)
        first = embedder.calls[0]
        users = {line(t) for t in GARDEN if t.role == "user"}
        replies = {line(t) for t in GARDEN if t.role == "assistant"}
        assert users <= set(first)
        assert replies <= set(first)
        assert "We decided to use MapLibre instead of Leaflet because it is free." in first  # the derived decision
        exchanges = [t for t in first if "\n" in t]
        assert len(exchanges) == (len(GARDEN) - 1 if mode == "embed" else 0)
        assert len(first) == len(set(first))  # each distinct text once
        assert not any(t in call for call in embedder.calls[1:] for t in first)  # never embedded again


def test_progress_is_reported_after_each_batch(tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    embedder = HashingEmbedder(batch_size=3)
    turns = [*GARDEN, *GARDEN[:3]]
    with open_memory(tmp_path / "p.db", "embed", embedder) as mem:
        mem.remember_many(turns, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(3, 7), (6, 7), (7, 7)]


class CallsEmbedder(HashingEmbedder):
    """The hashing embedder, keeping each call's texts."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return super().embed_batch(texts)


def test_text_vectors_embed_only_what_they_do_not_keep() -> None:
    from narrative.write.embedding import TextVectors

    embedder = CallsEmbedder()
    kept = TextVectors(embedder.embed_batch, size=3)
    first = kept.vectors(["a b", "c d", "a b"])
    assert embedder.calls == [["a b", "c d"]]
    assert np.array_equal(first[0], first[2]) and first.shape == (3, embedder.dims)
    second = kept.vectors(["c d", "e f"])
    assert embedder.calls[1] == ["e f"]
    assert np.array_equal(second[0], first[1])
    kept.vectors(["g h"])  # over the size: the least recently used ("a b") goes
    kept.vectors(["a b"])
    assert embedder.calls[-1] == ["a b"]
    assert kept.vectors([]).shape[0] == 0


def test_closing_embeds_in_one_call_and_keeps_what_it_compared(tmp_path: Path) -> None:
    """An open question compared at one close is not embedded again at the next one."""
    embedder = CallsEmbedder()
    question = "Should the schedule be per plot or per volunteer?"
    compared = []
    with open_memory(tmp_path / "c.db", "embed", embedder) as mem:
        for text in (question, "We decided to paint the shed green.", "We decided to buy a new hose."):
            mem.start_conversation()
            mem.remember(text, speaker="maya")
            before = len(embedder.calls)
            mem.close_conversation()
            compared.append(embedder.calls[before:])  # the preview embeds only what the similarity needs
            before = len(embedder.calls)
            confirmed = mem.confirm_memory()
            assert confirmed.end is not None
            made = confirmed.memories  # what the person confirmed, and nothing beside it
            new = [m for m in made if m.id not in confirmed.existing]  # a memory pointed to has its vector
            texts = [m.content for m in new if not composed_summary(m)]  # the rest: from what they summarise
            assert made and embedder.calls[before:] == ([texts] if texts else [])  # one call at most
            assert {m.id for m in made} <= set(vectors_of(mem))
    assert compared == [[], [[question, "We decided to paint the shed green."]], [["We decided to buy a new hose."]]]


# --- summaries without the model ------------------------------------------------------------------


def expected_summary_vector(mem: narrative.Memory, summary: MemoryItem) -> np.ndarray:
    """The mean of the vectors of the conversation memories made from the messages the summary cites."""
    stored = vectors_of(mem)
    cited = set(summary.message_ids)
    rows = [
        stored[m.id]
        for m in mem.list_memories(limit=1000)
        if m.stream.value == "conversation" and cited & set(m.message_ids)
    ]
    return unit(np.mean(rows, axis=0))


def test_summaries_take_the_mean_of_the_memories_they_summarise(tmp_path: Path) -> None:
    """Reflections, narrative links and the closing memory cost no model call: a summary is about what it
    summarises, so its vector is the mean of those memories' vectors (a person's edit is embedded)."""
    embedder = CallsEmbedder()
    with open_memory(tmp_path / "s.db", "compose", embedder) as mem:
        mem.remember_many([*GARDEN, *GARDEN])
        before = len(embedder.calls)
        mem.close_conversation()
        confirmed = mem.confirm_memory()
        assert confirmed.end is not None
        made = confirmed.memories
        summaries = [m for m in mem.list_memories(limit=1000) if m.stream.value in ("reflection", "narrative")]
        assert summaries and {m.id for m in made} <= {m.id for m in summaries}
        assert all(m.content not in call for m in summaries for call in embedder.calls[before:])
        stored = vectors_of(mem)
        for summary in summaries:
            assert np.allclose(stored[summary.id], expected_summary_vector(mem, summary), atol=1e-6)
            assert np.isclose(np.linalg.norm(stored[summary.id]), 1.0)


def test_reindex_makes_summaries_from_their_sources_again(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    with open_memory(path, "compose") as mem:
        mem.remember_many([*GARDEN, *GARDEN])
        mem.close_conversation()
        mem.confirm_memory()
    with open_memory(path, "compose", HashingEmbedder(dims=128)) as mem:
        mem.reindex()
        stored = vectors_of(mem)
        summaries = [m for m in mem.list_memories(limit=1000) if m.stream.value in ("reflection", "narrative")]
        assert summaries and all(len(stored[m.id]) == 128 for m in summaries)
        for summary in summaries:
            assert np.allclose(stored[summary.id], expected_summary_vector(mem, summary), atol=1e-6)


def test_import_with_another_model_makes_summaries_from_their_sources(tmp_path: Path) -> None:
    """An export made by one model, imported where another one embeds: the summaries' vectors are made again
    from the re-embedded conversation memories, not from the summaries' text."""
    with open_memory(tmp_path / "e.db", "compose") as mem:
        mem.remember_many([*GARDEN, *GARDEN])
        mem.close_conversation()
        mem.confirm_memory()
        exported = mem.export("json")
    with narrative.Memory(
        tmp_path / "i.db", user="maya", embedder=HashingEmbedder(dims=128), clock=FakeClock(), env={}
    ) as mem:
        mem.import_data(exported)
        stored = vectors_of(mem)
        summaries = [m for m in mem.list_memories(limit=1000) if m.stream.value in ("reflection", "narrative")]
        assert summaries and all(len(stored[m.id]) == 128 for m in summaries)
        for summary in summaries:
            assert np.allclose(stored[summary.id], expected_summary_vector(mem, summary), atol=1e-6)
