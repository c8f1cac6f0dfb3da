"""Many memories at once: update and delete by id or by filter, each all or nothing, on both stores."""

from __future__ import annotations

import pytest

import narrative
from narrative.errors import NotFound, ValidationError


@pytest.fixture
def three(mem: narrative.Memory) -> list[int]:
    return [
        mem.add_memory(text, metadata={"project": project}).id
        for text, project in (
            ("The shed roof leaks in the north corner.", "garden"),
            ("Order cedar boards for the raised beds.", "garden"),
            ("Renew the car insurance in May.", "home"),
        )
    ]


def test_update_many_in_one_go(mem: narrative.Memory, three: list[int]) -> None:
    a, b, _ = three
    done = mem.update_memories(
        [{"id": a, "content": "The shed roof leaks in the south corner.", "importance": 4}, {"id": b, "metadata": {}}]
    )
    assert [m.id for m in done] == [a, b]
    assert mem.get_memory(a).content.endswith("south corner.") and mem.get_memory(a).importance == 4
    assert mem.get_memory(b).metadata == {}
    assert mem.history(a)[-1].detail == {"fields": ["content", "importance"]}


def test_an_update_refused_changes_none(mem: narrative.Memory, three: list[int]) -> None:
    a, b, _ = three
    before = [mem.get_memory(i) for i in three]
    with pytest.raises(ValidationError, match="importance"):
        mem.update_memories([{"id": a, "content": "Changed."}, {"id": b, "importance": 9}])
    with pytest.raises(NotFound):
        mem.update_memories([{"id": a, "content": "Changed."}, {"id": 999, "content": "No such memory."}])
    with pytest.raises(ValidationError, match="unknown stream"):
        mem.update_memories([{"id": a, "stream": "decision"}])
    with pytest.raises(ValidationError, match="twice"):
        mem.update_memories([{"id": a, "importance": 3}, {"id": a, "importance": 4}])
    assert [mem.get_memory(i) for i in three] == before
    assert all(len(mem.history(i)) == 1 for i in three)


def test_delete_many_by_id_all_or_none(mem: narrative.Memory, three: list[int]) -> None:
    a, b, c = three
    with pytest.raises(NotFound, match="999"):
        mem.delete_memories([a, 999])
    assert mem.get_memory(a).id == a
    done = mem.delete_memories([a, b])
    assert done["ids"] == [a, b] and done["memories"] == 2
    assert [m.id for m in mem.list_memories()] == [c]
    assert mem.history(a)[-1].kind.value == "deleted"


def test_delete_by_filter(mem: narrative.Memory, three: list[int]) -> None:
    done = mem.delete_memories(filters={"metadata.project": "garden"})
    assert done["ids"] == three[:2]
    assert [m.id for m in mem.list_memories()] == [three[2]]
    assert mem.delete_memories(filters={"metadata.project": "garden"})["ids"] == []
    bad: dict[str, object] | None
    for bad in ({}, None):
        with pytest.raises(ValidationError):
            mem.delete_memories(filters=bad)
    with pytest.raises(ValidationError, match="one of the two"):
        mem.delete_memories([three[2]], filters={"stream": "fact"})
    with pytest.raises(ValidationError, match="no field"):
        mem.delete_memories(filters={"projekt": "home"})
    assert [m.id for m in mem.list_memories()] == [three[2]]


@pytest.mark.parametrize("turns", ["hello", [{"content": "hi"}], [["hi", "user"]], 5, {"content": "hi"}])
def test_remember_many_takes_turns_and_says_so_otherwise(mem: narrative.Memory, turns: object) -> None:
    """Anything but a list of ``Turn`` is refused by name before a message is stored (a string used to be read
    as one-letter turns' worth of AttributeError)."""
    with pytest.raises(ValidationError, match="turns must"):
        mem.remember_many(turns)  # type: ignore[arg-type]
    assert mem.store.count_rows("messages") == 0
