"""A worker fleet for benchmarks and drills, shaped like the Procfile: one worker for the
extract queue (thread pool), one for ingest + store (prefork), and beat when asked.
Worker processes are tests/integration/fleet.py's WorkerProcess (real `celery worker`).
Also: transcripts that make memories, job progress from the database, peak RSS.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from bench import dataset
from bench.common import env_for_children
from memlane.models.db import unit_of_work
from memlane.models.tables import Job, MemoryRow
from tests.integration.fleet import BeatProcess, WorkerProcess, fleet_env

FINISHED = ("done", "failed")


@dataclass
class Fleet:
    env: dict[str, str]
    log_dir: Path
    extract_concurrency: int = 8
    store_concurrency: int = 2
    workers: dict[str, WorkerProcess] = field(default_factory=dict)
    beat: BeatProcess | None = None
    generation: int = 0

    def start(self, role: str, *, wait: bool = True) -> WorkerProcess:
        """Start (or restart) the `extract` or `store` worker and wait until it is ready."""
        self.generation += 1
        if role == "extract":
            queues, pool, concurrency = "extract", "threads", self.extract_concurrency
        else:
            queues, pool, concurrency = "ingest,store", "prefork", self.store_concurrency
        worker = WorkerProcess(
            self.env,
            queues=queues,
            pool=pool,
            concurrency=concurrency,
            name=f"{role}{self.generation}",
            log_dir=self.log_dir,
        )
        self.workers[role] = worker
        if wait:
            worker.wait_ready(timeout=90)
        return worker

    def start_all(self, *, beat: bool = False) -> None:
        started = [self.start(role, wait=False) for role in ("extract", "store")]
        for worker in started:  # both import Celery and litellm at once
            worker.wait_ready(timeout=120)
        if beat:
            self.beat = BeatProcess(self.env, log_dir=self.log_dir)

    def restart_exited(self) -> list[str]:
        """Start again each worker that exited on its own, as the deployment's supervisor
        does (docker-compose's `restart: unless-stopped`, a Procfile platform); what
        exited, with its last critical log line."""
        restarted = []
        for role, worker in list(self.workers.items()):
            code = worker.proc.poll()
            if code is None:
                continue
            critical = [line for line in worker.log().splitlines() if "CRITICAL" in line]
            why = critical[-1].split("] ", 1)[-1][:160] if critical else "no critical line"
            restarted.append(f"{role} (exit {code}: {why})")
            self.start(role)
        return restarted

    def stop(self) -> None:
        for worker in self.workers.values():
            worker.stop()
        if self.beat is not None:
            self.beat.stop()

    def peak_rss_mib(self) -> dict[str, float]:
        """Peak resident memory (VmHWM) of each worker: its largest process, and the sum
        over the parent and its pool children."""
        out: dict[str, float] = {}
        for role, worker in self.workers.items():
            pids = [worker.proc.pid, *children(worker.proc.pid)]
            peaks = [vm_hwm_kib(pid) for pid in pids]
            out[f"{role}_max_mib"] = round(max(peaks) / 1024, 1)
            out[f"{role}_sum_mib"] = round(sum(peaks) / 1024, 1)
        return out


@contextmanager
def running_fleet(
    db_url: str,
    broker_url: str,
    log_dir: Path,
    *,
    settings: Mapping[str, str],
    beat: bool = False,
    extract_concurrency: int = 8,
) -> Iterator[Fleet]:
    """The fleet on `settings` (Settings field names → values), stopped at the end, also
    when the bench is sent SIGTERM (a test's timeout): the workers run in sessions of
    their own, so without it they would outlive the bench and go on taking the tasks of
    whoever uses that Redis database next."""
    env = env_for_children(**fleet_env(db_url, broker_url, **settings))
    fleet = Fleet(env, log_dir, extract_concurrency=extract_concurrency)
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _exit_on_term) if main else None
    try:
        fleet.start_all(beat=beat)
        yield fleet
    finally:
        fleet.stop()
        if main:
            signal.signal(signal.SIGTERM, previous)


def _exit_on_term(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def cpu_seconds(pids: list[int], threads: list[int] | None = None) -> float:
    """User + system CPU time of these processes (all their threads), from /proc; with
    `threads`, only those thread ids of the (single) process."""
    ticks = os.sysconf("SC_CLK_TCK")
    stats = (
        [f"/proc/{pids[0]}/task/{tid}/stat" for tid in threads]
        if threads is not None
        else [f"/proc/{pid}/stat" for pid in pids]
    )
    total = 0
    for stat in stats:
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def pids_named(name: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == name:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def cpu_by_role(fleet: Fleet, **more: int) -> dict[str, float]:
    """CPU seconds so far of each worker (with its pool children), PostgreSQL, Redis and
    the processes given by name=pid. PostgreSQL and Redis are machine-wide: anything
    else using them meanwhile is counted too."""
    out = {
        role: cpu_seconds([w.proc.pid, *children(w.proc.pid)]) for role, w in fleet.workers.items()
    }
    out["postgres"] = cpu_seconds(pids_named("postgres"))
    out["redis"] = cpu_seconds(pids_named("redis-server"))
    out |= {name: cpu_seconds([pid]) for name, pid in more.items()}
    return out


def cpu_by_kind(fleet: Fleet, database: str, **more: int) -> dict[str, float]:
    """cpu_by_role split finer, for accounting the whole machine: each worker's main
    thread (the consumer: receiving, acking, events, heartbeats) apart from its pool (the
    thread pool's other threads, or the prefork children); PostgreSQL's backends of
    `database` apart from the rest of PostgreSQL (other databases' backends, the writers);
    and the machine's busy time from /proc/stat (see live_cpu for the other processes)."""
    out = cpu_by_role(fleet, **more)
    postgres = pids_named("postgres")
    ours = [pid for pid in postgres if f" {database} " in _cmdline(pid)]
    out["postgres_ours"] = cpu_seconds(ours)
    out["postgres_other"] = out["postgres"] - out["postgres_ours"]
    out["all_live"] = cpu_seconds(
        [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()]
    )
    for role, worker in fleet.workers.items():
        pid = worker.proc.pid
        main = cpu_seconds([pid], threads=[pid]) if role == "extract" else cpu_seconds([pid])
        out[f"{role}_main"] = main
        out[f"{role}_pool"] = out[role] - main
    out["machine"], out["irq"] = machine_busy_seconds()
    return out


def live_cpu() -> dict[tuple[int, int], float]:
    """CPU seconds so far of every process alive now, keyed by (pid, start time) so that
    a reused pid is another process. The difference of two readings (a process new in
    the second counts whole; one gone from it is lost) is what live processes used."""
    ticks = os.sysconf("SC_CLK_TCK")
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[(int(entry.name), int(fields[19]))] = (int(fields[11]) + int(fields[12])) / ticks
    return out


def cpu_used_between(
    before: dict[tuple[int, int], float], after: dict[tuple[int, int], float]
) -> float:
    return sum(seconds - before.get(key, 0.0) for key, seconds in after.items())


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


def machine_busy_seconds() -> tuple[float, float]:
    """All cores' non-idle time since boot (user, nice, system, irq, softirq, steal), and
    the interrupts' part of it (no process's time includes it)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
    ticks = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq + steal) / ticks, (irq + softirq) / ticks


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def vm_hwm_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


# --------------------------------------------------------------------------- transcripts

_STATEMENTS = (
    "I prefer {tech} over {tech2} for {area}.",
    "I live in {city}.",
    "I work as a {job} at {company}.",
    "We decided to use {tech} for {area}.",
    "I like {activity} on weekends.",
    "I use {tech} every day for {area}.",
)


def transcript(
    user_id: str,
    conversation_id: str,
    seed: int,
    *,
    canary: str | None = None,
    assistant_messages: int = 5,
) -> dict[str, Any]:
    """A conversation of `assistant_messages` exchanges (one extraction job at the default
    cadence) whose user states facts the offline extractor and the stub turn into memories.
    With a canary, one statement carries that word."""
    rng = random.Random(seed)
    vocab = dataset.vocabulary()
    messages = []
    for i in range(assistant_messages):
        statement = rng.choice(_STATEMENTS).format(
            tech=rng.choice(dataset._TECH),
            tech2=rng.choice(dataset._TECH),
            area=rng.choice(dataset._AREA),
            city=rng.choice(dataset._CITY),
            job=rng.choice(dataset._JOB),
            company=rng.choice(vocab.companies),
            activity=rng.choice(dataset._ACTIVITY),
        )
        if canary and i == 0:
            statement = f"I prefer the {canary} toolkit for {rng.choice(dataset._AREA)}."
        messages.append({"role": "user", "content": f"{statement} Can you help me with it?"})
        messages.append({"role": "assistant", "content": f"Sure, here is step {i} of the plan."})
    return {"conversation_id": conversation_id, "user_id": user_id, "messages": messages}


# --------------------------------------------------------------------------- progress


def job_counts(db_url: str) -> dict[str, int]:
    with unit_of_work(db_url) as session:
        rows = session.execute(select(Job.status, func.count()).group_by(Job.status)).all()
    return {status: int(count) for status, count in rows}


def wait_all_finished(
    db_url: str,
    expected: int,
    *,
    timeout: float,
    poll_s: float = 0.2,
    on_poll: Callable[[], object] | None = None,
) -> dict[str, int]:
    """Poll until `expected` jobs exist and all are done or failed; returns the counts
    (unfinished ones included when the timeout came first). `on_poll` runs at each poll."""
    deadline = time.monotonic() + timeout
    while True:
        if on_poll is not None:
            on_poll()
        counts = job_counts(db_url)
        finished = sum(counts.get(s, 0) for s in FINISHED)
        if finished >= expected and sum(counts.values()) == finished:
            return counts
        if time.monotonic() > deadline:
            return counts
        time.sleep(poll_s)


def duplicate_memories(db_url: str) -> int:
    """Active memories whose (user, content) another active memory of the user repeats."""
    with unit_of_work(db_url) as session:
        rows = session.execute(
            select(MemoryRow.user_id, MemoryRow.content, func.count())
            .where(MemoryRow.status == "active")
            .group_by(MemoryRow.user_id, MemoryRow.content)
            .having(func.count() > 1)
        ).all()
    return sum(int(count) - 1 for _, _, count in rows)


def active_memories(db_url: str) -> int:
    with unit_of_work(db_url) as session:
        count = session.scalar(
            select(func.count()).select_from(MemoryRow).where(MemoryRow.status == "active")
        )
    return int(count or 0)
