"""Moving a user between deployments (Memlane inherits it): export their data as JSON
lines and import it elsewhere, ids preserved (models/store/users/export.py)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from sqlalchemy.exc import IntegrityError

from memlane.models.db import unit_of_work
from memlane.models.store.users import export as user_export
from memlane.pipeline.errors import ConflictError, InvalidInputError
from memlane.pipeline.metadata.filters import filter_of
from memlane.service.input_checks import check_category, check_text, checked

if TYPE_CHECKING:
    from memlane.config.settings import Settings
    from memlane.workers.embedders import Embedder

# A row is one memory, message or event; a vector of 8,192 floats is the longest
# (~200 KB). A longer line is no export of ours.
MAX_LINE_CHARS = 1_000_000
# A one-time stream of lines (stdin, a generator) is kept for the import's second
# reading in memory up to this size, then in a temporary file.
SPOOL_BYTES = 8 * 1024 * 1024


class UserTransfer:
    """Export and import of one user's data; mixed into Memlane."""

    if TYPE_CHECKING:
        url: str
        settings: Settings

        @property
        def embedder(self) -> Embedder: ...

    @checked("user_id", "agent_id")
    def export_user(
        self,
        user_id: str,
        *,
        messages: bool = False,
        agent_id: str | None = None,
        filter: Mapping[str, Any] | str | None = None,  # the API's word
    ) -> Iterator[str]:
        """The user's data as JSON lines (each without its newline): a header, then
        memories with their keywords, vectors and history, episodes, procedures, soul
        blocks, and with `messages` their conversations and messages. Read lazily, in
        one transaction: iterate it to the end (or close it). `agent_id`: what that
        agent sees, the shared data and its own; without, every agent's. `filter`: only
        the conversations, memories and episodes whose metadata passes it (checked now, a
        MetadataError naming the bad part, before any line)."""
        only = filter_of(filter)

        def lines() -> Iterator[str]:
            with unit_of_work(self.url) as session:
                rows = user_export.export_rows(
                    session, user_id, messages=messages, agent_id=agent_id, only=only
                )
                for record in rows:
                    yield json.dumps(record, ensure_ascii=False, separators=(",", ":"))

        return lines()

    def import_user(
        self,
        lines: Iterable[str | bytes],
        *,
        user_id: str | None = None,
        merge: bool = False,
    ) -> dict[str, int]:
        """Import an export (its lines) as `user_id` (default: the exported user; either
        stripped, as every door reads a user id), in one transaction: every row is
        validated first (InvalidInputError naming the line and field; nothing written).
        Returns the rows added per table, and when nonzero `stored_rows_kept`,
        `copied_with_new_ids`, `duplicate_memories`, `purged_memories`
        (user_export.LEFT_OUT_COUNTS). Ids and short ids are kept (short ids are
        renumbered when the user already uses them); an id the user holds already
        refuses the import (ConflictError) unless `merge`, which keeps what is stored
        and adds the rest; an id another user holds is given a new id (a copy:
        models/store/users/import_owners.py). Active memories the dedup rule or a
        purge's fingerprint keeps out are left out. Vectors are kept when they are of
        this lane's embedder, else computed with it. The lines are read twice (checked,
        keeping ids and keys only; then written in batches), so memory does not grow
        with the rows: `lines` that can be iterated again (a list) are, a one-time
        iterator (a generator, a file object) is spooled to a temporary file."""
        with _Source(lines) as source:
            records = source.records()
            first = next(records, None)
            if first is None:
                raise InvalidInputError("an export starts with its header line; this one is empty")
            exported = user_export.read_header(first[1])
            target = check_text(user_id, "user_id") if user_id is not None else exported
            embedder = self.embedder
            settings = self.settings
            try:
                with unit_of_work(self.url) as session:
                    counts = user_export.import_rows(
                        session,
                        _categories_checked(records, settings.categories),
                        source.again,
                        user_id=target,
                        exported=exported,
                        merge=merge,
                        embedder=(embedder.name, embedder.dim),
                        embed=embedder.embed,
                        dedup=(settings.dedup_threshold, settings.dedup_min_keywords),
                    )
            except IntegrityError as exc:
                # The checks above should leave none; if one is left, it is still the
                # file's fault, and nothing was written (the transaction rolled back).
                raise ConflictError(
                    f"the store refused a row of this export ({type(exc.orig).__name__}); "
                    "nothing was imported"
                ) from None
        return counts  # working sets follow through the change feed, as for any write


def _categories_checked(
    records: Iterator[tuple[int, dict[str, Any]]], configured: Sequence[str]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The records, a memory's category checked against the configured set on the way
    (an import writes memories as a front door does; the rows' own checks follow)."""
    for number, record in records:
        row = record.get("row")
        if record.get("kind") == "memories" and isinstance(row, dict):
            category = row.get("category")
            if isinstance(category, str):
                check_category(category, configured, where=f"line {number}: memories.category")
        yield number, record


class _Source:
    """An export's lines, read twice: checked, then written (the import keeps no row
    between). An iterable that gives a new iterator each time (a list, a file reopened)
    is read again; a one-time stream (stdin, a generator) is spooled as it is checked,
    to a temporary file past SPOOL_BYTES."""

    def __init__(self, lines: Iterable[str | bytes]) -> None:
        self._lines = lines
        self._spool: IO[bytes] | None = None
        self._spooled = False
        if isinstance(lines, Iterator):  # one pass only (a generator, a file)
            # closed by __exit__
            self._spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115

    def __enter__(self) -> _Source:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._spool is not None:
            self._spool.close()

    def records(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """The records (line number, parsed line), blank lines skipped."""
        lines = self._lines if self._spool is None else self._spooling()
        for number, line in enumerate(lines, start=1):
            item = _parse(number, line)
            if item is not None:
                yield item

    def again(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """The records once more, from the first after the header."""
        if self._spool is None:
            lines: Iterable[str | bytes] = self._lines
        elif self._spooled:
            lines = self._unspooled()
        else:
            raise RuntimeError("an export is read again only after a first full reading")
        parsed = (_parse(number, line) for number, line in enumerate(lines, start=1))
        records = (item for item in parsed if item is not None)
        next(records, None)  # the header
        return records

    def _spooling(self) -> Iterator[str | bytes]:
        assert self._spool is not None
        write = self._spool.write
        for line in self._lines:
            # a tag (text or bytes) and the length, so each line comes back as it came
            data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
            write(b"s" if isinstance(line, str) else b"b")
            write(len(data).to_bytes(8, "big"))
            write(data)
            yield line
        self._spooled = True

    def _unspooled(self) -> Iterator[str | bytes]:
        assert self._spool is not None
        spool = self._spool
        spool.seek(0)
        while tag := spool.read(1):
            data = spool.read(int.from_bytes(spool.read(8), "big"))
            yield data.decode("utf-8", "surrogatepass") if tag == b"s" else data


def _parse(number: int, line: str | bytes) -> tuple[int, dict[str, Any]] | None:
    if isinstance(line, bytes):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInputError(
                f"line {number}: not UTF-8 (byte {exc.start + 1} is {line[exc.start]:#04x}); "
                "an export is UTF-8 text"
            ) from None
    else:
        text = line
    if not text.strip():
        return None
    if len(text) > MAX_LINE_CHARS:
        raise InvalidInputError(
            f"line {number}: {len(text):,} characters; a line of an export holds at most "
            f"{MAX_LINE_CHARS:,}"
        )
    try:
        record = json.loads(text)
    except RecursionError:
        raise InvalidInputError(f"line {number}: nested too deeply to be an exported row") from None
    except ValueError as exc:
        raise InvalidInputError(f"line {number}: not JSON ({exc})") from None
    if not isinstance(record, dict):
        raise InvalidInputError(f"line {number}: not a JSON object")
    return number, record
