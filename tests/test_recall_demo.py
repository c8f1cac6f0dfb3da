"""The issue's own command lines on the bundled demo, run as a user would (the real CLI and the real model):
the decision answers "why SQLite instead of Firebase" first, a query with nothing relevant shows no hits,
and no message is shown twice in a result list.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def narrative(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NARRATIVE_USER": ""}
    env.pop("NARRATIVE_USER")
    return subprocess.run(
        [sys.executable, "-m", "narrative.interfaces.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("recall-demo")
    done = narrative("--db", "d.db", "demo", cwd=folder)
    assert done.returncode == 0, done.stderr
    return folder


def test_why_sqlite_shows_the_decision_first(demo: Path) -> None:
    done = narrative("--db", "d.db", "--user", "maya", "search", "why SQLite instead of Firebase", "-k", "3", cwd=demo)
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert "[decision]" in first and "SQLite instead of Firebase" in first
    assert done.stdout.count("We decided to go with SQLite") == 1  # the decision, its turn and exchange: once


def test_nothing_relevant_shows_no_hits(demo: Path) -> None:
    done = narrative("--db", "d.db", "--user", "maya", "search", "nothingmatchesthisxyz", cwd=demo)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "no memories match"
    as_json = narrative("--db", "d.db", "--user", "maya", "search", "nothingmatchesthisxyz", "--json", cwd=demo)
    assert json.loads(as_json.stdout) == []


def test_each_message_is_shown_once_in_a_long_result_list(demo: Path) -> None:
    done = narrative("--db", "d.db", "--user", "maya", "search", "why SQLite", "-k", "20", "--json", cwd=demo)
    hits = json.loads(done.stdout)
    assert hits[0]["stream"] == "decision"  # the broad reflection no longer pushes the specific memories down
    shown = [m for hit in hits for m in hit["shown_message_ids"]]
    assert len(shown) == len(set(shown))
    assert all(
        hit["why"]["similarity"] is None or hit["why"]["similarity"] >= 0.35 or hit["why"]["bm25_rank"] for hit in hits
    )  # nothing below the similarity floor unless it shares a query word
