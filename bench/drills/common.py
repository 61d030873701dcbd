"""What the fleet drills share: transcripts whose memories are known in advance, the
checks of a store after a drill, and the drill's verdict.

A drill transcript of user u, number t: five exchanges; the first user message is u's
signature fact ("I live in <city>."), word for word the same in every transcript of u; the
other four each state a preference made of three pseudo-words unique to (u, t, message).
The offline extractor (no LLM configured) reads one memory from each, so after T
transcripts of u the store must hold exactly 1 + 4·T active memories of u: the signature
once, confirmed T times (access_count = T: each conversation is new evidence), and every
unique preference once. Two unique preferences share at most {user, prefer, toolkit,
work}: Jaccard 4/10 < 0.6, so none merges with another, whatever the order of the jobs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select

from bench import dataset
from bench.common import Report
from bench.fleet import active_memories, duplicate_memories
from memlane.models.db import unit_of_work
from memlane.models.tables import MemoryRow

UNIQUE_PER_TRANSCRIPT = 4
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def pseudo_word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(3)) + str(rng.randint(10, 99))


def signature(user: str) -> str:
    return f"I live in {random.Random(user).choice(dataset._CITY)}."


def drill_transcript(user: str, number: int, *, canary: str | None = None) -> dict[str, Any]:
    rng = random.Random(f"{user}/{number}")
    statements = [signature(user)]
    for _ in range(UNIQUE_PER_TRANSCRIPT):
        a, b, c = (pseudo_word(rng) for _ in range(3))
        statements.append(f"I prefer the {a} {b} toolkit for {c} work.")
    if canary:
        statements[1] = (
            f"I prefer the {canary} {pseudo_word(rng)} toolkit for {pseudo_word(rng)} work."
        )
    messages = []
    for i, statement in enumerate(statements):
        messages.append({"role": "user", "content": f"{statement} Can you help me with that?"})
        messages.append({"role": "assistant", "content": f"Sure, step {i} is done."})
    return {"conversation_id": f"{user}-conv{number}", "user_id": user, "messages": messages}


def drill_corpus(users: int, per_user: int, *, prefix: str = "drill-user") -> list[dict[str, Any]]:
    """Transcripts interleaved across users (user 0 #0, user 1 #0, …), as a busy app sends."""
    return [drill_transcript(f"{prefix}{u}", t) for t in range(per_user) for u in range(users)]


@dataclass
class StoreState:
    active: int
    duplicates: int
    signatures_confirmed: int  # users whose signature memory has access_count == per_user
    signature_counts: dict[str, int] = field(default_factory=dict)


def store_state(
    db_url: str, users: int, per_user: int, *, prefix: str = "drill-user"
) -> StoreState:
    counts: dict[str, int] = {}
    with unit_of_work(db_url) as session:
        rows = session.execute(
            select(MemoryRow.user_id, func.max(MemoryRow.access_count))
            .where(MemoryRow.content.like("User lives in %"), MemoryRow.status == "active")
            .group_by(MemoryRow.user_id)
        ).all()
    counts = {user: int(count) for user, count in rows}
    confirmed = sum(1 for u in range(users) if counts.get(f"{prefix}{u}") == per_user)
    return StoreState(active_memories(db_url), duplicate_memories(db_url), confirmed, counts)


def expected_active(users: int, per_user: int) -> int:
    return users * (1 + UNIQUE_PER_TRANSCRIPT * per_user)


class Verdict:
    """A drill's checks: each one a line `check / expected / got / ok` (JSON and table)."""

    def __init__(self, drill: str) -> None:
        self.report = Report(f"drill {drill}", ["check", "expected", "got", "ok"])

    def check(self, name: str, expected: Any, got: Any, ok: bool | None = None) -> bool:
        passed = expected == got if ok is None else ok
        self.report.emit(check=name, expected=expected, got=got, ok=passed)
        return passed

    def note(self, name: str, value: Any) -> None:
        self.report.emit(check=name, expected=None, got=value, ok=None)

    @property
    def passed(self) -> bool:
        return all(row["ok"] is not False for row in self.report.rows)

    def finish(self) -> int:
        self.report.print_table()
        print(f"{self.report.bench}: {'PASSED' if self.passed else 'FAILED'}", flush=True)
        return 0 if self.passed else 1
