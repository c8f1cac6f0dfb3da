"""What a ranked result puts in front of a model, and single-turn baselines over the same turns.

A search result is scored by what a model would read, not by how many memories it returned:

* **turns shown** — each result is unrolled into the turns it reproduces, in rank order; evidence counts when it
  is among the first k distinct turns (``T@5``, ``T@10``, ``T@20``);
* **text budget** — each result spends the tokens of its text, in rank order; evidence counts when it is in a
  result that fits, together with every result ranked above it, within 500, 1,000 or 2,000 tokens.

A result reproduces a turn when it was made from that turn alone (an extracted decision, a turn note) or when the
turn's text stands in it word for word (an exchange holds its two turns verbatim).  A summary of many turns (a
reflection, a closing memory, a narrative link) spends its tokens but shows no turn: the bench cannot tell which
single turns it reproduces, so it earns nothing in either measure.

The baselines rank the same turns one by one, as a plain retriever would: BM25 (the store's own tokenizer and
scoring), MiniLM cosine, and their reciprocal rank fusion (k = 60, equal weights, the textbook setting).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from narrative.providers.embed import Embedder, embed_one
from narrative.providers.tokens import ApproxTokenCounter
from narrative.store.keyword_index import KeywordIndex, query_terms

TURN_KS = (5, 10, 20)
BUDGETS = (500, 1000, 2000)
BASELINES = ("bm25", "minilm", "rrf")
BASELINE_RRF_K = 60
_COUNTER = ApproxTokenCounter()


@dataclass(frozen=True)
class Shown:
    """One ranked result as a model sees it: the turns it reproduces (in order), its message ids, its cost."""

    turns: tuple[str, ...]
    sources: frozenset[str]
    tokens: int


@dataclass(frozen=True)
class Turn:
    dia_id: str
    text: str  # "speaker: words", exactly as a conversation memory writes a turn


def count_tokens(text: str) -> int:
    return _COUNTER.count(text)


def shown_turns(content: str, sources: Sequence[Turn]) -> tuple[str, ...]:
    """The turns a memory's text reproduces: its only source, or the sources whose text stands in it verbatim."""
    if len(sources) == 1:
        return (sources[0].dia_id,)
    return tuple(turn.dia_id for turn in sources if turn.text in content)


def score(ranked: Sequence[Shown], wanted: set[str]) -> dict[str, float]:
    """Turn recall at each k and budget recall at each budget for one ranked list."""
    order: list[str] = []
    for item in ranked:
        order += [t for t in item.turns if t not in order]
    result = {f"T@{k}": len(wanted & set(order[:k])) / len(wanted) for k in TURN_KS}
    for budget in BUDGETS:
        spent, found = 0, set[str]()
        for item in ranked:
            spent += item.tokens
            if spent > budget:
                break
            found.update(item.turns)
        result[f"B@{budget}"] = len(wanted & found) / len(wanted)
    return result


def duplicates(ranked: Sequence[Shown], top: int = 10) -> float:
    """Share of the top results whose source turns were all shown by a higher result."""
    head = list(ranked[:top])
    if not head:
        return 0.0
    shown: set[str] = set()
    repeated = 0
    for item in head:
        if item.sources and item.sources <= shown:
            repeated += 1
        shown.update(item.turns)
    return repeated / len(head)


class Baselines:
    """BM25, MiniLM and their RRF over single turns of one conversation."""

    def __init__(self, turns: Sequence[Turn], embedder: Embedder | None) -> None:
        self.turns = list(turns)
        self.index = KeywordIndex()
        self.index.upsert((i, "u", turn.text) for i, turn in enumerate(self.turns))
        self.embedder = embedder
        self.vectors: np.ndarray | None = None
        if embedder is not None and self.turns:
            self.vectors = np.asarray(embedder.embed_batch([t.text for t in self.turns]), dtype=np.float32)

    def rankings(self, question: str, depth: int | None = None) -> dict[str, list[Shown]]:
        """Each baseline's ranking of the turns, deep enough to fill the largest k and budget (or ``depth`` turns).

        Every turn is ranked (BM25 lists only the turns that share a query word) and the fusion is taken over the
        whole lists, so a baseline is cut by the budget it is scored at, never by a fixed number of results.
        """
        everything = len(self.turns)
        bm25 = [i for i, _ in self.index.search("u", query_terms(question), everything)]
        dense: list[int] = []
        if self.vectors is not None and self.embedder is not None:
            similarity = self.vectors @ np.asarray(embed_one(self.embedder, question), dtype=np.float32)
            dense = [int(i) for i in np.argsort(-similarity, kind="stable")]
        fused: dict[int, float] = {}
        for ranked in (bm25, dense):
            for rank, item in enumerate(ranked, start=1):
                fused[item] = fused.get(item, 0.0) + 1.0 / (BASELINE_RRF_K + rank)
        rrf = sorted(fused, key=lambda i: (-fused[i], i))
        return {name: self._head(ids, depth) for name, ids in (("bm25", bm25), ("minilm", dense), ("rrf", rrf))}

    def _head(self, ids: Sequence[int], depth: int | None) -> list[Shown]:
        """The first ``depth`` turns, or (by default) as many as fill the largest k and the largest budget."""
        if depth is not None:
            return [self._shown(i) for i in ids[:depth]]
        head: list[Shown] = []
        spent = 0
        for i in ids:
            if len(head) >= max(TURN_KS) and spent > max(BUDGETS):
                break
            head.append(self._shown(i))
            spent += head[-1].tokens
        return head

    def _shown(self, index: int) -> Shown:
        turn = self.turns[index]
        return Shown((turn.dia_id,), frozenset({turn.dia_id}), count_tokens(turn.text))


def mean_table(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    keys = [f"T@{k}" for k in TURN_KS] + [f"B@{b}" for b in BUDGETS]
    return {key: round(sum(r[key] for r in rows) / len(rows), 4) if rows else 0.0 for key in keys}
