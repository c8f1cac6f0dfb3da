"""The compact id map of the in-process indexes answers like a dict, whatever the order of ids."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from narrative.store.id_map import MISSING, IdMap

ops = st.lists(
    st.tuples(st.sampled_from(["set", "pop", "set_many"]), st.integers(0, 300), st.integers(0, 10_000)),
    max_size=300,
)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_the_map_answers_like_a_dict(steps: list[tuple[str, int, int]]) -> None:
    mapping, oracle = IdMap(), {}
    for op, ident, value in steps:
        if op == "set":
            mapping.set(ident, value)
            oracle[ident] = value
        elif op == "set_many":  # a batch of distinct ids, some below the largest (a merge), some above
            idents = list(dict.fromkeys([ident, ident + 7, max(0, ident - 50)]))
            mapping.set_many(idents, [value + i for i in range(len(idents))])
            oracle.update({i: value + n for n, i in enumerate(idents)})
        else:
            assert mapping.pop(ident) == oracle.pop(ident, MISSING)
    assert len(mapping) == len(oracle)
    assert mapping.ids().tolist() == sorted(oracle)
    probe = np.arange(-2, 310)
    assert mapping.get_many(probe).tolist() == [oracle.get(int(i), MISSING) for i in probe]
    assert all((i in mapping) == (i in oracle) for i in range(-2, 310))


def test_increasing_ids_cost_sixteen_bytes_each() -> None:
    mapping = IdMap()
    for start in range(0, 100_000, 10_000):
        mapping.set_many(np.arange(start, start + 10_000), np.arange(10_000))
    assert len(mapping) == 100_000 and mapping.get(99_999) == 9_999
    assert mapping.nbytes <= 2 * 16 * 100_000  # two int64 arrays, at most doubled capacity
    for ident in range(0, 90_000):
        mapping.pop(ident)
    assert len(mapping) == 10_000 and mapping.nbytes < 16 * 100_000  # tombstones compacted away
    assert mapping.get(95_000) == 5_000 and mapping.get(5) == MISSING
