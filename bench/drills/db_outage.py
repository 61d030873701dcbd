"""An outage of one PostgreSQL database, not of the whole server: connections to it are
refused and the open ones terminated for SECONDS, then allowed again. The restart
command of the smoke tests of `pg_restart` (which may not restart a shared server).

    python -m bench.drills.db_outage DATABASE [SECONDS]
"""

from __future__ import annotations

import sys
import time

import psycopg

from bench.common import PG_ADMIN_URL


def outage(database: str, seconds: float) -> int:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
        name = psycopg.sql.Identifier(database)
        conn.execute(psycopg.sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(name))
        try:
            dropped = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (database,),
            ).fetchone()
            time.sleep(seconds)
        finally:
            conn.execute(psycopg.sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(name))
    print(f"{database}: {dropped[0] if dropped else 0} connections dropped, {seconds:g} s refused")
    return 0


if __name__ == "__main__":
    raise SystemExit(outage(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 2.0))
