"""An OpenAI-compatible LLM stub on 127.0.0.1, driven by tests and benchmarks.

    with LLMStub() as stub:
        stub.answer(memories=[{...}], episode={"summary": "..."})
        stub.script([status(500), status(429, retry_after=1), ok()])
        litellm.completion(model="openai/stub", api_base=stub.base_url, api_key="x", ...)
        assert "<transcript>" in stub.requests[0]["messages"][1]["content"]

Scripted behaviours are consumed one per request, by either endpoint; once the script is
empty, the failure-rate mode (if set) and then the default answer apply.
Standalone: `python -m tests.llm_stub --port 8765 --delay 1.0`.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import struct
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Kind = Literal["ok", "status", "timeout", "malformed"]
DEFAULT_EPISODE: dict[str, Any] = {"summary": "A conversation.", "topics": [], "outcome": None}


@dataclass(frozen=True)
class Behaviour:
    kind: Kind
    answer: dict[str, Any] | None = None  # ok: the JSON answer (None = the default answer)
    usage: tuple[int, int] | None = None  # ok: (prompt_tokens, completion_tokens) to report
    code: int = 200  # status: the HTTP status to answer with
    retry_after: float | None = None  # status: the Retry-After header, in seconds
    seconds: float = 0.0  # timeout: how long to hold the request before answering
    text: str = ""  # malformed: the message content (chat) or body (embeddings)


def ok(
    memories: list[dict[str, Any]] | None = None,
    episode: dict[str, Any] | None = None,
    *,
    usage: tuple[int, int] | None = None,
) -> Behaviour:
    answer = None if memories is None and episode is None else _answer(memories, episode)
    return Behaviour("ok", answer=answer, usage=usage)


def status(code: int, *, retry_after: float | None = None) -> Behaviour:
    return Behaviour("status", code=code, retry_after=retry_after)


def timeout(seconds: float) -> Behaviour:
    return Behaviour("timeout", seconds=seconds)


def malformed(text: str = "not json") -> Behaviour:
    return Behaviour("malformed", text=text)


def _answer(
    memories: list[dict[str, Any]] | None, episode: dict[str, Any] | None
) -> dict[str, Any]:
    return {"memories": list(memories or []), "episode": dict(episode or DEFAULT_EPISODE)}


def approx_tokens(text: str) -> int:
    """The stub's token count: one per 4 characters, at least 1 (OpenAI's rule of thumb)."""
    return max(1, len(text) // 4)


def stub_vector(text: str, dim: int) -> list[float]:
    """A deterministic unit vector for `text`: sha256(counter ‖ text) bytes mapped to [-1, 1]."""
    values: list[float] = []
    counter = 0
    while len(values) < dim:
        digest = hashlib.sha256(counter.to_bytes(4, "big") + text.encode()).digest()
        values.extend(byte / 127.5 - 1.0 for byte in digest)
        counter += 1
    values = values[:dim]
    norm = sum(v * v for v in values) ** 0.5 or 1.0
    return [v / norm for v in values]


class LLMStub:
    def __init__(self, *, port: int = 0, embedding_dim: int = 64, delay_s: float = 0.0) -> None:
        self.embedding_dim = embedding_dim
        self.delay_s = delay_s  # every chat answer waits this long (benchmarks)
        self.requests: list[dict[str, Any]] = []  # chat request bodies, in arrival order
        self.embedding_requests: list[dict[str, Any]] = []
        self._default = _answer(None, None)
        self._script: deque[Behaviour] = deque()
        self._rates: list[tuple[float, Behaviour]] = []
        self._rng = random.Random(0)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LLMStub:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes requests held by timeout()
        if self._thread is not None:  # shutdown() would wait forever on a server never started
            self._server.shutdown()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> LLMStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def answer(
        self, memories: list[dict[str, Any]] | None = None, episode: dict[str, Any] | None = None
    ) -> None:
        """Set the default answer (used when no script entry or failure draw applies)."""
        self._default = _answer(memories, episode)

    def script(self, behaviours: Iterable[Behaviour]) -> None:
        with self._lock:
            self._script.extend(behaviours)

    def fail_randomly(self, rates: Iterable[tuple[float, Behaviour]], *, seed: int = 0) -> None:
        """Drill mode, e.g. `fail_randomly([(0.1, status(500)), (0.05, timeout(5))], seed=7)`:
        each unscripted request draws once from a seeded RNG and gets behaviour i with
        probability p_i, the default answer otherwise. `fail_randomly([])` turns it off."""
        pairs = list(rates)
        if sum(p for p, _ in pairs) > 1.0:
            raise ValueError("failure probabilities sum to more than 1")
        with self._lock:
            self._rates = pairs
            self._rng = random.Random(seed)

    def _next(self) -> Behaviour:
        with self._lock:
            if self._script:
                return self._script.popleft()
            if self._rates:
                draw, cumulative = self._rng.random(), 0.0
                for probability, behaviour in self._rates:
                    cumulative += probability
                    if draw < cumulative:
                        return behaviour
            return Behaviour("ok")

    # ------------------------------------------------------------------ answers

    def _chat(self, body: dict[str, Any], behaviour: Behaviour) -> dict[str, Any]:
        content = (
            behaviour.text
            if behaviour.kind == "malformed"
            else json.dumps(behaviour.answer or self._default)
        )
        prompt = "".join(str(m.get("content", "")) for m in body.get("messages", []))
        tokens_in, tokens_out = behaviour.usage or (approx_tokens(prompt), approx_tokens(content))
        return {
            "id": f"chatcmpl-stub-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "stub"),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": content},
                }
            ],
            "usage": {
                "prompt_tokens": tokens_in,
                "completion_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
            },
        }

    def _embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        texts = body.get("input", [])
        texts = [texts] if isinstance(texts, str) else [str(t) for t in texts]
        dim = int(body.get("dimensions") or self.embedding_dim)
        data: list[dict[str, Any]] = []
        for index, text in enumerate(texts):
            vector: Any = stub_vector(text, dim)
            if body.get("encoding_format") == "base64":  # what the openai SDK asks for
                vector = base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": vector})
        tokens = sum(approx_tokens(t) for t in texts)
        return {
            "object": "list",
            "data": data,
            "model": body.get("model", "stub"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


def _handler_for(stub: LLMStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            path = self.path.rstrip("/")
            if path.endswith("/chat/completions"):
                stub.requests.append(body)
            elif path.endswith("/embeddings"):
                stub.embedding_requests.append(body)
            else:
                return self._send(404, {"error": {"message": f"no route {self.path}"}})
            behaviour = stub._next()
            if behaviour.kind == "timeout":
                stub._stopping.wait(behaviour.seconds)
            if behaviour.kind == "status":
                headers = (
                    {}
                    if behaviour.retry_after is None
                    else {"Retry-After": f"{behaviour.retry_after:g}"}
                )
                error = {
                    "message": f"stub status {behaviour.code}",
                    "type": "stub_error",
                    "code": str(behaviour.code),
                }
                return self._send(behaviour.code, {"error": error}, headers)
            if path.endswith("/embeddings"):
                if behaviour.kind == "malformed":
                    return self._send_raw(200, behaviour.text.encode())
                return self._send(200, stub._embeddings(body))
            if stub.delay_s:
                stub._stopping.wait(stub.delay_s)
            return self._send(200, stub._chat(body, behaviour))

        def _send(
            self, code: int, payload: dict[str, Any], headers: dict[str, str] | None = None
        ) -> None:
            self._send_raw(code, json.dumps(payload).encode(), headers)

        def _send_raw(self, code: int, data: bytes, headers: dict[str, str] | None = None) -> None:
            try:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                pass

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description="OpenAI-compatible LLM stub on 127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--embedding-dim", type=int, default=64)
    args = parser.parse_args()
    stub = LLMStub(port=args.port, embedding_dim=args.embedding_dim, delay_s=args.delay)
    print(f"LLM stub on {stub.base_url} (delay {args.delay}s); Ctrl-C stops it", flush=True)
    try:
        stub._server.serve_forever()
    except KeyboardInterrupt:
        stub._server.server_close()


if __name__ == "__main__":
    main()
