"""The TypeScript client's own tests (`npm ci && npm test` in clients/typescript, Node's
test runner) against a live server on PostgreSQL."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import _truncate as truncate
from tests.integration.test_client import KEY, serve

pytestmark = pytest.mark.timeout(420)

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"


def npm(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["npm", *args], cwd=CLIENT, env=env, capture_output=True, text=True, timeout=360
    )


def test_the_typescript_client_passes_its_tests_against_a_live_server(
    pg_url: str, tmp_path: Path
) -> None:
    truncate(pg_url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    installed = npm("ci", "--no-audit", "--no-fund", env=env)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    for server in serve(tmp_path, MEMLANE_DATABASE_URL=pg_url, MEMLANE_EMBEDDING_MODEL="hashing"):
        tested = npm(
            "test", env={**env, "MEMLANE_CLIENT_URL": server.url, "MEMLANE_CLIENT_KEY": KEY}
        )
        assert tested.returncode == 0, tested.stdout[-6000:] + tested.stderr[-3000:]
        assert "# fail 0" in tested.stdout and "# pass 6" in tested.stdout, tested.stdout[-3000:]
