"""Each benchmark runs at its tiny size and prints what it promises: one JSON object per
result line (naming the machine) and a table. Figures are not checked: benchmarks do not
gate CI, they only must keep working."""

from __future__ import annotations

import json
import os

import pytest

from tests.integration.fleet import run_bench

pytestmark = pytest.mark.timeout(300)

EXPECTED_FIELDS = {
    "assemble": {"backend", "memories", "strategy", "p50_ms", "p99_ms", "floor_p50_ms"},
    "assemble_ab": {"backend", "asking", "memories", "side", "p50_ms", "cpu_p50_ms"},
    "dedup": {"backend", "memories", "p50_ms", "p99_ms", "candidates_mean", "uow_p50_ms"},
    "enqueue_api": {"n", "p50_ms", "p99_ms", "api_cpu_ms"},
    "fidelity": {"read", "memories", "considered_mean", "fidelity"},
    "rate_limit": {"phase", "requests", "passed", "rate_429", "limit_allows"},
    "import_peak": {"backend", "memories", "file_mb", "peak_mb", "seconds"},
    "tokens": {"part"},
    "working_set": {"backend", "memories", "measure", "p50_ms", "p99_ms"},
    "ingest": {"transcripts_per_s", "done", "failed", "extract_max_mib", "store_max_mib"},
    "inspector_pack": {"backend", "candidates", "page", "p50_ms", "p99_ms", "html_kib"},
    "metadata_filter": {"backend", "read", "memories", "filter", "p50_ms", "p99_ms", "ratio"},
    "purge": {"backend", "episodes", "p50_ms", "episodes_redacted", "packs_deleted"},
}
AB_SIDES = ("this checkout", "HEAD", "ratio")


@pytest.mark.parametrize("bench", sorted(EXPECTED_FIELDS))
def test_the_benchmark_runs_at_its_tiny_size(bench: str) -> None:
    # the benchmarks' own variables (scratch database names, Redis) pass; settings do not
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MEMLANE_") or k.startswith("MEMLANE_BENCH_")
    }
    # they must keep working, whatever the embedder: the lexical one loads no model in
    # every process it starts (minilm's costs are measured in the README)
    env["MEMLANE_EMBEDDING_MODEL"] = "hashing"
    # ingest's CPU accounting runs too: its table is the one answer to "where did it go"
    extra = ["--cpu-accounting"] if bench == "ingest" else []
    # against this very checkout, on a chat's memories: both sides read and walk replies
    extra = ["--base", "HEAD", "--asking"] if bench == "assemble_ab" else extra
    done = run_bench([f"bench.{bench}", "--size", "tiny", *extra], env=env, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    results = [r for r in rows if "goal" not in r and r["bench"] == bench]
    assert results, done.stdout
    for row in results:
        assert row["bench"] == bench
        assert row["machine"]["cores"] >= 1 and row["machine"]["memory_gib"] > 0
        assert EXPECTED_FIELDS[bench] <= set(row), row
    assert f"{bench} on " in done.stderr  # the human table
    if bench == "fidelity":
        assert {r["read"] for r in results} == {"store", "working-set"}
        assert all(0 < r["fidelity"] <= 1 for r in results)
    if bench == "assemble_ab":  # each backend: both sides and their ratio
        sides = {(r["backend"], r["side"]) for r in results}
        assert sides == {(b, s) for b in ("postgresql", "sqlite") for s in AB_SIDES}
    if bench == "working_set":
        assert len({(r["backend"], r["measure"]) for r in results}) == 10
    if bench == "ingest":
        assert all(r["done"] == r["transcripts"] for r in results)
        accounts = [r for r in rows if r["bench"] == "ingest_cpu"]
        assert len(accounts) == len(results)
        for account in accounts:
            ours = (
                *("enqueue", "bench_poll", "extract_main", "extract_pool", "store_main"),
                *("store_pool", "redis", "postgres", "stub"),
            )
            # every listed kind did work, and the kinds add up to the machine's busy time
            assert all(account[f"ms_{k}"] >= 0 for k in ours), account
            assert account["ms_extract_pool"] > 0 and account["ms_store_pool"] > 0, account
            assert account["ms_measured"] == pytest.approx(
                sum(account[f"ms_{k}"] for k in ours), abs=0.6
            )
            rest = ("measured", "postgres_other", "other_live", "irq", "exited")
            assert account["ms_machine"] == pytest.approx(
                sum(account[f"ms_{k}"] for k in rest), abs=0.6
            )
