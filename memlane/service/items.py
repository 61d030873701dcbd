"""The facade's soul blocks and procedures (Memlane inherits it): the user's context items
that are not memories, set and deleted by hand; every working set drops a deleted one at
its next assembly for the user."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from memlane.models.db import unit_of_work
from memlane.models.store.users import context_items
from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.records import Procedure, SoulBlock, SoulKind
from memlane.service.input_checks import checked


def _now() -> datetime:
    return datetime.now(UTC)


class ContextItemControl:
    """Soul blocks and procedures over the store; mixed into Memlane."""

    url: str

    @checked("user_id", "content")
    def set_soul_block(self, user_id: str, kind: SoulKind, content: str) -> SoulBlock:
        with unit_of_work(self.url) as session:
            return context_items.set_soul_block(
                session, user_id=user_id, kind=kind, content=content, now=_now()
            )

    @checked("user_id")
    def soul_blocks(self, user_id: str) -> list[SoulBlock]:
        with unit_of_work(self.url) as session:
            return context_items.soul_blocks(session, user_id)

    @checked("user_id", "name", "content")
    def add_procedure(
        self, user_id: str, name: str, content: str, *, extra_keywords: Iterable[str] = ()
    ) -> Procedure:
        words = keywords(f"{name} {content}") | {w.lower() for w in extra_keywords}
        with unit_of_work(self.url) as session:
            return context_items.add_procedure(
                session,
                user_id=user_id,
                name=name,
                content=content,
                keywords=words,
                now=_now(),
            )

    @checked("user_id")
    def procedures(self, user_id: str) -> list[Procedure]:
        with unit_of_work(self.url) as session:
            return context_items.procedures(session, user_id)

    @checked("user_id")
    def delete_soul_block(self, user_id: str, kind: SoulKind) -> None:
        """Delete the user's soul block of that kind (NotFoundError if none); every
        working set drops it at its next assembly for the user."""
        with unit_of_work(self.url) as session:
            context_items.delete_soul_block(session, user_id=user_id, kind=kind)

    @checked("user_id", "procedure")
    def delete_procedure(self, user_id: str, procedure: str) -> str:
        """Delete the user's procedure named by its id or its name; its id."""
        with unit_of_work(self.url) as session:
            return context_items.delete_procedure(session, user_id=user_id, procedure_id=procedure)
