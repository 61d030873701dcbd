"""Fidelity of what the assembler reads, on PostgreSQL: of the memories an exhaustive
assembly includes, the share an everyday one includes. Two reads, two tables:
- the store read (the working set's fallback): every visible memory of the user a
  candidate, with its exact cosine and text rank, against its few index-backed
  candidates, per top-k;
- the working set: every ranked item walked (MEMLANE_WALK_MARGIN=0) against the walk cut
  where the items' estimated lines fill `walk_margin` budgets, per margin.
Same store, query, budget and `now` on both sides; access records off, so no assembly
changes the next one's recency.

    python -m bench.fidelity                  # 10k user, 50 queries, top-k 25 / 50 / 100
    python -m bench.fidelity --size tiny      # seconds: proves it runs
    MEMLANE_EMBEDDING_MODEL=minilm python -m bench.fidelity   # HNSW (own database)

What an exhaustive assembly includes is not "the truth" of relevance, only what ranking
every memory would give: a shortfall is what the candidate read costs (an HNSW index's
misses, a memory none of the parts reached, the lexical score normalised by the best of
fewer candidates), not a judgement of the ranking itself (bench/eval_retrieval.py is that).
"""

from __future__ import annotations

import re
import sys
from typing import Any

from bench import dataset
from bench.common import NoAccessRecords, Report, parser, pg_database
from memlane.config.settings import Settings, load_settings
from memlane.models.db import get_engine
from memlane.models.store.memories.vector_index import ensure_for_users, wants_hnsw
from memlane.pipeline.assembly.budget import strategy_top_k
from memlane.service.facade import Memlane
from memlane.workers.embedders import get_embedder

PLANS: dict[str, dict[str, Any]] = {
    "tiny": {
        "size": 200,
        "queries": 5,
        "top_k": [10, 50],
        "margins": [1.5],
        "db": "memlane_bench_tiny",
    },
    "full": {
        "size": 10_000,
        "queries": 50,
        "top_k": [50, 250],
        "margins": [0.8, 1.0, 1.5, 2.0],
        "db": "memlane_bench",
    },
}


def included(settings: Settings, user: str, questions: list[str], vectors: Any, args: Any) -> Any:
    """The included memory ids and the memories' count in the pack of each question's
    assembly."""
    with Memlane(settings, dispatcher=NoAccessRecords(settings)) as lane:
        # loaded now: a large user's first assemblies otherwise read the store while
        # their view loads, and how many did depended on the machine's speed
        lane.warm(user)
        for question, vector in zip(questions, vectors, strict=True):
            result = lane.assemble(
                user,
                question,
                strategy=args.strategy,
                budget_tokens=args.budget,
                query_embedding=vector,
                now=dataset.NOW,
            )
            memories = sum(1 for item in result.pack_data["items"] if item["section"] == "memory")
            yield set(result.included_memory_ids), memories


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--strategy", default="scored")
    p.add_argument("--budget", type=int, default=4000)
    args = p.parse_args(argv)
    plan = PLANS[args.size]
    name = load_settings().embedding_model
    db = plan["db"] if name == "hashing" else f"{plan['db']}_{re.sub('[^a-z0-9]+', '_', name)}"
    url = pg_database(db)
    base = load_settings(database_url=url, broker_url=None, working_set_mb=0)
    embedder = get_embedder(base)
    user = dataset.ensure_user(url, plan["size"], log=lambda m: print(m, file=sys.stderr))
    if wants_hnsw(base.vector_index, embedder.capabilities):
        ensure_for_users(get_engine(url), [user], embedder.name, embedder.dim, 0)
    questions = dataset.queries(plan["queries"])
    vectors = embedder.embed(questions)
    size = plan["size"]
    columns = [
        "read",
        "memories",
        "top_k",
        "read_top_k",
        "walk_margin",
        "considered_mean",
        "fidelity",
    ]
    report = Report("fidelity", columns)

    def emit(read: str, truth: list[set[str]], settings: Settings, **cell: Any) -> None:
        found = total = considered = 0
        runs = included(settings, user, questions, vectors, args)
        for want, (got, candidates) in zip(truth, runs, strict=True):
            found += len(got & want)
            total += len(want)
            considered += candidates
        report.emit(
            read=read,
            memories=size,
            embedder=embedder.name,
            strategy=args.strategy,
            budget_tokens=args.budget,
            **cell,
            considered_mean=round(considered / len(questions), 1),
            included=total,
            found=found,
            fidelity=round(found / total, 3) if total else None,
        )

    # The store read, every memory a candidate: each strategy order reads the whole user,
    # the cosine is exact (no index), and the text rank is computed for every row.
    everything = base.model_copy(
        update={
            "vector_top_k": size,
            "strategy_top_k": size,
            "lexical_top_k": size,
            "vector_index": "exact",
        }
    )
    truth = [ids for ids, _ in included(everything, user, questions, vectors, args)]
    for k in plan["top_k"]:
        settings = base.model_copy(
            update={"vector_top_k": k, "strategy_top_k": k, "lexical_top_k": k}
        )
        # scaled up with the budget (memlane.pipeline.assembly.budget.strategy_top_k): the
        # relevance reads to the lines the whole budget holds, the strategy orders to
        # the lines the memories' share holds
        emit(
            "store",
            truth,
            settings,
            top_k=k,
            read_top_k=strategy_top_k(args.budget, 1.0, k),
            strategy_top_k=strategy_top_k(args.budget, base.memory_share, k),
        )
    # The working set, every ranked item walked, against the walk cut by the budget.
    walked = load_settings(database_url=url, broker_url=None, walk_margin=0)
    truth = [ids for ids, _ in included(walked, user, questions, vectors, args)]
    for margin in plan["margins"]:
        emit(
            "working-set",
            truth,
            walked.model_copy(update={"walk_margin": margin}),
            walk_margin=margin,
        )
    report.print_table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
