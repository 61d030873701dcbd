"""Token counting and the cost of budget enforcement.

- counting: `memlane.pipeline.assembly.tokens.count_tokens` with o200k_base and
  cl100k_base, on memory lines (short strings, one call each: the assembler's case) and
  on one long transcript (throughput), as tokens per second;
- budget enforcement: `assemble_context` on 100 / 300 / 600 candidate memories (a 4,000
  token budget), warm (its per-line caches filled, the steady state) and cold, against a
  trivial render of the same selection (`context_format.render_xml`, no counting).

    python -m bench.tokens
    python -m bench.tokens --size tiny
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import tiktoken

from bench import dataset
from bench.common import Report, latency_summary, parser, time_calls
from memlane.config.settings import Settings
from memlane.pipeline.assembly import context_format as fmt
from memlane.pipeline.assembly import parts as assembly_parts
from memlane.pipeline.assembly.assembler import assemble_context
from memlane.pipeline.assembly.records import AssemblyInput
from memlane.pipeline.assembly.tokens import count_tokens, get_encoding
from memlane.pipeline.ranking.scoring import Weights
from memlane.pipeline.records import MemoryRecord

ENCODINGS = ("o200k_base", "cl100k_base")
PLANS = {
    "tiny": {"lines": 200, "long_repeat": 2, "candidates": [100], "iterations": 20},
    "full": {"lines": 20_000, "long_repeat": 50, "candidates": [100, 300, 600], "iterations": 300},
}


def synthetic_memories(count: int, user: str = "u1") -> list[MemoryRecord]:
    rng = random.Random(count)
    vocab = dataset.vocabulary()
    categories = ("preference", "fact", "decision", "project")
    out = []
    for i in range(count):
        category = rng.choice(categories)
        created = dataset.NOW - timedelta(days=rng.uniform(0, 400))
        out.append(
            MemoryRecord(
                id=f"mem_{i:06d}",
                user_id=user,
                content=dataset.sentence(rng, vocab, category),
                category=category,  # type: ignore[arg-type]
                importance=round(rng.uniform(0.3, 1.0), 2),
                confidence=rng.choice((1.0, 0.7)),
                tier="verified" if i < 5 else "candidate",
                access_count=rng.randint(1, 40),
                created_at=created,
                confirmed_at=created,
                accessed_at=created + (dataset.NOW - created) * rng.random(),
            )
        )
    return out


def throughput(report: Report, plan: dict[str, Any]) -> None:
    memories = synthetic_memories(plan["lines"])
    lines = [fmt.memory_line(m) for m in memories]
    transcript = " ".join(m.content for m in memories[:500]) * plan["long_repeat"]
    for name in ENCODINGS:
        encoding = get_encoding(name)
        for kind, texts in (("memory lines", lines), ("long transcript", [transcript])):
            count_tokens(texts[0][:100], encoding)
            started = time.perf_counter()
            total = sum(count_tokens(text, encoding) for text in texts)
            elapsed = time.perf_counter() - started
            report.emit(
                part="count",
                encoding=name,
                text=kind,
                calls=len(texts),
                tokens=total,
                tokens_per_s=round(total / elapsed),
                us_per_call=round(elapsed / len(texts) * 1e6, 1),
            )


def enforcement(report: Report, plan: dict[str, Any]) -> None:
    encoding = get_encoding("o200k_base")
    for count in plan["candidates"]:
        enforce(report, count, encoding, plan["iterations"])


def enforce(report: Report, count: int, encoding: tiktoken.Encoding, iterations: int) -> None:
    memories = synthetic_memories(count)
    rng = random.Random(1)
    settings = Settings()
    request = AssemblyInput(
        user_id="u1",
        query="what does the user prefer?",
        strategy="scored",
        budget_tokens=4000,
        now=dataset.NOW,
        encoding=encoding,
        retrieval_mode="bench",
        memories=memories,
        relevance={m.id: rng.random() for m in memories},
        weights=Weights(**settings.weights.model_dump()),
        half_life_hours=settings.half_life_hours,
        memory_share=settings.memory_share,
        relevance_floor=settings.relevance_floor,
    )
    result = assemble_context(request)
    by_id = {m.id: m for m in memories}
    selection = fmt.Selection(user_id="u1", memories=[by_id[i] for i in result.included_memory_ids])

    def cold(_: int) -> None:
        assembly_parts.count_line.cache_clear()
        fmt._memory_line.cache_clear()
        assemble_context(request)

    timings: dict[str, Callable[[int], object]] = {
        "assemble_context warm": lambda _: assemble_context(request),
        "assemble_context cold": cold,
        "trivial render": lambda _: fmt.render_xml(selection),
    }
    for label, call in timings.items():
        durations = time_calls(call, warmup=3, iterations=iterations, max_seconds=10)
        report.emit(
            part="enforce",
            candidates=count,
            included=len(result.included_memory_ids),
            used_tokens=result.pack.used_tokens,
            what=label,
            **latency_summary(durations),
        )


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__.splitlines()[0]).parse_args(argv)
    plan = PLANS[args.size]
    columns = ["part", "encoding", "text", "tokens_per_s", "us_per_call", "candidates"]
    report = Report("tokens", [*columns, "included", "what", "p50_ms", "p99_ms"])
    throughput(report, plan)
    enforcement(report, plan)
    report.print_table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
