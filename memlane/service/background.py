"""Work that must not slow the request path, done by background threads of the process
that assembled: context packs (serialised, logged on `memlane.assembly` and saved here;
their content never travels through Redis), and access records (the ids of what went
into contexts, coalesced and handed to the dispatcher a few times a second)."""

from __future__ import annotations

import atexit
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from sqlalchemy.exc import OperationalError

from memlane.config.logging import ASSEMBLY_LOGGER
from memlane.models.db import unit_of_work
from memlane.models.store.users import erasures, packs
from memlane.pipeline.assembly.records import PackData, pack_json

log = logging.getLogger("memlane.packs")
assembly_log = logging.getLogger(ASSEMBLY_LOGGER)

_Flush = threading.Event
PackRow = tuple[str, str, datetime, str]  # pack id, user id, assembled at, body (JSON text)

# Packs the database refused (an outage) are saved again every RETRY_S, for at most
# RETRY_WINDOW after they were assembled: well inside the erasure fence
# (models/store/users/erasures.py), so a pack that waited never outlives its user's erasure.
RETRY_S = 1.0
RETRY_WINDOW = erasures.FENCE / 2
MAX_UNSAVED = 10_000


def packs_to_retry(
    rows: Sequence[PackRow], *, now: datetime, window: timedelta, limit: int
) -> tuple[list[PackRow], int]:
    """The packs still worth saving again: assembled within `window` before `now`, the
    newest `limit` of them; and how many are given up."""
    fresh = [row for row in rows if now - row[2] <= window]
    kept = sorted(fresh, key=lambda row: row[2])[-limit:] if limit > 0 else []
    return kept, len(rows) - len(kept)


class PackWriter:
    """Serialises, logs and saves the packs handed to `submit`, in batches. Packs the
    database refuses (while it is unavailable) are kept and saved again every RETRY_S,
    within RETRY_WINDOW and MAX_UNSAVED; others that fail are logged and dropped."""

    def __init__(self, url: str, *, batch: int = 100, linger_s: float = 0.05) -> None:
        self._url = url
        self._batch = batch
        # After a pack arrives, others are awaited this long to share its transaction:
        # packs saved together cost far less CPU each than packs saved alone
        # (bench/README.md), and that CPU is taken from the assemblies (the interpreter
        # is shared).
        self._linger_s = linger_s
        self._queue: queue.Queue[PackData | _Flush | None] = queue.Queue(maxsize=10_000)
        self._unsaved: list[PackRow] = []  # refused by an unavailable database; only _run
        self._thread = threading.Thread(target=self._run, name="memlane-packs", daemon=True)
        self._thread.start()

    def submit(self, pack: PackData) -> None:
        """Hand over a pack (`AssembledContext.pack_data`); it is not copied, so it must
        not change afterwards."""
        try:
            self._queue.put_nowait(pack)
        except queue.Full:
            # Losing a pack under overload is better than blocking the chat app; its id
            # is logged so "why was this not in the prompt?" at least says why not.
            log.warning(
                "pack writer is behind; pack %s is neither logged nor saved", pack["pack_id"]
            )

    def flush(self, timeout: float = 10.0) -> None:
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        stop = False
        while not stop:
            try:
                item = self._queue.get(timeout=RETRY_S if self._unsaved else None)
            except queue.Empty:
                self._write([])
                continue
            rows: list[PackRow] = []
            signals: list[_Flush | None] = []
            deadline = time.monotonic() + self._linger_s
            while True:
                if not isinstance(item, dict):  # a flush or close: written at once
                    signals.append(item)
                    break
                # One pack at a time, as each arrives: the interpreter is held for a
                # pack's serialising, not a batch's, while an assembly may be waiting.
                row = self._row(item)
                if row is not None:
                    rows.append(row)
                if len(rows) >= self._batch:
                    break
                try:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
            if rows or self._unsaved:
                self._write(rows)
            for signal in signals:
                if signal is None:
                    stop = True
                else:
                    signal.set()

    def _write(self, rows: list[PackRow]) -> None:
        try:
            self._save(rows)
        except Exception:
            log.exception("could not save %d context packs", len(rows))

    def _row(self, pack: PackData) -> PackRow | None:
        """The pack's row, its body logged on the way; None for a pack that cannot be
        serialised (logged, and the others are still saved)."""
        try:
            body = pack_json(pack)
            if assembly_log.isEnabledFor(logging.DEBUG):  # the whole pack, query included
                assembly_log.debug(json.dumps(body, sort_keys=True, separators=(",", ":")))
            elif assembly_log.isEnabledFor(logging.INFO):  # what it did, not what was asked
                assembly_log.info(json.dumps(pack_summary(body), separators=(",", ":")))
            # orjson: a tenth of json's time for a pack (bench/README.md)
            text = orjson.dumps(body, default=_plain).decode()
        except Exception:
            log.exception("could not serialise context pack %s", pack.get("pack_id"))
            return None
        return (pack["pack_id"], pack["user_id"], pack["assembled_at"], text)

    def _save(self, rows: list[PackRow]) -> None:
        now = datetime.now(UTC)
        retrying = bool(self._unsaved)
        if retrying:
            rows, given_up = packs_to_retry(
                self._unsaved + rows, now=now, window=RETRY_WINDOW, limit=MAX_UNSAVED
            )
            self._unsaved = []
            if given_up:
                log.warning("%d context packs waited too long to be saved; dropped", given_up)
        if not rows:
            return
        try:
            # no pre-ping: a refused save is kept and saved again anyway, and the ping
            # was a third of a one-pack save's CPU (bench/README.md)
            with unit_of_work(self._url, pre_ping=False) as session:
                packs.save_packs(session, rows, now=now)
        except OperationalError as exc:
            # Saving is idempotent (a pack id is one row), so a retry after a commit whose
            # answer was lost stores nothing twice.
            self._unsaved = rows
            # once an outage, not once a retry
            log.log(
                logging.DEBUG if retrying else logging.WARNING,
                "database unavailable; %d context packs kept to save again (%s)",
                len(rows),
                type(exc.orig).__name__ if exc.orig is not None else "OperationalError",
            )
        else:
            if retrying:
                log.info("saved %d context packs after a database outage", len(rows))


def _plain(value: Any) -> Any:
    """What orjson cannot write itself: a float's subclass (numpy's float64) as the float."""
    if isinstance(value, float):
        return float(value)
    raise TypeError(f"cannot serialise {type(value).__name__} in a context pack")


SUMMARY_FIELDS = (
    "pack_id",
    "assembled_at",
    "strategy",
    "style",
    "budget_tokens",
    "used_tokens",
    "dropped_count",
    "drop_reasons",
    "retrieval_mode",
)


def pack_summary(body: Mapping[str, Any]) -> dict[str, Any]:
    """What the INFO line of an assembly says: its figures, not the user's query, id or
    items (a log is kept longer and read by more people than the store's packs)."""
    summary = {name: body[name] for name in SUMMARY_FIELDS if name in body}
    items = body.get("items") or []
    summary["items"] = len(items)
    summary["included"] = sum(1 for item in items if item.get("included"))
    return summary


Publish = Callable[[Sequence[str], Sequence[datetime]], None]


class AccessRecorder:
    """Coalesces access records: each memory id keeps the latest moment it went into a
    context, and every `interval_s` all of them are handed to `publish` (the dispatcher's
    batch `record_access`) at once, from this thread. `flush` publishes at once.

    At most `max_pending` ids wait; past that, new ids are left out and counted, and the
    count is logged as a warning (the memories' recency then lags until their next use).
    A failed publish keeps its ids for the next round (within the same limit)."""

    def __init__(
        self, publish: Publish, *, interval_s: float = 0.2, max_pending: int = 100_000
    ) -> None:
        self._publish = publish
        self._interval_s = interval_s
        self._max_pending = max_pending
        self._pending: dict[str, datetime] = {}
        self._left_out = 0
        self._lock = threading.Lock()  # guards _pending and _left_out
        self._publishing = threading.Lock()  # one publish at a time, in order
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memlane-access", daemon=True)
        self._thread.start()
        # A process that never calls close still hands over its last interval's ids.
        atexit.register(self.close)

    def add(self, memory_ids: Sequence[str], accessed_at: datetime) -> None:
        with self._lock:
            pending = self._pending
            for memory_id in memory_ids:
                seen = pending.get(memory_id)
                if seen is None:
                    if len(pending) >= self._max_pending:
                        self._left_out += 1
                        continue
                    pending[memory_id] = accessed_at
                elif seen < accessed_at:
                    pending[memory_id] = accessed_at

    def flush(self) -> None:
        """Publish what is pending now, in the caller's thread."""
        with self._publishing:
            with self._lock:
                pending, self._pending = self._pending, {}
                left_out, self._left_out = self._left_out, 0
            if left_out:
                log.warning(
                    "access records are behind: %d memory ids were left out "
                    "(their accessed_at moves at their next use)",
                    left_out,
                )
            if not pending:
                return
            try:
                self._publish(list(pending), list(pending.values()))
            except Exception:
                log.exception("could not publish %d access records; retrying", len(pending))
                for memory_id, moment in pending.items():
                    self.add([memory_id], moment)

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        atexit.unregister(self.close)
        self._thread.join(timeout=10)
        self.flush()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.flush()
