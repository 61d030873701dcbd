"""The pipeline stays pure: no I/O libraries, no environment, no clock.

Read from the source with `ast`, so a forbidden import or call is caught even in code no
test runs; and checked at run time, so an indirect import (through a helper library) is
caught too.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import memlane.pipeline

PIPELINE_DIR = Path(memlane.pipeline.__file__).parent
SOURCES = sorted(PIPELINE_DIR.rglob("*.py"))

FORBIDDEN_LIBRARIES = frozenset(
    {
        "sqlalchemy",
        "alembic",
        "celery",
        "kombu",
        "litellm",
        "redis",
        "httpx",
        "requests",
        "aiohttp",
        "urllib3",
        "psycopg",
        "psycopg2",
        "pgvector",
        "fastapi",
        "pydantic_settings",
        "socket",
        "subprocess",
    }
)
# The standard library loads these itself (email.utils imports socket), so only a
# direct import of them counts.
LOADED_BY_THE_STANDARD_LIBRARY = frozenset({"socket", "subprocess"})
# Inside the project, the pipeline may use only itself (its records included).
PROJECT = "memlane"
ALLOWED_PROJECT_MODULES = ("memlane.pipeline",)
ENVIRONMENT_NAMES = frozenset({"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"})
CLOCK_METHODS = frozenset({"now", "utcnow", "today"})
CLOCK_FUNCTIONS = frozenset(
    {"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns"}
)


def _imported_modules(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            # "from memlane.models import store" imports memlane.models.store
            found.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _import_violations(tree: ast.AST) -> list[str]:
    problems: list[str] = []
    for module in _imported_modules(tree):
        root = module.split(".")[0]
        # "from memlane.pipeline import x" also yields the bare package "memlane": allowed,
        # since what it brings in is listed separately as "memlane.pipeline.x".
        allowed = module == "memlane" or any(
            module == name or module.startswith(name + ".") for name in ALLOWED_PROJECT_MODULES
        )
        if root in FORBIDDEN_LIBRARIES or (root == PROJECT and not allowed):
            problems.append(f"imports {module}")
    return problems


def _violations(source: str) -> list[str]:
    tree = ast.parse(source)
    problems = _import_violations(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute | ast.Name):
            name = node.attr if isinstance(node, ast.Attribute) else node.id
            if name in ENVIRONMENT_NAMES:
                problems.append(f"line {node.lineno}: reads the environment ({name})")
        if isinstance(node, ast.ImportFrom) and node.module in ("os", "time"):
            for alias in node.names:
                if alias.name in ENVIRONMENT_NAMES | CLOCK_FUNCTIONS:
                    problems.append(f"line {node.lineno}: imports {node.module}.{alias.name}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target, method = node.func.value, node.func.attr
            if method in CLOCK_METHODS:
                problems.append(f"line {node.lineno}: reads the clock (.{method}())")
            if isinstance(target, ast.Name) and target.id == "time" and method in CLOCK_FUNCTIONS:
                problems.append(f"line {node.lineno}: reads the clock (time.{method}())")
    return problems


def test_the_pipeline_has_modules_to_check() -> None:
    names = {path.relative_to(PIPELINE_DIR).as_posix() for path in SOURCES}
    assert {
        "dedup/keywords.py",
        "dedup/plan.py",
        "dedup/similarity.py",
        "ranking/scoring.py",
        "assembly/assembler.py",
    } <= names


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PIPELINE_DIR)))
def test_pipeline_module_is_pure(path: Path) -> None:
    assert _violations(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "source",
    [
        "import sqlalchemy",
        "from sqlalchemy.orm import Session",
        "import celery.app",
        "from litellm import completion",
        "import redis",
        "import httpx",
        "import requests",
        "import psycopg",
        "from memlane.models.store import memories",
        "from memlane.models import store",
        "from memlane.config.settings import get_settings",
        "import memlane.workers.tasks",
        "from memlane.models.schemas import TranscriptIn",
        "from memlane.models import schemas",
        "from memlane.service.facade import Memlane",
        "from memlane import Memlane",
        "import os\nx = os.environ['X']",
        "import os\nx = os.getenv('X')",
        "from os import environ",
        "from os import getenv",
        "from datetime import datetime\nx = datetime.now()",
        "import datetime\nx = datetime.datetime.utcnow()",
        "from datetime import date\nx = date.today()",
        "import time\nx = time.time()",
        "import time\nx = time.monotonic()",
        "from time import time",
    ],
)
def test_the_checker_catches(source: str) -> None:
    assert _violations(source) != []


@pytest.mark.parametrize(
    "source",
    [
        "from memlane.pipeline.records import MemoryRecord",
        "from memlane.pipeline import records",
        "from memlane.pipeline.dedup.keywords import keywords",
        "import tiktoken\nimport snowballstemmer",
        "from datetime import datetime, timedelta\ndef f(now: datetime): return now",
        "import time\nx = time.strftime('%Y')",
    ],
)
def test_the_checker_allows(source: str) -> None:
    assert _violations(source) == []


def test_importing_the_pipeline_loads_no_io_library() -> None:
    names = sorted(
        "memlane.pipeline."
        + p.relative_to(PIPELINE_DIR).with_suffix("").as_posix().replace("/", ".")
        for p in SOURCES
        if p.name != "__init__.py"
    )
    code = (
        "import importlib, json, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    loaded = set(json.loads(result.stdout))
    roots = {name.split(".")[0] for name in loaded}
    assert roots & (FORBIDDEN_LIBRARIES - LOADED_BY_THE_STANDARD_LIBRARY) == set()
    project = {name for name in loaded if name.split(".")[0] == PROJECT}
    assert {n for n in project if not n.startswith("memlane.pipeline")} <= {"memlane"}
