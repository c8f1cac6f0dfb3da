"""The latency bench at tiny sizes: every figure it reports is there, PostgreSQL's plans read only the user's rows."""

from __future__ import annotations

import random
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import narrative
from conftest import pg_server
from narrative.bench import latency

QUERIES = ["trip to Porto", "who is Sam waiting on", "how did Maya feel about the marathon"]


@pytest.fixture
def pg_url() -> Any:
    server = pg_server()
    url = server.fresh_schema()
    yield url
    server.release(url)


@pytest.mark.postgres
def test_sizes_and_tenants_on_both_stores(pg_url: str) -> None:
    report = latency.run(
        [120],
        queries=4,
        chroma=False,
        pool=12,
        ingest_turns=0,
        postgres=pg_url,
        tenants=[(3, 5)],
        tenant_searches=4,
        message_search=30,
        turns_into=4,
    )
    sqlite, postgres = report["sizes"]
    assert (sqlite["store"], postgres["store"]) == ("sqlite", "postgres")
    for row in (sqlite, postgres):
        assert row["recall@10"] == 1.0 and row["within_0.005@10"] == 1.0  # exact search at this size
        assert row["hybrid"]["p95_ms"] >= row["hybrid"]["p50_ms"] > 0
        assert row["kb_per_memory_above_model"] is not None and row["index_s"] >= 0
        assert row["first_pass"]["p95_ms"] > 0 and row["hybrid+embedding"]["p95_ms"] > 0  # both passes timed
        assert row["turns_into"]["turns"] == 4 and row["turns_into"]["turns_per_s"] > 0
    assert postgres["plan"] == {"indexes": ["memory_vectors_pkey"], "rows_read": 120}
    [tenants] = report["tenants"]
    assert tenants["memories"] == 15 and tenants["plans"]["foreign"] == 0
    assert tenants["plans"]["max_rows_read"] <= 5 and tenants["plans"]["scans"] == {"primary key": 4}
    text = latency.format_report(report)
    assert "of its hits within 0.005 of the exact 10th's cosine" in text
    assert sqlite["alternated"] and postgres["alternated"]
    assert "120 searches timed alternately: each query on SQLite, then on PostgreSQL" in text
    assert "PostgreSQL ÷ SQLite p95" in text and "Many tenants on PostgreSQL" in text and "first pass" in text
    assert "scans that read another user's rows: 0" in text
    assert "write path into this store: 4 turns" in text
    lite_messages, pg_messages = report["message_search"]
    assert (lite_messages["store"], pg_messages["store"], pg_messages["messages"]) == ("sqlite", "postgres", 30)
    assert pg_messages["search"]["p95_ms"] > 0 and pg_messages["every_message"]["p95_ms"] > 0
    assert "every_message" not in lite_messages and "every message ÷ search" in text


def test_tenants_are_written_users_x_each() -> None:
    from narrative.interfaces.cli import _register, cli

    _register()
    result = CliRunner().invoke(cli, ["bench", "latency", "--memories", "", "--ingest-turns", "0", "--tenants", "10"])
    assert result.exit_code != 0 and "USERSxEACH" in result.output


def test_a_negative_message_search_size_is_refused_by_name() -> None:
    from narrative.interfaces.cli import _register, cli

    _register()
    result = CliRunner().invoke(
        cli, ["bench", "latency", "--memories", "", "--ingest-turns", "0", "--message-search", "-1"]
    )
    assert result.exit_code == 2 and "--message-search" in result.output


@pytest.mark.postgres
def test_the_bench_server_holds_its_index_in_shared_buffers() -> None:
    """The latency bench's own PostgreSQL runs with room for the searched user's HNSW index (docs/scaling.md)."""
    import psycopg

    from narrative.bench.pgserver import SHARED_BUFFERS, temporary_server

    with temporary_server() as url, psycopg.connect(url) as conn:
        row = conn.execute("SHOW shared_buffers").fetchone()
    assert row is not None and row[0] == SHARED_BUFFERS


def spied_store(path: Path, name: str, events: list[tuple[str, ...]]) -> narrative.Memory:
    """A real SQLite bench store (with the real model, as the bench's) that notes its searches and emptied caches."""
    events.append(("open", name))
    mem = narrative.Memory(path, user=name, embedder="minilm", env={})
    search, embedder = mem.search, mem.embedder
    assert embedder is not None
    clear = getattr(embedder, "clear_cache")  # noqa: B009 - the real model's query cache, not on the protocol

    def noted_search(query: str, k: int, **options: Any) -> Any:
        events.append(("search", name, query))
        return search(query, k, **options)

    def noted_clear() -> None:
        events.append(("clear", name))
        clear()

    setattr(mem, "search", noted_search)  # noqa: B010 - a spy on the real store's search
    setattr(embedder, "clear_cache", noted_clear)  # noqa: B010
    return mem


def test_the_stores_take_turns_on_every_query(tmp_path: Path) -> None:
    """Query i runs on every store before query i + 1 runs on any: both see the same machine load."""
    events: list[tuple[str, ...]] = []
    with (
        spied_store(tmp_path / "lite.db", "lite", events) as lite,
        spied_store(tmp_path / "other.db", "other", events) as other,
    ):
        events.clear()
        times = latency.time_alternately([lite, other], ["trip to Kyoto", "notes about the marathon"], "hybrid", True)
    assert events == [
        ("clear", "lite"),
        ("search", "lite", "trip to Kyoto"),
        ("clear", "other"),
        ("search", "other", "trip to Kyoto"),
        ("clear", "lite"),
        ("search", "lite", "notes about the marathon"),
        ("clear", "other"),
        ("search", "other", "notes about the marathon"),
    ]
    assert [len(each) for each in times] == [2, 2] and all(t > 0 for each in times for t in each)


def bench_size(
    tmp_path: Path, names: list[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[list[dict[str, Any]], list[tuple[str, ...]]]:
    """``measure_size`` at 60 memories on spied SQLite stores, each reading of the peak RSS noted among the events."""
    events: list[tuple[str, ...]] = []

    def noted_peak_rss() -> float:
        events.append(("rss",))
        return 500.0

    monkeypatch.setattr(latency, "peak_rss_mb", noted_peak_rss)
    with narrative.Memory(tmp_path / "pool.db", user="pool", embedder="minilm", env={}) as pool:
        assert pool.embedder is not None
        rng = random.Random(3)
        pool_texts = [latency.sentence(rng) for _ in range(12)]
        pool_vectors = np.asarray(pool.embedder.embed_batch(pool_texts), dtype=np.float32)
        query_vectors = np.asarray(pool.embedder.embed_batch(QUERIES), dtype=np.float32)
    opens = [partial(spied_store, tmp_path / f"{name}.db", name, events) for name in names]
    rows = latency.measure_size(opens, 60, pool_texts, pool_vectors, (QUERIES, query_vectors), 400.0, turns_into=2)
    return rows, events


def searches(events: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The searches of the bench's rows (not the one that loads a store's indexes)."""
    return [(e[1], e[2]) for e in events if e[0] == "search" and e[2] != "warm up the index"]


def test_two_stores_are_timed_alternately_and_the_first_one_s_rss_is_read_before_the_second_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows, events = bench_size(tmp_path, ["lite", "other"], monkeypatch)
    first_read, second_read = [i for i, e in enumerate(events) if e == ("rss",)]
    assert first_read < events.index(("open", "other")) < second_read  # the second store's memory is not counted
    taking_turns = [(name, query) for query in QUERIES for name in ("lite", "other")]
    one_by_one = [(name, query) for name in ("lite", "other") for query in QUERIES]
    # first pass, the query-embedding cache warmed (untimed), then hybrid, vector, keyword, hybrid+embedding
    assert searches(events) == taking_turns + one_by_one + taking_turns * 4
    for row in rows:
        assert row["alternated"] and row["memories"] == 60 and row["recall@10"] == 1.0
        assert row["peak_rss_mb"] == 500.0 and row["kb_per_memory_above_model"] == round(100 * 1024 / 60, 2)
        assert row["hybrid"]["p95_ms"] > 0 and row["first_pass"]["p95_ms"] > 0 and row["turns_into"]["turns"] == 2


def test_one_store_is_timed_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a second store (``--postgres none``, or a size above ``--postgres-max``) nothing is alternated and
    the peak RSS is read after the searches, as before."""
    [row], events = bench_size(tmp_path, ["lite"], monkeypatch)
    assert "alternated" not in row and row["hybrid"]["p95_ms"] > 0
    assert searches(events) == [("lite", query) for query in QUERIES] * 6
    last_search = max(i for i, e in enumerate(events) if e[0] == "search")
    [rss_read] = [i for i, e in enumerate(events) if e == ("rss",)]
    assert rss_read > last_search
