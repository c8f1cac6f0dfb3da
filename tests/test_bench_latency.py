"""The latency bench at tiny sizes: every figure it reports is there, PostgreSQL's plans read only the user's rows."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from conftest import pg_server
from narrative.bench import latency


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
