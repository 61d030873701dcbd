"""Why evidence stays out of a tight context, and what other ways of spending the budget
would give: LoCoMo's walks replayed (issue 39).

    python -m bench.locomo_walks DATA_DIR [--embedder minilm|hashing]
                                          [--granularity turn|sentence]
                                          [--budgets 500,1000,2000] [--limit N]

DATA_DIR as bench.locomo's (the LoCoMo dev split; its licence is not the project's, so
nothing of it is kept here). The store is built as bench.locomo builds it (SQLite, the
verbatim stand-in extractor); every question is assembled at every budget one after
another, as production runs, and its pack read back with each item's text
(`Memlane.pack(…, with_texts=True)`). Then:

1. Where each evidence turn missing from a context stood (bench.walk_replay.fate): not
   walked (ranked past the working set's shortlist), ranked past the last line taken, or
   skipped for room while a line ranked after it went in.
2. Each walk replayed under the rules of bench.walk_replay over the same walked items and
   tokens, scored by DATA_DIR's scorer on the items' texts (no markup, so no dates: answer
   words are below bench.locomo's, alike for every rule). `rank_order` is the assembler's
   own; `agree` is the share of assemblies where its replay took what the context holds.
   `with_next` adds, after the first line taken, the memory said next in its conversation
   (its line's tokens estimated: its text's and MEMORY_MARKUP's); the `…_at_floor` rules
   walk such replies after every item at or above the relevance floor.
3. How many missing evidence turns a memory said right before or after a line taken
   holds (`beside a taken line`, counted apart from the fates).

Prints one JSON object (per budget and rule: evidence and answer words %, all and per
category; the fates' counts) on stdout and a table on stderr.
"""

from __future__ import annotations

import argparse
import html
import importlib.util
import itertools
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import tiktoken

from bench import locomo
from bench import walk_replay as replay
from memlane.config.settings import Settings
from memlane.models.schemas import MemoryPublic
from memlane.pipeline.assembly import context_format as fmt
from memlane.pipeline.assembly.tokens import get_encoding
from memlane.pipeline.dedup.keywords import keywords
from memlane.service.facade import Memlane

# The most tokens of markup a memory line took in bench.locomo's runs (mean 19.0, max 20).
MEMORY_MARKUP = 20
Rule = Callable[[Sequence[replay.Item], replay.Room, float], list[replay.Item]]
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def scorer(data: Path) -> ModuleType:
    """DATA_DIR's score.py, imported (stdlib only)."""
    spec = importlib.util.spec_from_file_location("locomo_score", data / "score.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _item(item: dict[str, Any]) -> replay.Item:
    return replay.Item(
        id=str(item["id"]),
        section=str(item["section"]),
        relevance=float((item.get("components") or {}).get("relevance") or 0.0),
        composite=float(item.get("score") or 0.0),
        tokens=int(item["tokens"]),
        text=str(item.get("text") or ""),
    )


def walked_items(pack: dict[str, Any]) -> tuple[list[replay.Item], list[replay.Item]]:
    """The pack's items taken before the pool (pinned and verified memories in), and
    those the walk competed with for the rest of the budget (rule 4's pool)."""
    first = [
        _item(i) for i in pack["items"] if i["tier"] in ("pinned", "verified") and i["included"]
    ]
    pool = [
        _item(i)
        for i in pack["items"]
        if i["tier"] in ("candidate", None)
        and i["drop_reason"] in (None, "over_budget", "redundant")
    ]
    return first, pool


def packs(
    settings: Settings,
    questions: Sequence[dict[str, Any]],
    budgets: Sequence[int],
    now_for: dict[str, datetime],
) -> list[tuple[dict[str, Any], int, str, dict[str, Any]]]:
    """(question, budget, context, pack with texts) of every assembly, in order."""
    out = []
    with Memlane(settings) as lane:
        for q in questions:
            for budget in budgets:
                result = lane.assemble(
                    q["user_id"], q["question"], budget_tokens=budget, now=now_for[q["user_id"]]
                )
                lane.flush()  # recorded (and the pack stored) before the next, as time passes
                pack = lane.pack(str(result.pack_data["pack_id"]), with_texts=True)
                out.append((q, budget, result.text, pack))
    return out


@dataclass(frozen=True, slots=True)
class Conversations:
    """Each memory's neighbours in its conversation (by when they were said, then in the
    order they were extracted) and text."""

    before: dict[str, str]
    after: dict[str, str]
    text: dict[str, str]


def conversations(lane: Memlane, users: Sequence[str]) -> Conversations:
    before: dict[str, str] = {}
    after: dict[str, str] = {}
    text: dict[str, str] = {}
    for user in users:
        memories: list[MemoryPublic] = []
        while batch := lane.list_memories(user, limit=500, offset=len(memories)):
            memories += batch
        # one extraction's memories share its time: its order (the extractor's, here the
        # messages') is their refs'
        memories.sort(key=lambda m: (m.source_conversation_id or "", m.created_at, m.ref))
        for m, n in itertools.pairwise(memories):
            if m.source_conversation_id == n.source_conversation_id:
                after[m.id], before[n.id] = n.id, m.id
        text |= {m.id: m.content for m in memories}
    return Conversations(before, after, text)


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", type=Path, help="transcripts.jsonl, questions.jsonl, score.py")
    p.add_argument("--embedder", default="minilm", help="minilm (the default) | hashing")
    p.add_argument("--granularity", choices=locomo.GRANULARITIES, default="turn")
    p.add_argument("--budgets", default=",".join(map(str, locomo.BUDGETS)))
    p.add_argument("--limit", type=int, default=0, help="every k-th question, N in all")
    args = p.parse_args(argv)
    budgets = [int(b) for b in args.budgets.split(",")]
    questions = locomo.read_jsonl(args.data / "questions.jsonl")
    if args.limit and args.limit < len(questions):
        questions = questions[:: len(questions) // args.limit][: args.limit]
    score = scorer(args.data)
    locomo.VerbatimStub.granularity = args.granularity
    with (
        locomo.VerbatimStub() as stub,
        locomo.pipeline_settings("sqlite", None, args.embedder, stub.base_url) as settings,
    ):
        last = locomo.ingest(settings, locomo.read_jsonl(args.data / "transcripts.jsonl"))
        now_for = {user: at + timedelta(days=1) for user, at in last.items()}
        assembled = packs(settings, questions, budgets, now_for)
        with Memlane(settings) as lane:
            said = conversations(lane, sorted(now_for))
        floor = settings.relevance_floor
    report = tally(assembled, score, floor, said)
    report |= {"embedder": args.embedder, "granularity": args.granularity}
    report["questions"] = len(questions)
    print_table(report, budgets)
    print(json.dumps(report))


def tally(
    assembled: Sequence[tuple[dict[str, Any], int, str, dict[str, Any]]],
    score: ModuleType,
    floor: float,
    said: Conversations,
) -> dict[str, Any]:
    """Each rule's scores and the fates of missing evidence, per budget."""
    encoding = get_encoding("o200k_base")
    estimated: dict[str, replay.Item] = {}

    def said_next(pool: Sequence[replay.Item]) -> dict[str, replay.Item]:
        walked = {i.id: i for i in pool}
        out = {}
        for item in pool:
            if (n := said.after.get(item.id)) is None:
                continue
            if n not in walked and n not in estimated:
                tokens = len(encoding.encode_ordinary(fmt.text(said.text[n]))) + MEMORY_MARKUP
                estimated[n] = replay.Item(n, "memory", 0.0, 0.0, tokens, said.text[n])
            out[item.id] = walked.get(n) or estimated[n]
        return out

    sums: dict[int, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    fates: dict[int, Counter[str]] = defaultdict(Counter)
    agree: Counter[int] = Counter()
    for q, budget, context, pack in assembled:
        first, items = walked_items(pack)
        room = replay.Room.of(budget, str(q["user_id"]), encoding).after(first)
        words = keywords(str(q["question"]))
        rules = _rules(words, encoding, said_next(items))
        taken_ids = {i["id"] for i in pack["items"] if i["included"]} - {i.id for i in first}
        for name, rule in rules.items():
            taken = rule(items, room, floor)
            if name == "rank_order":
                agree[budget] += {i.id for i in taken} == taken_ids
            text = "\n".join(i.text for i in [*first, *taken])
            _add(sums[budget][name], score.score(text, q), q)
        in_context = " ".join(score.norm_ws(html.unescape(context)).split())
        for text in q.get("evidence_text", []):
            evidence = score.norm_ws(text)
            if evidence and evidence not in in_context:
                fates[budget][replay.fate(evidence, items, taken_ids, floor)] += 1
                beside = {said.before.get(t) for t in taken_ids} | {
                    said.after.get(t) for t in taken_ids
                }
                if any(evidence in score.norm_ws(said.text[m]) for m in beside if m):
                    fates[budget]["beside a taken line"] += 1
    return {
        "budgets": {
            str(budget): {
                "agree": round(100 * agree[budget] / max(1, sums[budget]["rank_order"]["n"]), 1),
                "fates": dict(fates[budget]),
                "rules": {name: _figures(c) for name, c in by_rule.items()},
            }
            for budget, by_rule in sorted(sums.items())
        }
    }


def _rules(
    words: frozenset[str] | set[str],
    encoding: tiktoken.Encoding,
    next_of: dict[str, replay.Item],
) -> dict[str, Rule]:
    """bench.walk_replay's rules, by name, for one question (its keywords)."""

    def trim(items: Sequence[replay.Item], room: replay.Room, floor: float) -> list[replay.Item]:
        return replay.trim_to_fit(items, room, floor, query_words=words, encoding=encoding)

    return {
        "rank_order": replay.rank_order,
        "value_per_token": replay.value_per_token,
        "knapsack": lambda i, r, f: replay.knapsack(i, r, f, weighted=False),
        "knapsack_weighted": lambda i, r, f: replay.knapsack(i, r, f, weighted=True),
        "trim_to_fit": trim,
        "stop_at_skip": replay.stop_at_skip,
        "with_next": lambda i, r, f: replay.with_next(i, r, f, next_of=next_of),
        "replies_at_floor": lambda i, r, f: replay.replies_at_floor(i, r, f, next_of=next_of),
        "first_reply_at_floor": lambda i, r, f: replay.reply_of_first_at_floor(
            i, r, f, next_of=next_of
        ),
        "question_replies_at_floor": lambda i, r, f: replay.replies_to_questions_at_floor(
            i, r, f, next_of=next_of
        ),
        "question_replies_last": lambda i, r, f: replay.replies_to_questions_last(
            i, r, f, next_of=next_of
        ),
    }


def _add(into: Counter[str], scores: dict[str, float], q: dict[str, Any]) -> None:
    into["n"] += 1
    for key in ("all", f"c{q['category']}"):
        for measure in ("ev_all", "ans_rec"):
            if scores.get(measure) is not None:
                into[f"{measure}|{key}"] += scores[measure]  # type: ignore[assignment]
                into[f"n_{measure}|{key}"] += 1


def _figures(c: Counter[str]) -> dict[str, dict[str, float | None]]:
    def pct(measure: str, key: str) -> float | None:
        n = c[f"n_{measure}|{key}"]
        return round(100 * c[f"{measure}|{key}"] / n, 1) if n else None

    keys = ["all", *(f"c{k}" for k in CATEGORIES)]
    return {
        ("all" if key == "all" else CATEGORIES[int(key[1:])]): {
            "evidence": pct("ev_all", key),
            "answer_words": pct("ans_rec", key),
        }
        for key in keys
    }


def print_table(report: dict[str, Any], budgets: Sequence[int]) -> None:
    out = sys.stderr
    print(
        f"\nLoCoMo dev walks replayed, {report['embedder']}, {report['granularity']} "
        "(evidence / answer words %, texts only)",
        file=out,
    )
    print("rule".ljust(27) + "".join(f"{b:>16}" for b in budgets), file=out)
    for rule in report["budgets"][str(budgets[0])]["rules"]:
        cells = [report["budgets"][str(b)]["rules"][rule]["all"] for b in budgets]
        print(
            rule.ljust(27) + "".join(f"{c['evidence']:>7} / {c['answer_words']:<6}" for c in cells),
            file=out,
        )
    for b in budgets:
        cell = report["budgets"][str(b)]
        agree, fates = cell["agree"], cell["fates"]
        print(f"{b}: rank_order replay agrees {agree}%; missing evidence: {fates}", file=out)


if __name__ == "__main__":
    main()
