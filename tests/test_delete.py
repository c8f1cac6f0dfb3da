"""Deletes leave nothing behind: no row, no full-text entry, no vector (stored or in the in-process index).

Checked by looking into the database itself: row counts of every table, the FTS5 shadow tables
(``*_fts_docsize`` has one row per indexed document) and FTS5's own integrity check against the
content tables, plus searches of the in-process vector index.  On PostgreSQL (every test runs on
both stores) the keyword searches of each kind stand in for the FTS tables, and the in-process
keyword index must hold exactly the memories table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import narrative
from conftest import FakeClock
from narrative.errors import InvalidTransition, NotFound
from narrative.model import EntityType, StorylineKind
from narrative.store.opening import open_store

Snap = Callable[[Any], dict[str, list[tuple[Any, ...]]]]
FTS = {
    "memories_fts": "memories",
    "messages_fts": "messages",
    "narratives_fts": "narratives",
    "storylines_fts": "storylines",
}

GARDEN = [
    ("user", "We decided to use zinnias instead of marigolds because bees love them."),
    ("assistant", "Zinnias it is. What comes next?"),
    ("user", "I'm waiting on Tomas to send the seed catalogue."),
]
SEEDS = [
    ("user", "Tomas sent the seed catalogue this morning, so we can order."),
    ("assistant", "Then the order can go out today."),
    ("user", "I need to order the zeppelin tomato seeds."),
]


@pytest.fixture
def mem(db: str, clock: FakeClock) -> Iterator[narrative.Memory]:
    """Vectors on (hashing embedder) so that deleting them can be checked."""
    memory = narrative.Memory(db, user="alice", embedder="hashing", clock=clock, env={})
    yield memory
    memory.close()


def session(mem: narrative.Memory, turns: list[tuple[str, str]], title: str, user: str = "alice") -> int:
    conversation = mem.start_conversation(title, user=user)
    for role, text in turns:
        mem.remember(text, role, speaker=user if role == "user" else "rook", user=user)
    mem.close_conversation(user=user)
    mem.confirm_memory(user=user)
    return conversation.id


def user_tables(store: Any) -> list[str]:
    if store.backend == "postgres":
        rows = store._all(
            "SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND column_name = 'user_id'"
        )
        return sorted(r[0] for r in rows)
    rows = store.conn.execute(
        "SELECT m.name FROM sqlite_master m WHERE m.type = 'table' AND EXISTS"
        " (SELECT 1 FROM pragma_table_info(m.name) WHERE name = 'user_id')"
    )
    return sorted(r[0] for r in rows)


def census(store: Any, user: str) -> dict[str, int]:
    """Rows of ``user`` in every table, and child rows hanging on nothing."""
    counts = {t: store.count_rows(t, user) for t in user_tables(store)}
    counts["users"] = store._exec("SELECT COUNT(*) FROM users WHERE id = ?", (user,)).fetchone()[0]
    for child, parent, column in (
        ("memory_sources", "memories", "memory_id"),
        ("use_references", "uses", "use_id"),
        ("memory_sources", "messages", "message_id"),
    ):
        counts[f"orphan {child}.{column}"] = store._exec(
            f"SELECT COUNT(*) FROM {child} WHERE {column} NOT IN (SELECT id FROM {parent})"
        ).fetchone()[0]
    return counts


def assert_fts_clean(store: Any) -> None:
    """Every FTS index holds exactly its content table's rows (FTS5 integrity check, rank 1)."""
    if store.backend == "postgres":  # the in-process keyword index holds exactly the memories
        for user in store.list_users():
            store.keyword_search_memories(user.id, "anything")  # loads every user's memories into it
        assert (len(store._keywords) if store._keywords is not None else 0) == store.count_rows("memories")
        return
    for fts, content in FTS.items():
        store.conn.execute(f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)")
        indexed = store.conn.execute(f"SELECT COUNT(*) FROM {fts}_docsize").fetchone()[0]
        assert indexed == store.conn.execute(f"SELECT COUNT(*) FROM {content}").fetchone()[0], fts


def fts_hits(store: Any, word: str) -> dict[str, list[int]]:
    if store.backend == "postgres":  # every kind of keyword search, for every user there is or was
        users = sorted({u.id for u in store.list_users()} | {"alice", "bob"})
        return {
            "memories_fts": [i for u in users for i, _ in store.keyword_search_memories(u, word)],
            "messages_fts": [m.id for u in users for m, _ in store.search_messages(u, word)],
            "narratives_fts": [n.id for u in users for n in store.search_narratives(u, word)],
            "storylines_fts": [i for u in users for i, _ in store.keyword_search_storylines(u, word)],
        }
    return {
        fts: [r[0] for r in store.conn.execute(f"SELECT rowid FROM {fts} WHERE {fts} MATCH ?", (word,))] for fts in FTS
    }


def vector_ids(mem: narrative.Memory, text: str, user: str = "alice") -> set[int]:
    assert mem.embedder is not None
    query = mem.embedder.embed_batch([text])[0]
    return {i for i, _ in mem.store.vector_search(user, np.asarray(query), mem.embedder.identity, k=500)}


# --- a user ------------------------------------------------------------------------------------------


def test_delete_user_leaves_no_row_no_index_entry_no_vector(mem: narrative.Memory) -> None:
    store = mem.store
    assert store.backend in ("sqlite", "postgres")
    session(mem, GARDEN, "zinnias")
    session(mem, SEEDS, "seeds")
    mem.search("zinnias", k=3)  # a recorded use
    mem.create_api_key(label="phone")
    mem.remember("A quokka visited the garden.", speaker="alice")  # an active conversation too
    session(mem, [("user", "Bob here: I decided to paint the shed blue because it is cheerful.")], "shed", "bob")
    bob_before = census(store, "bob")
    assert vector_ids(mem, "zinnias bees marigolds")  # the in-process index is built and answers
    result = mem.delete_user("alice")
    assert result["deleted"]["memories"] > 0
    left = census(store, "alice")
    assert all(n == 0 for n in left.values()), {k: v for k, v in left.items() if v}
    assert census(store, "bob") == bob_before
    assert_fts_clean(store)
    for word in ("zinnias", "quokka", "catalogue"):
        assert fts_hits(store, word) == {fts: [] for fts in FTS}, word
    assert store.memory_vectors("alice")[0] == []
    assert vector_ids(mem, "zinnias bees marigolds") == set()
    assert vector_ids(mem, "paint the shed blue", user="bob")  # bob's vectors still answer
    with pytest.raises(NotFound):
        mem.delete_user("alice")
    assert mem.greet().text == "Hello. Nothing is open yet."  # the name starts afresh


# --- a memory ----------------------------------------------------------------------------------------


def test_delete_memory_takes_its_entities_vector_and_index_entry(mem: narrative.Memory) -> None:
    store = mem.store
    assert store.backend in ("sqlite", "postgres")
    first = session(mem, GARDEN, "zinnias")
    second = session(mem, SEEDS, "seeds")
    waiting = next(e for e in store.list_entities("alice", entity_types=[EntityType.WAITING_ON]))
    assert not waiting.is_active
    closing = mem.get_conversation_archive(second)["memories"][0]
    assert waiting.resolved_by_memory_id == closing.id
    attached = {e.id for e in store.list_entities("alice", memory_id=closing.id)}
    assert attached and closing.id in vector_ids(mem, closing.content)
    mem.delete_memory(closing.id)
    with pytest.raises(NotFound):
        mem.get_memory(closing.id)
    assert not [e for e in store.list_entities("alice") if e.id in attached]
    assert not store.list_state_deltas("alice", memory_id=closing.id)
    for table in ("memory_vectors", "memory_sources"):
        assert store._exec(f"SELECT COUNT(*) FROM {table} WHERE memory_id = ?", (closing.id,)).fetchone()[0] == 0  # type: ignore[attr-defined]
    assert closing.id not in vector_ids(mem, closing.content)
    assert closing.id not in {i for hits in fts_hits(store, "catalogue").values() for i in hits}
    assert_fts_clean(store)
    reopened = store.get_entity("alice", waiting.id)  # the resolution came from the deleted memory
    assert reopened.is_active and reopened.resolved_by_memory_id is None and reopened.resolved_at is None
    assert mem.get_conversation_archive(first)["memories"]  # the other conversation's memory stays
    with pytest.raises(NotFound):
        mem.delete_memory(closing.id)


def test_deleting_the_only_memory_of_a_running_link_splices_the_link_out(mem: narrative.Memory) -> None:
    mem.start_conversation()
    result = mem.remember("We decided to grow pumpkins because the kids love them.", speaker="alice")
    link = result.narrative
    assert link is not None and not link.sealed
    for memory in result.memories:
        mem.delete_memory(memory.id)
    with pytest.raises(NotFound):
        mem.store.get_narrative("alice", link.id)
    assert_fts_clean(mem.store)


# --- a conversation ----------------------------------------------------------------------------------


def test_delete_conversation_takes_what_came_only_from_it(mem: narrative.Memory) -> None:
    store = mem.store
    assert store.backend in ("sqlite", "postgres")
    first = session(mem, GARDEN, "zinnias")
    mem.search("catalogue")  # recorded while nothing is active
    second = session(mem, SEEDS, "seeds")
    third = session(mem, [("user", "The zinnias are sprouting; I realized the bees found them first.")], "sprouts")
    before_first = {t: len(rows) for t, rows in mem.get_conversation_archive(first).items() if isinstance(rows, list)}
    second_memories = [m.id for m in mem.list_memories(conversation_id=second, limit=500)]
    second_links = [n.id for n in mem.list_narratives(limit=500) if n.conversation_id == second]
    third_link = next(n for n in mem.list_narratives(limit=500) if n.conversation_id == third)
    assert second_memories and second_links
    counts = mem.delete_conversation(second)
    assert counts["messages"] == len(SEEDS) and counts["memories"] == len(second_memories)
    with pytest.raises(NotFound):
        mem.get_conversation(second)
    assert mem.store.get_memories("alice", second_memories) == []
    for table in ("messages", "entities", "state_deltas", "memories", "narratives"):
        assert (
            store._exec(  # type: ignore[attr-defined]
                f"SELECT COUNT(*) FROM {table} WHERE conversation_id = ?",
                (second,),
            ).fetchone()[0]
            == 0
        ), table
    marks = ",".join("?" * len(second_memories))
    assert (
        store._exec(  # type: ignore[attr-defined]
            f"SELECT COUNT(*) FROM memory_vectors WHERE memory_id IN ({marks})",
            second_memories,
        ).fetchone()[0]
        == 0
    )
    assert not vector_ids(mem, "Tomas sent the seed catalogue") & set(second_memories)
    assert fts_hits(store, "zeppelin") == {fts: [] for fts in FTS}
    assert_fts_clean(store)
    # the first conversation is untouched, except that its waiting-on is open again
    after_first = {t: len(rows) for t, rows in mem.get_conversation_archive(first).items() if isinstance(rows, list)}
    assert after_first == before_first
    assert any(e.entity_type is EntityType.WAITING_ON for e in mem.open_threads())
    # the chain stays whole: the third conversation's link now follows the first's
    chain = [n.conversation_id for n in mem.walk_back(third_link.id)]
    assert second not in chain and first in chain
    assert not set(second_links) & {n.id for n in mem.list_narratives(limit=500)}


def test_delete_conversation_drops_storylines_left_empty(mem: narrative.Memory) -> None:
    first = session(mem, GARDEN, "zinnias")
    used = {m.storyline_id for m in mem.messages(first)}
    detected = [s for s in mem.list_storylines() if s.kind is StorylineKind.DETECTED and s.id in used]
    assert detected
    counts = mem.delete_conversation(first)
    assert counts["storylines"] == len(detected)
    remaining = {s.id for s in mem.list_storylines(include_archived=True)}
    assert not remaining & {s.id for s in detected}
    assert_fts_clean(mem.store)
    assert fts_hits(mem.store, "zinnias") == {fts: [] for fts in FTS}


# --- a storyline -------------------------------------------------------------------------------------


def topic_of(mem: narrative.Memory, conversation_id: int) -> int:
    """The detected storyline the conversation's first message was routed to."""
    storyline_id = mem.messages(conversation_id)[0].storyline_id
    assert storyline_id is not None
    assert mem.get_storyline(storyline_id).kind is StorylineKind.DETECTED
    return storyline_id


def test_delete_storyline_moves_its_memories_to_your_story(mem: narrative.Memory, snapshot: Snap) -> None:
    cid = session(mem, GARDEN, "zinnias")
    storyline = mem.get_storyline(topic_of(mem, cid))
    moved = mem.list_memories(storyline_id=storyline.id, limit=500)
    result = mem.delete_storyline(storyline.id)
    assert result["moved_memories"] == len(moved)
    your_story = mem.your_story()
    assert {m.id for m in moved} <= {m.id for m in mem.list_memories(storyline_id=your_story.id, limit=500)}
    with pytest.raises(NotFound):
        mem.get_storyline(storyline.id)
    assert (
        mem.store._exec(  # type: ignore[attr-defined]
            "SELECT COUNT(*) FROM storyline_vectors WHERE storyline_id = ?",
            (storyline.id,),
        ).fetchone()[0]
        == 0
    )
    assert_fts_clean(mem.store)
    before = snapshot(mem.store)
    with pytest.raises(InvalidTransition):
        mem.delete_storyline(your_story.id)
    with pytest.raises(NotFound):
        mem.delete_storyline(9999)
    assert snapshot(mem.store) == before


def test_delete_storyline_with_its_memories(mem: narrative.Memory) -> None:
    store = mem.store
    assert store.backend in ("sqlite", "postgres")
    cid = session(mem, GARDEN, "zinnias")
    storyline_id = topic_of(mem, cid)
    ids = [m.id for m in mem.list_memories(storyline_id=storyline_id, limit=500)]
    routed = [m for m in mem.messages(cid) if m.storyline_id == storyline_id]
    counts = mem.delete_storyline(storyline_id, move_to_your_story=False)
    assert counts["memories"] == len(ids) and counts["messages"] == len(routed)
    assert store.get_memories("alice", ids) == []
    assert not vector_ids(mem, "zinnias marigolds bees") & set(ids)
    assert len(routed) == len(GARDEN)  # the whole conversation was about zinnias: it went with the storyline
    assert counts["conversations"] == 1 and store.list_messages("alice", conversation_id=cid) == []
    with pytest.raises(NotFound):
        mem.get_conversation(cid)
    for table in ("memories", "narratives", "messages", "entities"):
        assert (
            store._exec(  # type: ignore[attr-defined]
                f"SELECT COUNT(*) FROM {table} WHERE storyline_id = ?",
                (storyline_id,),
            ).fetchone()[0]
            == 0
        )
    assert_fts_clean(store)


def test_a_conversation_a_storyline_delete_leaves_without_messages_goes_too(mem: narrative.Memory) -> None:
    """Not "A family evening · 0 messages": the emptied conversation goes, title and all; the active one stays."""
    cid = session(
        mem,
        [("user", "My sister Ana came over for dinner with her kids."), ("user", "We played board games until late.")],
        "A family evening",
    )
    first, second = (m.storyline_id for m in mem.messages(cid))
    assert first != second and first is not None and second is not None
    counts = mem.delete_storyline(first, move_to_your_story=False)
    assert counts.get("conversations", 0) == 0 and mem.get_conversation(cid).message_count == 1  # one message left
    counts = mem.delete_storyline(second, move_to_your_story=False)
    assert counts.get("conversations", 0) == 1
    with pytest.raises(NotFound):
        mem.get_conversation(cid)
    assert "A family evening" not in [c.title for c in mem.list_conversations(limit=100)]
    active = mem.start_conversation("Tonight")
    mem.remember("My sister Ana came over for dinner again.", speaker="alice")
    [routed] = mem.messages(active.id)
    assert routed.storyline_id is not None
    counts = mem.delete_storyline(routed.storyline_id, move_to_your_story=False)
    kept = mem.get_conversation(active.id)  # the agent is still talking in it
    assert counts.get("conversations", 0) == 0 and (kept.status.value, kept.message_count, kept.title) == (
        "active",
        0,
        "Tonight",
    )
    assert_fts_clean(mem.store)


def test_a_deleted_id_is_never_given_again(mem: narrative.Memory) -> None:
    """An agent that kept "conversation 3" must not find another conversation there: the ids of deleted
    conversations, messages and storylines (the newest ones, which SQLite would hand out again) stay unused."""
    session(mem, GARDEN, "zinnias")
    last = session(mem, SEEDS, "seeds")
    old_messages = {m.id for m in mem.messages(last)}
    made = mem.create_storyline("Seed orders", description="what we ordered")
    mem.delete_conversation(last)
    mem.delete_storyline(made.id)
    again = session(mem, SEEDS, "seeds again")
    assert again > last
    assert min(m.id for m in mem.messages(again)) > max(old_messages)
    assert mem.create_storyline("Seed orders", description="what we ordered").id > made.id
    with pytest.raises(NotFound):
        mem.get_conversation(last)


def test_the_ids_a_caller_passes_back_are_never_given_again(mem: narrative.Memory) -> None:
    """A use, a binding, an API key, an open item and a narrative link are named by id in later calls
    (learn_from_outcome, complete_binding, revoke_api_key, resolve_thread, walk_back): after the newest one is
    deleted, the next one gets a new id on SQLite too, as on PostgreSQL (revoking key 1 twice must not revoke
    the key made after it)."""
    your_story = mem.your_story()
    old_binding = mem.bind(your_story.id, "toolset", "shovels")
    mem.delete_binding(old_binding.id)
    assert mem.bind(your_story.id, "toolset", "rakes").id > old_binding.id

    mem.create_api_key(label="laptop")
    old_key = mem.list_api_keys()[-1]["id"]
    mem.revoke_api_key(old_key)
    mem.create_api_key(label="phone")
    assert mem.list_api_keys()[-1]["id"] > old_key

    shed = mem.add_memory("The shed key is under the blue pot.")
    mem.search("shed key", record=True)
    old_use = mem.list_uses()[0].id
    mem.delete_memory(shed.id)  # the use that quoted it goes too
    mem.add_memory("The gate code is 4711.")
    mem.search("gate code", record=True)
    assert mem.list_uses()[0].id > old_use
    with pytest.raises(NotFound):
        mem.get_use(old_use)

    last = session(mem, SEEDS, "seeds")
    old_items = [e.id for e in mem.open_threads()]
    old_links = [n.id for n in mem.list_narratives()]
    assert old_items and old_links
    mem.delete_conversation(last)
    session(mem, SEEDS, "seeds again")
    assert min(e.id for e in mem.open_threads()) > max(old_items)
    assert min(n.id for n in mem.list_narratives()) > max(old_links)


def test_a_storyline_counts_only_the_messages_it_still_has_after_a_delete(mem: narrative.Memory) -> None:
    """`narrative storylines` says "N messages": a deleted conversation's messages are no longer counted, and the
    messages a deleted storyline hands to Your Story are counted there."""

    def counted() -> dict[int, tuple[int, int]]:
        return {
            s.id: (s.interaction_count, len(mem.store.list_messages("alice", storyline_id=s.id)))
            for s in mem.list_storylines(include_archived=True)
        }

    first = session(mem, [("user", "Hello!"), *GARDEN], "zinnias")
    second = session(mem, [("user", "Hi there!"), *SEEDS], "seeds")
    shared = {m.storyline_id for m in mem.messages(first)} & {m.storyline_id for m in mem.messages(second)}
    assert shared  # both began with a greeting: Small talk holds a message of each
    mem.delete_conversation(second)
    assert all(count == held for count, held in counted().values()), counted()
    topic = next(m.storyline_id for m in mem.messages(first) if m.storyline_id not in shared)
    assert topic is not None
    mem.delete_storyline(topic)
    count, held = counted()[mem.your_story().id]
    assert count == held > 0


def test_a_deleted_default_storyline_comes_back_when_needed(mem: narrative.Memory) -> None:
    mem.your_story()  # makes alice, with her default storylines (a read would make nothing)
    small_talk = next(s for s in mem.list_storylines() if s.kind is StorylineKind.DEFAULT)
    mem.delete_storyline(small_talk.id)
    mem.start_conversation()
    mem.remember("Hi there!", speaker="alice")
    mem.remember("Thanks, bye!", speaker="alice")
    assert any(s.kind is StorylineKind.DEFAULT for s in mem.list_storylines())


# --- the CLI -----------------------------------------------------------------------------------------


def test_cli_delete(mem: narrative.Memory, db: str) -> None:
    from narrative.interfaces.cli import _register, cli

    _register()
    cid = session(mem, GARDEN, "zinnias")
    memory_id = mem.list_memories(limit=1)[0].id
    mem.close()
    runner = CliRunner()
    base = ["--db", db, "--user", "alice", "--embedder", "hashing"]
    refused = runner.invoke(cli, [*base, "delete", "memory", str(memory_id)], input="n\n")
    assert refused.exit_code != 0
    done = runner.invoke(cli, [*base, "delete", "memory", str(memory_id), "--yes", "--json"])
    assert done.exit_code == 0, done.output
    done = runner.invoke(cli, [*base, "delete", "conversation", str(cid), "--yes"])
    assert done.exit_code == 0 and f"deleted conversation #{cid}" in done.output
    done = runner.invoke(cli, [*base, "delete", "user", "alice", "--yes", "--json"])
    assert done.exit_code == 0, done.output
    store = open_store(db)
    try:
        assert all(n == 0 for n in census(store, "alice").values())
        assert_fts_clean(store)
    finally:
        store.close()
