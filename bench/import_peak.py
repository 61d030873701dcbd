"""Peak memory of `memlane users import`: an export of N memories, each with a vector of
the importing deployment's embedder and its `created` event, imported into a fresh store
by a child process, whose VmHWM (its own image's peak resident memory) is the figure.
The import reads the file twice (checking, then writing) and keeps only ids and keys in
between, so the peak should not grow with N. `--code DIR` runs the import of another
checkout (to compare with the version before in the same session)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, Report, env_for_children, parser, pg_database, sqlite_database

# The child: the CLI, then its own peak (getrusage's ru_maxrss would carry the peak of
# the process it was forked from across exec).
PEAK = """import re, runpy, sys
sys.argv = ["memlane", *sys.argv[1:]]
try:
    runpy.run_module("memlane.cli.app", run_name="__main__")
finally:
    with open("/proc/self/status") as status:
        kb = int(re.search(r"VmHWM:\\s+(\\d+) kB", status.read()).group(1))
    print(f"peak {kb // 1024} MB", file=sys.stderr)
"""
DIM, MODEL = 256, "hashing"  # the hashing embedder's (no vector is computed again)


def write_export(path: Path, memories: int, dim: int = DIM, model: str = MODEL) -> None:
    """An export of `memories` memories, each with its `created` event and a vector of
    the importing deployment's embedder (`dim`, `model`: so none is computed again)."""
    header = {"kind": "memlane-export", "version": 1, "user_id": "big", "messages": False}
    at = "2025-01-01T00:00:00+00:00"
    with path.open("w") as out:
        out.write(json.dumps(header) + "\n")
        for n in range(memories):
            row = {
                "id": f"mem_{n:024x}",
                "content": f"User keeps notebook number {n} in drawer {n % 97}.",
                "category": "fact",
                "importance": 0.5,
                "confidence": 0.9,
                "keywords": ["notebook", f"n{n}", f"drawer{n % 97}"],
                "embedding": [((n * 7 + i) % 101) / 101 for i in range(dim)],
                "embedding_model": model,
                "embedding_dim": dim,
                "created_at": at,
                "confirmed_at": at,
                "accessed_at": at,
                "ref": n + 1,
            }
            event = {"memory_id": row["id"], "kind": "created", "actor": "cli", "at": at}
            out.write(json.dumps({"kind": "memories", "row": row}) + "\n")
            out.write(json.dumps({"kind": "memory_events", "row": event}) + "\n")


def import_peak(url: str, dump: Path, code: Path) -> tuple[int, float]:
    """The child's peak (MB) and its wall time (s)."""
    env = env_for_children(
        MEMLANE_DATABASE_URL=url, MEMLANE_EMBEDDING_MODEL=MODEL, PYTHONPATH=str(code)
    )
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", PEAK, "users", "import", str(dump)],
        env=env,
        capture_output=True,
        text=True,
        cwd=code,
    )
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(result.stderr[-2000:])
    return int(re.findall(r"peak (\d+) MB", result.stderr)[-1]), seconds


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--backend", nargs="+", default=["postgresql", "sqlite"])
    p.add_argument("--sizes", nargs="+", type=int, help="memories (overrides --size)")
    p.add_argument("--code", type=Path, default=ROOT, help="the checkout whose import runs")
    args = p.parse_args(argv)
    sizes = args.sizes or ([200, 400] if args.size == "tiny" else [10_000, 30_000])
    report = Report("import_peak", ["backend", "memories", "file_mb", "peak_mb", "seconds"])
    with tempfile.TemporaryDirectory() as scratch:
        for size in sizes:
            dump = Path(scratch) / f"export-{size}.jsonl"
            write_export(dump, size)
            for backend in args.backend:
                if backend == "postgresql":
                    url = pg_database("memlane_bench_import", fresh=True)
                else:
                    url = sqlite_database(Path(scratch) / "import.sqlite", fresh=True)
                peak, seconds = import_peak(url, dump, args.code.resolve())
                report.emit(
                    backend=backend,
                    memories=size,
                    file_mb=round(dump.stat().st_size / 2**20),
                    peak_mb=peak,
                    seconds=round(seconds, 1),
                )
    report.print_table()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
