"""The API's pages render with no network: /docs (Swagger UI) and /redoc load their
scripts and styles from the server itself (the fastapi-offline package), checked in
headless Chromium (Debian's `chromium`, installed by scripts/ensure_services.sh) against
uvicorn serving the API in its own process."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memlane.api.app import openapi_document
from memlane.models import migrate
from tests.integration.test_client import KEY, Server, serve

pytestmark = pytest.mark.timeout(180)

# No network, no profile of the machine's, nothing started in the background.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=15000",  # lets the page's scripts run before the capture
)


@pytest.fixture(scope="module")
def docs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("docs")
    url = f"sqlite:///{folder / 'memlane.db'}"
    migrate.upgrade(url)
    yield from serve(folder, MEMLANE_DATABASE_URL=url)


def chromium(tmp_path: Path, *args: str) -> str:
    binary = shutil.which("chromium")
    assert binary, "Debian's chromium is not installed: run scripts/ensure_services.sh"
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    profile.mkdir()
    done = subprocess.run(
        [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def routes() -> set[str]:
    return set(openapi_document()["paths"])


def test_the_docs_page_loads_nothing_from_another_host(docs_server: Server) -> None:
    for page in ("/docs", "/redoc"):
        html = httpx.get(docs_server.url + page, timeout=10).text
        linked = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert linked, page
        assert all(url.startswith("/") for url in linked), linked  # same origin only
        assert "cdn." not in html and "fonts.googleapis" not in html
        for url in linked:
            assert httpx.get(docs_server.url + url, timeout=10).status_code == 200, url


def test_swagger_ui_renders_every_route_in_headless_chromium(
    docs_server: Server, tmp_path: Path
) -> None:
    dom = chromium(tmp_path, "--dump-dom", docs_server.url + "/docs")
    shown = set(re.findall(r'data-path="([^"]+)"', dom))
    assert shown == routes()
    # The page's assets came from this server (the browser reached no other).
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css"):
        assert docs_server.requests_to(f"/static-offline-docs/{asset}") >= 1, asset

    shot = tmp_path / "docs.png"
    chromium(tmp_path, "--window-size=1400,1000", f"--screenshot={shot}", docs_server.url + "/docs")
    image = shot.read_bytes()
    assert image.startswith(b"\x89PNG")
    # A blank page (the CDN's script missing) compresses to a few kB; routes drawn are more.
    assert len(image) > 30_000, f"{shot}: {len(image)} bytes, the page looks blank"
    print(f"screenshot of /docs: {shot}")


def test_redoc_renders_the_routes_in_headless_chromium(docs_server: Server, tmp_path: Path) -> None:
    dom = chromium(tmp_path, "--dump-dom", docs_server.url + "/redoc")
    assert {path for path in routes() if path.startswith("/v1/")} <= set(
        re.findall(r"/v1/[a-z_/{}]+", dom)
    )


def test_the_docs_need_no_api_key_and_the_routes_still_do(docs_server: Server) -> None:
    assert httpx.get(docs_server.url + "/docs", timeout=10).status_code == 200
    assert httpx.get(docs_server.url + "/openapi.json", timeout=10).status_code == 200
    denied = httpx.get(docs_server.url + "/v1/users/u1/memories", timeout=10)
    assert denied.status_code == 401
    allowed = httpx.get(
        docs_server.url + "/v1/users/u1/memories",
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=10,
    )
    assert allowed.status_code == 200
