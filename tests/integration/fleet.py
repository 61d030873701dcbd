"""A real Celery worker fleet for tests: worker processes started with `celery worker`
against the test Redis and PostgreSQL, and helpers to watch jobs finish."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from memlane.models.db import unit_of_work
from memlane.models.tables import Job, MemoryRow

ROOT = Path(__file__).resolve().parents[2]


def stop_group(proc: subprocess.Popen[Any], grace_s: float = 20.0) -> None:
    """SIGTERM a process started with `start_new_session=True` and its children; SIGKILL
    what is left after `grace_s` (a Flower or worker that hangs on shutdown)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def run_bench(args: list[str], *, env: Mapping[str, str], timeout: float) -> Any:
    """`python -m <args>` (a bench or drill) to its end, its output captured. Past
    `timeout` it is sent SIGTERM, so it stops the fleet it started (bench.fleet), and
    the test fails: a SIGKILL (subprocess.run's) would leave its workers running."""
    proc = subprocess.Popen(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        raise AssertionError(f"{args} still running after {timeout} s:\n{err[-3000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


class CeleryProcess:
    """One `celery -A memlane.workers.app …` command in a process group of its own, its output
    in a log file under `log_dir`."""

    def __init__(self, args: list[str], env: Mapping[str, str], *, log_path: Path) -> None:
        self.log_path = log_path
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "memlane.workers.app", *args],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]

    def kill(self) -> None:
        """SIGKILL the whole process group: parent and children die mid-task."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        stop_group(self.proc)
        self._log.close()


class WorkerProcess(CeleryProcess):
    """One `celery worker` process (prefork parent + children, or threads)."""

    def __init__(
        self,
        env: Mapping[str, str],
        *,
        queues: str = "ingest,extract,store,webhooks",
        pool: str = "threads",
        concurrency: int = 4,
        name: str = "w1",
        log_dir: Path,
        beat: bool = False,
    ) -> None:
        args = [
            "worker",
            "-Q",
            queues,
            "--pool",
            pool,
            "--concurrency",
            str(concurrency),
            "-n",
            f"{name}@%h",
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
            "-E",
            *(["-B", "--schedule", str(log_dir / f"beat-{name}")] if beat else []),
        ]
        log_path = log_dir / f"worker-{name}-{time.monotonic_ns()}.log"
        super().__init__(args, env, log_path=log_path)

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited early:\n{self.log()}")
            if b" ready." in self.log_path.read_bytes():
                return
            time.sleep(0.1)
        raise RuntimeError(f"worker not ready after {timeout}s:\n{self.log()}")


class BeatProcess(CeleryProcess):
    """`celery beat` alone: publishes the sweep every sweep_every_s."""

    def __init__(self, env: Mapping[str, str], *, log_dir: Path) -> None:
        stamp = time.monotonic_ns()
        schedule = log_dir / f"beat-schedule-{stamp}"
        args = ["beat", "--schedule", str(schedule), "--loglevel", "INFO"]
        super().__init__(args, env, log_path=log_dir / f"beat-{stamp}.log")


def fleet_env(db_url: str, broker_url: str, **extra: str) -> dict[str, str]:
    env = {
        "MEMLANE_DATABASE_URL": db_url,
        "MEMLANE_BROKER_URL": broker_url,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONUNBUFFERED": "1",
    }
    env.update({f"MEMLANE_{k.upper()}": v for k, v in extra.items()})
    return env


def job_statuses(db_url: str, job_ids: Iterable[str] | None = None) -> dict[str, str]:
    with unit_of_work(db_url) as s:
        query = select(Job.id, Job.status)
        if job_ids is not None:
            query = query.where(Job.id.in_(list(job_ids)))
        return {row.id: row.status for row in s.execute(query)}


def wait_for_jobs(
    db_url: str, job_ids: Iterable[str] | None = None, *, timeout: float = 60.0
) -> dict[str, str]:
    """Wait until every job is done or failed; fail with their states if time runs out."""
    ids = None if job_ids is None else list(job_ids)
    deadline = time.monotonic() + timeout
    while True:
        statuses = job_statuses(db_url, ids)
        if statuses and all(s in ("done", "failed") for s in statuses.values()):
            return statuses
        if time.monotonic() > deadline:
            raise AssertionError(f"jobs not finished after {timeout}s: {statuses}")
        time.sleep(0.2)


def memory_count(db_url: str, user_id: str | None = None) -> int:
    with unit_of_work(db_url) as s:
        query = select(func.count()).select_from(MemoryRow).where(MemoryRow.status == "active")
        if user_id:
            query = query.where(MemoryRow.user_id == user_id)
        return int(s.scalar(query) or 0)
