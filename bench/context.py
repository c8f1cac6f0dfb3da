"""Latency of ``Memory.context(query, 2000)`` on a realistic store.

    python bench/context.py --memories 10000
    python bench/context.py --memories 10000 --db /tmp/ctx10k.db      # keep the store, reuse it next time

Builds (or reuses) a store for one user through the real write path: synthetic but realistic
sessions over a dozen life and work topics (decisions with reasons, tasks, waiting-ons, open
questions, reading notes, feelings, small talk), replayed with ``remember_many`` (routing,
extraction, running narrative, storyline summaries, reflections, retention) and embedded with the
real MiniLM model in batches, until the user has at least ``--memories`` memories. Every session is
closed except the last, which stays active (an agent mid-conversation).

Then ``context(query, budget)`` runs for ``--queries`` distinct questions, twice:

* cold — the first time each question is seen: includes embedding the question with MiniLM;
* warm — the same questions again: the embedder's query cache answers, so this is the assembly
  itself (search, selection, budget fitting, recording the use);

and, for reference, the MiniLM query embedding alone.

Prints p50/p95/max per pass and the target (p95 ≤ 30 ms).
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # before numpy loads: see --blas-threads
    _blas = sys.argv[sys.argv.index("--blas-threads") + 1] if "--blas-threads" in sys.argv else "1"
    os.environ.setdefault("OPENBLAS_NUM_THREADS", _blas)

import argparse
import random
import statistics
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

import narrative
from narrative.engine import Turn
from narrative.providers.embed import MiniLMEmbedder, embed_one

USER = "bench"
TARGET_P95_MS = 30.0

# Each topic: people, things, choices (picked, rejected, reason), tasks, questions, a book, feelings.
TOPICS: dict[str, dict[str, Any]] = {
    "garden app": {
        "people": ["Sam", "Priya", "Jonas"],
        "things": ["plot map", "watering schedule", "sync layer", "badge"],
        "choices": [
            ("SQLite", "Firebase", "it works offline"),
            ("a map view", "a list view", "volunteers think in places"),
            ("weekly digests", "push notifications", "notifications feel naggy"),
        ],
        "tasks": ["draw the plot map", "write the sync code", "test the app in the garden", "design the badges"],
        "questions": ["should the schedule be per plot or per volunteer", "how do two volunteers share a plot"],
        "book": ("Thinking in Systems", "Donella Meadows", "behaviour comes from structure"),
    },
    "wedding": {
        "people": ["Lena", "Mum", "Tomas"],
        "things": ["speech", "flights to Porto", "dress", "gift"],
        "choices": [
            ("a short speech", "a long speech", "people get restless"),
            ("the early flight", "the late flight", "the rehearsal is at noon"),
        ],
        "tasks": ["write three stories for the speech", "book the flights to Porto", "call Mum about Lisbon"],
        "questions": ["should I mention the lost ice cream story", "who else is giving a speech"],
        "book": ("Speak With No Fear", "Mike Acker", "fear shrinks with rehearsal"),
    },
    "marathon": {
        "people": ["Coach Ana", "Dev"],
        "things": ["long run", "running shoes", "training plan", "knee"],
        "choices": [
            ("the 16-week plan", "the 12-week plan", "my base is still low"),
            ("trail shoes", "road shoes", "the race has gravel sections"),
        ],
        "tasks": ["run 18 km on Sunday", "book a physio session", "buy new running shoes"],
        "questions": ["should I run through the knee pain", "how fast should the easy runs be"],
        "book": ("Daniels' Running Formula", "Jack Daniels", "easy days must stay easy"),
    },
    "moving house": {
        "people": ["the landlord", "Mara", "the movers"],
        "things": ["deposit", "boxes", "new lease", "piano"],
        "choices": [
            ("the flat on Elm Street", "the house by the river", "the commute is shorter"),
            ("professional movers", "a rented van", "the piano needs care"),
        ],
        "tasks": ["pack the kitchen", "sign the new lease", "get the deposit back", "update my address"],
        "questions": ["when does the old lease end", "can the piano go up the stairs"],
        "book": ("The Life-Changing Magic of Tidying Up", "Marie Kondo", "keep what sparks joy"),
    },
    "job search": {
        "people": ["the recruiter", "Hannah", "my manager"],
        "things": ["CV", "portfolio", "offer", "interview"],
        "choices": [
            ("the startup offer", "the bank offer", "the work is more interesting"),
            ("a one-page CV", "a two-page CV", "recruiters skim"),
        ],
        "tasks": ["update the portfolio", "prepare the system design interview", "send the CV to Hannah"],
        "questions": ["should I negotiate the salary", "how do I explain the gap year"],
        "book": ("Designing Your Life", "Bill Burnett", "prototype your options"),
    },
    "kitchen renovation": {
        "people": ["the contractor", "Yusuf"],
        "things": ["countertop", "cabinets", "budget", "tiles"],
        "choices": [
            ("oak cabinets", "white laminate", "they last longer"),
            ("an induction hob", "a gas hob", "it is safer with kids"),
        ],
        "tasks": ["choose the tiles", "get a second quote", "clear the kitchen by Friday"],
        "questions": ["is the budget enough for new plumbing", "can we keep the old sink"],
        "book": ("A Pattern Language", "Christopher Alexander", "light on two sides of every room"),
    },
    "guitar": {
        "people": ["my teacher Rosa", "Ben"],
        "things": ["barre chords", "metronome", "new strings", "recital"],
        "choices": [
            ("fingerstyle", "a pick", "the songs I love are fingerpicked"),
            ("daily short practice", "weekend marathons", "consistency beats volume"),
        ],
        "tasks": ["practise the F barre chord", "learn the recital piece", "change the strings"],
        "questions": ["why does my wrist hurt after practice", "which song for the recital"],
        "book": ("The Inner Game of Music", "Barry Green", "self-criticism blocks performance"),
    },
    "thesis": {
        "people": ["Professor Lind", "Ines"],
        "things": ["literature review", "survey data", "chapter three"],
        "choices": [
            ("a mixed-methods design", "a pure survey", "interviews explain the numbers"),
            ("R", "SPSS", "the analysis must be reproducible"),
        ],
        "tasks": ["finish the literature review", "clean the survey data", "send chapter three to Lind"],
        "questions": ["is the sample size large enough", "should the pilot study go in the appendix"],
        "book": ("How to Write a Thesis", "Umberto Eco", "a thesis is a craft you can learn"),
    },
    "taxes": {
        "people": ["the accountant", "the tax office"],
        "things": ["receipts", "tax return", "invoice"],
        "choices": [
            ("the accountant", "doing it myself", "freelance income is tricky"),
            ("a separate business account", "one account", "it keeps the receipts clean"),
        ],
        "tasks": ["collect the receipts", "file the tax return", "pay the second instalment"],
        "questions": ["can I deduct the home office", "when is the filing deadline"],
        "book": ("Your Money or Your Life", "Vicki Robin", "money is life energy"),
    },
    "japan trip": {
        "people": ["Kenji", "Aiko"],
        "things": ["rail pass", "ryokan", "itinerary", "visa"],
        "choices": [
            ("Kyoto first", "Tokyo first", "the cherry blossoms peak there earlier"),
            ("a rail pass", "single tickets", "we travel a lot between cities"),
        ],
        "tasks": ["book the ryokan in Kyoto", "buy the rail pass", "plan the Hiroshima day"],
        "questions": ["is the rail pass worth it", "do we need cash everywhere"],
        "book": ("The Roads to Sata", "Alan Booth", "walking shows the real country"),
    },
    "choir": {
        "people": ["the conductor", "Greta"],
        "things": ["alto part", "concert", "rehearsal", "sheet music"],
        "choices": [
            ("the alto section", "the soprano section", "my range sits lower"),
            ("learning by ear", "sight-reading", "the concert is soon"),
        ],
        "tasks": ["learn the alto part of the Requiem", "print the sheet music", "book the hall"],
        "questions": ["should we add a second concert", "who leads the warm-up"],
        "book": ("Choral Pedagogy", "Brenda Smith", "breath supports the phrase"),
    },
}
FEELINGS = ["happy", "anxious", "excited", "worried", "frustrated", "relieved", "proud", "nervous", "tired"]
SMALL_TALK = ["Morning!", "Thanks, that helps.", "Haha, fair enough.", "Good night!", "Ok, cool."]
QUESTION_FORMS = [
    "what did we decide about the {thing}?",
    "where was I with the {topic}?",
    "why did we choose {picked}?",
    "what am I waiting on from {person}?",
    "what's still open for the {topic}?",
    "remind me what {person} said",
    "what did {author} say in {book}?",
    "how do I feel about the {thing}?",
    "next steps for the {topic}",
    "fix the {thing} thing",
    "did I {task} yet?",
]


def _user_turn(rng: random.Random, topic: str, t: dict[str, Any]) -> str:
    person, thing = rng.choice(t["people"]), rng.choice(t["things"])
    picked, rejected, reason = rng.choice(t["choices"])
    task = rng.choice(t["tasks"])
    book, author, claim = t["book"]
    forms = [
        f"I need to {task} before the weekend.",
        f"I'm waiting on {person} to send the {thing}.",
        f"We decided to go with {picked} instead of {rejected} because {reason}.",
        f"Let's go with {picked} rather than {rejected}, since {reason}.",
        f"Open question: {rng.choice(t['questions'])}?",
        f"{rng.choice(t['questions']).capitalize()}?",
        f"I've been reading {book} by {author}. On p. {rng.randint(5, 300)} it says {claim}.",
        f"I'm {rng.choice(FEELINGS)} about the {thing} for the {topic}.",
        f"{person} sent the {thing} yesterday, so I can finally {task}.",
        f"Today I worked on the {thing} with {person} for about {rng.randint(1, 5)} hours.",
        f"I realized the {thing} matters more than I thought for the {topic}.",
        rng.choice(SMALL_TALK),
    ]
    return rng.choice(forms)


def _assistant_turn(rng: random.Random, topic: str, t: dict[str, Any]) -> str:
    person, thing = rng.choice(t["people"]), rng.choice(t["things"])
    picked, rejected, _ = rng.choice(t["choices"])
    forms = [
        f"Noted: {rng.choice(t['tasks'])} is next, and it waits on {person}.",
        f"That sounds right. {picked.capitalize()} fits better than {rejected} here.",
        f"Do you want to start with the {thing} or with {rng.choice(t['tasks'])}?",
        f"Good idea. I'd keep the {thing} simple for now and revisit it after {person} replies.",
        f"I'll keep that open for the {topic}: {rng.choice(t['questions'])}.",
    ]
    return rng.choice(forms)


def session_turns(rng: random.Random, start: datetime, length: int) -> list[Turn]:
    main = rng.choice(list(TOPICS))
    turns = []
    for i in range(length):
        topic = main if rng.random() < 0.8 else rng.choice(list(TOPICS))
        role = "user" if i % 2 == 0 else "assistant"
        text = (_user_turn if role == "user" else _assistant_turn)(rng, topic, TOPICS[topic])
        speaker = "maya" if role == "user" else "Rook"
        turns.append(Turn(text, role, speaker=speaker, at=start + timedelta(minutes=2 * i)))
    return turns


def questions(rng: random.Random, n: int) -> list[str]:
    found: list[str] = []
    seen: set[str] = set()
    while len(found) < n:
        topic = rng.choice(list(TOPICS))
        t = TOPICS[topic]
        book, author, _ = t["book"]
        q = rng.choice(QUESTION_FORMS).format(
            thing=rng.choice(t["things"]),
            topic=topic,
            picked=rng.choice(t["choices"])[0],
            person=rng.choice(t["people"]),
            author=author,
            book=book,
            task=rng.choice(t["tasks"]),
        )
        if q not in seen:
            seen.add(q)
            found.append(q)
    return found


class CachingEmbedder:
    """MiniLM with a text → vector memo for the build: synthetic sessions repeat sentences, and an
    identical text always gets the identical vector, so the stored vectors are exactly MiniLM's."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        self.inner = inner
        self.memo: dict[str, np.ndarray] = {}
        self.identity, self.dims, self.batch_size = inner.identity, inner.dims, inner.batch_size

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.memo))
        if missing:
            for text, vector in zip(missing, self.inner.embed_batch(missing), strict=True):
                self.memo[text] = vector
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        return np.vstack([self.memo[t] for t in texts])


def build(mem: narrative.Memory, memories: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    at = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
    started = time.perf_counter()
    sessions = turns = 0
    while mem.store.count_rows("memories", USER) < memories:
        active = mem.active_conversation()
        if active is not None:
            mem.close_conversation(active.id)
            if hasattr(mem, "confirm_memory"):
                mem.confirm_memory(active.id)
        mem.start_conversation(at=at)
        batch = session_turns(rng, at, rng.randint(12, 30))
        mem.remember_many(batch)
        sessions, turns = sessions + 1, turns + len(batch)
        at += timedelta(days=rng.choice([0, 1, 1, 2, 3]), hours=rng.randint(1, 5))
        if sessions % 25 == 0:
            done = mem.store.count_rows("memories", USER)
            rate = done / (time.perf_counter() - started)
            print(f"  {done:>6} memories, {turns} turns, {sessions} sessions ({rate:.0f} memories/s)", flush=True)
    return {"seconds": time.perf_counter() - started, "sessions": sessions, "turns": turns}


def measure(mem: narrative.Memory, queries: list[str], budget: int) -> list[float]:
    times = []
    for q in queries:
        start = time.perf_counter()
        mem.context(q, budget)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def row(name: str, times: list[float]) -> str:
    p50 = statistics.median(times)
    p95 = float(np.percentile(np.asarray(times), 95))
    verdict = "ok" if p95 <= TARGET_P95_MS else "over"
    return f"{name:<28}{len(times):>6}{p50:>10.1f}{p95:>10.1f}{max(times):>10.1f}   {verdict}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=10_000, help="build until the user has this many")
    parser.add_argument("--queries", type=int, default=200, help="distinct questions per pass")
    parser.add_argument("--budget", type=int, default=2000, help="token budget of each context")
    parser.add_argument("--db", default=None, help="store file (reused when it already holds enough memories)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--build-threads", type=int, default=1, help="torch threads for MiniLM")
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="OpenBLAS threads for numpy (set before numpy loads; 1 avoids thread thrash on 2 cores)",
    )
    args = parser.parse_args()

    db = Path(args.db) if args.db else Path(f"/tmp/narrative-bench-context-{args.memories}.db")
    minilm = MiniLMEmbedder(batch_size=64, num_threads=args.build_threads)
    mem = narrative.Memory(db, user=USER, embedder=CachingEmbedder(minilm), env={})
    have = mem.store.count_rows("memories", USER)
    print(f"store {db}: {have} memories (OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '-')})")
    if have < args.memories:
        print(f"building up to {args.memories} memories with MiniLM (this takes a few minutes)…", flush=True)
        built = build(mem, args.memories, args.seed)
        print(f"built in {built['seconds']:.0f} s: {built['sessions']:.0f} sessions, {built['turns']:.0f} turns")
    mem.close()
    mem = narrative.Memory(db, user=USER, embedder=minilm, env={})  # queries: the plain embedder and its cache
    counts = {t: mem.store.count_rows(t, USER) for t in ("memories", "messages", "storylines", "entities")}
    print("store holds " + ", ".join(f"{n} {t}" for t, n in counts.items()))

    qs = questions(random.Random(args.seed + 1), args.queries)
    mem.context("warm up the index and the model", args.budget, record=False)
    cold = measure(mem, qs, args.budget)
    warm = measure(mem, qs, args.budget)
    embed_only = []
    for q in qs:  # the model alone, on texts it has not cached
        start = time.perf_counter()
        embed_one(minilm, f"{q} (again)")
        embed_only.append((time.perf_counter() - start) * 1e3)
    sample = mem.context(qs[0], args.budget, record=False)
    print()
    print(f"context(query, {args.budget}) over {counts['memories']} memories (ms)")
    print(f"{'pass':<28}{'n':>6}{'p50':>10}{'p95':>10}{'max':>10}   target p95 ≤ {TARGET_P95_MS:.0f} ms")
    print(row("cold (embeds the query)", cold))
    print(row("warm (query embedding cached)", warm))
    print(row("MiniLM query embedding alone", embed_only))
    print(
        f"\nsample block: {sample.tokens} tokens, {len(sample.memories)} memories, {len(sample.recent)} recent messages"
    )
    mem.close()


if __name__ == "__main__":
    main()
