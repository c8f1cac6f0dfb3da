"""The in-process vector index: every backend answers exactly what a brute-force scan over one user answers."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest

from narrative.errors import EmbeddingMismatch, ValidationError
from narrative.store.vector_index import VectorIndex

DIMS = 16
BACKENDS = ["exact", "hnsw", "auto"]

MakeIndex = Callable[[], VectorIndex]


@pytest.fixture(params=BACKENDS)
def make_index(request: pytest.FixtureRequest) -> MakeIndex:
    """A factory for empty indexes of one backend.

    ``ef_search`` above the data size makes the HNSW search exhaustive on these
    small sets, so its answers can be compared with brute force exactly;
    ``auto`` switches to a graph at 100 vectors so both halves of the hybrid run.
    """
    backend = request.param

    def make() -> VectorIndex:
        return VectorIndex(DIMS, backend=backend, hnsw_threshold=100, exact_limit=8, ef_search=1024)

    return make


def unit_rows(count: int, seed: int) -> npt.NDArray[np.float32]:
    rows = np.random.default_rng(seed).normal(size=(count, DIMS)).astype(np.float32)
    return np.asarray(rows / np.linalg.norm(rows, axis=1, keepdims=True), dtype=np.float32)


def brute_force(
    rows: dict[int, np.ndarray], query: np.ndarray, k: int, allowed: set[int] | None = None
) -> list[tuple[int, float]]:
    query = query / np.linalg.norm(query)
    scored = [(ident, float(vector @ query)) for ident, vector in rows.items() if allowed is None or ident in allowed]
    scored.sort(key=lambda pair: (-pair[1], pair[0]))
    return scored[:k]


def assert_same(got: list[tuple[int, float]], expected: list[tuple[int, float]]) -> None:
    assert [ident for ident, _ in got] == [ident for ident, _ in expected]
    np.testing.assert_allclose([s for _, s in got], [s for _, s in expected], atol=1e-5)


@pytest.fixture
def two_users(make_index: MakeIndex) -> tuple[VectorIndex, dict[str, dict[int, np.ndarray]]]:
    """300 vectors for alice (ids 1..300), 150 for bob (ids 1001..1150)."""
    index = make_index()
    alice = dict(zip(range(1, 301), unit_rows(300, seed=1), strict=True))
    bob = dict(zip(range(1001, 1151), unit_rows(150, seed=2), strict=True))
    for user, rows in (("alice", alice), ("bob", bob)):
        index.add(list(rows), [user] * len(rows), np.stack(list(rows.values())))
    return index, {"alice": alice, "bob": bob}


def test_results_match_brute_force(two_users: tuple[VectorIndex, dict[str, dict[int, np.ndarray]]]) -> None:
    index, data = two_users
    for seed, k in ((10, 1), (11, 10), (12, 50)):
        query = unit_rows(1, seed)[0]
        for user in ("alice", "bob"):
            assert_same(index.search(user, query, k), brute_force(data[user], query, k))
    assert len(index) == 450
    assert index.count("alice") == 300
    assert 1 in index and 1001 in index and 5000 not in index


def test_k_beyond_the_user_size_returns_everything_in_order(make_index: MakeIndex) -> None:
    index = make_index()
    rows = dict(zip(range(1, 6), unit_rows(5, seed=3), strict=True))
    index.add(list(rows), ["carol"] * 5, np.stack(list(rows.values())))
    query = unit_rows(1, seed=4)[0]
    assert_same(index.search("carol", query, 20), brute_force(rows, query, 20))
    assert index.search("carol", query, 0) == []


def test_a_user_never_sees_another_users_ids(make_index: MakeIndex) -> None:
    index = make_index()
    shared = unit_rows(120, seed=5)  # the very same vectors for both users
    index.add(list(range(1, 121)), ["alice"] * 120, shared)
    index.add(list(range(201, 321)), ["bob"] * 120, shared)
    for row in range(0, 120, 7):
        hits = index.search("alice", shared[row], 50)
        assert hits[0][0] == row + 1
        assert all(ident <= 120 for ident, _ in hits)
        bob_hits = index.search("bob", shared[row], 50)
        assert all(201 <= ident <= 320 for ident, _ in bob_hits)
    assert index.search("alice", shared[0], 10, allowed={201, 202, 203}) == []
    assert index.search("mallory", shared[0], 10) == []


def test_the_allowed_filter(two_users: tuple[VectorIndex, dict[str, dict[int, np.ndarray]]]) -> None:
    index, data = two_users
    query = unit_rows(1, seed=6)[0]
    few = {3, 17, 29, 1001, 99999}  # under exact_limit; includes another user's id and an unknown id
    many = set(range(1, 301, 2)) | {1002, 1004}  # over exact_limit: the graph is searched and post-filtered
    for allowed in (few, many):
        for k in (1, 3, 25):
            assert_same(index.search("alice", query, k, allowed), brute_force(data["alice"], query, k, allowed))
    assert index.search("alice", query, 10, allowed=set()) == []
    [(ident, score)] = index.search("alice", query, 10, allowed=frozenset({5}))
    assert ident == 5
    assert score == pytest.approx(float(data["alice"][5] @ query), abs=1e-5)


def test_remove(two_users: tuple[VectorIndex, dict[str, dict[int, np.ndarray]]]) -> None:
    index, data = two_users
    query = unit_rows(1, seed=7)[0]
    gone = [ident for ident, _ in index.search("alice", query, 20)][::2]
    index.remove([*gone, 424242])  # an unknown id is ignored
    for ident in gone:
        del data["alice"][ident]
    assert len(index) == 440
    assert_same(index.search("alice", query, 30), brute_force(data["alice"], query, 30))
    allowed = set(range(1, 301))
    assert_same(index.search("alice", query, 30, allowed), brute_force(data["alice"], query, 30, allowed))
    index.remove(list(data["bob"]))
    assert index.count("bob") == 0
    assert index.search("bob", query, 5) == []


def test_adding_an_id_again_replaces_its_vector(make_index: MakeIndex) -> None:
    index = make_index()
    rows = dict(zip(range(1, 201), unit_rows(200, seed=8), strict=True))
    index.add(list(rows), ["alice"] * 200, np.stack(list(rows.values())))
    query = unit_rows(1, seed=9)[0]
    rows[42] = query.copy()
    index.add([42], ["alice"], query.reshape(1, -1))
    assert_same(index.search("alice", query, 1), [(42, 1.0)])
    assert len(index) == 200
    index.add([42], ["bob"], query.reshape(1, -1))  # the id now belongs to bob
    assert 42 not in [ident for ident, _ in index.search("alice", query, 200)]
    assert_same(index.search("bob", query, 5), [(42, 1.0)])
    assert len(index) == 200


def test_removed_ids_can_come_back(make_index: MakeIndex) -> None:
    index = make_index()
    vectors = unit_rows(150, seed=10)
    index.add(list(range(1, 151)), ["alice"] * 150, vectors)
    index.remove(range(1, 151, 3))
    index.add(list(range(1, 151, 3)), ["alice"] * 50, vectors[::3])
    rows = dict(zip(range(1, 151), vectors, strict=True))
    query = unit_rows(1, seed=11)[0]
    assert_same(index.search("alice", query, 40), brute_force(rows, query, 40))


def test_an_incremental_index_equals_a_rebuild_from_the_database(make_index: MakeIndex) -> None:
    """Adds, updates, moves and removes, then the same final rows loaded fresh: same answers."""
    index = make_index()
    truth: dict[int, tuple[str, np.ndarray]] = {}
    rng = np.random.default_rng(12)
    next_id = 1
    for step in range(30):
        batch = unit_rows(20, seed=100 + step)
        ids = list(range(next_id, next_id + 20))
        next_id += 20
        users = ["alice" if rng.random() < 0.7 else "bob" for _ in ids]
        index.add(ids, users, batch)
        truth.update({i: (u, v) for i, u, v in zip(ids, users, batch, strict=True)})
        victims = [int(i) for i in rng.choice(list(truth), size=6, replace=False)]
        index.remove(victims[:3])
        for ident in victims[:3]:
            del truth[ident]
        for ident in victims[3:]:  # rewritten, sometimes for the other user
            user = "bob" if truth[ident][0] == "alice" else "alice"
            truth[ident] = (user, unit_rows(1, seed=1000 + ident)[0])
            index.add([ident], [user], truth[ident][1].reshape(1, -1))
    ids = list(truth)
    users = [truth[i][0] for i in ids]
    matrix = np.stack([truth[i][1] for i in ids])
    fresh = make_index()
    fresh.add(ids, users, matrix)
    assert len(index) == len(fresh) == len(truth)
    allowed = set(ids[::2])
    for seed in range(5):
        query = unit_rows(1, seed=200 + seed)[0]
        for user in ("alice", "bob"):
            expected = brute_force({i: truth[i][1] for i in ids if truth[i][0] == user}, query, 15)
            assert_same(index.search(user, query, 15), expected)
            assert_same(fresh.search(user, query, 15), expected)
            assert index.search(user, query, 15, allowed) == fresh.search(user, query, 15, allowed)
    index.rebuild(ids[:10], users[:10], matrix[:10])
    assert len(index) == 10


def test_many_deletions_keep_answers_exact(make_index: MakeIndex) -> None:
    """Enough deletions that a graph is rebuilt from the live rows."""
    index = make_index()
    vectors = unit_rows(2600, seed=13)
    index.add(list(range(1, 2601)), ["alice"] * 2600, vectors)
    index.remove(range(1, 2401))
    rows = dict(zip(range(2401, 2601), vectors[2400:], strict=True))
    query = unit_rows(1, seed=14)[0]
    assert_same(index.search("alice", query, 25), brute_force(rows, query, 25))
    assert index.count("alice") == 200


def test_the_hybrid_builds_and_drops_its_graph() -> None:
    index = VectorIndex(DIMS, backend="auto", hnsw_threshold=100)
    index.add(list(range(1, 100)), ["alice"] * 99, unit_rows(99, seed=15))
    index.add([5000], ["bob"], unit_rows(1, seed=16))
    assert index._shards["alice"].graph is None
    index.add([100], ["alice"], unit_rows(1, seed=17))
    assert index._shards["alice"].graph is not None
    assert index._shards["bob"].graph is None
    index.remove(range(1, 60))
    assert index._shards["alice"].graph is None
    assert VectorIndex(DIMS, backend="exact", hnsw_threshold=1)._tuning.hnsw_threshold is None


def test_inputs_are_checked(make_index: MakeIndex) -> None:
    index = make_index()
    with pytest.raises(EmbeddingMismatch):
        index.add([1], ["alice"], np.ones((1, DIMS + 1), dtype=np.float32))
    with pytest.raises(ValidationError):
        index.add([1, 2], ["alice"], np.ones((1, DIMS), dtype=np.float32))
    with pytest.raises(ValidationError):
        index.add([1, 2], ["alice"], np.ones((2, DIMS), dtype=np.float32))
    with pytest.raises(ValidationError):
        index.add([1], "alice", np.ones((1, DIMS), dtype=np.float32))
    with pytest.raises(ValidationError):
        index.add([1], ["alice"], np.full((1, DIMS), np.nan, dtype=np.float32))
    with pytest.raises(EmbeddingMismatch):
        index.search("alice", np.ones(DIMS + 2, dtype=np.float32), 3)
    with pytest.raises(ValidationError):
        index.search("alice", np.ones(DIMS, dtype=np.float32), -1)
    with pytest.raises(ValidationError):
        VectorIndex(DIMS, backend="faiss")  # type: ignore[arg-type]
    index.add([], [], np.empty((0, DIMS), dtype=np.float32))
    index.add([], [], [])
    assert len(index) == 0


def test_vectors_are_normalised_on_the_way_in(make_index: MakeIndex) -> None:
    index = make_index()
    vectors = unit_rows(3, seed=18)
    index.add([1, 2, 3], ["alice"] * 3, vectors * np.array([[2.0], [0.5], [10.0]], dtype=np.float32))
    hits = index.search("alice", vectors[1] * 7.0, 3)
    assert_same(hits[:1], [(2, 1.0)])
    assert all(-1.0 - 1e-5 <= score <= 1.0 + 1e-5 for _, score in hits)


def test_concurrent_adds_and_searches(make_index: MakeIndex) -> None:
    index = make_index()
    errors: list[BaseException] = []

    def writer(offset: int) -> None:
        try:
            for start in range(offset, offset + 200, 20):
                index.add(list(range(start, start + 20)), ["alice"] * 20, unit_rows(20, seed=start))
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    def reader() -> None:
        try:
            for seed in range(50):
                hits = index.search("alice", unit_rows(1, seed=seed)[0], 10)
                assert len({ident for ident, _ in hits}) == len(hits)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(o,)) for o in (1, 1001)] + [threading.Thread(target=reader)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert index.count("alice") == 400


def test_a_bulk_load_builds_each_graph_once_at_the_end() -> None:
    index = VectorIndex(DIMS, backend="auto", hnsw_threshold=100)
    rows = unit_rows(300, seed=20)
    index.reserve("alice", 300)
    with index.bulk():
        for start in range(0, 300, 50):
            index.add(list(range(start + 1, start + 51)), ["alice"] * 50, rows[start : start + 50])
            assert index._shards["alice"].graph is None  # deferred while loading
    assert index._shards["alice"].graph is not None
    assert len(index._shards["alice"].matrix) == 300  # sized up front: never grown by doubling
    query = unit_rows(1, seed=21)[0]
    assert [i for i, _ in index.search("alice", query, 5)][:1] == [
        i for i, _ in brute_force(dict(zip(range(1, 301), rows, strict=True)), query, 1)
    ]


def test_float16_halves_the_matrix_and_keeps_the_order_close() -> None:
    rows = dict(zip(range(1, 401), unit_rows(400, seed=22), strict=True))
    index = VectorIndex(DIMS, backend="exact", precision="float16")
    index.add(list(rows), ["alice"] * 400, np.stack(list(rows.values())))
    assert index._shards["alice"].matrix.dtype == np.float16
    for seed in range(5):
        query = unit_rows(1, seed=30 + seed)[0]
        got, expected = index.search("alice", query, 10), brute_force(rows, query, 10)
        np.testing.assert_allclose([s for _, s in got], [s for _, s in expected], atol=2e-3)
        assert len({i for i, _ in got} & {i for i, _ in expected}) >= 9
    allowed = set(range(1, 401, 3))
    got = index.search("alice", unit_rows(1, seed=40)[0], 5, allowed)
    assert {i for i, _ in got} <= allowed and len(got) == 5
    with pytest.raises(ValidationError):
        VectorIndex(DIMS, precision="int4")  # type: ignore[arg-type]
