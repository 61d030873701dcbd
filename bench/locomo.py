"""Does the assembled context carry the evidence? LoCoMo, through the real pipeline.

    python -m bench.locomo DATA_DIR [--backend sqlite|postgresql] [--embedder minilm|hashing]
                                    [--budgets 500,1000,2000] [--modes production,fresh]
                                    [--style default|compact] [--now after|wall]
                                    [--granularity turn|sentence]
                                    [--limit N] [--out DIR]

DATA_DIR holds `transcripts.jsonl`, `questions.jsonl` and `score.py` (the LoCoMo dev split
and its scorer, kept outside this repository: its licence is not the project's). The
protocol is the one DATA_DIR's README describes:

1. Extraction stand-in: an OpenAI-compatible stub on 127.0.0.1 that litellm calls through
   the normal extraction path. For each extraction prompt it answers with one memory per
   `part="new"` message, the message text verbatim (speaker prefix kept, XML unescaped),
   category fact, importance 0.5, confidence 1.0; messages of fewer than 4 words are
   skipped; at most 10 per extraction (the last 10). The episode is the first 200
   characters of the new messages, with up to 5 frequent words as topics.
   `--granularity sentence`: one memory per sentence of each new message instead
   ("Name: sentence", a shared picture's caption left out), as an LLM extractor writes
   memories smaller than turns; the same rules of length and number. Evidence is then
   found only for the turns of one sentence (the scorer looks for a turn's whole text):
   answer words are its measure.
2. Every transcript is enqueued in file order as final, then every job waited for.
3. Every question at every budget is assembled with the question as the query, one
   after another, in two modes on the same store: `fresh` (nothing recorded between
   assemblies) and `production` (what each context showed is recorded before the next
   assembly, as a running deployment records it). `now` is one day after the user's
   last message (`--now wall` uses the clock).
4. `score.py --tokenizer tiktoken --encoding o200k_base --contexts-file …`, run by this
   Python (tiktoken, with litellm's offline encoding files), beside its BM25 and recent
   baselines.

Also printed: the markup of the memory lines the contexts hold (tokens of a line minus
tokens of its escaped content, o200k_base), mean and maximum.
"""

from __future__ import annotations

import argparse
import html
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import NoAccessRecords
from memlane.config.settings import Settings, load_settings
from memlane.models import migrate
from memlane.models.schemas import TranscriptIn
from memlane.pipeline.assembly import context_format as fmt
from memlane.pipeline.assembly.context_format import STYLES, Style
from memlane.pipeline.assembly.tokens import get_encoding
from memlane.service.facade import Memlane
from tests.llm_stub import Behaviour, LLMStub

BUDGETS = (500, 1000, 2000)
MODES = ("fresh", "production")
MIN_WORDS = 4
MAX_MEMORIES = 10
_NEW_MESSAGE = re.compile(r'<message seq="(\d+)" role="\w+" part="new">(.*?)</message>', re.S)
_WORD = re.compile(r"[a-z]{4,}")


GRANULARITIES = ("turn", "sentence")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_SPEAKER = re.compile(r"^([^:]{1,40}):\s*(.*)$", re.S)


def sentences(message: str) -> list[str]:
    """A "Name: text" message as memories smaller than turns, as an LLM extractor writes
    them: each sentence of its text (a shared picture's caption left out), the speaker's
    name kept before it."""
    found = _SPEAKER.match(message)
    name, text = (found.group(1), found.group(2)) if found else ("", message)
    text = re.sub(r"\s*\[image:[^\]]*\]", "", text)
    return [f"{name}: {part}" if name else part for part in _SENTENCE_END.split(text) if part]


def verbatim_answer(prompt: str, granularity: str = "turn") -> dict[str, Any]:
    """The stand-in's extraction of one prompt (step 1 of the module docstring); at
    `sentence` granularity one memory per sentence of each new message."""
    texts = [html.unescape(text) for _, text in _NEW_MESSAGE.findall(prompt)]
    units = texts if granularity == "turn" else [s for t in texts for s in sentences(t)]
    kept = [t for t in units if len(t.split()) >= MIN_WORDS][-MAX_MEMORIES:]
    memories = [
        {"content": t, "category": "fact", "importance": 0.5, "confidence": 1.0} for t in kept
    ]
    joined = " ".join(texts)
    topics = [w for w, _ in Counter(_WORD.findall(joined.lower())).most_common(5)]
    summary = joined[:200].strip() or "A conversation."
    return {"memories": memories, "episode": {"summary": summary, "topics": topics}}


class VerbatimStub(LLMStub):
    """The loopback LLM stub answering every extraction prompt with `verbatim_answer`."""

    granularity = "turn"

    def _chat(self, body: dict[str, Any], behaviour: Behaviour) -> dict[str, Any]:
        prompt = "".join(str(m.get("content", "")) for m in body.get("messages", []))
        answer = verbatim_answer(prompt, self.granularity)
        return super()._chat(body, Behaviour("ok", answer=answer))


@dataclass(frozen=True)
class Question:
    question_id: str
    user_id: str
    question: str


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@contextmanager
def pipeline_settings(
    backend: str, database_url: str | None, embedder: str, stub_url: str
) -> Iterator[Settings]:
    with tempfile.TemporaryDirectory(prefix="memlane-locomo-") as scratch:
        url = database_url or f"sqlite:///{Path(scratch) / 'locomo.db'}"
        if backend == "postgresql" and database_url is None:
            raise SystemExit("--backend postgresql needs --database-url (an empty database)")
        migrate.upgrade(url)
        yield load_settings(
            database_url=url,
            llm_model="openai/verbatim",
            llm_api_base=stub_url,
            llm_api_key="x",
            embedding_model=embedder,
        )


def ingest(settings: Settings, transcripts: Sequence[dict[str, Any]]) -> dict[str, datetime]:
    """Enqueue every transcript as final; wait for every job. Returns each user's last
    message time."""
    last: dict[str, datetime] = {}
    job_ids: list[str] = []
    with Memlane(settings, dispatcher=NoAccessRecords(settings)) as lane:
        for raw in transcripts:
            transcript = TranscriptIn.model_validate({**raw, "final": True})
            job_ids += lane.enqueue(transcript).job_ids
            stamps = [m.created_at for m in transcript.messages if m.created_at is not None]
            if stamps:
                last[transcript.user_id] = max([*stamps, last.get(transcript.user_id, stamps[0])])
        statuses = lane.wait(job_ids, timeout=3600)
    failed = {j: s for j, s in statuses.items() if s != "done"}
    if failed:
        raise RuntimeError(f"{len(failed)} extraction jobs did not finish: {failed}")
    return last


def assemble_all(
    settings: Settings,
    questions: Sequence[Question],
    budgets: Sequence[int],
    *,
    mode: str,
    now_for: dict[str, datetime | None],
    style: Style,
) -> tuple[list[dict[str, Any]], list[int]]:
    """Every question at every budget, one after another. Returns the contexts and the
    markup tokens of every memory line they hold."""
    encoding = get_encoding("o200k_base")
    contexts: list[dict[str, Any]] = []
    markup: list[int] = []
    dispatcher = NoAccessRecords(settings) if mode == "fresh" else None
    with Memlane(settings, dispatcher=dispatcher) as lane:
        for q in questions:
            for budget in budgets:
                result = lane.assemble(
                    q.user_id,
                    q.question,
                    budget_tokens=budget,
                    now=now_for[q.user_id],
                    style=style,
                )
                if mode == "production":
                    lane.flush()  # recorded before the next assembly, as time passes
                contexts.append(
                    {"question_id": q.question_id, "budget": budget, "context": result.text}
                )
                markup += [
                    len(encoding.encode_ordinary(line))
                    - len(encoding.encode_ordinary(fmt.text(content)))
                    for line, content in memory_lines(result.text)
                ]
    return contexts, markup


_MEMORY_LINE = re.compile(r"^(<m(?:emory)?\b[^>]*>)(.*)(</m(?:emory)?>)$", re.M)


def memory_lines(text: str) -> list[tuple[str, str]]:
    """(line with its newline, unescaped content) of every memory line of a context."""
    return [(m.group(0) + "\n", html.unescape(m.group(2))) for m in _MEMORY_LINE.finditer(text)]


def tiktoken_env() -> dict[str, str]:
    spec = importlib.util.find_spec("litellm")
    assert spec is not None and spec.submodule_search_locations
    folder = Path(spec.submodule_search_locations[0]) / "litellm_core_utils" / "tokenizers"
    return {**os.environ, "TIKTOKEN_CACHE_DIR": str(folder)}


def score(
    data: Path, contexts_file: Path, budgets: Sequence[int], name: str, limit: int
) -> dict[str, Any]:
    out = contexts_file.with_suffix(".scores.json")
    command = [
        sys.executable,
        str(data / "score.py"),
        "--transcripts",
        str(data / "transcripts.jsonl"),
        "--questions",
        str(data / "questions.jsonl"),
        "--budget",
        ",".join(map(str, budgets)),
        "--tokenizer",
        "tiktoken",
        "--encoding",
        "o200k_base",
        "--contexts-file",
        str(contexts_file),
        "--ext-name",
        name,
        "--json",
        str(out),
        *(["--limit", str(limit)] if limit else []),
    ]
    subprocess.run(command, check=True, env=tiktoken_env(), capture_output=True, text=True)
    tables: dict[str, Any] = json.loads(out.read_text())["tables"]
    return tables


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "data", type=Path, help="folder with transcripts.jsonl, questions.jsonl, score.py"
    )
    p.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    p.add_argument("--database-url", help="an empty database (PostgreSQL); default: a temp SQLite")
    p.add_argument("--embedder", default="minilm", help="minilm (the default) | hashing")
    p.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--now", choices=("after", "wall"), default="after")
    p.add_argument("--style", choices=STYLES, default="default")
    p.add_argument(
        "--granularity",
        choices=GRANULARITIES,
        default="turn",
        help="the stand-in's memories: one per message (turn) or one per sentence",
    )
    p.add_argument("--limit", type=int, default=0, help="every k-th question, N in all")
    p.add_argument("--out", type=Path, help="keep the contexts and scores in this folder")
    args = p.parse_args(argv)

    budgets = [int(b) for b in args.budgets.split(",")]
    modes = [m for m in args.modes.split(",") if m]
    transcripts = read_jsonl(args.data / "transcripts.jsonl")
    questions = [
        Question(q["question_id"], q["user_id"], q["question"])
        for q in read_jsonl(args.data / "questions.jsonl")
    ]
    if args.limit and args.limit < len(questions):
        questions = questions[:: len(questions) // args.limit][: args.limit]
    out = args.out or Path(tempfile.mkdtemp(prefix="memlane-locomo-out-"))
    out.mkdir(parents=True, exist_ok=True)

    report: dict[str, Any] = {
        "embedder": args.embedder,
        "backend": args.backend,
        "style": args.style,
        "now": args.now,
        "granularity": args.granularity,
        "modes": {},
    }
    VerbatimStub.granularity = args.granularity
    with (
        VerbatimStub() as stub,
        pipeline_settings(
            args.backend, args.database_url, args.embedder, stub.base_url
        ) as settings,
    ):
        started = time.perf_counter()
        last = ingest(settings, transcripts)
        report["ingest_s"] = round(time.perf_counter() - started, 1)
        print(f"ingested {len(transcripts)} transcripts in {report['ingest_s']} s", file=sys.stderr)
        now_for: dict[str, datetime | None] = {
            user: (None if args.now == "wall" else at + timedelta(days=1))
            for user, at in last.items()
        }
        for mode in modes:
            started = time.perf_counter()
            contexts, markup = assemble_all(
                settings, questions, budgets, mode=mode, now_for=now_for, style=args.style
            )
            elapsed = time.perf_counter() - started
            grain = "" if args.granularity == "turn" else f"-{args.granularity}"
            path = out / f"contexts-{args.embedder}-{args.backend}-{args.style}{grain}-{mode}.jsonl"
            path.write_text("".join(json.dumps(c) + "\n" for c in contexts), encoding="utf-8")
            tables = score(args.data, path, budgets, "memlane", args.limit)
            report["modes"][mode] = {
                "assemblies": len(contexts),
                "assemble_ms_mean": round(1000 * elapsed / max(1, len(contexts)), 1),
                "markup_per_memory_mean": round(sum(markup) / max(1, len(markup)), 2),
                "markup_per_memory_max": max(markup, default=0),
                "budgets": {
                    str(b): {
                        system: _figures(tables[str(b)], system)
                        for system in ("memlane", "bm25", "recent")
                    }
                    for b in budgets
                },
            }
    print_report(report, budgets)
    grain = "" if args.granularity == "turn" else f"-{args.granularity}"
    name = f"report-{args.embedder}-{args.backend}-{args.style}{grain}.json"
    (out / name).write_text(json.dumps(report, indent=1))
    print(json.dumps(report))


def _figures(table: dict[str, Any], system: str) -> dict[str, float | int | None]:
    row = table.get(f"{system}|all") or {}

    def pct(share: float | None) -> float | None:
        return None if share is None else round(100 * share, 1)

    return {
        "evidence": pct(row.get("ev_all")),
        "answer_words": pct(row.get("ans_rec")),
        "tokens": round(row.get("tok", 0.0)),
        "over": row.get("over"),
    }


def print_report(report: dict[str, Any], budgets: Sequence[int]) -> None:
    print(
        f"\nLoCoMo dev, {report['embedder']} on {report['backend']}, {report['style']} style, "
        f"{report['granularity']} granularity, now {report['now']} (evidence / answer words %)"
    )
    header = "system".ljust(22) + "".join(f"{b:>18}" for b in budgets)
    print(header)
    first = next(iter(report["modes"].values()))
    for system in ("recent", "bm25"):
        cells = [first["budgets"][str(b)][system] for b in budgets]
        print(
            system.ljust(22)
            + "".join(f"{c['evidence']:>8} / {c['answer_words']:<7}" for c in cells)
        )
    for mode, figures in report["modes"].items():
        cells = [figures["budgets"][str(b)]["memlane"] for b in budgets]
        print(
            f"memlane {mode}".ljust(22)
            + "".join(f"{c['evidence']:>8} / {c['answer_words']:<7}" for c in cells)
            + f"  over {sum(c['over'] or 0 for c in cells)}"
            + f"  markup {figures['markup_per_memory_mean']}"
            + f" (max {figures['markup_per_memory_max']})"
        )


if __name__ == "__main__":
    main()
