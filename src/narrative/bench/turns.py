"""What a ranked result puts in front of a model, and single-turn baselines over the same turns.

A search result is scored by what a model would read, not by how many memories it returned:

* **turns shown** — each result is unrolled into the turns (messages) it shows, in rank order; evidence counts
  when it is among the first k distinct turns (``T@5``, ``T@10``, ``T@20``);
* **text budget** — each result spends the tokens of its text, in rank order; evidence counts when it is in a
  result that fits, together with every result ranked above it, within 500, 1,000 or 2,000 tokens;
* **restated** — the share of the top 10 results whose text mostly repeats what the results above it showed.

Which turns a result shows is decided in :mod:`narrative.bench.hits`.  A summary of many turns (a reflection, a
closing memory, a narrative link) spends its tokens but shows no turn: it earns nothing in the first two measures.

The baselines rank the same turns one by one, as a plain retriever would: BM25 (the store's own tokenizer and
scoring), MiniLM cosine, and their reciprocal rank fusion (k = 60, equal weights, the textbook setting).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from narrative.providers.embed import Embedder, embed_one
from narrative.providers.tokens import ApproxTokenCounter
from narrative.store.keyword_index import KeywordIndex, query_terms

TURN_KS = (5, 10, 20)
BUDGETS = (500, 1000, 2000)
BASELINES = ("bm25", "minilm", "rrf")
BASELINE_RRF_K = 60
RESTATED_SHARE = 0.8  # a result is restated when this share of its word 3-grams was shown above it
_COUNTER = ApproxTokenCounter()
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Shown:
    """One ranked result as a model sees it: the turns it shows (in order), its source turns, its cost, its text,
    and whether it says it conflicts with another memory."""

    turns: tuple[str, ...]
    sources: frozenset[str]
    tokens: int
    text: str = ""
    conflicts: bool = False


@dataclass(frozen=True)
class Turn:
    key: str  # the benchmark's id of the message: a LoCoMo dia_id, a BEAM message id
    text: str  # "speaker: words", exactly as a conversation memory writes a turn


def count_tokens(text: str) -> int:
    return _COUNTER.count(text)


def shown_turns(content: str, sources: Sequence[Turn]) -> tuple[str, ...]:
    """The turns a memory's text reproduces: its only source, or the sources whose text stands in it verbatim."""
    if len(sources) == 1:
        return (sources[0].key,)
    return tuple(turn.key for turn in sources if turn.text in content)


def fitting(ranked: Sequence[Shown], budget: int) -> list[Shown]:
    """The results a reader gets within ``budget`` tokens: each with every result above it, in rank order."""
    spent, head = 0, []
    for item in ranked:
        spent += item.tokens
        if spent > budget:
            break
        head.append(item)
    return head


def turns_in(ranked: Sequence[Shown]) -> set[str]:
    """Every turn the results show."""
    return {turn for item in ranked for turn in item.turns}


def score(ranked: Sequence[Shown], wanted: set[str]) -> dict[str, float]:
    """Turn recall at each k and budget recall at each budget for one ranked list."""
    order: list[str] = []
    for item in ranked:
        order += [t for t in item.turns if t not in order]
    result = {f"T@{k}": len(wanted & set(order[:k])) / len(wanted) for k in TURN_KS}
    for budget in BUDGETS:
        result[f"B@{budget}"] = len(wanted & turns_in(fitting(ranked, budget))) / len(wanted)
    return result


def score_paths(
    ranked: Mapping[str, Sequence[Shown]], filling: Mapping[str, Sequence[Shown]], wanted: set[str]
) -> dict[str, dict[str, float]]:
    """Every ranking's measures; a path in ``filling`` takes its budget measures from that deeper ranking."""
    result = {name: score(items, wanted) for name, items in ranked.items()}
    for name, items in filling.items():
        result[name].update({key: value for key, value in score(items, wanted).items() if key.startswith("B@")})
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


def words(text: str) -> list[str]:
    """A text's words, lower case (runs of letters, digits and underscores)."""
    return _WORD.findall(text.lower())


def restated(ranked: Sequence[Shown], top: int = 10) -> float:
    """Share of the top results whose text was already shown by the results above it (summaries included):
    at least 80 % of its distinct word 3-grams appear in their texts.  A text of one or two words counts only
    when the whole of it stands, word for word, in a text above; a text without words never counts."""
    head = list(ranked[:top])
    if not head:
        return 0.0
    seen: set[tuple[str, ...]] = set()
    above: list[str] = []
    repeated = 0
    for item in head:
        said = words(item.text)
        grams = {tuple(said[i : i + 3]) for i in range(len(said) - 2)}
        if grams:
            repeated += len(grams & seen) >= RESTATED_SHARE * len(grams)
        elif said:
            phrase = f" {' '.join(said)} "
            repeated += any(phrase in f" {text} " for text in above)
        seen |= grams
        above.append(" ".join(said))
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
        return Shown((turn.key,), frozenset({turn.key}), count_tokens(turn.text), turn.text)


MEASURES = tuple([f"T@{k}" for k in TURN_KS] + [f"B@{b}" for b in BUDGETS])


def mean_table(rows: Sequence[Mapping[str, float]], keys: Sequence[str] = MEASURES) -> dict[str, float]:
    return {key: round(sum(r[key] for r in rows) / len(rows), 4) if rows else 0.0 for key in keys}


def group_table(rows: Sequence[dict[str, Any]], group: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
    """Per ranking (the names in each row's ``turns``): the mean measures per group of questions and overall."""
    names = list(rows[0]["turns"]) if rows else []
    table: dict[str, Any] = {}
    for name in names:
        by_group: dict[str, list[dict[str, float]]] = {}
        for row in rows:
            by_group.setdefault(group(row), []).append(row["turns"][name])
            by_group.setdefault("overall", []).append(row["turns"][name])
        table[name] = {g: {"n": len(v), **mean_table(v)} for g, v in by_group.items()}
    return table


def ratios(table: dict[str, Any], path: str, group: str = "overall") -> dict[str, Any]:
    """The path's figure over the best baseline's at each k and budget, for one group of questions."""
    result: dict[str, Any] = {}
    ours = table[path][group]
    for key in MEASURES:
        best = max(BASELINES, key=lambda name: table[name][group][key])
        value = table[best][group][key]
        result[key] = {"best_baseline": best, "ratio": round(ours[key] / value, 3) if value else None}
    return result


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    ordered = sorted(values)
    if not ordered:
        return {"p50": None, "p95": None}
    return {"p50": round(ordered[len(ordered) // 2], 2), "p95": round(ordered[int(len(ordered) * 0.95)], 2)}
