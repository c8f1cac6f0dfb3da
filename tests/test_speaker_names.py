"""A query's vector is made without the names of the people who speak: the name would make everything a person
said look close to a question about them (issue 28), while the keyword list still matches it."""

from __future__ import annotations

import numpy as np
import pytest

import narrative
from narrative.read.speakers import query_vector_of, speaker_names, without_speakers

NAMES = frozenset({"caroline", "melanie"})
CHAT = [
    ("hey Ana, long time no see!", "Ben"),
    ("Ben! my sister moved to Lisbon last spring, so I visit her a lot", "Ana Maria"),
    ("haha thanks so much", "Ben"),
    ("I finally started my new job as a nurse at the city hospital", "Ben"),
    ("that's amazing, congrats on the hospital job!", "Ana Maria"),
    ("how have you been?", "Ben"),
    ("talk soon!", "Ben"),
]


@pytest.mark.parametrize(
    ("query", "searched"),
    [
        ("What career path has Caroline decided to pursue?", "What career path has decided to pursue?"),
        ("What is Melanie's favourite book?", "What is favourite book?"),
        ("When did Caroline and Melanie meet?", "When did and meet?"),
        ("Who is Caroline?", "Who is Caroline?"),  # nothing else to mean
        ("What did Caroline do?", "What did Caroline do?"),
        ("Where is the blue watering can?", "Where is the blue watering can?"),  # no speaker named
    ],
)
def test_a_query_is_embedded_without_the_speakers_it_names(query: str, searched: str) -> None:
    assert without_speakers(query, NAMES) == searched


def test_without_speakers_the_query_is_unchanged() -> None:
    assert without_speakers("What is Caroline's job?", frozenset()) == "What is Caroline's job?"


def test_the_speakers_are_the_people_of_the_storylines(smem: narrative.Memory) -> None:
    for text, speaker in CHAT:
        smem.remember(text, speaker=speaker)
    participants = {p.name for s in smem.store.list_storylines("alice", include_archived=True) for p in s.participants}
    assert participants  # the storylines know who spoke
    assert speaker_names(smem.store, "alice") == {w for name in participants for w in name.lower().split()}


def test_a_question_about_a_person_finds_what_they_said_not_their_small_talk(smem: narrative.Memory) -> None:
    for text, speaker in CHAT:
        smem.remember(text, speaker=speaker)
    top = smem.search("Where does Ben work?", 3, mode="vector")[0]
    assert "nurse at the city hospital" in top.text, [h.text for h in smem.search("Where does Ben work?", 3)]


def test_a_query_naming_a_speaker_searches_with_the_mean_of_both_directions() -> None:
    asked: list[str] = []

    def embed(text: str) -> tuple[np.ndarray, str]:
        asked.append(text)
        return (np.array([3.0, 0.0]) if "Caroline" in text else np.array([0.0, 2.0])), "model"

    vector, model = query_vector_of("What is Caroline's job?", NAMES, embed)
    assert asked == ["What is Caroline's job?", "What is job?"] and model == "model"
    assert np.allclose(vector, np.array([1.0, 1.0]) / np.sqrt(2))  # each direction counts the same
    asked.clear()
    vector, _ = query_vector_of("Where is the blue watering can?", NAMES, embed)
    assert asked == ["Where is the blue watering can?"] and np.allclose(vector, [0.0, 2.0])  # as asked
