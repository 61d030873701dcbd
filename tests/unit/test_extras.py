"""The distribution's split: the core installs the client alone, each part names the
extra it needs when that is missing, and pyproject.toml installs what each part imports.

A missing extra is simulated in a subprocess by making the modules it installs
unimportable (`sys.modules[name] = None`, which both `import` and
`importlib.util.find_spec` honour); scripts/check_install.sh installs each extra set
from the registry for real.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from memlane.config import extras
from memlane.config.extras import MissingExtraError, require

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def requirement_name(requirement: str) -> str:
    return re.split(r"[\[<>=!~ ;@]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def closure(names: set[str]) -> set[str]:
    """The installed distributions `names` pull in, themselves included (extras of the
    dependencies are ignored, as pip ignores them unless asked)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            requirements = metadata.requires(name) or []
        except metadata.PackageNotFoundError:  # a marker kept it out (another Python)
            continue
        seen.add(name)
        for requirement in requirements:
            if "extra ==" not in requirement:
                todo.append(requirement_name(requirement))
    return seen


def extra_distributions(extra: str) -> set[str]:
    """The distributions an extra lists, through its `memlane[...]` references."""
    found: set[str] = set()
    for requirement in PYPROJECT["optional-dependencies"][extra]:
        name = requirement_name(requirement)
        if name == "memlane":
            inner = re.search(r"\[(.*)\]", requirement)
            assert inner, requirement
            for other in inner.group(1).split(","):
                found |= extra_distributions(other.strip())
        else:
            found.add(name)
    return found


def distribution_of(module: str) -> set[str]:
    return {name.lower().replace("_", "-") for name in metadata.packages_distributions()[module]}


def run_without(blocked: set[str], code: str) -> subprocess.CompletedProcess[str]:
    prelude = f"import sys\nfor _name in {sorted(blocked)!r}:\n    sys.modules[_name] = None\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_core_is_the_client_alone() -> None:
    assert {requirement_name(r) for r in PYPROJECT["dependencies"]} == {"httpx", "pydantic"}


@pytest.mark.parametrize(
    ("extra", "modules"),
    [
        ("embedded", extras.EMBEDDED_MODULES + extras.CLI_MODULES),
        ("fleet", (*extras.FLEET_MODULES, "litellm")),
        ("server", extras.SERVER_MODULES),
        ("postgres", ("psycopg",)),
        ("mcp", ("mcp",)),
        ("flower", ("flower",)),
    ],
)
def test_each_extra_installs_what_its_part_checks(extra: str, modules: tuple[str, ...]) -> None:
    listed = extra_distributions(extra)
    for module in modules:
        assert distribution_of(module) & listed, f"{module} is not installed by [{extra}]"


def test_all_is_every_extra() -> None:
    parts = set(PYPROJECT["optional-dependencies"]) - {"all", "dev", "docs", "minilm"}
    assert extra_distributions("all") == set().union(*map(extra_distributions, parts))


def test_require_names_the_extra_and_what_is_missing() -> None:
    require("a part", "embedded", "json")  # the standard library is always there
    with pytest.raises(MissingExtraError) as raised:
        require("the thing", "server", "json", "no_such_module_here", "also_missing")
    message = str(raised.value)
    assert "the thing needs the 'server' extra" in message
    assert "no_such_module_here, also_missing" in message
    assert 'pip install "memlane[server]"' in message
    assert isinstance(raised.value, ImportError)


def test_the_client_imports_and_sends_with_only_the_core_installed() -> None:
    keep = closure({"httpx", "pydantic"}) | {"memlane"}
    blocked = {
        module
        for module, names in metadata.packages_distributions().items()
        if not {n.lower().replace("_", "-") for n in names} & keep and module.isidentifier()
    }
    assert {"sqlalchemy", "tiktoken", "fastapi", "celery", "litellm", "numpy"} <= blocked
    done = run_without(
        blocked,
        """
        from memlane import BudgetError, TranscriptError
        from memlane.client import AsyncClient, Client
        from memlane.client.errors import ConnectionFailed

        AsyncClient("http://127.0.0.1:9")
        with Client("http://127.0.0.1:9", retries=0, timeout=2) as client:
            try:  # port 9 (discard) is closed: the whole send path runs, to its typed error
                client.context("u1", "anything")
            except ConnectionFailed as error:
                print(type(error).__name__, issubclass(BudgetError, Exception))
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ConnectionFailed True"


@pytest.mark.parametrize(
    ("blocked", "statement", "extra"),
    [
        ({"sqlalchemy"}, "from memlane import Memlane", "embedded"),
        ({"tiktoken"}, "import memlane.models.store", "embedded"),
        ({"typer"}, "import memlane.cli.app", "embedded"),
        ({"fastapi"}, "import memlane.api.app", "server"),
        ({"celery"}, "import memlane.workers.app", "fleet"),
        ({"mcp"}, "import memlane.mcp.server", "mcp"),
        ({"litellm"}, "from memlane.workers.llm import load_litellm; load_litellm()", "fleet"),
        (
            {"psycopg"},
            "from memlane.models.db import build_engine; build_engine('postgresql+psycopg://x/y')",
            "postgres",
        ),
    ],
)
def test_a_part_without_its_extra_names_it(blocked: set[str], statement: str, extra: str) -> None:
    done = run_without(blocked, statement)
    assert done.returncode != 0
    assert f"needs the '{extra}' extra" in done.stderr, done.stderr
    assert f'pip install "memlane[{extra}]"' in done.stderr


def test_the_command_without_its_extra_prints_the_install_line() -> None:
    done = run_without({"typer", "rich"}, "from memlane.__main__ import main; main()")
    assert done.returncode == 2
    assert done.stderr.startswith("memlane: the memlane command line needs the 'embedded' extra")
    assert "Traceback" not in done.stderr
