"""The loopback LLM stub (tests/llm_stub.py) in a process of its own, answering with
varied extractions, so a benchmark's own process does not share its interpreter lock.

    python -m bench.stub --delay 1.0 [--port 0] [--answers 50] [--drill]

Prints `READY <base_url>` once it listens. Each request draws one of `--answers`
extractions (three memories and an episode from bench.dataset's generator), so users
get repeated facts (dedup bumps) as well as new ones. `--drill` adds the failure mix of
the flaky-LLM drill: 20% HTTP 500, 10% 429 with Retry-After, 5% time-outs, 5% malformed.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench import dataset
from bench.common import ROOT
from tests.llm_stub import Behaviour, LLMStub, malformed, ok, status, timeout

DRILL_FAILURES: list[tuple[float, Behaviour]] = [
    (0.20, status(500)),
    (0.10, status(429, retry_after=1)),
    (0.05, timeout(5.0)),
    (0.05, malformed('{"memories": [{"content": "cut off')),
]


def answers(count: int, *, seed: int = 5) -> list[Behaviour]:
    rng = random.Random(seed)
    texts = dataset.new_memory_texts(count * 3, seed=seed)
    categories = ("preference", "fact", "decision", "project")
    out = []
    for i in range(count):
        memories = [
            {
                "content": texts[3 * i + j].split(",")[0].rstrip(".") + ".",
                "category": rng.choice(categories),
                "importance": round(rng.uniform(0.4, 0.95), 2),
                "confidence": rng.choice((1.0, 0.7)),
            }
            for j in range(3)
        ]
        episode: dict[str, Any] = {
            "summary": f"Talked about {memories[0]['content']}",
            "topics": [],
            "outcome": None,
        }
        out.append(ok(memories, episode))
    return out


def configure(stub: LLMStub, *, answer_count: int, drill: bool) -> None:
    """Answers spread evenly over the probability left after the failures."""
    failures = DRILL_FAILURES if drill else []
    left = 1.0 - sum(p for p, _ in failures)
    choices = answers(answer_count)
    share = left / len(choices) * (1 - 1e-9)  # the sum must not exceed 1 by a rounding
    stub.fail_randomly([*failures, *((share, b) for b in choices)], seed=3)


@contextmanager
def stub_process(
    delay: float = 0.0, *, drill: bool = False, answers: int = 50
) -> Iterator[tuple[str, int]]:
    """Run the stub in a child process; yields its base URL and process id."""
    command = [sys.executable, "-m", "bench.stub", "--delay", str(delay), "--answers", str(answers)]
    proc = subprocess.Popen(
        command + (["--drill"] if drill else []),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line.startswith("READY "):
            raise RuntimeError(f"the stub did not start: {line!r}")
        yield line.split(" ", 1)[1], proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--answers", type=int, default=50)
    p.add_argument("--drill", action="store_true")
    args = p.parse_args()
    stub = LLMStub(port=args.port, delay_s=args.delay)
    configure(stub, answer_count=args.answers, drill=args.drill)
    print(f"READY {stub.base_url}", flush=True)
    stop = threading.Event()
    stub.start()
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        stub.stop()


if __name__ == "__main__":
    main()
