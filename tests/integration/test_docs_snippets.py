"""Every Python snippet of the docs and the README runs here: each is a file under
docs/snippets/ (the pages include them with pymdownx.snippets, the README holds copies a
test compares), executed as a reader would run it, against a real served API on
PostgreSQL, or the embedded default, with the OpenAI and Anthropic SDKs talking to a
local stand-in for the providers. A renamed call or parameter fails here."""

from __future__ import annotations

import asyncio
import json
import re
import runpy
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from memlane.client import Client
from tests.integration.conftest import _truncate as truncate
from tests.integration.test_client import KEY, Server, serve

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[2]
SNIPPETS = ROOT / "docs" / "snippets"
ANSWER = "Happy to help."


class Provider:
    """OpenAI's /v1/chat/completions and Anthropic's /v1/messages, answering ANSWER and
    keeping each request's body: what the app sent its model, system prompt included."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                provider.requests.append(body)
                if self.path.endswith("/chat/completions"):
                    answer: dict[str, Any] = {
                        "id": "chatcmpl-1", "object": "chat.completion", "created": 0,
                        "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": ANSWER}}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }  # fmt: skip
                else:
                    answer = {
                        "id": "msg_1", "type": "message", "role": "assistant",
                        "model": body["model"], "stop_reason": "end_turn", "stop_sequence": None,
                        "content": [{"type": "text", "text": ANSWER}],
                        "usage": {"input_tokens": 1, "output_tokens": 1},
                    }  # fmt: skip
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def system_prompts(self) -> list[str]:
        prompts = []
        for body in self.requests:
            if "system" in body:  # Anthropic: a top-level system
                prompts.append(body["system"])
            else:
                prompts += [m["content"] for m in body["messages"] if m["role"] == "system"]
        return prompts


@pytest.fixture(scope="module")
def server(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    truncate(pg_url)
    yield from serve(tmp_path_factory.mktemp("api"), MEMLANE_DATABASE_URL=pg_url)


@pytest.fixture
def provider(server: Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[Provider]:
    """The environment a reader's app has: memlane's address and key, and the SDKs'."""
    stand_in = Provider()
    monkeypatch.setenv("MEMLANE_CLIENT_URL", server.url)
    monkeypatch.setenv("MEMLANE_CLIENT_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", stand_in.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stand_in.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    yield stand_in
    stand_in.server.shutdown()


TURNS = [
    "I prefer Vitest over Jest for testing.",
    "Can you help me plan the sprint?",
    "What should come first?",
    "And after that?",
    "Thanks, that helps.",
]


def converse(reply: Any, user_id: str) -> list[dict[str, Any]]:
    """Five turns through the snippet's reply(): the fifth answer makes extraction due."""
    messages: list[dict[str, Any]] = []
    for text in TURNS:
        messages.append({"role": "user", "content": text})
        assert reply(user_id, f"chat-{user_id}", messages) == ANSWER
    return messages


def remembered(server: Server, user_id: str, word: str, timeout: float = 60) -> str:
    with Client(server.url, api_key=KEY) as memlane:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            context = memlane.context(user_id, "which test runner?").context
            if word in context:
                return context
            time.sleep(0.2)
    raise AssertionError(f"{user_id}'s context never showed {word!r}")


@pytest.mark.parametrize("snippet", ["quickstart_openai.py", "quickstart_anthropic.py"])
def test_the_quick_start_remembers_and_puts_memory_in_the_system_prompt(
    snippet: str, server: Server, provider: Provider
) -> None:
    user_id = snippet.removesuffix(".py")
    reply = runpy.run_path(str(SNIPPETS / snippet))["reply"]
    messages = converse(reply, user_id)
    assert len(messages) == 10 and messages[-1] == {"role": "assistant", "content": ANSWER}
    remembered(server, user_id, "Vitest")
    reply(user_id, f"chat-{user_id}", [*messages, {"role": "user", "content": "Which runner?"}])
    assert "Vitest" in provider.system_prompts()[-1]
    assert "Vitest" not in provider.system_prompts()[0]  # nothing was known at the start


def test_the_async_quick_start(server: Server, provider: Provider) -> None:
    reply = runpy.run_path(str(SNIPPETS / "quickstart_async.py"))["reply"]

    async def conversation() -> None:
        messages: list[dict[str, Any]] = []
        for text in TURNS:
            messages.append({"role": "user", "content": text})
            assert await reply("async-user", "chat-async", messages) == ANSWER

    asyncio.run(conversation())
    remembered(server, "async-user", "Vitest")


def test_the_client_tour(server: Server, provider: Provider) -> None:
    tour = runpy.run_path(str(SNIPPETS / "client_tour.py"))
    assert "Porto" in tour["block"]
    assert tour["hits"] and "Porto" in tour["hits"][0].memory.content
    assert {m.id for m in tour["page"].memories} == {m.id for m in tour["everything"]}
    assert [event.kind for event in tour["history"]][-1] == "pinned"


def test_the_agents_snippet(server: Server, provider: Provider) -> None:
    ran = runpy.run_path(str(SNIPPETS / "agents.py"))
    assert "Sam" in ran["context"].context and "Porto" in ran["context"].context
    assert set(ran["scopes"].values()) == {"user", "agent:tutor"}
    assert {m.agent_id for m in ran["own"]} == {None, "tutor"}
    assert "Porto" in ran["coach"] and "Sam" not in ran["coach"]


def test_the_facade_on_the_embedded_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in __import__("os").environ if n.startswith("MEMLANE_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # the default database is memlane.db in the working directory
    ran = runpy.run_path(str(SNIPPETS / "facade.py"))
    assert (tmp_path / "memlane.db").exists()
    assert "bakery in Porto" in ran["prompt"]
    assert [e.kind for e in ran["history"]] == ["created", "pinned", "edited"]
    assert "bakery" in ran["hits"][0].memory.content
    assert ran["page"].memories


def test_the_metadata_page_on_the_embedded_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in __import__("os").environ if n.startswith("MEMLANE_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMLANE_EMBEDDING_MODEL", "hashing")  # the page's calls, not a model
    ran = runpy.run_path(str(SNIPPETS / "metadata.py"))
    assert "PostgreSQL" in ran["atlas"].text and "support rota" not in ran["atlas"].text
    assert [m.metadata["team"] for m in ran["eng"]] == ["eng"]
    assert "PostgreSQL" in ran["recent"][0].memory.content
    assert [m.content for m in ran["not_ops"]] == [m.content for m in ran["eng"]]


def fenced(text: str, language: str) -> list[str]:
    """The fenced blocks of a language, indented ones (in tabs) too, dedented."""
    found = re.findall(rf"^( *)```{language}\n(.*?)^\1```", text, flags=re.M | re.S)
    return [re.sub(rf"^{indent}", "", block, flags=re.M) for indent, block in found]


def test_every_python_and_json_block_of_the_docs_is_a_snippet_file() -> None:
    """A page shows code only by including a file of docs/snippets/ (which the tests
    above run); the README's blocks are copies of those files, word for word."""
    files = {path.name: path.read_text(encoding="utf-8") for path in SNIPPETS.iterdir()}
    for page in (ROOT / "docs").glob("*.md"):
        for language in ("python", "json"):
            for block in fenced(page.read_text(encoding="utf-8"), language):
                included = re.fullmatch(r'--8<-- "([\w.]+)"\n', block)
                assert included and included[1] in files, (page.name, block[:200])
    readme = fenced((ROOT / "README.md").read_text(encoding="utf-8"), "python")
    assert len(readme) >= 3
    for block in readme:
        assert block in files.values(), block[:200]


def test_the_openai_transcript_is_stored_as_the_page_says(server: Server) -> None:
    transcript = json.loads((SNIPPETS / "openai_transcript.json").read_text())
    with Client(server.url, api_key=KEY) as memlane:
        done = memlane.enqueue(transcript)
        exported = memlane.export_user(transcript["user_id"], messages=True)
    assert done.stored_messages == len(transcript["messages"])
    rows = [json.loads(line) for line in exported.splitlines()]
    stored = [
        (row["row"]["role"], row["row"]["content"])
        for row in rows
        if row.get("kind") == "messages" and row["row"]["conversation_id"] == "trip-1"
    ]
    # the page's rules: developer is system, an image a placeholder, tool calls and
    # results kept as context in the message's text
    assert stored == [
        ("system", "You are a travel assistant."),
        ("user", "I live in Porto.\n\n[image]"),
        ("tool", '<tool_call id="call_1" name="search_flights">{"from": "OPO"}</tool_call>'),
        ("tool", '<tool_result id="call_1">TP1943 departs 08:10</tool_result>'),
        ("assistant", "TP1943 leaves at 08:10."),
    ]
