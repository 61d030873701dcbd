"""What does the assembler retrieve? Answer recall of the assembled context against two
baselines built from the raw messages, at the same token budgets.

Data, written for this evaluation: examples/eval/conversations.jsonl, 4 users × 4 sessions
over seven weeks (200 messages, 1,900–3,000 tokens per user; one session per user is about
something else entirely), and examples/eval/questions.jsonl, 44 questions. Each question
lists regexes for its answer, which one user's conversations state once (an echo, such as
the assistant repeating a date, counts as stating it too): 42 said by the user, 2 by the
assistant; 12 names, 8 dates, 6 decisions, 5 preferences and 13 other facts. Each also
carries `memory`, the fact as an LLM extractor would store it.

Pipeline under test: the real one. A fresh database per embedder; every transcript is
enqueued through the facade (`final`), extracted offline and stored by the in-process
worker; then `Memlane.assemble(user, question, budget_tokens=B, now=…)` for every
question, with `now` one day after the last message. Access recording is switched off,
so one question's assembly never changes the next one's recency.

Hit: the text given to the model (the assembled XML, or the baseline's messages) matches
one of the question's answer regexes (case-insensitive unless the regex says otherwise).
Baselines, on the user's raw messages, each message as "role: content":
- recent: the newest messages, newest first, until the next one does not fit;
- bm25: messages ranked by BM25 (`memlane.pipeline.ranking.lexical.bm25_scores` over stemmed words,
  stopwords removed; ties: newest first), added in that order when they fit.
Tokens are counted with the assembler's tokenizer (MEMLANE_TOKEN_MODEL's). Extracted
memories get ids from random job ids, and ids break ties between equal scores, so a
figure can move by a question between runs.

Also reported: `extracted`, the share of questions whose answer is in the user's stored
memories or episode summaries at all (the ceiling for the assembled context), and per
embedder and budget the misses, marked `not extracted` or `not retrieved`.

    python -m bench.eval_retrieval                 # hashing and minilm, SQLite
    python -m bench.eval_retrieval --embedders hashing --budgets 500 --details misses.jsonl
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import tiktoken

from bench.common import NoAccessRecords
from memlane.config.settings import Settings, load_settings
from memlane.models import migrate
from memlane.models.db import get_engine, unit_of_work
from memlane.models.schemas import MemoryCreate, TranscriptIn
from memlane.models.store.memories import memories
from memlane.models.store.users import context_items
from memlane.models.tables import Base
from memlane.pipeline.assembly.tokens import encoding_for_model
from memlane.pipeline.dedup.keywords import STOPWORDS, keywords, stem, tokens
from memlane.pipeline.ranking.lexical import bm25_scores
from memlane.pipeline.records import Category
from memlane.service.facade import Memlane

EVAL = Path(__file__).resolve().parents[1] / "examples" / "eval"
BUDGETS = (500, 1000, 2000)
EMBEDDERS = ("hashing", "minilm")


@dataclass(frozen=True)
class Question:
    user_id: str
    question: str
    answers: tuple[str, ...]
    said_by: str
    kind: str
    memory: str  # the answer as an LLM extractor would store it (the +ref runs)

    @property
    def category(self) -> Category:
        return (
            "preference"
            if self.kind == "preference"
            else "decision"
            if self.kind == "decision"
            else "fact"
        )

    def answered_by(self, text: str) -> bool:
        return any(re.search(pattern, text, re.IGNORECASE) for pattern in self.answers)


def load(folder: Path = EVAL) -> tuple[list[TranscriptIn], list[Question]]:
    lines = (folder / "conversations.jsonl").read_text(encoding="utf-8").splitlines()
    transcripts = [TranscriptIn.model_validate_json(line) for line in lines if line.strip()]
    questions = []
    for line in (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            questions.append(Question(**{**item, "answers": tuple(item["answers"])}))
    return transcripts, questions


# --------------------------------------------------------------------------- baselines


@dataclass(frozen=True)
class RawMessage:
    text: str  # "role: content", as a baseline hands it to the model
    created_at: datetime


def raw_messages(transcripts: Sequence[TranscriptIn], user_id: str) -> list[RawMessage]:
    found = [
        RawMessage(f"{m.role}: {m.content}", m.created_at or datetime.min)
        for t in transcripts
        if t.user_id == user_id
        for m in t.messages
    ]
    return sorted(found, key=lambda m: m.created_at)


def analysed(text: str) -> list[str]:
    """Stemmed words without stopwords, repeats kept (BM25 counts them)."""
    return [stem(w) for w in tokens(text) if w not in STOPWORDS and not w.endswith("n't")]


def recent_window(messages: Sequence[RawMessage], budget: int, enc: tiktoken.Encoding) -> str:
    """The newest messages that fit, stopping at the first that does not."""
    chosen: list[str] = []
    used = 0
    for message in reversed(messages):
        cost = len(enc.encode(message.text + "\n"))
        if used + cost > budget:
            break
        chosen.append(message.text)
        used += cost
    return "\n".join(reversed(chosen))


def bm25_window(
    messages: Sequence[RawMessage], query: str, budget: int, enc: tiktoken.Encoding
) -> str:
    """Messages by BM25 for the query (ties: newest first), each added if it still fits."""
    documents = {str(i): analysed(m.text) for i, m in enumerate(messages)}
    scores = bm25_scores(analysed(query), documents)
    order = sorted(range(len(messages)), key=lambda i: (-scores.get(str(i), 0.0), -i))
    chosen: list[str] = []
    used = 0
    for i in order:
        cost = len(enc.encode(messages[i].text + "\n"))
        if used + cost <= budget:
            chosen.append(messages[i].text)
            used += cost
    return "\n".join(chosen)


# --------------------------------------------------------------------------- the pipeline


def ingest(settings: Settings, transcripts: Sequence[TranscriptIn]) -> Memlane:
    lane = Memlane(settings, dispatcher=NoAccessRecords(settings))
    job_ids: list[str] = []
    for transcript in transcripts:
        job_ids += lane.enqueue(transcript).job_ids
    statuses = lane.wait(job_ids, timeout=600)
    failed = {j: s for j, s in statuses.items() if s != "done"}
    if failed:
        raise RuntimeError(f"extraction jobs did not finish: {failed}")
    return lane


def stored_text(lane: Memlane, user_id: str) -> str:
    """Everything the store kept for the user that an assembly could show."""
    memories = [m.content for m in lane.list_memories(user_id, status="active", limit=10_000)]
    with unit_of_work(lane.url) as session:
        episodes = context_items.recent_episodes(session, user_id, limit=1_000)
    shown = [f"{e.summary} {e.outcome or ''} {' '.join(e.topics)}" for e in episodes]
    return "\n".join(memories + shown)


def add_reference_facts(
    lane: Memlane, transcripts: Sequence[TranscriptIn], questions: Sequence[Question]
) -> None:
    """Store each question's reference fact (`memory`: the sentence an LLM extractor would
    write), dated by the first message that states the answer."""
    for number, q in enumerate(questions):
        said = min(
            m.created_at
            for t in transcripts
            if t.user_id == q.user_id
            for m in t.messages
            if m.created_at and q.answered_by(m.content)
        )
        vector = lane.embedder.embed([q.memory])[0]
        with unit_of_work(lane.url) as session:
            memories.add(
                session,
                user_id=q.user_id,
                memory=MemoryCreate(content=q.memory, category=q.category, importance=0.7),
                keywords=keywords(q.memory),
                embedding=vector,
                embedding_model=lane.embedder.name,
                now=said,
                memory_id=f"mem_ref_{number:03d}",
            )


def assemble_all(
    lane: Memlane,
    method: str,
    embedder: str,
    questions: Sequence[Question],
    budgets: Sequence[int],
    now: datetime,
    stored_by_user: dict[str, str],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    results: list[dict[str, Any]] = []
    misses: list[dict[str, Any]] = []
    in_store = {q.question for q in questions if q.answered_by(stored_by_user[q.user_id])}
    results.append(_result(f"{method}:in-store", embedder, None, len(in_store), len(questions)))
    for budget in budgets:
        hits = 0
        latencies = []
        mode = ""
        for q in questions:
            started = time.perf_counter()
            context = lane.assemble(q.user_id, q.question, budget_tokens=budget, now=now)
            latencies.append((time.perf_counter() - started) * 1000)
            mode = context.pack.retrieval_mode
            if q.answered_by(context.text):
                hits += 1
                continue
            misses.append(
                {
                    "method": method,
                    "embedder": embedder,
                    "budget": budget,
                    "user_id": q.user_id,
                    "question": q.question,
                    "reason": "not retrieved" if q.question in in_store else "not extracted",
                }
            )
        latencies.sort()
        results.append(
            {
                **_result(method, embedder, budget, hits, len(questions)),
                "retrieval_mode": mode,
                "p50_ms": round(latencies[len(latencies) // 2], 2),
            }
        )
    return results, misses


def evaluate(
    embedders: Sequence[str], budgets: Sequence[int], database_url: str | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    transcripts, questions = load()
    now = max(m.created_at for t in transcripts for m in t.messages if m.created_at)
    now += timedelta(days=1)
    enc = encoding_for_model(load_settings().token_model)
    users = sorted({q.user_id for q in questions})
    raw = {u: raw_messages(transcripts, u) for u in users}
    results: list[dict[str, Any]] = []
    misses: list[dict[str, Any]] = []

    for budget in budgets:
        recent = sum(q.answered_by(recent_window(raw[q.user_id], budget, enc)) for q in questions)
        results.append(_result("recent", None, budget, recent, len(questions)))
        bm25 = sum(
            q.answered_by(bm25_window(raw[q.user_id], q.question, budget, enc)) for q in questions
        )
        results.append(_result("bm25-raw", None, budget, bm25, len(questions)))

    for embedder in embedders:
        for method in ("assembled", "assembled+ref"):
            with tempfile.TemporaryDirectory() as tmp:
                url = database_url or f"sqlite:///{Path(tmp) / 'eval.db'}"
                if database_url:
                    _empty(database_url)
                settings = load_settings(database_url=url, embedding_model=embedder)
                started = time.perf_counter()
                lane = ingest(settings, transcripts)
                ingest_s = time.perf_counter() - started
                try:
                    if method == "assembled+ref":
                        add_reference_facts(lane, transcripts, questions)
                    stored = {u: stored_text(lane, u) for u in users}
                    found, missed = assemble_all(
                        lane, method, embedder, questions, budgets, now, stored
                    )
                    found[0]["ingest_s"] = round(ingest_s, 2)
                    found[0]["memories"] = sum(
                        len(lane.list_memories(u, limit=10_000)) for u in users
                    )
                    results += found
                    misses += missed
                finally:
                    lane.close()
    return results, misses


def _empty(url: str) -> None:
    """Migrate the given database and delete every row (each run starts from nothing)."""
    migrate.upgrade(url)
    with get_engine(url).begin() as conn:
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(table.delete())


def _result(
    method: str, embedder: str | None, budget: int | None, hits: int, n: int
) -> dict[str, Any]:
    return {
        "bench": "eval_retrieval",
        "method": method,
        "embedder": embedder,
        "budget": budget,
        "questions": n,
        "hits": hits,
        "hit_rate": round(hits / n, 3),
    }


def table(results: Sequence[dict[str, Any]], embedders: Sequence[str]) -> str:
    """Budgets down, methods across; then how many answers each store held at all."""
    by = {(r["method"], r["embedder"], r["budget"]): r for r in results}
    budgets = sorted({r["budget"] for r in results if r["budget"] is not None})
    columns: list[tuple[str, str | None]] = [("recent", None), ("bm25-raw", None)]
    columns += [(m, e) for m in ("assembled", "assembled+ref") for e in embedders]
    header = ["budget", *(m if e is None else f"{m}/{e}" for m, e in columns)]
    rows = [header]
    for budget in budgets:
        row = [str(budget)]
        for method, embedder in columns:
            r = by.get((method, embedder, budget))
            row.append(f"{r['hits']}/{r['questions']} {r['hit_rate']:.0%}" if r else "-")
        rows.append(row)
    row = ["in store", "", ""]
    for method, embedder in columns[2:]:
        r = by.get((f"{method}:in-store", embedder, None))
        row.append(f"{r['hits']}/{r['questions']} {r['hit_rate']:.0%}" if r else "-")
    rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(widths[i]) for i, c in enumerate(row)) for row in rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--embedders", default=",".join(EMBEDDERS))
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument(
        "--database-url",
        help="an empty, migrated database to use instead of a fresh SQLite file "
        "(it is filled once per embedder: give one embedder per run)",
    )
    parser.add_argument("--details", type=Path, help="write every miss as a JSON line here")
    args = parser.parse_args(argv)
    embedders = [e for e in args.embedders.split(",") if e]
    budgets = [int(b) for b in args.budgets.split(",") if b]
    if args.database_url and len(embedders) > 1:
        parser.error("--database-url takes one embedder per run")
    results, misses = evaluate(embedders, budgets, args.database_url)
    for result in results:
        print(json.dumps(result, sort_keys=True))
    print(table(results, embedders), file=sys.stderr)
    if args.details:
        args.details.write_text("".join(json.dumps(m) + "\n" for m in misses), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
