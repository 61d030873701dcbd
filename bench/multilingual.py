"""Languages: retrieval recall and dedup precision/recall on a small multilingual set.

    python -m bench.multilingual [--embedders hashing,minilm] [--budgets 500,150]

Retrieval: one user holds the 56 facts of bench.multilingual_data (eight in each of
English, German, French, Spanish, Portuguese, Chinese and Japanese), added by hand
through the facade on a fresh SQLite store per embedder; each fact's question, asked in
its language, is a hit when the assembled context (`Memlane.assemble`, each of
`--budgets` tokens, no access records) includes that fact. The other 55 facts are the
distractors, seven of them on the same topic in other languages. At 500 tokens about
half the store fits; at 150, four or five memories: there the ranking decides. Printed
per language, embedder and budget.

Dedup: `is_duplicate` with the default settings on the hand-written pairs: precision and
recall of "same fact" within a language, and how many of the pairs of one fact in two
languages were merged (by design none: keywords do not cross languages).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.common import NoAccessRecords, machine
from bench.multilingual_data import FACTS, PAIRS
from memlane.config.settings import Settings, load_settings
from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.dedup.similarity import is_duplicate
from memlane.pipeline.language.detect import detect_language
from memlane.service.facade import Memlane

USER = "polyglot"


def retrieval(embedder: str, budgets: list[int]) -> dict[int, dict[str, float]]:
    """Recall per budget and language (share of questions whose fact is in the context)."""
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(
            database_url=f"sqlite:///{Path(tmp) / 'ml.db'}", embedding_model=embedder
        )
        lane = Memlane(settings, dispatcher=NoAccessRecords(settings))
        try:
            ids: dict[str, list[str]] = {}
            for language, facts in FACTS.items():
                ids[language] = [lane.add_memory(USER, {"content": fact}).id for fact, _ in facts]
            now = datetime.now(UTC) + timedelta(days=1)
            recall: dict[int, dict[str, float]] = {budget: {} for budget in budgets}
            for budget in budgets:
                for language, facts in FACTS.items():
                    hits = 0
                    for (_, question), memory_id in zip(facts, ids[language], strict=True):
                        context = lane.assemble(USER, question, budget_tokens=budget, now=now)
                        hits += memory_id in context.included_memory_ids
                    recall[budget][language] = round(100 * hits / len(facts), 1)
            return recall
        finally:
            lane.close()


def dedup_figures(settings: Settings) -> dict[str, float]:
    merged = [
        (
            same,
            detect_language(a) == detect_language(b),
            is_duplicate(
                a,
                keywords(a),
                b,
                keywords(b),
                threshold=settings.dedup_threshold,
                min_keywords=settings.dedup_min_keywords,
            ),
        )
        for a, b, same in PAIRS
    ]
    within = [(same, got) for same, one_language, got in merged if one_language]
    true_positive = sum(same and got for same, got in within)
    return {
        "pairs": len(within),
        "precision": round(100 * true_positive / max(1, sum(got for _, got in within)), 1),
        "recall": round(100 * true_positive / max(1, sum(same for same, _ in within)), 1),
        "cross_language_pairs": len(merged) - len(within),
        "cross_language_merged": sum(got for _, one_language, got in merged if not one_language),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedders", default="hashing,minilm")
    parser.add_argument("--budgets", default="500,150")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    languages = list(FACTS)
    print("recall of the right memory, per language (%)")
    print(
        f"{'embedder':<10}{'budget':>7}"
        + "".join(f"{code:>7}" for code in languages)
        + f"{'all':>7}"
    )
    figures: dict[str, object] = {"machine": machine()}
    for embedder in args.embedders.split(","):
        started = time.perf_counter()
        by_budget = retrieval(embedder, budgets)
        for budget, recall in by_budget.items():
            overall = round(sum(recall.values()) / len(recall), 1)
            cells = "".join(f"{recall[code]:>7.1f}" for code in languages)
            print(f"{embedder:<10}{budget:>7}{cells}{overall:>7.1f}")
            figures[f"{embedder}@{budget}"] = {**recall, "all": overall}
        print(f"  ({embedder}: {time.perf_counter() - started:.1f} s)")
    dedup = dedup_figures(load_settings())
    print(
        f"dedup on {dedup['pairs']} pairs within a language: precision {dedup['precision']}%,"
        f" recall {dedup['recall']}%; pairs of one fact in two languages merged:"
        f" {dedup['cross_language_merged']} of {dedup['cross_language_pairs']}"
    )
    figures["dedup"] = dedup
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
