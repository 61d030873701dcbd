#!/usr/bin/env bash
# The demo on the embedded default: no PostgreSQL, no Redis, no network, no API key.
# Ingests the bundled example transcripts through the real pipeline with an in-process
# worker into a SQLite file, then prints the memories and an assembled context.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
exec .venv/bin/memlane demo "$@"
