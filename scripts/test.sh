#!/usr/bin/env bash
# The whole test suite, with its set-up: the virtualenv, PostgreSQL with pgvector and Redis
# (started or installed where possible), then ruff, mypy and pytest in parallel
# (MEMLANE_TEST_WORKERS processes, default 4; each has its own databases, tests/scratch.py),
# then the install check (scripts/check_install.sh). Extra arguments go to pytest and skip
# the install check (e.g. scripts/test.sh -k dedup).
set -euo pipefail
export LITELLM_LOCAL_MODEL_COST_MAP=True
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/bootstrap.sh
scripts/ensure_services.sh
echo "[memlane test] ruff"
.venv/bin/ruff check .
echo "[memlane test] mypy"
.venv/bin/mypy -p memlane
.venv/bin/mypy bench
echo "[memlane test] pytest"
# worksteal: a worker that runs out takes tests queued on another, so the slow drills
# and benchmarks queued late on one worker do not make the run wait on it alone
.venv/bin/pytest -q -n "${MEMLANE_TEST_WORKERS:-4}" --dist worksteal "$@"
# The whole run (no pytest arguments) ends as a user's install begins: the wheel into a
# fresh virtualenv per extra set, from the package registry (about 2 minutes).
if [ $# -eq 0 ]; then
  echo "[memlane test] install check"
  scripts/check_install.sh
fi
echo "[memlane test] finished in $(( $(date +%s) - start )) s"
