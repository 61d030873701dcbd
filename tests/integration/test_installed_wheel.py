"""The built wheel installs one import name, `memlane`, and works from a chat app's folder
that holds its own `models.py`, `config.py`, `pipeline.py` and `workers/` (Django's and
many apps' conventions), which must not shadow anything of memlane's.

The wheel is built from a copy of the repository without network (the project's
virtualenv provides setuptools) and installed with `--no-deps` into a scratch virtualenv
that reuses this one's installed dependencies through a path file.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYOUT = ("pipeline", "models", "workers", "config")
WORKER = ("--pool", "solo", "-n", "wheel@%h", "--loglevel", "INFO")


def _run(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    tracked = _run(
        "git", "ls-files", "--cached", "--others", "--exclude-standard", cwd=ROOT
    ).split()
    for name in tracked:
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_symlink():
            target.symlink_to(os.readlink(ROOT / name))
        else:
            shutil.copy2(ROOT / name, target)
    out = tmp_path_factory.mktemp("wheel")
    _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-w",
        out,
        source,
    )
    [built] = out.glob("memlane-*.whl")
    return built


@pytest.fixture(scope="module")
def scratch_python(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("venv")
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    purelib = Path(
        _run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").strip()
    )
    # This virtualenv's packages, as a plain path: its own path files (the editable install
    # of memlane among them) are not processed, so only the wheel provides `memlane`.
    (purelib / "project-dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    _run(
        sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheel
    )
    return python


@pytest.fixture
def app_folder(tmp_path: Path) -> Path:
    """A chat app's folder whose own modules carry the layout's names."""
    app = tmp_path / "chat_app"
    (app / "workers").mkdir(parents=True)
    for name in ("models", "config", "pipeline"):
        (app / f"{name}.py").write_text(f"raise ImportError('the app\\'s own {name}.py')\n")
    (app / "workers" / "__init__.py").write_text("raise ImportError('the app\\'s workers/')\n")
    return app


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLANE_", "PYTHON"))}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", **extra)
    return env


def test_the_wheel_holds_only_memlane(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"memlane"}
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    # the parts of the layout, their data files and the migrations travel inside memlane/
    assert {f"memlane/{part}/__init__.py" for part in LAYOUT} <= names
    assert "memlane/models/migrations/alembic.ini" in names
    assert any(n.startswith("memlane/models/migrations/versions/0001") for n in names)
    assert "memlane/py.typed" in names
    # the demo's conversations and tiktoken's BPE files (no litellm in an embedded install)
    assert "memlane/cli/examples/maya-01-auth-migration.json" in names
    assert "memlane/pipeline/assembly/encodings/9b5ad71b2ce5302211f9c61530b329a4922fc6a4" in names
    # the inspector's templates and assets: its pages render from the package, offline
    assert "memlane/api/ui/templates/base.html" in names
    assert {"memlane/api/ui/static/ui.css", "memlane/api/ui/static/ui.js"} <= names


def test_the_demo_runs_from_the_installed_wheel(
    scratch_python: Path, app_folder: Path, tmp_path: Path
) -> None:
    out = _run(
        scratch_python,
        "-m",
        "memlane",
        "demo",
        "--db",
        tmp_path / "demo.db",
        cwd=app_folder,
        env=_env(tmp_path),
    )
    assert "ingested  5 transcripts" in out and "<memlane_context" in out


def test_an_app_with_its_own_models_enqueues_and_assembles(
    scratch_python: Path, app_folder: Path, tmp_path: Path
) -> None:
    script = textwrap.dedent(
        """
        import sys
        import memlane
        from memlane import Memlane, TranscriptError
        assert not memlane.__file__.startswith(sys.argv[1]), memlane.__file__

        messages = []
        for i in range(5):
            text = "I prefer TypeScript over JavaScript." if i == 0 else f"Step {i}, please."
            messages += [{"role": "user", "content": text},
                         {"role": "assistant", "content": f"Done with step {i}."}]
        with Memlane.from_settings() as lane:
            result = lane.enqueue({"conversation_id": "c1", "user_id": "u1",
                                   "messages": messages})
            assert set(lane.wait(result.job_ids, timeout=60).values()) == {"done"}
            context = lane.assemble("u1", "which language does the user prefer?",
                                    budget_tokens=400)
            rejected = False
            try:
                lane.enqueue({"conversation_id": "c2", "user_id": "u1", "messages": []})
            except TranscriptError:
                rejected = True
        print("TypeScript" in context.text, rejected)
        """
    )
    env = _env(tmp_path, MEMLANE_DATABASE_URL=f"sqlite:///{tmp_path / 'app.db'}")
    out = _run(scratch_python, "-c", script, ROOT, cwd=app_folder, env=env)
    assert out.split() == ["True", "True"]


def test_the_celery_app_starts_from_the_app_folder(
    scratch_python: Path, app_folder: Path, tmp_path: Path, redis_url: str
) -> None:
    env = _env(
        tmp_path,
        MEMLANE_DATABASE_URL=f"sqlite:///{tmp_path / 'app.db'}",
        MEMLANE_BROKER_URL=redis_url,
    )
    worker = subprocess.Popen(
        [str(scratch_python), "-m", "celery", "-A", "memlane.workers.app", "worker", *WORKER],
        cwd=app_folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        ping = "from memlane.workers.app import app; print(app.control.ping(timeout=2))"
        deadline = time.monotonic() + 90
        answer = ""
        while time.monotonic() < deadline and worker.poll() is None:
            answer = _run(scratch_python, "-c", ping, cwd=app_folder, env=env)
            if "pong" in answer:
                break
        assert "wheel@" in answer and "pong" in answer, _drain(worker)
    finally:
        _stop(worker)


def _drain(process: subprocess.Popen[str]) -> str:
    _stop(process)
    return process.stdout.read() if process.stdout else ""


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, 15)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
