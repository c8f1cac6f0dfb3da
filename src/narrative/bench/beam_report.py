"""The printed report of ``narrative bench beam`` (the figures themselves come from :mod:`narrative.bench.beam`)."""

from __future__ import annotations

from typing import Any

from narrative.bench import turns as shown_text
from narrative.bench.beam import ABILITIES

PATHS = ("default", *shown_text.BASELINES)


def format_report(report: dict[str, Any]) -> str:
    lines = [
        f"BEAM retrieval — {report['folder']}: {report['chats']} chats, {report['questions']} questions "
        f"({report['questions_without_evidence']} without evidence not scored)",
        *_ingest_lines(report["ingest"]),
        f"search latency: default p50 {report['search_ms']['default']['p50']} ms, "
        f"p95 {report['search_ms']['default']['p95']} ms",
        "",
        "What a reader is shown. T@k: evidence among the first k distinct messages the results show;",
        "B@n: evidence in the results that fit within n tokens. default = Memory.search(question) as shipped;",
        "bm25, minilm, rrf = single messages. Knowledge updates are scored on the updated message, contradictions",
        "and temporal questions on both sides.",
        "",
        *_measure_table(report["turns"]),
        *_ratio_table(report["ratios"]),
        "",
        *_shares_table(
            "knowledge updates",
            report["knowledge_update"],
            ("current", "stale"),
            "current = an updated message shown within 1,000 tokens; stale = an original message shown there "
            "above every updated one, or with none",
        ),
        *_shares_table(
            "contradictions",
            report["contradiction"],
            ("both", "said"),
            "both = a message of each side shown within 2,000 tokens; said = a hit there says it conflicts",
        ),
        f"duplicates in the top 10 (all source messages already shown above): default "
        f"{report['duplicates_top10']['default']:.3f}",
        f"restated in the top 10 (≥ 80 % of the text's word 3-grams shown above, summaries included): default "
        f"{report['restated_top10']['default']:.3f}",
        f"default search returned {report['default_returned']['mean']} results on average; "
        f"{report['default_returned']['empty']} questions got none",
    ]
    return "\n".join(lines)


def _ingest_lines(ingest: dict[str, Any]) -> list[str]:
    model = ingest["model"]
    lines = [
        f"ingest: {ingest['messages']} messages in {ingest['seconds']} s = {ingest['messages_per_s']} messages/s "
        f"(write path incl. embeddings); {ingest['passages']} passages = {ingest['passages_per_s']} passages/s",
        f"bare model on the same passages in the same run: {model['passages_per_s']} passages/s "
        f"({model['seconds']} s); write path ÷ bare model = {ingest['ratio']}",
        f"closing and confirming the conversations: {ingest['closing_seconds']} s",
    ]
    for refusal in ingest["refused"]:
        lines.append(
            f"refused by the write path: chat {refusal['chat']} message {refusal['id']} "
            f"({refusal['characters']:,} characters): {refusal['error']}"
        )
    return lines


def _groups(table: dict[str, Any]) -> list[str]:
    """The abilities in the table, in the report's order, then overall."""
    known = dict.fromkeys(g for g in (*ABILITIES, *sorted(table)) if g in table and g != "overall")
    return [*known, "overall"] if table else []


def _measure_table(turns: dict[str, Any]) -> list[str]:
    header = f"{'path':<8} {'ability':<25} {'n':>4} " + " ".join(f"{key:>6}" for key in shown_text.MEASURES)
    lines = [header, "-" * len(header)]
    for name in PATHS:
        table = turns.get(name, {})
        for group in _groups(table):
            row = table[group]
            values = " ".join(f"{row[k]:>6.3f}" for k in shown_text.MEASURES)
            lines.append(f"{name:<8} {group:<25} {row['n']:>4} {values}")
        lines.append("")
    return lines


def _ratio_table(ratios: dict[str, Any]) -> list[str]:
    if not ratios:
        return []
    header = f"{'default ÷ best baseline':<34} " + " ".join(f"{key:>6}" for key in shown_text.MEASURES)
    lines = [header, "-" * len(header)]
    for group in _groups(ratios):
        cells = [ratios[group][key]["ratio"] for key in shown_text.MEASURES]
        lines.append(f"{group:<34} " + " ".join("   n/a" if c is None else f"{c:>6.2f}" for c in cells))
    best = "  ".join(f"{k} {ratios['overall'][k]['best_baseline']}" for k in shown_text.MEASURES)
    lines.append(f"best single-message baseline overall: {best}")
    return lines


def _shares_table(title: str, shares: dict[str, Any], keys: tuple[str, str], meaning: str) -> list[str]:
    n = next(iter(shares.values()))["n"] if shares else 0
    lines = [f"{title} (n={n}): {meaning}", f"{'path':<8} " + " ".join(f"{k:>8}" for k in keys)]
    for name in PATHS:
        if name in shares:
            lines.append(f"{name:<8} " + " ".join(f"{shares[name][k]:>8.3f}" for k in keys))
    lines.append("")
    return lines
