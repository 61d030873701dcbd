"""The retrieval evaluation end to end on its own data (hashing embedder, one budget): the
real pipeline ingests, extracts offline and assembles."""

from __future__ import annotations

import json

import pytest

from bench.eval_retrieval import main

pytestmark = pytest.mark.timeout(240)


def test_the_evaluation_runs_and_the_assembler_beats_recent_messages(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--embedders", "hashing", "--budgets", "500"]) == 0
    out, err = capsys.readouterr()
    results = {(r["method"], r["budget"]): r for r in map(json.loads, out.splitlines())}
    assert set(results) == {
        ("recent", 500),
        ("bm25-raw", 500),
        ("assembled:in-store", None),
        ("assembled", 500),
        ("assembled+ref:in-store", None),
        ("assembled+ref", 500),
    }
    rate = {key: r["hit_rate"] for key, r in results.items()}
    # reference facts: every answer is in the store, and most reach a 500-token context
    assert rate[("assembled+ref:in-store", None)] == 1.0
    assert rate[("assembled+ref", 500)] >= 0.85 > rate[("recent", 500)] + 0.5
    # a context holds only stored items, so never more answers than the store has
    assert 0 < rate[("assembled", 500)] <= rate[("assembled:in-store", None)]
    header = [line for line in err.splitlines() if line.startswith("budget ")]
    assert header and "assembled+ref/hashing" in header[0]
