"""The inspector in a browser: Playwright drives Debian's chromium (never a downloaded
browser) against a real `memlane serve` on PostgreSQL with a seeded store, with every
request to another host refused (the pages must work offline). Sign in, find a user,
open a memory and its history, pin it and see the pin in a new pack, run the playground,
open a pack and find a dropped item's reason, retry a failed job. Each main page is
screenshotted at 1280 and 390 px (INSPECTOR_SCREENSHOTS names the folder; a temporary
one otherwise) and checked for what a phone needs: no sideways scroll of the page, every
field labelled."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, Request, Route, expect, sync_playwright
from sqlalchemy import text

from memlane.config.settings import load_settings
from memlane.models.db import get_engine
from memlane.service.facade import Memlane
from tests.conftest import EXAMPLES
from tests.integration.conftest import _truncate as truncate
from tests.integration.test_client import free_port

pytestmark = pytest.mark.timeout(240)

KEY = "inspector-browser-key-9c2b"
USER = "daniel"
WIDTHS = (1280, 390)
EXTRA = [  # enough memories that a small budget drops some
    "The user grows tomatoes and basil on the balcony",
    "The user is training for a half marathon in April",
    "The user's favourite cuisine is Sichuan",
    "The user reads science fiction before bed",
    "The user bakes sourdough bread every weekend",
    "The user is allergic to peanuts",
    "The user plans a trip to Kyoto in the autumn",
    "The user plays the cello in a community orchestra",
]
FAILED_RAW = "Sure! Here are the memories I found: the user likes soup (not JSON)"


@pytest.fixture(scope="module")
def seeded(pg_url: str) -> dict[str, Any]:
    """The store: daniel's meal-planning conversation extracted (offline rules), some
    memories added by hand, and one of his jobs failed with the model's raw answer."""
    truncate(pg_url)
    body = json.loads((EXAMPLES / "daniel-01-meal-planning.json").read_text())
    with Memlane(load_settings(database_url=pg_url)) as lane:
        result = lane.enqueue({**body, "final": True})
        assert set(lane.wait(result.job_ids, timeout=60).values()) == {"done"}
        for fact in EXTRA:
            lane.add_memory(USER, {"content": fact, "category": "fact", "importance": 0.4})
        vegetarian = next(
            m for m in lane.list_memories(USER, limit=100) if "vegetarian" in m.content.lower()
        )
    failed = result.job_ids[0]
    with get_engine(pg_url).begin() as conn:
        conn.execute(
            text("UPDATE jobs SET status = 'failed', last_error = :error WHERE id = :id"),
            {"id": failed, "error": f"the answer is not JSON\n--- raw answer ---\n{FAILED_RAW}"},
        )
    return {"url": pg_url, "vegetarian": vegetarian, "failed_job": failed}


@pytest.fixture(scope="module")
def server(seeded: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("inspector")
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    env = {**clean, "MEMLANE_DATABASE_URL": seeded["url"], "MEMLANE_API_KEYS": f"lead:{KEY}"}
    log = folder / "serve.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "memlane", "serve", "--port", str(port)],
            cwd=folder,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, log.read_text()
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    named = os.environ.get("INSPECTOR_SCREENSHOTS")
    folder = Path(named) if named else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    binary = shutil.which("chromium")
    assert binary, "Debian's chromium is not installed: run scripts/ensure_services.sh"
    with sync_playwright() as driver:
        launched = driver.chromium.launch(
            executable_path=binary, args=["--no-sandbox", "--disable-gpu"]
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser, server: str) -> Iterator[Page]:
    context = browser.new_context(base_url=server, viewport={"width": 1280, "height": 900})
    elsewhere: list[str] = []

    def only_the_server(route: Route, request: Request) -> None:
        if request.url.startswith(server):
            route.continue_()
        else:
            elsewhere.append(request.url)
            route.abort()

    context.route("**/*", only_the_server)
    opened = context.new_page()
    opened.on("dialog", lambda dialog: dialog.accept())
    yield opened
    context.close()
    assert not elsewhere, f"the pages asked another host for {elsewhere}"


def sign_in(page: Page) -> None:
    page.goto("/ui/users")
    expect(page).to_have_url(re.compile(r".*/ui/signin.*"))
    page.get_by_label("API key").fill(KEY)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Users")).to_be_visible()


def check_layout(page: Page, shots: Path, name: str) -> None:
    """Screenshots at each width; the page never scrolls sideways (wide tables scroll
    in their own box) and every visible field has a label."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(shots / f"{name}-{width}.png"), full_page=True)
        overflow = page.evaluate("document.documentElement.scrollWidth")
        wide = page.evaluate(
            """w => [...document.querySelectorAll('body *')]
                 .filter(el => el.getBoundingClientRect().right > w + 1)
                 .map(el => el.tagName + '.' + el.className).slice(0, 5)""",
            width,
        )
        assert overflow <= width, f"{name} at {width}px is {overflow}px wide: {wide}"
    unlabelled = page.evaluate(
        """[...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
             .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label'))
             .map(el => el.name)"""
    )
    assert not unlabelled, f"{name}: fields without a label: {unlabelled}"
    page.set_viewport_size({"width": 1280, "height": 900})


def test_the_inspector_flows(page: Page, seeded: dict[str, Any], server: str, shots: Path) -> None:
    page.goto("/ui/signin")
    check_layout(page, shots, "signin")
    sign_in(page)

    # find a user
    page.get_by_label("User id (or its start)").fill("dan")
    page.get_by_role("button", name="Find").click()
    check_layout(page, shots, "users")
    page.get_by_role("link", name=USER, exact=True).click()
    expect(page.get_by_role("heading", name=f"User {USER}")).to_be_visible()
    check_layout(page, shots, "user")

    # a memory and its history, and where it came from
    memory = seeded["vegetarian"]
    page.get_by_role("link", name=memory.content).click()
    expect(page.get_by_role("heading", name=f"Memory m{memory.ref}")).to_be_visible()
    history = page.get_by_role("list", name="History")
    expect(history).to_contain_text("created")
    expect(page.get_by_role("list", name="Source messages")).to_contain_text("vegetarian")
    check_layout(page, shots, "memory")

    # pin it: the history records who, and a new pack shows the pin
    page.get_by_role("button", name="Pin", exact=True).click()
    expect(page.get_by_role("status")).to_contain_text("pinned")
    expect(history).to_contain_text("ui:api:lead")
    answer = httpx.post(
        server + "/v1/context",
        headers={"Authorization": f"Bearer {KEY}"},
        json={"user_id": USER, "query": "which city does the user live in?", "budget_tokens": 90},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    pack_id = answer.json()["pack"]["pack_id"]
    for _ in range(100):  # packs are saved in the background
        if (
            httpx.get(
                f"{server}/v1/packs/{pack_id}", headers={"Authorization": f"Bearer {KEY}"}
            ).status_code
            == 200
        ):
            break
        time.sleep(0.1)
    page.goto(f"/ui/packs/{pack_id}")
    pinned_row = page.locator(f"tr#c-{memory.id}")
    expect(pinned_row).to_contain_text("pinned")
    expect(pinned_row).to_contain_text("included")

    # a dropped item's reason, by "where is?"
    dropped = page.locator("tr.out").first
    expect(dropped).to_be_visible()
    dropped_text = dropped.locator("td").nth(2).inner_text()
    page.get_by_label("Where is").fill(dropped_text)
    page.get_by_role("button", name="Find").click()
    expect(page.locator("#answer")).to_contain_text("dropped")
    expect(page.locator("tr.found")).to_contain_text(dropped_text)
    check_layout(page, shots, "pack")

    # the playground: a context and its pack, nothing recorded
    page.goto(f"/ui/users/{USER}/playground")
    page.get_by_label("Question").fill("what does the user eat?")
    page.get_by_label("Budget (tokens)").fill("120")
    page.get_by_label("Strategy").select_option("balanced")
    page.get_by_role("button", name="Assemble").click()
    expect(page.get_by_label("Context text")).to_contain_text("vegetarian")
    expect(page.locator(f"tr#c-{memory.id}")).to_contain_text("included")
    check_layout(page, shots, "playground")

    # a failed job: its reason and raw answer, then retried
    page.goto("/ui/jobs?status=failed")
    row = page.locator(f"#job-{seeded['failed_job']}")
    expect(row).to_contain_text("the answer is not JSON")
    row.get_by_text("Raw LLM answer").click()
    expect(row).to_contain_text(FAILED_RAW)
    check_layout(page, shots, "jobs")
    row.get_by_role("button", name=f"Retry job {seeded['failed_job']}").click()
    expect(page.get_by_role("status")).to_contain_text("queued again")
    with get_engine(seeded["url"]).connect() as conn:
        status = conn.execute(
            text("SELECT status FROM jobs WHERE id = :id"), {"id": seeded["failed_job"]}
        ).scalar_one()
    assert status != "failed"


def test_the_keyboard_skips_to_the_content(page: Page) -> None:
    sign_in(page)
    page.goto(f"/ui/users/{USER}")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")  # past the menu: the page's first link
    assert page.evaluate("document.activeElement.textContent") == "Playground"
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Playground")).to_be_visible()
