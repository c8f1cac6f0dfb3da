"""Memory that stays true (issue 23): a correction supersedes what it corrects, a contradiction is shown with
both sides, and neither deletes anything.  The detector reads how people correct themselves: a change cue, the
same subject, a changed value ("not X", a new number or date)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import narrative
from conftest import FakeClock
from narrative.interfaces.cli import main
from narrative.interfaces.serialize import hit_dict
from narrative.text.statements import SINCE_DONE, contradiction, statements, update

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Run:
    """``narrative ARGS`` as a user types them (the default embedder: the real local model)."""
    monkeypatch.chdir(tmp_path)
    for name in ("NARRATIVE_DB", "NARRATIVE_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NARRATIVE_USER", "maya")

    def invoke(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = 0
        try:
            main(list(args))
        except SystemExit as stop:
            code = int(stop.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


def ok(run: Run, *args: str) -> str:
    code, out, err = run(*args)
    assert code == 0, out + err
    return out


# --- the detector, phrase by phrase ------------------------------------------------------------------------


def _update(old: str, new: str) -> str | None:
    found = [update(b, a) for b in statements(new) for a in statements(old)]
    return next((change.reason for change in found if change), None)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Berlin.", "Actually, I moved: I live in Lisbon now, not Berlin."),
        ("My favourite colour is blue.", "Correction: my favourite colour is green, not blue."),
        ("We decided to use SQLite for the app.", "We switched to Postgres instead of SQLite for the app."),
        ("I live in Berlin with my cat.", "I don't live in Berlin anymore."),
        ("The launch is on April 1, 2024.", "Update: the launch moved to April 5, 2024."),
        (
            "My test coverage is at 65% for the API module.",
            "The API module test coverage has recently improved to 78%.",
        ),
        ("The gallery has 8 project cards.", "I added two projects, so the gallery now has 10 project cards."),
        ("I have spent 3 hours studying probability.", "I've now spent 4 hours studying probability."),
        ("The budget for the trip is $1,500.", "The trip budget is now $2,000."),
        (  # the counted noun ends its phrase: "12 conditional probability problems" counts problems
            "I finished 8 problems on conditional probability with 85% accuracy.",
            "I've recently increased my practice to 12 conditional probability problems a week.",
        ),
        (  # a change in a clause that states, after one that asks
            "The team meeting is on May 4.",
            "What a week, the team meeting is now on May 6.",
        ),
        (  # a clause opening with "when" that states: when it moved, it moved
            "Our launch date is April 1.",
            "Our launch, when we last spoke, moved to April 5.",
        ),
        (  # a cue that opens the sentence is about all of it, the value in a later clause too
            "The launch is on April 1, 2024.",
            "Update: after the review, the launch is on April 5, 2024.",
        ),
        (  # a relative clause states: "which has now reached 165" is no question
            "The main branch has 150 commits merged.",
            "I'm securing the app, given the commits merged into the main branch, which has now reached 165.",
        ),
        (  # "staying below 35%": a verb before the value names no other measure than the bounce rate's
            "I'm monitoring the bounce rate of my portfolio site, and it is under 40%.",
            "The bounce rate has improved significantly, now consistently staying below 35%.",
        ),
        (  # "reduced X from A to B": the change reaches its value past what it was
            "The autocomplete input latency is around 520ms on my laptop.",
            "I've reduced the autocomplete input latency from 520ms to 290ms by optimizing event listeners.",
        ),
        # the same sentence said again with one place changed and a change cue (a new user's probe)
        ("I live in Berlin.", "I live in Lisbon now."),
        ("My favourite colour is blue.", "My favourite colour is green now."),
        ("My manager is Alice.", "Alice left; my manager is Bob now."),
        ("My phone number is 555-1234.", "My new phone number is 555-9876."),
        ("I'm vegetarian.", "I'm pescatarian now."),
        ("I work at Google.", "I work at Microsoft now."),
    ],
)
def test_people_correct_themselves_in_these_ways(old: str, new: str) -> None:
    assert _update(old, new) is not None


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Berlin.", "I love Berlin in the spring."),  # no change cue
        ("I ran 10 miles yesterday.", "Now I'm reading 3 books."),  # nothing shared
        ("I have 2 kids.", "Now my sister has a new puppy."),  # a cue, no shared subject, no value
        ("I'm not sure about the API limits for my app.", "I'm not sure how to update my app now."),
        ("The gallery has 8 project cards.", "The gallery now has 8 project cards and a footer."),  # same value
        ("We bought 3 chairs.", "Now we need 2 tables."),  # different things counted
        ("The first triangle has sides 3, 4 and 5.", "Now the second triangle has sides 6, 8 and 10."),  # bare numbers
        (  # "4" of "4/5 correct" is no count of what the later sentence counts, though both say "probability"
            "My score was 4/5 correct on the coin toss problems, so my probability mastery is good.",
            "I've been studying coin toss problems for a week now and got 90% on a quiz of 10 probability questions.",
        ),
        (  # "15 classification problems" and "8 problems on medians" count different problems
            "I recently completed 15 classification problems on triangles with 80% accuracy.",
            "I recently solved 8 problems on medians and altitudes of a triangle.",
        ),
        (  # a describing word after "instead of" names no old value
            "I want to use the correct notation for the triangle sides.",
            "I used s = 12 instead of the correct s = 18 for the triangle sides.",
        ),
        (  # a question states no value
            "hmm, so how do I set up alerts when bounce rates go above 40%?",
            "The bounce rate has improved, now consistently staying below 35%.",
        ),
        (  # a verb of change without the value it changes to
            "The budget tracker project had its MVP deadline on April 15.",
            "The budget tracker release v1.0.0 of April 20 has been pushed to the GitHub repository.",
        ),
        (  # "already" is no change cue: a progress report of another thing ("95% accuracy" on area problems)
            "I completed 15 classification problems with 80% accuracy.",
            "I've already completed 12 area problems with 95% accuracy on triangle classification.",
        ),
        (  # two dates of different things in sentences that share a topic
            "I study dice problems with my sister, whose birthday party is on May 2.",
            "I study dice problems now, and my new phone arrives on May 9.",
        ),
        (  # the terms of a worked example are no values: "1/2 × 1/2 = 1/4" does not change "4 heads"
            "I calculated the probability of getting 4 heads out of 5 coin tosses for my mastery score.",
            "Now I see that heads on each coin toss is 1/2, so two heads is 1/2 × 1/2 = 1/4 for my mastery score.",
        ),
        (  # a change asked about changes nothing
            "The probability of heads for my 2 coins is 50 percent.",
            "I'm tossing my 2 coins again, and how does that change to 25 percent for both coins showing heads",
        ),
        (  # nor does one supposed
            "The price of my coffee subscription is 12 dollars.",
            "I keep the coffee subscription, but if the price is raised to 15 dollars I will cancel it.",
        ),
        (  # a version names a release, it counts nothing: "2.3" of "Flask 2.3.1" is no "201 status code"
            "I'm writing async routes with Flask 2.3.1 in my backend code.",
            "I'm making the new POST route return a 201 status code from my backend code.",
        ),
        (  # the cue ("now") is in another clause than the value: the 90% is checked, not said to have changed
            "I want to score at least 80% accuracy on my probability quiz by February 1.",
            "I've been practising probability for a week now, so I want to check I kept the 90% accuracy on my quiz.",
        ),
        (  # "as of April 9" says when the figure was true: no deadline moved
            "I'm finishing the autocomplete error handling by March 26, 2024.",
            "My autocomplete error handling coverage is currently at 85% as of April 9, 2024.",
        ),
        (  # a number no word follows counts what the words before it name only when it completes them ("reached
            # 165"): "rolling a 4" counts no problems
            "For my dice probability problem, what are the chances that I'm rolling a 4",
            "I've recently increased my practice to 12 conditional probability problems.",
        ),
        (  # what a percentage measures is named beside it: a success rate is no bounce rate
            "The contact form passed its integration tests with a 95% success rate on my site.",
            "The bounce rate of my site has improved, now below 35%.",
        ),
        (  # nor is a debounce the input lag, though both are said of the same app
            "I implemented a 300ms debounce in my weather app.",
            "The input lag in my weather app is now over 500ms on slower devices.",
        ),
        (  # nor the CSS bundle size the image sizes
            "I keep the CSS bundle size under 150KB for my portfolio site.",
            "I recently reduced the image sizes of my portfolio site from 300KB to 180KB.",
        ),
        (  # "DOM updates" names a thing: no change cue
            "The autocomplete input latency in my weather app was 400ms.",
            "My DOM updates add to the autocomplete input latency of 520ms in my weather app.",
        ),
        (  # what a figure in a relative clause measures is named before its comma: a fetch latency is no input lag
            "The fetch call latency in my weather app, which is now around 250ms, is fine on a local network.",
            "My weather app's input latency, which is currently around 520ms, needs work before the demo.",
        ),
        ("I like tea.", "I like coffee now too."),  # an addition, not a change
        ("I live in Berlin.", "I don't live in Lisbon now."),  # a denial of something else
        ("My sister lives in Porto.", "My sister is in Porto now."),  # no place changed: said again
        ("It was a great experience.", "It was a long process, but now it is done."),  # not said of oneself
        ("I'm hanging in there.", "I'm staying positive now."),  # a mood in passing, not one word for another
        ("Your cooking is amazing!", "Your new hair color is amazing!"),  # not the end of what is said
    ],
)
def test_these_are_not_corrections(old: str, new: str) -> None:
    assert _update(old, new) is None


@pytest.mark.parametrize(
    ("sentence", "cue"),
    [
        ("I need to update the deadline to April 5.", "update"),
        ("Update: the deadline is April 5.", "update"),
        ("Quick update: the deadline is April 5.", "update"),
        ("We updated the budget to $500.", "updated"),
        ("I pushed a status update to the team.", ""),
        ("I optimized the event listeners and DOM updates in my app.", ""),
    ],
)
def test_update_is_a_change_cue_as_a_verb_or_a_label_not_as_a_noun(sentence: str, cue: str) -> None:
    assert statements(sentence)[0].cue == cue


def test_a_change_from_one_value_to_another_names_the_value_it_changed_to() -> None:
    """ "from 300KB to 180KB": 300KB is what the sizes were; the update is to 180KB (it read "300 kb, was 250"), and
    it updates what was 300KB, not another figure ("improved from 60% to 85%" is no update of a goal of 80%)."""
    new = "I recently reduced the gallery image sizes from 300KB to 180KB"
    assert _update("Each gallery image size is 300KB now.", new) == "recently: 180 kb, was 300"
    assert _update("Each gallery image size is 250KB now.", new) is None
    improved = "My accuracy on the probability quiz improved from 60% to 85%."
    assert _update("I want to reach at least 80% accuracy on my probability quiz.", improved) is None
    assert _update("My probability quiz accuracy is 60%.", improved) == "improved from 60% to: 85 percent, was 60"
    assert _update("Over 2 weeks my probability quiz accuracy improved from 60% to 85%.", improved) is None  # again
    goal = "My probability quiz accuracy is 60%, and I want to get it up to 85%."  # a goal, then what was done
    assert _update(goal, improved) == "improved from 60% to: 85 percent, was 60"


def test_a_later_figure_updates_what_a_change_went_to_not_what_it_was_from() -> None:
    """ "reduced the page load from 900ms to 400ms" says the load is 400ms: a later figure updates the 400ms (the
    reason, and the words a storyline forgets, name it), not the 900ms that was already past."""
    reduced = "Caching reduced the page load time of my blog from 900ms to 400ms."
    assert _update(reduced, "Actually, the page load time of my blog is now 350ms.") == "actually: 350 ms, was 400"
    assert _update(reduced, "Update: the page load time of my blog is 350ms.") == "update: 350 ms, was 400"


def test_a_figure_said_to_be_what_it_was_at_first_is_what_a_change_was_from() -> None:
    """ "which was initially 800ms, and I've reduced it to 300ms" says what the load time was, as "from 800ms to
    300ms" does: it updates a load time of 800ms, not a figure of 500ms said of something else."""
    reduced = "The dashboard load time was initially 800ms, and I've reduced it to 300ms."
    assert _update("The dashboard load time is 800ms.", reduced) == "reduced it to: 300 ms, was 800"
    assert _update("The dashboard load time is 500ms.", reduced) is None


def test_a_count_of_things_about_something_counts_only_those() -> None:
    """ "8 problems on medians" counts problems on medians: no update of 5 problems on the Pythagorean theorem,
    an update of 5 problems on medians."""
    medians = "I recently solved 8 problems on medians and altitudes, with 1 error in a median length."
    assert _update("I solved 5 problems on the Pythagorean theorem, with 1 error in a length.", medians) is None
    assert _update("I solved 5 problems and got 1 error in a length calculation.", medians) is None
    assert _update("I solved 5 problems on medians last week.", medians) == "recently: 8 problem, was 5"
    merged = "My repository now has 12 branches merged on GitLab."  # a verb between: "on GitLab" is no topic
    assert _update("My repository has 10 branches merged on GitHub.", merged) == "now: 12 branch, was 10"


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ("My dentist appointment is on Monday.", "My dentist appointment is on Friday now.", "now: friday, was monday"),
        ("The team meeting is on Tuesday.", "I moved the team meeting to Friday.", "moved: friday, was tuesday"),
        ("The team meeting is on Tuesday.", "The team meeting is on Wednesday, not Tuesday.", "not tuesday any more"),
        ("I live in Berlin.", "I live in Lisbon, not Berlin.", "not berlin any more"),
    ],
)
def test_a_weekday_is_a_value_and_a_not_x_naming_what_was_said_corrects_it(old: str, new: str, reason: str) -> None:
    """A plan's weekday changes as a date does; "…, not Tuesday" corrects what was said with no other cue."""
    assert _update(old, new) == reason


def test_the_day_something_happened_and_a_not_x_of_something_unsaid_are_no_corrections() -> None:
    assert _update("I went to a support group last Friday.", "I now go to the gym on Mondays.") is None
    assert _update("I love my job at the bakery.", "Painting is a hobby, not a job.") is None
    assert _update("The team meeting is on Tuesday.", "The team lunch is on Wednesday, not Thursday.") is None


def test_a_relative_clause_names_what_its_figure_measures() -> None:
    """ "the input latency, which is currently around 520ms" measures the input latency: an update of the input
    latency, not the page load time of the same app."""
    latency = "My weather app's input latency, which is currently around 520ms, is too high."
    assert _update("My weather app's input latency is 600ms.", latency) == "currently: 520 ms, was 600"
    assert _update("The page load time of my weather app is 600ms.", latency) is None


def test_a_change_that_says_the_date_it_moved_from_updates_that_date_only() -> None:
    """ "moved from April 1 to April 5, 2024" updates the launch of April 1, 2024 (the year said once), not one of
    April 3."""
    moved = "Update: the launch moved from April 1 to April 5, 2024."
    assert _update("The launch is on April 1, 2024.", moved) == "update: april 5 2024, was april 1 2024"
    assert _update("The launch is on April 3, 2024.", moved) is None


def test_a_measure_is_named_before_a_joining_word_and_matched_by_the_words_it_begins() -> None:
    """ "a response time of 280ms" measures the response time (though "time" is a common word), so a debounce of
    300ms in the same app is no update of it; "study sessions" is what "studying" is, so 4 hours of sessions
    update 3 hours spent studying."""
    assert _update("My weather app has an API response time of 280ms.", "My weather app debounce is now 300ms.") is None
    studying, sessions = "I have spent 3 hours studying probability this week.", "I have recently extended my "
    sessions += "probability study sessions to 4 hours this week."
    assert _update(studying, sessions) == "recently: 4 hour, was 3"


def test_a_verb_of_change_changes_the_value_it_changes_to() -> None:
    """ "I increased my quiz score from 75% to 92% after 15 problems" changed the score, not a count of problems."""
    old = "I have practised 10 problems on permutations for my quiz."
    increased = "I increased my quiz score from 75% to 92% after practising 15 problems on permutations."
    assert _update(old, increased) is None
    assert _update(old, "I have now practised 15 problems on permutations for my quiz.") is not None


def test_an_assistant_reply_neither_supersedes_nor_is_superseded(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        mem.remember("The launch is on April 1, 2024.")
        mem.remember("Update: the launch moved to April 5, 2024, so the review is now on April 3.", role="assistant")
        mem.remember("With the new numbers the probability is now 1/3 and the total is now 12 cards.", role="assistant")
        mem.remember("Update: the total is now 14 cards.", role="assistant")
        assert all(m.valid_to is None for m in mem.list_memories(limit=50))
        mem.remember("Update: the launch moved to April 5, 2024.")  # the person says so
        assert any(m.valid_to is not None for m in mem.list_memories(limit=50))


@pytest.mark.parametrize(
    ("said", "reply", "correction", "query"),
    [
        (
            "I live in Berlin.",
            "Nice, Berlin is a great city to live in.",
            "Actually, I moved: I live in Lisbon now, not Berlin.",
            "where do I live?",
        ),
        (
            "I prefer dark mode in every editor.",
            "Got it, dark mode it is.",
            "I no longer prefer dark mode; I prefer light mode instead.",
            "which editor theme do I prefer?",
        ),
    ],
)
def test_a_short_reply_that_restates_a_corrected_statement_goes_with_it(
    db: str, clock: FakeClock, said: str, reply: str, correction: str, query: str
) -> None:
    """The assistant's acknowledgement of what the person said ranked first after the person corrected it (its
    exchange was found by the old words and showed the reply alone), and the context's scene, storyline card and
    recent messages kept saying it.  Restoring the corrected memory brings the reply back too."""
    with narrative.Memory(db, user="alice", clock=clock, env={}) as mem:
        first = mem.remember(said)
        mem.remember(reply, role="assistant")
        corrected = mem.remember(correction)
        hits = mem.search(query, 5, record=False)
        # the correction first: its turn, or its clause noted in Your Story ("I live in Lisbon now")
        assert hits and hits[0].shown == (corrected.message.id,) and hits[0].text in correction
        assert all(reply not in h.text for h in hits)
        block = mem.context(query, record=False).text
        assert reply not in block and correction in block
        assert any(reply in h.text for h in mem.search(query, 5, include_superseded=True, record=False))
        mem.restore_memory(first.memories[0].id)
        assert any(reply in h.text for h in mem.search(query, 5, record=False))


def test_a_reply_that_already_says_the_new_value_stays_current(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        mem.remember("The launch is on April 1, 2024.")
        told = mem.remember("Noted: the launch moved to April 5, 2024, so the review is on April 3.", role="assistant")
        result = mem.remember("Update: the launch moved to April 5, 2024.")
        assert result.settled.superseded
        assert all(mem.get_memory(m.id).valid_to is None for m in told.memories)


def test_a_message_that_says_more_stays_current_and_is_shown_after_its_update(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        first = mem.remember(
            "The first sprint deadline is April 1, 2024. The whole project should take 6 weeks of evenings."
        )
        clock.advance(days=3)
        later = mem.remember("Update: the first sprint deadline moved to April 5, 2024.")
        assert all(m.valid_to is None for m in mem.list_memories(limit=50))  # nothing went stale
        hits = mem.search("when is the first sprint deadline?", 5)
        shown_at = {m: next(i for i, h in enumerate(hits) if m in h.shown) for h in hits for m in h.shown}
        assert shown_at[later.message.id] <= shown_at[first.message.id]  # the update first (or with it)
        assert [m for h in hits for m in h.shown].count(first.message.id) == 1
        linked = next(h for h in hits if first.message.id in h.shown)
        assert any(r.startswith("updates: ") for r in linked.conflict_reasons)
        assert any(first.message.id in h.shown for h in mem.search("how long should the whole project take?", 3))


def test_an_update_is_shown_without_dragging_in_what_it_updated(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        first = mem.remember(
            "The first sprint deadline is April 1, 2024. The whole project should take 6 weeks of evenings."
        )
        clock.advance(days=3)
        later = mem.remember("Update: the first sprint deadline moved to April 5, 2024.")
        assert later.settled.conflicts  # linked: the earlier message says more, so it stays current
        shown = [m for h in mem.search("moved", 5, record=False) for m in h.shown]
        assert later.message.id in shown and first.message.id not in shown


def test_an_exchange_showing_an_updated_turn_brings_the_update_above_it(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        first = mem.remember("The launch is on April 1, 2024. The venue holds 80 people and has a small stage.")
        mem.remember("Great, an April launch with a small stage sounds lovely.", role="assistant")
        for i in range(3):
            mem.remember(f"Unrelated note {i} about the garden beds and tomatoes.")
        later = mem.remember("Update: the launch moved to April 5, 2024.")
        hits = mem.search("lovely small stage launch venue people", 6)
        at = {m: next(i for i, h in enumerate(hits) if m in h.shown) for h in hits for m in h.shown}
        assert hits[at[first.message.id]].memory.message_ids != (first.message.id,)  # shown through the exchange
        assert at[later.message.id] < at[first.message.id]  # the update is brought in above it


def _long_message(first_part: str) -> str:
    """``first_part``, six long paragraphs of other things, and a last one about the garden: several passages."""
    filler = [
        f"Paragraph {i} is about the {topic} and nothing else: " + " ".join(f"{topic}-detail-{j}" for j in range(40))
        for i, topic in enumerate(["bakery", "harbour", "library", "orchard", "railway", "museum"])
    ]
    return "\n\n".join([first_part, *filler, "The garden beds get 30 minutes of water."])


def test_an_update_comes_in_only_beside_the_part_of_a_long_message_it_updates(db: str, clock: FakeClock) -> None:
    """A long message says many things; a later figure for one of them is brought in beside the part that said it,
    not beside another part of the message a search found on its own."""
    long = _long_message("The launch is on April 1, 2024. The old hall holds 80 people.")
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        first = mem.remember(long)
        assert len(mem.store.passages_of_messages("alice", [first.message.id])[first.message.id]) > 2
        clock.advance(days=3)
        later = mem.remember("Update: the launch moved to April 5, 2024.")
        assert later.settled.conflicts and later.settled.conflicts[0].other_passage_id is not None
        garden = mem.search("garden beds water minutes", 3, record=False)
        assert garden[0].passage is not None and "garden beds" in garden[0].text
        assert all(later.message.id not in h.shown for h in garden)  # not what the part found is about
        launch = mem.search("launch old hall", 3, record=False)
        at = {m: next(i for i, h in enumerate(launch) if m in h.shown) for h in launch for m in h.shown}
        assert at[later.message.id] <= at[first.message.id]  # the part it updates brings it in, above


def test_a_contradiction_comes_in_only_beside_the_part_of_a_long_message_it_is_about(db: str, clock: FakeClock) -> None:
    long = _long_message("I've never written any Flask routes in this project.")
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        first = mem.remember(long)
        clock.advance(days=3)
        later = mem.remember("I wrote the homepage route with Flask today, it works.")
        [conflict] = later.settled.conflicts
        assert conflict.other_passage_id is not None and conflict.reason.startswith(SINCE_DONE)
        garden = mem.search("garden beds water minutes", 3, record=False)
        assert garden[0].passage is not None and "garden beds" in garden[0].text
        assert all(later.message.id not in h.shown for h in garden)
        routes = mem.search("written flask routes project", 3, record=False)
        assert {first.message.id, later.message.id} <= {m for h in routes for m in h.shown}  # both sides


def test_a_denial_contradicts_what_was_affirmed_with_no_order_between_them() -> None:
    [never] = statements("I've never written any Flask routes in this project.")
    [did] = statements("The homepage route with Flask returns static HTML.")
    assert contradiction(never, did) is not None and contradiction(did, never) is not None
    [other] = statements("The weather in Lisbon was lovely.")
    assert contradiction(never, other) is None
    # what is denied is the clause after "never": sharing the rest of the sentence is no contradiction
    [never] = statements("I've never completed any coin toss problems before, but I want to learn about dice.")
    [dice] = statements("My dice questions about probability were fun, I want to learn more about dice.")
    [coins] = statements("I scored 4/5 on the 5 coin toss problems in my probability quiz.")
    assert contradiction(never, dice) is None and contradiction(never, coins) is not None


def test_a_run_on_sentence_is_read_clause_by_clause() -> None:
    clauses = ", ".join(f"and then I talked about topic number {i} at some length" for i in range(12))
    text = f"I don't know why I have never practiced any conditional probability problems before, {clauses}."
    assert len(text) > 600
    found = statements(text)
    assert len(found) > 1 and found[0].denied
    assert {"conditional", "probability", "problem"} <= found[0].denied_keys
    assert all(text[s.start : s.end].strip() for s in found)


# --- through the write and read paths ------------------------------------------------------------------------


def test_the_berlin_lisbon_sequence_through_the_cli(run: Run) -> None:
    ok(run, "--db", "notes.db", "add", "message", "I live in Berlin.")
    added = ok(run, "--db", "notes.db", "add", "message", "Actually, I moved: I live in Lisbon now, not Berlin.")
    assert "supersedes message #1" in added
    out = ok(run, "--db", "notes.db", "search", "where do I live?")
    shown = [line for line in out.splitlines() if not line.strip().startswith("why:")]
    assert shown[0].endswith("Actually, I moved: I live in Lisbon now, not Berlin.")
    assert not any(line.endswith("] I live in Berlin.") for line in shown)  # the old statement is not a hit
    assert "supersedes #1, 'I live in Berlin.'" in out  # only named in the newer hit's why
    old = ok(run, "--db", "notes.db", "search", "where do I live?", "--include-superseded")
    assert any(line.endswith("] I live in Berlin.") for line in old.splitlines())


def test_the_blue_green_sequence_through_the_cli(run: Run) -> None:
    ok(run, "--db", "notes.db", "add", "message", "My favourite colour is blue.")
    ok(run, "--db", "notes.db", "add", "message", "Correction: my favourite colour is green, not blue.")
    hits = json.loads(ok(run, "--db", "notes.db", "search", "What is my favourite colour?", "--json"))
    assert hits[0]["text"] == "Correction: my favourite colour is green, not blue."
    assert all(h["text"] != "My favourite colour is blue." for h in hits)
    context = ok(run, "--db", "notes.db", "context", "What is my favourite colour?")
    assert "green, not blue" in context
    assert "My favourite colour is blue." not in context


def test_as_of_a_time_before_the_correction_returns_what_was_current_then(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        mem.remember("I live in Berlin.")
        before = clock.advance(days=30)
        mem.remember("Actually, I moved: I live in Lisbon now, not Berlin.")
        [now] = mem.search("where do I live", 5)
        assert "Lisbon" in now.text and "Berlin." not in now.text.replace("not Berlin.", "")
        then = mem.search("where do I live", 5, as_of=before - timedelta(days=1))
        assert [h.text for h in then] == ["I live in Berlin."]
        both = mem.search("where do I live", 5, include_superseded=True)
        assert "I live in Berlin." in {line for h in both for line in h.text.splitlines()}  # alone or with the reply


def test_every_hit_says_whether_it_is_current(db: str, clock: FakeClock) -> None:
    """With include_superseded a superseded memory is a hit like any other: it says it is no longer current (when,
    and which memory superseded it) in the keys every interface shows and in its why; a current hit says null."""
    with narrative.Memory(db, user="alice", clock=clock, env={}) as mem:
        mem.remember("I live in Berlin.")
        clock.advance(days=30)
        mem.remember("Actually, I moved: I live in Lisbon now, not Berlin.")
        hits = mem.search("where do I live", 5, include_superseded=True, record=False)
        old = [h for h in hits if h.memory.valid_to is not None]
        new = [h for h in hits if h.memory.valid_to is None]
        assert old and new, [(h.memory.id, h.memory.valid_to) for h in hits]
        for hit in old:
            row, ended = hit_dict(hit), hit.memory.valid_to
            assert ended is not None and row["superseded_by"] == hit.memory.superseded_by is not None
            assert row["valid_to"] == ended.isoformat() and datetime.fromisoformat(row["valid_to"]) == ended
            assert row["why"]["summary"].startswith(f"superseded by #{hit.memory.superseded_by} on ")
            assert "no longer current" in row["why"]["summary"]
        for hit in new:
            row = hit_dict(hit)
            assert row["superseded_by"] is None and row["valid_to"] is None
            assert "superseded by" not in row["why"]["summary"]
        assert json.loads(json.dumps(hit_dict(old[0])))["superseded_by"] == old[0].memory.superseded_by
        for hit in mem.search("where do I live", 5, record=False):  # the default: current hits only, saying so
            assert hit_dict(hit)["valid_to"] is None and hit_dict(hit)["superseded_by"] is None


def test_the_cli_marks_a_superseded_hit_and_its_json_says_it(run: Run) -> None:
    ok(run, "--db", "notes.db", "add", "message", "I live in Berlin.")
    ok(run, "--db", "notes.db", "add", "message", "Actually, I moved: I live in Lisbon now, not Berlin.")
    rows = json.loads(ok(run, "--db", "notes.db", "search", "where do I live?", "--include-superseded", "--json"))
    old = [r for r in rows if r["valid_to"] is not None]
    current = [r for r in rows if r["valid_to"] is None]
    assert old and current
    assert all(isinstance(r["superseded_by"], int) for r in old)
    assert all(r["superseded_by"] is None and "superseded" not in r["why"]["summary"] for r in current)
    assert all(r["why"]["summary"].startswith(f"superseded by #{r['superseded_by']} on ") for r in old)
    out = ok(run, "--db", "notes.db", "search", "where do I live?", "--include-superseded")
    heads = [line for line in out.splitlines() if line.startswith("#")]
    for row in old:
        assert any(
            line.startswith(f"#{row['id']} [") and f"[superseded by #{row['superseded_by']}]" in line for line in heads
        ), out
    for row in current:
        assert not any(line.startswith(f"#{row['id']} [") and "superseded" in line for line in heads), out
    assert "[superseded" not in ok(run, "--db", "notes.db", "search", "where do I live?")


def test_as_of_a_time_before_an_edit_shows_the_text_as_it_was(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        said = mem.remember("The product launch is on April 1.")
        before = clock()
        clock.advance(days=2)
        mem.edit_memory(said.memories[0].id, content="The product launch is on April 8.")
        then = " ".join(h.text for h in mem.search("product launch", 5, as_of=before, record=False))
        now = " ".join(h.text for h in mem.search("product launch", 5, record=False))
        assert "April 1" in then and "April 8" not in then
        assert "April 8" in now and "April 1" not in now


def test_nothing_is_deleted_and_restoring_undoes_it(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        first = mem.remember("I live in Berlin.")
        second = mem.remember("Actually, I moved: I live in Lisbon now, not Berlin.")
        old = mem.get_memory(first.memories[0].id)
        assert old.valid_to is not None and old.superseded_by == second.memories[0].id
        assert mem.store.count_rows("messages") == 2
        restored = mem.restore_memory(old.id)
        assert restored.valid_to is None and restored.superseded_by is None
        assert "I live in Berlin." in {h.text for h in mem.search("where do I live", 5)}


def test_deleting_a_correction_makes_what_it_corrected_current_again(db: str, clock: FakeClock) -> None:
    """A deleted correction no longer says what is true: the fact it superseded is current again, with an event
    in its history that says why (before, it stayed superseded by nothing and dropped out of recall)."""
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        first = mem.remember("I live in Berlin.")
        clock.advance(minutes=5)
        second = mem.remember("Actually, I moved: I live in Lisbon now, not Berlin.")
        old = first.memories[0].id
        by = mem.get_memory(old).superseded_by
        assert by is not None
        counts = mem.delete_memory(by)
        assert counts["restored"] == 2  # "I live in Berlin." and its note in Your Story ("I live in Berlin")
        assert not [m for m in mem.list_memories(stream="fact") if "Lisbon" in m.content]  # went with its turn
        again = mem.get_memory(old)
        assert again.valid_to is None and again.superseded_by is None
        assert "I live in Berlin." in {h.text for h in mem.search("where do I live", 5, record=False)}
        assert second.message.id not in {m for h in mem.search("where do I live", 5, record=False) for m in h.shown}
        last = mem.history(old)[-1]
        assert last.kind.value == "restored" and "was deleted" in str(last.detail)


def test_deleting_the_conversation_of_a_correction_restores_what_it_corrected(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        first = mem.remember("My favourite colour is blue.")
        mem.close_conversation()
        mem.confirm_memory()
        clock.advance(days=1)
        second = mem.remember("Correction: my favourite colour is green, not blue.")
        assert mem.get_memory(first.memories[0].id).valid_to is not None
        mem.delete_conversation(second.message.conversation_id)
        assert mem.get_memory(first.memories[0].id).valid_to is None
        assert "My favourite colour is blue." in {h.text for h in mem.search("favourite colour", 5, record=False)}


def test_deleting_a_correction_of_one_part_of_a_long_message_restores_that_part(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        filler = " ".join(f"The garden bed number {i} holds tomatoes, basil and a few marigolds." for i in range(10))
        long = mem.remember("\n\n".join([filler, filler, "I live in Berlin.", filler, filler]))  # a passage each
        clock.advance(minutes=5)
        second = mem.remember("Actually, I moved: I live in Lisbon now, not Berlin.")
        [taken] = second.settled.superseded
        assert taken.passage.message_id == long.message.id and not taken.memories  # the rest of it stays current

        def stale() -> list[int]:
            parts = mem.store.passages_of_messages("alice", [long.message.id])[long.message.id]
            return [p.id for p in parts if not p.is_current]

        assert stale() == [taken.passage.id]
        mem.delete_memory(taken.by.memory_id)
        assert stale() == []


def test_a_turn_dated_before_a_statement_does_not_supersede_it(db: str, clock: FakeClock) -> None:
    """A late sync stores a correction dated before the statement it names: by the times, the statement was said
    last, so it stays current (superseding it left ``valid_to`` before the memory's own time)."""
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        start = clock()
        said = mem.remember("My dentist appointment is on May 3.", at=start + timedelta(days=30))
        late = mem.remember("Actually, my dentist appointment moved to April 20, not May 3.", at=start)
        assert not late.settled.superseded
        assert all(m.valid_to is None for m in said.memories)


def test_only_the_same_speaker_corrects_a_statement(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        mem.remember("I live in Berlin.", speaker="Ana")
        result = mem.remember("Actually, I live in Lisbon now, not Berlin.", speaker="Ben")
        assert not result.settled.superseded
        assert len(mem.search("where do I live", 5, record=False)) >= 2


def test_a_contradiction_is_shown_with_both_sides_and_says_so(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        mem.remember("The homepage route with Flask returns static HTML, I wrote it yesterday.")
        mem.remember("Sure, happy to help with Flask.", role="assistant")
        said = mem.remember("I've never written any Flask routes in this project.")
        assert said.settled.conflicts
        hits = mem.search("have I written Flask routes", 10, record=False)
        texts = " ".join(h.text for h in hits)
        assert "never written any Flask routes" in texts and "homepage route" in texts
        flagged = [h for h in hits if h.conflicts]
        assert len(flagged) >= 2
        assert "conflicts with" in str(flagged[0].why()["summary"])


def test_a_denial_is_linked_to_the_earlier_turns_that_say_most_of_what_it_denies(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        did = mem.remember("My score was 4/5 correct on the 5 coin toss problems, how does that show mastery?")
        mem.remember("A 4/5 score on coin toss problems shows 80% mastery. " * 20, role="assistant")
        for i in range(6):  # turns that share the sentence's other words, or only one of the denied ones
            mem.remember(f"I want to learn probability concepts with a concrete example about coins, part {i}.")
            mem.remember(
                f"Here is a concrete example about coin probability and tosses, part {i}. " * 10, role="assistant"
            )
        said = mem.remember(
            "I've never completed any coin toss problems before, but I want to learn probability concepts with a "
            "concrete example."
        )
        linked = {c.other_memory_id for c in said.settled.conflicts}
        assert len(linked) <= 3
        mine = {p.memory_id for p in mem.store.passages_of_messages("alice", [did.message.id])[did.message.id]}
        assert mine & linked


def test_doing_what_was_denied_is_progress_shown_above_the_denial(db: str, clock: FakeClock) -> None:
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        never = mem.remember("I've never written any Flask routes in this project.")
        clock.advance(days=2)
        done = mem.remember("I wrote the homepage route with Flask today, it returns static HTML.")
        [link] = done.settled.conflicts
        assert link.reason.startswith("updates: since done") and not done.settled.superseded
        hits = mem.search("Flask routes written", 5, record=False)
        at = {m: i for i, h in enumerate(hits) for m in h.shown}
        assert at[done.message.id] <= at[never.message.id]  # progress first; the denial stays, linked


def test_an_instruction_a_question_or_a_wish_is_no_progress_on_what_was_denied(db: str, clock: FakeClock) -> None:
    """An instruction ("Always show the code when I ask about Flask routes"), a question ("how do I write …?") and a
    wish ("I want to write …") say nothing was done: none is linked to "I've never written any Flask routes" as
    progress (each was, "since done: flask, route"); a report of doing it still is."""
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        mem.remember("I've never written any Flask routes in this project.")
        clock.advance(days=2)
        for instruction in (
            "Always show the full code when I ask about Flask routes in this project.",
            "Please, make sure every Flask route I write in this project gets a test.",
            "How do I write my first Flask route for this project?",
            "I want to write my first Flask routes in this project next week.",
        ):
            assert not mem.remember(instruction).settled.conflicts
        clock.advance(days=2)
        assert mem.remember("I wrote the homepage route with Flask today, it works.").settled.conflicts


def test_a_figure_of_another_measure_neither_supersedes_nor_updates_one(db: str, clock: FakeClock) -> None:
    """ "The bounce rate … now below 35%" hid "… passed with a 95% success rate" as no longer true, and "the input
    lag … is now over 500ms" was linked as the update of "a 300ms debounce": each is another measure of the same
    site or app.  The success rate stays current and searchable; a figure of the same measure still updates."""
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        mem.remember("The contact form on my portfolio site passed its tests with a 95% success rate.")
        mem.remember("I implemented a 300ms debounce for the autocomplete in my weather app.")
        mem.remember("I'm monitoring the bounce rate of my portfolio site, it is under 40%.")
        clock.advance(days=2)
        bounce = mem.remember("The bounce rate of my portfolio site has improved, now below 35%.").settled
        assert [c.reason for c in bounce.conflicts] + [s.reason for s in bounce.superseded] == [
            "now: 35 percent, was 40"
        ]
        lag = mem.remember("The input lag of the autocomplete in my weather app is now over 500ms.").settled
        assert not lag.conflicts and not lag.superseded
        [hit, *_] = mem.search("success rate of the contact form tests", 5)
        assert "95% success rate" in hit.text


def test_a_wish_that_also_reports_is_progress_on_what_was_denied(db: str, clock: FakeClock) -> None:
    """ "I want to write more …, since I've written the homepage route" wishes and reports: what it reports is
    progress on "I've never written any Flask routes"."""
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        mem.remember("I've never written any Flask routes in this project.")
        clock.advance(days=2)
        said = "I want to write more Flask routes in this project, since I've written the homepage route already."
        [conflict] = mem.remember(said).settled.conflicts
        assert conflict.reason.startswith(SINCE_DONE)


def _denial_and_progress(mem: narrative.Memory, clock: FakeClock) -> tuple[Any, list[Any]]:
    """A denial, then four reports (two days apart) of doing what was denied."""
    never = mem.remember("I've never written any Flask routes in this project.")
    reports = []
    for route in ("homepage", "login", "settings", "export"):
        clock.advance(days=2)
        reports.append(mem.remember(f"I wrote the {route} route with Flask today, it works."))
    return never, reports


def test_a_denial_brings_in_only_the_newest_progress(db: str, clock: FakeClock) -> None:
    """Each report of doing what was denied is linked to the denial; a search that shows the denial brings in the
    newest report (where things stand), not every one of them."""
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        never, reports = _denial_and_progress(mem, clock)
        assert all(r.settled.conflicts[0].reason.startswith(SINCE_DONE) for r in reports)
        hits = mem.search("never written any Flask routes in this project", 2, record=False)
        shown = {m for h in hits for m in h.shown}
        assert never.message.id in shown and reports[-1].message.id in shown
        assert not shown & {r.message.id for r in reports[:-1]}


def test_older_progress_keeps_its_own_rank_below_the_denial(db: str, clock: FakeClock) -> None:
    """Only the newest report of doing what was denied moves above the denial; the older reports are ranked by
    their own match (moving each of them up pushed the other side of a contradiction out of the budget)."""
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        never, reports = _denial_and_progress(mem, clock)
        hits = mem.search("never written any Flask routes in this project", 10, record=False)
        at = {m: i for i, h in enumerate(hits) for m in h.shown}
        assert at[reports[-1].message.id] < at[never.message.id]
        assert all(at[r.message.id] > at[never.message.id] for r in reports[:-1] if r.message.id in at)


def test_a_conflict_stands_with_the_best_hit_showing_its_message(db: str, clock: FakeClock) -> None:
    """A memory's conflicts are placed by the best-ranked result that shows its message, not by a lower one that
    happens to be the message's own memory while showing another part of it."""
    from narrative.read.candidates import Candidates, Unit
    from narrative.read.conflicting import standing_for

    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        mem.remember("Coin toss problems are a good start. " * 3, role="assistant")
        denial = mem.remember("I've never completed any coin toss problems before.")
        reply = mem.remember("Then let us start with one coin toss problem.", role="assistant")
        [own] = {p.memory_id for p in mem.store.passages_of_messages("alice", [denial.message.id])[denial.message.id]}
        before = mem.get_memory(own)  # the denial lives in the exchange before it (the reply, then the denial)
        after = next(m for m in reply.memories if set(m.message_ids) == {denial.message.id, reply.message.id})
        assert denial.message.id in before.message_ids and after.id != before.id
        found = Candidates()
        found.units = {
            ("m", after.id): Unit(after.id, after.stream, after.created_at, after.message_ids),
            ("m", before.id): Unit(before.id, before.stream, before.created_at, before.message_ids),
        }
        earlier = before.message_ids[0]
        shows = {("m", after.id): frozenset(after.message_ids), ("m", before.id): frozenset({earlier})}
        chosen = [("m", after.id), ("m", before.id)]  # the exchange after ranks first; the one before shows a part
        listed = standing_for(mem.store, "alice", chosen, shows, found)
        assert listed[before.id] == ("m", after.id) and listed[after.id] == ("m", after.id)


def test_a_hit_with_more_conflicts_than_results_asked_for_is_answered(db: str, clock: FakeClock) -> None:
    """One result asked for, and its memory disagrees with two earlier ones: the hit and both sides are shown
    (no crash while making room)."""
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        first = mem.remember("I completed 5 coin toss problems on Monday with my sister.")
        second = mem.remember("I completed 3 more coin toss problems on Tuesday at the library.")
        clock.advance(days=2)
        never = mem.remember("I've never completed any coin toss problems before.")
        assert len(never.settled.conflicts) == 2
        hits = mem.search("never completed any coin toss problems", 1, record=False)
        shown = {m for h in hits for m in h.shown}
        assert {first.message.id, second.message.id, never.message.id} <= shown


# --- with an LLM: the model's judgement, validated --------------------------------------------------------------

JUDGEMENT = "You keep a person's memory true over time."


@pytest.mark.parametrize("provider", ["ollama", "openai"])
def test_with_an_llm_its_judgement_decides_and_a_bad_answer_falls_back(tmp_path: Path, provider: str) -> None:
    from llm_server import Reply, ScriptedLLMServer

    with ScriptedLLMServer(fallback=Reply.json({"topic_tags": ["home"], "importance": 3})) as server:
        server.answer("You keep a one-sentence account", Reply.text("Maya talks about where she lives."))
        server.answer(JUDGEMENT, Reply.json({"relation": "update", "reason": "she moved"}))
        settings: dict[str, Any] = {"llm": provider, "llm_url": server.url, "llm_model": "test"}
        with narrative.Memory(tmp_path / "a.db", user="maya", embedder="none", env={}, **settings) as mem:
            mem.remember("I live in Berlin.", speaker="Maya")
            # no change cue the rules know: only the model can tell this is a move
            said = mem.remember("I don't live in Berlin; home is Lisbon these days.", speaker="Maya")
            assert said.settled.superseded and "model" in said.settled.superseded[0].reason
            asked = [r for r in server.chat_requests if JUDGEMENT in json.dumps(r.body)]
            assert asked and "I live in Berlin." in json.dumps(asked[0].body)
        server.answer(JUDGEMENT, Reply.json({"relation": "maybe"}))  # not one of the three: the rules decide
        with narrative.Memory(tmp_path / "b.db", user="maya", embedder="none", env={}, **settings) as mem:
            mem.remember("I live in Berlin.", speaker="Maya")
            said = mem.remember("Actually, I live in Lisbon now, not Berlin.", speaker="Maya")
            assert said.settled.superseded and "not berlin" in said.settled.superseded[0].reason
            assert mem.pending_messages() == []


def test_the_cli_restores_a_superseded_memory_and_history_shows_both_with_times(run: Run) -> None:
    ok(run, "--db", "notes.db", "add", "message", "I live in Berlin.")
    added = ok(run, "--db", "notes.db", "add", "message", "Actually, I moved: I live in Lisbon now, not Berlin.")
    [correction] = re.findall(r"memory #(\d+) \[conversation\]", added)
    history = ok(run, "--db", "notes.db", "memory", "history", "1")
    assert "created" in history and "superseded" in history and "I live in Berlin." in history
    assert f"superseded_by: {correction}" in history
    restored = ok(run, "--db", "notes.db", "memory", "restore", "1")
    assert restored.startswith("restored #1")
    again = ok(run, "--db", "notes.db", "memory", "history", "1")
    assert "restored" in again
    events = json.loads(ok(run, "--db", "notes.db", "memory", "history", "1", "--json"))["events"]
    assert [e["kind"] for e in events] == ["created", "superseded", "restored"]
    assert all(e["created_at"] for e in events)


def test_a_search_reads_memories_with_their_sources_and_what_they_superseded_at_once(db: str, clock: FakeClock) -> None:
    """The read a search's hits are made from (one statement) gives what the separate reads give: the memories in
    the order asked, their source messages in order, and what each superseded."""
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        mem.remember("I live in Berlin.")
        clock.advance(days=2)
        mem.remember("Actually, I moved: I live in Lisbon now, not Berlin.")
        mem.remember("The garden needs water on Fridays.", role="assistant")
        store = mem.store
        listed = {m.id: m for m in store.list_memories("alice")}  # their sources read by a second statement
        ids = [*sorted(listed, reverse=True), 10_000]
        together, superseded = store.memories_and_superseded("alice", ids)
        assert together == store.get_memories("alice", ids) == [listed[i] for i in ids if i in listed]
        assert superseded == store.superseded_by_memories("alice", ids) and superseded  # Berlin, by Lisbon
        briefs = store.memory_briefs("alice", ids)
        for memory in together:
            assert briefs[memory.id].sources == tuple(sorted(memory.message_ids))
            assert briefs[memory.id].valid_to == memory.valid_to
        assert any(len(m.message_ids) == 2 for m in together)  # an exchange: two sources, in order


def test_a_correction_is_found_without_reading_every_memory_of_the_user(db: str, clock: FakeClock) -> None:
    """The write path looks for what a statement corrects among the best keyword matches, asking the filter
    (current conversation memories) about those only: a user with many memories used to have all their ids read
    on every turn (11.6 turns/s at 100,000 memories, 175 after). The correction is still found."""
    with narrative.Memory(db, user="alice", embedder="none", clock=clock, env={}) as mem:
        mem.add_memories(
            [{"content": f"note {i} about the blue tent and the garden", "stream": "conversation"} for i in range(1500)]
        )
        mem.remember("My dentist appointment is on May 3.")
        clock.advance(days=1)
        store = mem.store
        largest: list[int] = []
        read = store._all  # type: ignore[attr-defined]

        def counted(sql: str, params: Any = (), *rest: Any, **named: Any) -> Any:
            rows = read(sql, params, *rest, **named)
            largest.append(len(rows))
            return rows

        store._all = counted  # type: ignore[attr-defined]
        try:
            mem.remember("Actually, my dentist appointment moved to May 10.")
        finally:
            store._all = read  # type: ignore[attr-defined]
        assert max(largest) < 500
        assert mem.search("dentist appointment", 5)[0].memory.content.endswith("May 10.")
        assert not [m for m in mem.list_memories(current_only=True) if m.content.endswith("May 3.")]
