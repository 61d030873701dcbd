#!/usr/bin/env bash
# Installs memlane as a user would: the wheel built from this checkout, with its
# dependencies from the package registry, into a fresh virtualenv per extra set, then a
# smoke of what that set is for. Prints each set's installed size and install time.
#
#   scripts/check_install.sh                 # core embedded server fleet
#   scripts/check_install.sh core embedded   # only these
#
# core: the client (memlane.client) talks to a served API and gets its typed errors;
#       the CLI and the facade say which extra to install.
# embedded: `memlane demo` runs from the installed wheel, outside the checkout.
# server: `memlane serve` answers /readyz. fleet: the Celery app and litellm import.
# The targets for core (a chat app's requirement) are checked: <= 40 MB, <= 30 s.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
export LITELLM_LOCAL_MODEL_COST_MAP=True
CORE_MAX_MB="${MEMLANE_CORE_MAX_MB:-40}"
CORE_MAX_S="${MEMLANE_CORE_MAX_S:-30}"
sets=("$@")
[ ${#sets[@]} -gt 0 ] || sets=(core embedded server fleet)

scripts/bootstrap.sh
work="$(mktemp -d)"
server_pid=""
cleanup() {
  [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

say() { echo "[memlane install] $*"; }
fail() { echo "[memlane install] FAILED: $*" >&2; exit 1; }

.venv/bin/python -m pip wheel -q --no-deps --no-build-isolation -w "$work/dist" . >/dev/null
wheel="$(ls "$work"/dist/memlane-*.whl)"
say "built $(basename "$wheel")"

free_port() { .venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_ready() {  # url, seconds
  local deadline=$(( $(date +%s) + $2 ))
  until curl -fsS "$1" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.5
  done
}

# A venv without pip (pip is the tool, not part of what a user's app installs), filled by
# this checkout's pip; prints nothing, sets $venv, $mb and $secs.
install_set() {
  local name="$1" spec="$2"
  venv="$work/venv-$name"
  .venv/bin/python -m venv --without-pip "$venv"
  local start; start=$(date +%s)
  .venv/bin/python -m pip --python "$venv/bin/python" install -q --no-cache-dir \
    "memlane${spec} @ file://$wheel" 2>&1 | grep -v '^WARNING: Location' || true
  secs=$(( $(date +%s) - start ))
  local purelib
  purelib="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
  "$venv/bin/python" -c "import memlane" || fail "$name: memlane is not importable"
  mb=$(du -sm "$purelib" | cut -f1)
}

smoke_core() {
  # A served API from the project's own environment (the server extra), on SQLite.
  local port; port="$(free_port)"
  # exec: $! is then the server's own pid, which the kill below stops (a subshell's
  # pid, killed, left the server running after the check)
  (cd "$work" && MEMLANE_DATABASE_URL="sqlite:///$work/served.db" \
    exec "$ROOT/.venv/bin/memlane" serve --port "$port" >"$work/serve.log" 2>&1) &
  server_pid=$!
  wait_ready "http://127.0.0.1:$port/readyz" 120 || { cat "$work/serve.log"; fail "the API did not start"; }
  (cd "$work" && "$venv/bin/python" - "http://127.0.0.1:$port" <<'PY')
import sys

from memlane.client import Client
from memlane.client.errors import BudgetError

messages = [{"role": "user", "content": "I prefer TypeScript over JavaScript."},
            {"role": "assistant", "content": "Noted."}]
with Client(sys.argv[1]) as memlane:
    queued = memlane.enqueue(
        {"conversation_id": "c1", "user_id": "u1", "messages": messages, "final": True}
    )
    assert queued.job_ids, queued
    assert "<" in memlane.context("u1", "language?", budget_tokens=400).context
    try:
        memlane.context("u1", "language?", budget_tokens=1)
    except BudgetError as error:
        print("client: enqueued, context fetched, typed error:", type(error).__name__)
    else:
        raise SystemExit("a budget of 1 token was not refused")
heavy = sorted(m for m in ("sqlalchemy", "tiktoken", "fastapi", "celery", "litellm") if m in sys.modules)
assert not heavy, f"the client imported {heavy}"
PY
  kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""
  local out
  out="$("$venv/bin/memlane" --help 2>&1)" && fail "core: the CLI ran without its extra"
  grep -q 'memlane\[embedded\]' <<<"$out" || fail "core: the CLI did not name its extra: $out"
  out="$("$venv/bin/python" -c 'from memlane import Memlane' 2>&1)" && fail "core: the facade imported"
  grep -q 'memlane\[embedded\]' <<<"$out" || fail "core: the facade did not name its extra: $out"
  say "core: without an extra, the CLI and the facade name memlane[embedded]"
}

smoke_embedded() {
  (cd "$work" && "$venv/bin/memlane" demo --db "$work/demo.db" >"$work/demo.out" 2>"$work/demo.err") \
    || { cat "$work/demo.err"; fail "embedded: memlane demo failed"; }
  grep -q "<memlane_context" "$work/demo.out" || fail "embedded: the demo printed no context"
  local out
  out="$("$venv/bin/python" -c 'import memlane.api' 2>&1)" && fail "embedded: memlane.api imported"
  grep -q 'memlane\[server\]' <<<"$out" || fail "embedded: memlane.api did not name its extra: $out"
  say "embedded: memlane demo ran from the wheel; memlane.api names memlane[server]"
}

smoke_server() {
  local port; port="$(free_port)"
  (cd "$work" && MEMLANE_DATABASE_URL="sqlite:///$work/server.db" \
    exec "$venv/bin/memlane" serve --port "$port" >"$work/server.log" 2>&1) &
  server_pid=$!
  wait_ready "http://127.0.0.1:$port/readyz" 120 || { cat "$work/server.log"; fail "server: did not start"; }
  kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""
  say "server: memlane serve answered /readyz"
}

smoke_fleet() {
  (cd "$work" && MEMLANE_BROKER_URL=redis://127.0.0.1:6379/0 \
    MEMLANE_DATABASE_URL="postgresql+psycopg://127.0.0.1/memlane" "$venv/bin/python" -c '
import memlane.workers.tasks
from memlane.workers.app import app
from memlane.workers.llm import load_litellm
load_litellm()
assert "memlane.extract" in app.tasks, sorted(app.tasks)
') || fail "fleet: the Celery app or litellm did not import"
  say "fleet: the Celery app and litellm import"
}

declare -A spec=([core]="" [embedded]="[embedded]" [server]="[server]" [fleet]="[fleet,postgres]" [all]="[all]")
summary=()
for name in "${sets[@]}"; do
  [ -n "${spec[$name]+set}" ] || fail "unknown set $name (one of: ${!spec[*]})"
  say "installing memlane${spec[$name]}"
  install_set "$name" "${spec[$name]}"
  "smoke_$name"
  summary+=("$(printf '%-9s %6s MB %5s s' "$name" "$mb" "$secs")")
  if [ "$name" = core ]; then
    [ "$mb" -le "$CORE_MAX_MB" ] || fail "core installs $mb MB (target <= $CORE_MAX_MB)"
    [ "$secs" -le "$CORE_MAX_S" ] || fail "core took $secs s to install (target <= $CORE_MAX_S)"
  fi
  rm -rf "$venv"
done
say "installed size and time per set (site-packages, no pip):"
printf '  %s\n' "${summary[@]}"
