"""`memlane demo`: the embedded default end to end, with no services, network or key.

A fresh SQLite file, the in-process worker, the offline extractor and the hashing
embedder (forced, whatever MEMLANE_* says); the bundled example transcripts go through
the real pipeline (enqueue → extract → dedup/store), then for each user the memories
are shown with the score the assembler gave them, and the context for a sample query.
"""

from __future__ import annotations

import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

from memlane.cli.common import lane_session, report_job_outcomes, stderr, stdout, wait_for_jobs
from memlane.cli.transcript_files import read_transcripts

if TYPE_CHECKING:
    from memlane.models.schemas import MemoryPublic
    from memlane.pipeline.assembly.records import AssembledContext, PackItem
    from memlane.service.facade import Memlane

SAMPLE_QUERY = "What stack and tools does the user prefer?"
DEMO_TIMEOUT_S = 120.0
_SHORT_REASONS = {"over_memory_share": "share", "over_budget": "budget"}


def examples_dir() -> Path:
    """The bundled transcripts: package data beside this module, so the demo runs the
    same from a checkout and from an installed wheel."""
    return Path(__file__).resolve().parent / "examples"


def demo_overrides(db: Path) -> dict[str, object]:
    return {
        "database_url": f"sqlite:///{db}",
        "broker_url": None,
        "llm_model": None,
    }


def fresh_database(db: Path) -> Path:
    """Delete the demo database (and SQLite's WAL side files) so each run starts empty."""
    from memlane.models.db import dispose_engines

    db = db.resolve()
    # A pooled connection of an earlier run in this process would keep the deleted file.
    dispose_engines()
    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        path.unlink(missing_ok=True)
    return db


def run_demo(
    db: Path,
    *,
    query: str = SAMPLE_QUERY,
    budget: int = 1500,
    examples: Path | None = None,
    console: Console = stdout,
) -> int:
    """Run the demo; returns the exit code (1 when an extraction job failed)."""
    started = time.monotonic()
    source = examples or examples_dir()
    found = read_transcripts([str(source)], final=True)  # final: the tails are extracted too
    db = fresh_database(db)
    with lane_session(**demo_overrides(db)) as lane:
        console.rule("memlane demo")
        console.print(f"database  {db}  (SQLite, in-process worker, offline extractor)")
        job_ids: list[str] = []
        messages = 0
        for item in found:
            result = lane.enqueue(item.transcript)
            job_ids.extend(result.job_ids)
            messages += result.stored_messages
        console.print(
            f"ingested  {len(found)} transcripts from {source.name}/: {messages} messages, "
            f"{len(job_ids)} extraction jobs"
        )
        statuses = wait_for_jobs(lane, job_ids, timeout=DEMO_TIMEOUT_S, console=stderr)
        code = report_job_outcomes(lane, statuses, timeout=DEMO_TIMEOUT_S)
        if code:
            return code
        users = list(dict.fromkeys(item.transcript.user_id for item in found))
        for user in users:
            _show_user(lane, user, query=query, budget=budget, console=console)
    console.rule()
    console.print(f"done in {time.monotonic() - started:.1f} s. Explore the same store:")
    memlane = memlane_command()
    user = shlex.quote(users[0])
    for line in (
        f"export MEMLANE_DATABASE_URL={shlex.quote(f'sqlite:///{db}')}",
        f"{memlane} memories list --user {user}",
        f"{memlane} assemble --user {user} -q {shlex.quote(query)} --json",
    ):
        # soft_wrap: a command cut in two at the terminal's width no longer pastes.
        console.print(f"  {line}", soft_wrap=True)
    return 0


def memlane_command() -> str:
    """How to run memlane from a shell as this process was run: `memlane` when that is
    the one on PATH, else the console script beside this Python (scripts/demo.sh runs it
    from .venv/bin, which is not on PATH until activated), else `python -m memlane`."""
    script = Path(sys.executable).parent / "memlane"
    found = shutil.which("memlane")
    if found is not None and script.exists() and Path(found).resolve() == script.resolve():
        return "memlane"
    if script.exists():
        try:
            return shlex.quote(str(script.relative_to(Path.cwd())))
        except ValueError:
            return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m memlane"


def _show_user(lane: Memlane, user: str, *, query: str, budget: int, console: Console) -> None:
    result = lane.assemble(user, query, budget_tokens=budget)
    memories = lane.list_memories(user, limit=1000)
    console.print()
    console.rule(f"user {user}")
    console.print(memory_score_table(memories, result, title=f"{user}: {len(memories)} memories"))
    console.print(f"context for {query!r}:")
    if console.is_terminal:
        console.print(
            Syntax(
                result.text.rstrip("\n"),
                "xml",
                theme="ansi_dark",
                word_wrap=True,
                background_color="default",
            )
        )
    else:
        # Piped or redirected: the context as the assembler made it, byte for byte; rich
        # would wrap it at 80 columns (mid-tag) and pad the broken lines with spaces.
        console.file.write(result.text if result.text.endswith("\n") else result.text + "\n")
        console.file.flush()
    pack = result.pack
    reasons = ", ".join(f"{k}: {v}" for k, v in sorted(pack.drop_reasons.items()))
    console.print(
        f"pack {pack.pack_id}: {pack.used_tokens}/{pack.budget_tokens} tokens used, "
        f"{pack.dropped_count} dropped" + (f" ({reasons})" if reasons else "")
    )


def memory_score_table(
    memories: list[MemoryPublic], result: AssembledContext, *, title: str
) -> Table:
    """The user's memories with the score the assembler gave each (the strategy's value:
    the composite 0.40 relevance + 0.30 importance' + 0.20 recency + 0.10 frequency for
    `scored`), and whether it went into the context; best first."""
    items: dict[str, PackItem] = {
        item.id: item for item in result.pack.items if item.section == "memory"
    }

    def order(memory: MemoryPublic) -> tuple[float, float, str]:
        item = items.get(memory.id)
        score = item.score if item is not None and item.score is not None else -1.0
        return (-score, -memory.importance, memory.id)

    table = Table(title=title, caption="score: the assembler's (composite for scored)")
    table.add_column("content", overflow="fold", ratio=1)
    table.add_column("category", no_wrap=True)
    for name in ("imp.", "conf.", "seen", "score"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("in ctx", no_wrap=True)
    for memory in sorted(memories, key=order):
        item = items.get(memory.id)
        score = f"{item.score:.3f}" if item is not None and item.score is not None else "–"
        if item is None:
            placed = "not considered"
        elif item.included:
            placed = "yes"
        else:
            placed = "no: " + _SHORT_REASONS.get(item.drop_reason or "", item.drop_reason or "?")
        table.add_row(
            memory.content,
            memory.category,
            f"{memory.importance:.2f}",
            f"{memory.confidence:.2f}",
            str(memory.access_count),
            score,
            placed,
        )
    return table
