"""Moving a user between deployments (Memlane inherits it): export their data as JSON
lines and import it elsewhere, ids preserved (models/store/users/export.py)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from memlane.models.db import unit_of_work
from memlane.models.store.users import export as user_export
from memlane.pipeline.errors import InvalidInputError
from memlane.service.input_checks import check_text, checked

if TYPE_CHECKING:
    from memlane.workers.embedders import Embedder


class UserTransfer:
    """Export and import of one user's data; mixed into Memlane."""

    if TYPE_CHECKING:
        url: str

        @property
        def embedder(self) -> Embedder: ...

    @checked("user_id")
    def export_user(self, user_id: str, *, messages: bool = False) -> Iterator[str]:
        """The user's data as JSON lines (each without its newline): a header, then
        memories with their keywords, vectors and history, episodes, procedures, soul
        blocks, and with `messages` their conversations and messages. Read lazily, in
        one transaction: iterate it to the end (or close it)."""
        with unit_of_work(self.url) as session:
            for record in user_export.export_rows(session, user_id, messages=messages):
                yield json.dumps(record, ensure_ascii=False, separators=(",", ":"))

    def import_user(
        self,
        lines: Iterable[str | bytes],
        *,
        user_id: str | None = None,
        merge: bool = False,
    ) -> dict[str, int]:
        """Import an export (its lines) as `user_id` (default: the exported user), in one
        transaction; the rows added per table. Ids and short ids are kept (short ids are
        renumbered when the user already uses them); an id the store holds already
        refuses the import (ConflictError) unless `merge`, which keeps what is stored
        and adds the rest. Vectors are kept when they are of this lane's embedder, else
        computed with it."""
        parsed = (_parse(number, line) for number, line in enumerate(lines, start=1))
        records = (record for record in parsed if record is not None)
        header = next(records, None)
        if header is None:
            raise InvalidInputError("an export starts with its header line; this one is empty")
        exported = user_export.read_header(header)
        target = user_id if user_id is not None else exported
        check_text(target, "user_id")
        embedder = self.embedder
        with unit_of_work(self.url) as session:
            counts = user_export.import_rows(
                session,
                records,
                user_id=target,
                merge=merge,
                embedder=(embedder.name, embedder.dim),
                embed=embedder.embed,
            )
        return counts  # working sets follow through the change feed, as for any write


def _parse(number: int, line: str | bytes) -> dict[str, Any] | None:
    text = line.decode("utf-8") if isinstance(line, bytes) else line
    if not text.strip():
        return None
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise InvalidInputError(f"line {number}: not JSON ({exc})") from None
    if not isinstance(record, dict):
        raise InvalidInputError(f"line {number}: not a JSON object")
    return record
