"""A real HTTP receiver of webhooks for tests, on 127.0.0.1: it records every request
(headers and raw body) and answers each event's first `fail_first` sends with a 500,
or every send with `status_for_all` when set; `slow_first_s` holds each event's first
answer that long (a sender's timeout)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes
    answered: int

    @property
    def event(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.body)
        return parsed


class Receiver:
    def __init__(self, *, fail_first: int = 0, slow_first_s: float = 0.0) -> None:
        self.fail_first = fail_first
        self.slow_first_s = slow_first_s
        self.status_for_all: int | None = None
        self.received: list[Received] = []
        self._sends: Counter[str] = Counter()
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                event_id = json.loads(body).get("id", "")
                with receiver._lock:
                    receiver._sends[event_id] += 1
                    if receiver.status_for_all is not None:
                        answer = receiver.status_for_all
                    else:
                        answer = 500 if receiver._sends[event_id] <= receiver.fail_first else 200
                    receiver.received.append(Received(dict(self.headers), body, answer))
                    first = receiver._sends[event_id] == 1
                if first and receiver.slow_first_s:
                    time.sleep(receiver.slow_first_s)
                self.send_response(answer)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def accepted(self) -> list[Received]:
        """The requests answered 2xx, each event once (deduplicated by event id, as a
        receiver must: delivery is at least once)."""
        with self._lock:
            seen: dict[str, Received] = {}
            for request in self.received:
                if request.answered < 300:
                    seen.setdefault(request.event["id"], request)
            return list(seen.values())

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
