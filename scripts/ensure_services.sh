#!/usr/bin/env bash
# Makes sure PostgreSQL (with the pgvector extension) and Redis are up on this machine, and
# that Debian's chromium is installed (tests/integration/test_api_docs.py, and the
# inspector's Playwright tests, tests/integration/test_inspector_browser.py: Playwright drives
# this chromium; it never downloads a browser of its own).
# Idempotent: each step checks before it acts. Fails loudly, naming what is missing.
set -euo pipefail

PGVER="${MEMLANE_PG_MAJOR:-15}"
PG_CONFIG="/usr/lib/postgresql/${PGVER}/bin/pg_config"
PGHOST="${PGHOST:-127.0.0.1}"
PGUSER="${PGUSER:-postgres}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

say() { printf '[memlane setup] %s\n' "$*"; }
die() { printf '[memlane setup] ERROR: %s\n' "$*" >&2; exit 1; }

pg_up() { pg_isready -q -h "$PGHOST" -p 5432 2>/dev/null; }

# --- PostgreSQL -------------------------------------------------------------
if ! command -v pg_isready >/dev/null 2>&1; then
  die "PostgreSQL client tools are not installed (apt-get install postgresql-${PGVER})"
fi
if ! pg_up; then
  say "PostgreSQL is down; starting cluster ${PGVER}/main"
  $SUDO pg_ctlcluster --skip-systemctl-redirect "$PGVER" main start || die "could not start PostgreSQL ${PGVER}"
  for _ in $(seq 1 30); do pg_up && break; sleep 1; done
  pg_up || die "PostgreSQL did not become ready on ${PGHOST}:5432"
fi

# --- pgvector ---------------------------------------------------------------
has_vector() {
  psql -h "$PGHOST" -U "$PGUSER" -d postgres -tAc \
    "select count(*) from pg_available_extensions where name = 'vector'" 2>/dev/null | grep -q '^1$'
}
if ! has_vector; then
  say "pgvector is not installed for PostgreSQL ${PGVER}; building it from Debian's source package"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  export DEBIAN_FRONTEND=noninteractive
  if [ ! -d "/usr/include/postgresql/${PGVER}/server" ] || ! command -v make >/dev/null 2>&1 || ! command -v dpkg-source >/dev/null 2>&1; then
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq "postgresql-server-dev-${PGVER}" build-essential dpkg-dev >/dev/null
  fi
  # A private sources list (deb-src, trixie) so the machine's own apt configuration is untouched.
  uris="$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)"
  [ -n "$uris" ] || uris="http://deb.debian.org/debian"
  cat >"$work/src.sources" <<SRC
Types: deb-src
URIs: ${uris}
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  mkdir -p "$work/lists/partial"
  aptopts=(-o "Dir::Etc::sourcelist=$work/src.sources" -o "Dir::Etc::sourceparts=-" -o "Dir::State::Lists=$work/lists")
  chmod 755 "$work"
  apt-get "${aptopts[@]}" update -qq 2>/dev/null || die "could not read Debian's source index for pgvector"
  (cd "$work" && apt-get "${aptopts[@]}" source --download-only pgvector >/dev/null 2>&1) \
    || die "could not download the pgvector source package"
  (cd "$work" && dpkg-source -x --no-check ./pgvector_*.dsc pgvector >/dev/null) \
    || die "could not unpack the pgvector source package"
  # OPTFLAGS="" avoids -march=native, so the build runs on any x86-64.
  make -s -C "$work/pgvector" OPTFLAGS="" PG_CONFIG="$PG_CONFIG" >"$work/build.log" 2>&1 \
    || { tail -20 "$work/build.log" >&2; die "pgvector build failed"; }
  $SUDO make -s -C "$work/pgvector" OPTFLAGS="" PG_CONFIG="$PG_CONFIG" install >/dev/null || die "pgvector install failed"
  has_vector || die "pgvector was built but PostgreSQL does not list it"
  say "pgvector installed"
fi

# --- Redis ------------------------------------------------------------------
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
if ! redis_up; then
  if ! command -v redis-server >/dev/null 2>&1; then
    say "Redis is not installed; installing it"
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq redis-server >/dev/null || die "could not install redis-server"
  fi
  say "Redis is down; starting it"
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/memlane.log || die "could not start redis-server"
  for _ in $(seq 1 20); do redis_up && break; sleep 0.5; done
  redis_up || die "Redis did not answer on 127.0.0.1:6379"
fi
# --- Chromium (the API page's test renders /docs headless) ------------------
if ! command -v chromium >/dev/null 2>&1; then
  say "Chromium is not installed; installing Debian's chromium"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null || die "could not install chromium"
fi

say "PostgreSQL ${PGVER} with pgvector and Redis are up; chromium is installed"
