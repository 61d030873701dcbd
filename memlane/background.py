"""Writes that must not slow the request path: context packs, saved by one background
thread in the process that assembled them (their content never travels through Redis)."""

from __future__ import annotations

import logging
import queue
import threading
from datetime import datetime
from typing import Any

from models.db import unit_of_work
from models.store import context_items

log = logging.getLogger("memlane.packs")

_Item = tuple[str, str, datetime, dict[str, Any]]


class PackWriter:
    def __init__(self, url: str, *, batch: int = 100) -> None:
        self._url = url
        self._batch = batch
        self._queue: queue.Queue[_Item | None] = queue.Queue(maxsize=10_000)
        self._thread = threading.Thread(target=self._run, name="memlane-packs", daemon=True)
        self._thread.start()

    def submit(
        self, pack_id: str, user_id: str, assembled_at: datetime, body: dict[str, Any]
    ) -> None:
        try:
            self._queue.put_nowait((pack_id, user_id, assembled_at, body))
        except queue.Full:
            # The pack is also in the assembly log line; losing the stored copy under
            # overload is better than blocking the chat app.
            log.warning("pack writer is behind; pack %s is only in the log", pack_id)

    def flush(self, timeout: float = 10.0) -> None:
        done = threading.Event()
        self._queue.put(("__flush__", "", datetime.min, {"event": done}))
        done.wait(timeout)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        stop = False
        while not stop:
            item = self._queue.get()
            items: list[_Item | None] = [item]
            while len(items) < self._batch:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            packs = [i for i in items if i is not None and i[0] != "__flush__"]
            if packs:
                try:
                    with unit_of_work(self._url) as session:
                        for pack_id, user_id, assembled_at, body in packs:
                            context_items.save_pack(
                                session,
                                pack_id=pack_id,
                                user_id=user_id,
                                assembled_at=assembled_at,
                                body=body,
                            )
                except Exception:
                    log.exception("could not save %d context packs", len(packs))
            for i in items:
                if i is None:
                    stop = True
                elif i[0] == "__flush__":
                    i[3]["event"].set()
