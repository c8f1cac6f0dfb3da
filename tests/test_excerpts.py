"""Excerpts: a search result shows the sentences of a long turn that hold the query's words, not the whole passage
(issue 28: the budget a reader has is spent on what answers)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import narrative
from narrative.read.excerpts import ELLIPSIS, EXCERPT_TOKENS, excerpt_of
from narrative.store.keyword_index import query_terms
from narrative.text.passages import approx_tokens


def garden_steps(count: int) -> list[str]:
    topics = ["weeding", "compost", "seedlings", "pruning", "mulch", "trellis", "aphids", "harvest"]
    return [
        f"Step {i}: for the {topics[i % len(topics)]} work, check the beds on the north side and write down how "
        f"long each task took."
        for i in range(count)
    ]


# --- the excerpt of a text ------------------------------------------------------------------------------------


def test_a_text_that_fits_is_shown_whole() -> None:
    text = "Sam will send the bed measurements on Friday, and the frame arrives on Monday."
    assert excerpt_of(text, query_terms("when do the measurements come?")) == text


def test_a_long_text_is_shown_by_the_sentences_that_hold_the_query_words() -> None:
    steps = garden_steps(6)
    text = " ".join([*steps[:3], "The blue watering can lives behind the greenhouse door.", *steps[3:]])
    shown = excerpt_of(text, query_terms("where is the blue watering can?"))
    assert "The blue watering can lives behind the greenhouse door." in shown
    assert approx_tokens(shown) <= EXCERPT_TOKENS + 4  # the excerpt, and the marks of what was left out
    assert shown.startswith(ELLIPSIS) and shown.endswith(ELLIPSIS)


def test_a_text_found_by_meaning_alone_is_shown_from_its_beginning() -> None:
    text = " ".join(garden_steps(8))
    shown = excerpt_of(text, query_terms("greenhouse key"))
    assert shown.startswith("Step 0:") and shown.endswith(ELLIPSIS)
    assert approx_tokens(shown) <= EXCERPT_TOKENS + 2


def test_two_pieces_of_one_run_shown_side_by_side_are_joined_as_they_were() -> None:
    text = ":".join(["0"] * 41)  # no whitespace anywhere: the pieces are cut out of one run
    shown = excerpt_of(text, [])
    assert shown.endswith(ELLIPSIS) and " " not in shown.removesuffix(f" {ELLIPSIS}")
    assert text.startswith(shown.removesuffix(f" {ELLIPSIS}"))


@settings(max_examples=150, deadline=None)
@given(st.text(min_size=0, max_size=3000), st.lists(st.sampled_from(["step", "blue", "the", "x", "1"]), max_size=3))
def test_an_excerpt_is_pieces_of_the_text_in_order_within_the_size(text: str, words: list[str]) -> None:
    shown = excerpt_of(text, words)
    if approx_tokens(text) <= EXCERPT_TOKENS:
        assert shown == text
        return
    position, plain = 0, " ".join(text.split())  # two pieces shown side by side are joined by one space
    for piece in (" ".join(p.split()) for p in shown.split(ELLIPSIS)):
        if piece:
            found = plain.find(piece, position)
            assert found >= 0  # every piece is the text's own, in the text's order
            position = found + len(piece)
    assert approx_tokens(shown.replace(ELLIPSIS, "")) <= EXCERPT_TOKENS


# --- what a search result shows ---------------------------------------------------------------------------------


def test_a_hit_on_a_long_reply_shows_the_sentence_that_answers_not_the_whole_passage(smem: narrative.Memory) -> None:
    smem.remember("How should I plan the garden this year?")
    steps = garden_steps(30)
    text = "\n\n".join([*steps[:16], "Also: the blue watering can lives behind the greenhouse door.", *steps[16:]])
    reply = smem.remember(text, role="assistant", speaker="Rook")
    top = smem.search("where is the blue watering can?", 3)[0]
    assert reply.message.id in top.shown
    shown = top.text[top.text.index(f"(message #{reply.message.id}, part") :]
    assert "the blue watering can lives behind the greenhouse door" in shown
    assert approx_tokens(shown) <= EXCERPT_TOKENS + 20  # the excerpt and the pointer to the whole message


def test_a_long_turn_asked_before_a_reply_is_shown_by_its_excerpt(smem: narrative.Memory) -> None:
    question = " ".join([*garden_steps(6), "My budget for the garden is 300 euros, so how should I spend it?"])
    asked = smem.remember(question, speaker="Maya")
    reply = smem.remember("Spend most of the 300 euros budget on soil and seedlings.", role="assistant")
    top = smem.search("what budget did I set for the garden?", 3)[0]
    assert top.shown == (asked.message.id, reply.message.id)
    first = top.text.splitlines()[0]
    assert first.startswith("Maya: ") and "300 euros" in first
    assert approx_tokens(first) <= EXCERPT_TOKENS + 6
