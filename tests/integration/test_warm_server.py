"""The API warms before it answers anything: in a fresh process, the tokenizer is loaded
by the end of the app's start (uvicorn binds its port only after), and the first
/v1/context is of the order of the second, where a cold one pays the tokenizer's load."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import json, sys, time
from fastapi.testclient import TestClient
from memlane.api.app import create_app
from memlane.config.settings import load_settings
from memlane.pipeline.assembly.tokens import get_encoding

app = create_app(settings=load_settings(database_url=sys.argv[1]))
before = get_encoding.cache_info().currsize
with TestClient(app) as client:  # runs the app's start, as uvicorn does before binding
    started = get_encoding.cache_info().currsize
    times = []
    for query in ("where does the user live?", "what does the user eat?"):
        at = time.perf_counter()
        answer = client.post("/v1/context", json={"user_id": "warm-api", "query": query})
        assert answer.status_code == 200, answer.text
        times.append((time.perf_counter() - at) * 1000)
print(json.dumps({"before": before, "started": started, "times": times}))
"""


def test_the_api_loads_the_tokenizer_before_its_first_request(pg: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, pg],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert (found["before"], found["started"]) == (0, 1)
    first, second = found["times"]
    # cold, the first paid the tokenizer's load: 350-900 ms here against a few ms after
    assert first <= max(4 * second, 150.0), found
