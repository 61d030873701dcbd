"""Run the fault drills, one after another: `python -m bench.drills [name ...]`.

Names: bad_input, kill_worker, redis_restart, broker_outage, database_outage, flaky_llm,
tenant_isolation, sustained_load, slow_consumer (the default: all of these, about 25
minutes on a 2-core machine) and pg_restart, run only when named: it restarts the
PostgreSQL server, which every other user of that server notices. Exit 0 when every drill passed.
"""

from __future__ import annotations

import importlib
import sys

DEFAULT = (
    "bad_input",
    "kill_worker",
    "redis_restart",
    "broker_outage",
    "database_outage",
    "flaky_llm",
    "tenant_isolation",
    "sustained_load",
    "slow_consumer",
)
DRILLS = (*DEFAULT, "pg_restart")


def main(argv: list[str]) -> int:
    names = argv or list(DEFAULT)
    unknown = sorted(set(names) - set(DRILLS))
    if unknown:
        print(f"unknown drill(s) {', '.join(unknown)}; choose from {', '.join(DRILLS)}")
        return 2
    results = {}
    for name in names:
        print(f"\n=== drill {name} ===", flush=True)
        results[name] = importlib.import_module(f"bench.drills.{name}").main([])
    print("\n" + "\n".join(f"{n}: {'passed' if c == 0 else 'FAILED'}" for n, c in results.items()))
    return 0 if all(code == 0 for code in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
