"""PostgreSQL keeps each searched user's memory briefs in process beside the keyword index, current from the change
log: what a search reads of its candidates (stream, time, sources, end of validity) stays what the database holds,
whatever another process writes, supersedes or deletes, and whatever a transaction that rolls back changed.  An
unfiltered hybrid search ranks by keyword while the server searches by vector on the same connection: its answers
are those of the two searches run one after the other."""

from __future__ import annotations

import contextlib
import random
import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import pg_server
from narrative.errors import StoreError
from narrative.model import Conflict, MemoryBrief, MemoryItem, Participant, Role, Source, StorylineKind, Stream
from narrative.store.postgres import PostgresStore
from narrative.store.postgres.base import array_parameter, collapse_in_lists
from narrative.store.protocol import searched_in_turn
from narrative.store.sqlite.base import to_text
from narrative.store.sqlite.passages import PassageRows

pytestmark = pytest.mark.postgres

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
WORDS = "berlin lisbon moved flat rent garden tax bike train office sprint deadline friday coffee".split()
MODEL = "test-model"
ACTIONS = ["say", "supersede", "date", "restore", "delete", "forget", "conflict", "conflict", "rollback"]


@pytest.fixture(scope="module")
def shared_url() -> Any:
    server = pg_server()
    url = server.fresh_schema()
    yield url
    server.release(url)


@pytest.fixture
def url() -> Any:
    server = pg_server()
    url = server.fresh_schema()
    yield url
    server.release(url)


def read_from_the_database(
    store: PostgresStore, user: str, ids: list[int]
) -> tuple[dict[int, MemoryBrief], list[Conflict]]:
    """The oracle: briefs and conflicts read by statement, as before (and as SQLite does)."""
    return PassageRows.memory_briefs_and_conflicts(store, user, ids)


def say(store: PostgresStore, user: str, rng: random.Random, step: int, stream: Stream = Stream.CONVERSATION) -> int:
    """A message and a memory made of it; the memory's id."""
    store.ensure_user(user, NOW)
    conversation = store.active_conversation(user) or store.insert_conversation(user, NOW)
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6)))
    when = NOW + timedelta(minutes=step)
    message = store.insert_message(user, conversation.id, Role.USER, text, when)
    memory = store.insert_memory(
        MemoryItem(
            0,
            user,
            stream,
            Source.CONVERSATION,
            text,
            3,
            when,
            message_ids=(message.id,),
            conversation_id=conversation.id,
        )
    )
    return memory.id


def set_column(store: PostgresStore, memory_id: int, column: str, value: Any) -> None:
    store._exec(f"UPDATE memories SET {column} = ? WHERE id = ?", (value, memory_id))


def statements_sent(store: PostgresStore) -> list[str]:
    """A list that takes the text of every statement ``store`` sends from now on (cleared by the caller)."""
    sent: list[str] = []
    run = store._run

    def counted(sql: str, params: Any, returning: bool = False) -> Any:
        sent.append(sql)
        return run(sql, params, returning)

    store._run = counted  # type: ignore[method-assign]
    return sent


def memory_ids(store: PostgresStore, user: str) -> list[int]:
    return [int(r[0]) for r in store._all("SELECT id FROM memories WHERE user_id = ? ORDER BY id", (user,))]


def test_briefs_follow_what_another_process_supersedes_dates_and_deletes(url: str) -> None:
    reader, writer = PostgresStore(url), PostgresStore(url)  # two processes on one database
    try:
        rng = random.Random(7)
        ids = [say(writer, "ann", rng, step) for step in range(12)]
        assert reader.memory_briefs_and_conflicts("ann", ids) == read_from_the_database(reader, "ann", ids)
        writer.supersede_memories("ann", ids[:3], by=ids[3], now=NOW + timedelta(days=1))  # valid_to
        set_column(writer, ids[4], "event_at", to_text(NOW - timedelta(days=30)))  # no interface changes these yet
        set_column(writer, ids[5], "stream", Stream.RESEARCH.value)
        writer.insert_conflict("ann", ids[6], ids[7], NOW)
        message = writer.get_memory("ann", ids[8]).message_ids[0]
        writer.delete_messages("ann", [message])
        briefs, conflicts = reader.memory_briefs_and_conflicts("ann", ids)
        assert (briefs, conflicts) == read_from_the_database(reader, "ann", ids)
        assert briefs[ids[0]].valid_to is not None and briefs[ids[4]].when == NOW - timedelta(days=30)
        assert (
            briefs[ids[5]].stream is Stream.RESEARCH
            and message not in briefs.get(ids[8], MemoryBrief(*briefs[ids[0]][:2], ())).sources
        )
        assert [(c.memory_id, c.other_memory_id) for c in conflicts] == [(ids[6], ids[7])]
        assert reader.memory_briefs("ann", ids) == briefs
    finally:
        reader.close()
        writer.close()


def test_a_memory_that_gains_or_loses_a_source_shows_it(url: str) -> None:
    reader, writer = PostgresStore(url), PostgresStore(url)
    try:
        rng = random.Random(3)
        ids = [say(writer, "bo", rng, step) for step in range(3)]
        reader.memory_briefs_and_conflicts("bo", ids)  # the reader holds bo's briefs
        conversation = writer.active_conversation("bo")
        assert conversation is not None
        extra = writer.insert_message("bo", conversation.id, Role.USER, "also this", NOW + timedelta(hours=1))
        writer._exec(
            "INSERT INTO memory_sources(memory_id, message_id, user_id) VALUES (?, ?, ?)", (ids[0], extra.id, "bo")
        )
        assert reader.memory_briefs("bo", ids)[ids[0]].sources[-1] == extra.id
        writer.delete_messages("bo", [extra.id])
        assert reader.memory_briefs_and_conflicts("bo", ids) == read_from_the_database(reader, "bo", ids)
    finally:
        reader.close()
        writer.close()


def test_an_update_that_changes_nothing_the_process_holds_is_not_logged(url: str) -> None:
    store = PostgresStore(url)
    try:
        memory = say(store, "cy", random.Random(1), 0)
        before = store.count_rows("memory_changes")
        store.update_memory("cy", memory, importance=5)  # not in a brief nor in the keyword index
        set_column(store, memory, "valid_to", None)  # the same value again
        assert store.count_rows("memory_changes") == before
        store.supersede_memories("cy", [memory], by=memory, now=NOW)
        assert store.count_rows("memory_changes") == before + 1
    finally:
        store.close()


def test_a_conflict_shows_on_both_memories_until_one_of_them_goes(url: str) -> None:
    reader, writer = PostgresStore(url), PostgresStore(url)
    try:
        rng = random.Random(9)
        ids = [say(writer, "gu", rng, step) for step in range(4)]
        assert reader.memory_briefs_and_conflicts("gu", ids)[1] == []
        writer.insert_conflict("gu", ids[0], ids[1], NOW, reason="two dates")
        for side in ids[:2]:
            (conflict,) = reader.memory_briefs_and_conflicts("gu", [side, ids[3]])[1]
            assert (conflict.memory_id, conflict.other_memory_id, conflict.reason) == (ids[0], ids[1], "two dates")
        writer.delete_memories("gu", [ids[1]])
        assert reader.memory_briefs_and_conflicts("gu", ids) == read_from_the_database(reader, "gu", ids)
        assert reader.memory_briefs_and_conflicts("gu", [ids[0]])[1] == []
    finally:
        reader.close()
        writer.close()


def test_what_a_rolled_back_transaction_superseded_is_current_again(url: str) -> None:
    store = PostgresStore(url)
    try:
        rng = random.Random(5)
        ids = [say(store, "di", rng, step) for step in range(4)]
        store.memory_briefs_and_conflicts("di", ids)
        with pytest.raises(StoreError), store.transaction():
            store.supersede_memories("di", ids[:2], by=ids[2], now=NOW)
            inside = store.memory_briefs("di", ids)  # the transaction sees its own change
            assert inside[ids[0]].valid_to is not None
            raise StoreError("undo")
        after = store.memory_briefs_and_conflicts("di", ids)
        assert after == read_from_the_database(store, "di", ids)
        assert after[0][ids[0]].valid_to is None
    finally:
        store.close()


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    steps=st.lists(
        st.sampled_from(["say", "supersede", "date", "restore", "delete", "forget", "conflict", "rollback"]),
        max_size=14,
    )
)
def test_any_sequence_of_writes_keeps_the_briefs_those_of_the_database(shared_url: str, steps: list[str]) -> None:
    user = "u" + uuid.uuid4().hex[:8]
    reader, writer = PostgresStore(shared_url), PostgresStore(shared_url)
    try:
        rng = random.Random(len(steps))
        ids = [say(writer, user, rng, step) for step in range(3)]
        reader.memory_briefs_and_conflicts(user, ids)
        for step, action in enumerate(steps):
            alive = memory_ids(writer, user)
            if action == "say" or not alive:
                say(writer, user, rng, 10 + step)
            elif action == "supersede":
                writer.supersede_memories(user, [rng.choice(alive)], by=alive[-1], now=NOW + timedelta(days=step))
            elif action == "date":
                set_column(writer, rng.choice(alive), "event_at", to_text(NOW - timedelta(days=step)))
            elif action == "restore":
                writer.restore_memories(user, alive)
            elif action == "delete":
                message = writer.get_memory(user, rng.choice(alive)).message_ids
                writer.delete_messages(user, list(message))
            elif action == "forget":
                writer.delete_memories(user, [rng.choice(alive)])  # its conflicts go with it
            elif action == "conflict" and len(alive) > 1:
                writer.insert_conflict(user, alive[0], rng.choice(alive[1:]), NOW)
            elif action == "rollback":
                try:
                    with reader.transaction():
                        reader.supersede_memories(user, alive, by=alive[0], now=NOW)
                        reader.memory_briefs(user, alive)
                        raise StoreError("undo")
                except StoreError:
                    pass
            every = memory_ids(writer, user) + ids
            assert reader.memory_briefs_and_conflicts(user, every) == read_from_the_database(reader, user, every)
    finally:
        reader.close()
        writer.close()


def test_an_unfiltered_hybrid_search_answers_as_the_two_searches_in_turn(url: str) -> None:
    store = PostgresStore(url)
    try:
        rng = random.Random(11)
        ids = [say(store, "ed", rng, step) for step in range(40)]
        vectors = np.random.default_rng(2).normal(size=(len(ids), 384)).astype(np.float32)
        store.put_memory_vectors("ed", MODEL, dict(zip(ids, vectors, strict=True)))
        for query, vector in (("moved to lisbon", vectors[3]), ("friday coffee", vectors[20] + vectors[21])):
            together = store.keyword_and_vector_search("ed", query, vector, MODEL, limit=10)
            assert together == searched_in_turn(store, "ed", query, vector, MODEL, 10, None)
            assert (together[0][0] and together[1][0][0][0] == ids[3]) or query != "moved to lisbon"
        # a query with no searchable word still sends the vector search
        nothing = store.keyword_and_vector_search("ed", "the", vectors[5], MODEL, limit=5)
        assert nothing[0] == ([], []) and nothing[1][0][0][0] == ids[5]
    finally:
        store.close()


def test_a_hybrid_search_ranked_before_its_catch_up_ranks_again_when_another_process_wrote(url: str) -> None:
    """The keyword ranking runs on the held index while the server answers the catch-up and the vector search; a
    catch-up that changes the index (another process's memory, delete or edit) makes it rank again: the answers
    are always those of the two searches in turn, as the database now holds them."""
    reader, writer = PostgresStore(url), PostgresStore(url)
    try:
        rng = random.Random(12)
        ids = [say(writer, "ed", rng, step) for step in range(30)]
        vectors = np.random.default_rng(3).normal(size=(len(ids), 384)).astype(np.float32)
        writer.put_memory_vectors("ed", MODEL, dict(zip(ids, vectors, strict=True)))
        query = "lisbon garden"
        assert reader.keyword_and_vector_search("ed", query, vectors[0], MODEL, limit=10)  # the user is held now
        fresh = say(writer, "ed", rng, 99)
        writer.update_memory("ed", fresh, content="lisbon garden lisbon garden")
        writer.put_memory_vectors("ed", MODEL, {fresh: vectors[0]})
        for change in ("new", "deleted"):
            together = reader.keyword_and_vector_search("ed", query, vectors[0], MODEL, limit=10)
            assert together == searched_in_turn(writer, "ed", query, vectors[0], MODEL, 10, None), change
            assert (together[0][0][0][0] == fresh) == (change == "new"), together[0][0]
            writer.delete_memories("ed", [fresh])
    finally:
        reader.close()
        writer.close()


def test_integer_lists_go_to_the_server_as_one_array_literal(url: str) -> None:
    assert array_parameter([3, 1, 2]) == "{3,1,2}"
    assert array_parameter(["a", "b"]) == ["a", "b"] and array_parameter([True, 2]) == [True, 2]
    assert collapse_in_lists("x IN (?, ?) AND y NOT IN (?)", [1, 2, 9]) == (
        "x = ANY(?) AND y <> ALL(?)",
        ["{1,2}", "{9}"],
    )
    store = PostgresStore(url)
    try:
        rng = random.Random(2)
        ids = [say(store, "fi", rng, step) for step in range(5)]
        found = store._all(
            "SELECT id FROM memories WHERE user_id IN (?, ?) AND id IN (?, ?, ?) AND id NOT IN (?) ORDER BY id",
            ["fi", "nobody", ids[0], ids[2], ids[4], ids[2]],
        )
        assert [int(r[0]) for r in found] == [ids[0], ids[4]]
    finally:
        store.close()


def test_a_search_catches_up_once(url: str) -> None:
    from narrative.store.postgres.search import _CATCH_UP

    store = PostgresStore(url)
    try:
        rng = random.Random(4)
        ids = [say(store, "hu", rng, step) for step in range(30)]
        vectors = np.random.default_rng(3).normal(size=(len(ids), 384)).astype(np.float32)
        store.put_memory_vectors("hu", MODEL, dict(zip(ids, vectors, strict=True)))
        sent = statements_sent(store)
        for names_read in (1, 0):  # the first loads the user and reads the speaker names; the second holds them
            sent.clear()
            with store.reading("hu"):
                store.participant_names("hu")
                store.keyword_and_vector_search("hu", "moved to lisbon", vectors[0], MODEL, limit=20)
                store.memory_briefs_and_conflicts("hu", ids)
                store.memory_briefs("hu", ids[:3])
            catch_ups = [s for s in sent if s.startswith(_CATCH_UP[:40])]
            assert len(catch_ups) == 1
            assert sum("FROM storylines" in s for s in sent) == names_read
        sent.clear()
        store.memory_briefs_and_conflicts("hu", ids)  # outside a search: catches up
        assert sum(s.startswith(_CATCH_UP[:40]) for s in sent) == 1
    finally:
        store.close()


@pytest.mark.parametrize("in_a_search", [True, False])
def test_another_threads_uncommitted_memory_stays_unseen(url: str, in_a_search: bool) -> None:
    """Another thread's catch-up inside its transaction moves the shared index to its view (its uncommitted rows):
    a read by this thread catches up again, inside a search too, and reads those memories again as it sees them
    (the log's entries for them are not committed: this thread's catch-up cannot see them)."""
    store = PostgresStore(url)
    try:
        rng = random.Random(8)
        ids = [say(store, "iv", rng, step) for step in range(5)]
        written, release = threading.Event(), threading.Event()
        made: list[int] = []

        def writer() -> None:
            try:
                with store.transaction():
                    made.append(say(store, "iv", random.Random(1), 99))
                    store._exec("UPDATE memories SET content = 'zebra crossing' WHERE id = ?", (made[0],))
                    store.keyword_search_memories("iv", "zebra")  # the shared index now shows it to this thread
                    written.set()
                    release.wait(30)
                    raise StoreError("undo")
            except StoreError:
                pass

        with store.reading("iv") if in_a_search else contextlib.nullcontext():
            thread = threading.Thread(target=writer)
            thread.start()
            assert written.wait(30)
            keywords, _ = store.keyword_search_memories_and_passages("iv", "zebra", None, 10)
            briefs, _ = store.memory_briefs_and_conflicts("iv", [*ids, *made])
            release.set()
            thread.join(30)
        assert keywords == [] and made[0] not in briefs and set(briefs) == set(ids)
    finally:
        store.close()


def test_a_search_holds_the_speaker_names_until_a_storyline_changes(url: str) -> None:
    reader, writer = PostgresStore(url), PostgresStore(url)
    try:
        say(writer, "jo", random.Random(1), 0)
        storyline = writer.insert_storyline("jo", "Trip", StorylineKind.USER, NOW)
        writer.update_storyline("jo", storyline.id, participants=[Participant("Caroline", "participant")])
        sent = statements_sent(reader)
        for expected in (1, 0):  # read once, then held
            sent.clear()
            with reader.reading("jo"):
                assert "Caroline" in reader.participant_names("jo")
                reader.keyword_search_memories_and_passages("jo", "lisbon", None, 5)
            assert sum("FROM storylines" in s for s in sent) == expected
        writer.update_storyline("jo", storyline.id, updated_at=NOW)  # not the participants: nothing to read again
        writer.update_storyline(
            "jo", storyline.id, participants=[Participant("Caroline", "participant"), Participant("Mel", "participant")]
        )
        with reader.reading("jo"):  # held names come before the search's catch-up, the new ones after it
            assert reader.participant_names("jo") == {"Caroline"}
            reader.keyword_search_memories_and_passages("jo", "lisbon", None, 5)
            assert {"Caroline", "Mel"} <= reader.participant_names("jo")
        writer.delete_storyline("jo", storyline.id)
        with reader.reading("jo"):
            reader.keyword_search_memories_and_passages("jo", "lisbon", None, 5)
            assert reader.participant_names("jo") == writer.participant_names("jo")
        assert reader.participant_names("jo") == writer.participant_names("jo")  # outside a search: read
    finally:
        reader.close()
        writer.close()


def test_a_search_whose_speakers_changed_meanwhile_searches_with_the_new_names(url: str, minilm: Any) -> None:
    """The held names are used before the search's catch-up (sent with its vector search); when the catch-up says
    a speaker came, the search embeds the query again without the new name and searches again."""
    from narrative.providers.embed import embed_one
    from narrative.read.search import SearchMode, SearchParams, hybrid_search

    reader, writer = PostgresStore(url), PostgresStore(url)
    try:
        say(writer, "jo", random.Random(2), 0)
        storyline = writer.insert_storyline("jo", "Trip", StorylineKind.USER, NOW)
        writer.update_storyline("jo", storyline.id, participants=[Participant("Caroline", "participant")])
        embedded: list[str] = []

        def embed(text: str) -> tuple[np.ndarray, str]:  # the real model, told what it embeds
            embedded.append(text)
            return embed_one(minilm, text), minilm.identity

        params = SearchParams(k=5, pool=20, mode=SearchMode.HYBRID)
        hybrid_search(reader, "jo", "what did Mel say about lisbon", NOW, params, embed_query=embed)
        assert embedded == ["what did Mel say about lisbon"]  # Mel is nobody yet
        writer.update_storyline(
            "jo", storyline.id, participants=[Participant("Caroline", "participant"), Participant("Mel", "participant")]
        )
        embedded.clear()
        hybrid_search(reader, "jo", "what did Mel say about lisbon", NOW, params, embed_query=embed)
        assert "what did say about lisbon" in embedded, embedded  # the query without the new speaker's name
    finally:
        reader.close()
        writer.close()


def test_a_process_past_its_bound_lets_the_least_recently_searched_users_go(url: str) -> None:
    """A worker serving many users holds at most ``held_rows`` memories and messages: the users it searched least
    recently are let go (never the one being searched) and read again on their next search, which then answers
    as the database holds their memories now, whatever another process wrote meanwhile."""
    reader, writer = PostgresStore(url, held_rows=25), PostgresStore(url)
    try:
        rng = random.Random(13)
        ids = {user: [say(writer, user, rng, step) for step in range(10)] for user in ("ann", "bo", "cy")}
        vectors = np.random.default_rng(4).normal(size=(10, 384)).astype(np.float32)
        for user, made in ids.items():
            writer.put_memory_vectors(user, MODEL, dict(zip(made, vectors, strict=True)))

        def searched(user: str) -> None:
            for query in ("lisbon garden", "friday coffee"):
                got = reader.keyword_and_vector_search(user, query, vectors[1], MODEL, limit=5)
                assert got == searched_in_turn(writer, user, query, vectors[1], MODEL, 5, None), user
            assert reader.memory_briefs_and_conflicts(user, ids[user]) == read_from_the_database(
                writer, user, ids[user]
            )

        searched("ann")
        searched("bo")
        assert reader._keyword_users == {"ann", "bo"}  # 20 held
        searched("cy")  # 30 > 25: ann, searched least recently, goes
        assert reader._keyword_users == {"bo", "cy"} and "ann" not in reader._briefs
        writer.update_memory("ann", ids["ann"][0], content="lisbon garden lisbon garden")  # while ann is not held
        writer.delete_memories("ann", [ids["ann"][1]])
        searched("ann")  # read again: bo goes now, cy stays
        assert reader._keyword_users == {"cy", "ann"}
        top = reader.keyword_and_vector_search("ann", "lisbon garden", None, MODEL, limit=1)[0][0]
        assert top[0][0] == ids["ann"][0]
        # messages held for the write path count too
        assert reader.search_messages("bo", "garden lisbon coffee friday sprint", 3)
        assert "bo" in reader._held_messages and "cy" not in reader._keyword_users
        # the user being searched stays, even alone past the bound; 0 means no bound
        alone = PostgresStore(url, held_rows=5)
        unbounded = PostgresStore(url, held_rows=0)
        try:
            for user in ids:
                alone.keyword_search_memories(user, "garden")
                unbounded.keyword_search_memories(user, "garden")
                assert alone._keyword_users == {user}
            assert unbounded._keyword_users == set(ids)
        finally:
            alone.close()
            unbounded.close()
    finally:
        reader.close()
        writer.close()


def test_the_bound_set_on_a_memory_reaches_its_postgresql_store(url: str) -> None:
    from narrative.engine import Memory

    with Memory(url, user="ann", embedder="none", env={}, held_rows=7) as mem:
        assert isinstance(mem.store, PostgresStore) and mem.store._held_rows == 7
    with Memory(url, user="ann", embedder="none", env={"NARRATIVE_HELD_ROWS": "0"}) as mem:
        assert isinstance(mem.store, PostgresStore) and mem.store._held_rows == 0
