"""The HTTP API as a deploy runs it, for the drills that drive it: `uvicorn --factory
memlane.api.app:create_app` in a process of its own on 127.0.0.1, and the resident memory
of a process tree."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.fleet import children


@dataclass
class ApiServer:
    url: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def api_server(env: Mapping[str, str], log_dir: Path) -> Iterator[ApiServer]:
    """The API on a free port of 127.0.0.1 with `env` (MEMLANE_* settings), once /healthz
    answers; stopped at the end."""
    port = free_port()
    log_path = log_dir / f"api-{port}.log"
    command = [sys.executable, "-m", "uvicorn", "--factory", "memlane.api.app:create_app"]
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            [*command, "--host", "127.0.0.1", "--port", str(port), "--no-access-log"],
            cwd=log_dir,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = ApiServer(f"http://127.0.0.1:{port}", proc, log_path)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(server.url + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the API did not start:\n{server.log()}")
            time.sleep(0.1)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def rss_kib(pid: int) -> int:
    """Resident memory of a process and its children, now (VmRSS)."""
    total = 0
    for one in (pid, *children(pid)):
        try:
            for line in Path(f"/proc/{one}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total
