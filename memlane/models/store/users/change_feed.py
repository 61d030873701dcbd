"""The per-user change feed behind every process's working set.

Every transaction that writes a user's memories, episodes, procedures or soul blocks
takes the user's next change number (`stamp`: `user_state.version + 1`, one per
transaction and user) and writes it into `change_seq` of each row it touches, or into
`removed_items` for an item it deletes outright. The counter row stays locked until the
transaction ends, so a user's numbers become visible in commit order: once a reader sees
number n, it sees every number below n as well. A reader that has applied everything up
to v asks for the rows with change_seq > v (`since`) and is then current as of the
highest number it read.

Access records (`memories.record_access`, what a context showed) take no number: they
move only `accessed_at`, which the working set does not keep (the `recent` strategy,
which orders by it, reads the store).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, cast

from sqlalchemy import Select, Table, bindparam, exists, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import BindParameter

from memlane.models.db import autocommit_engine, get_engine, read_unit
from memlane.models.pipelined import CompiledRead, compile_read, run_reads
from memlane.models.store.rows import Vectors, memory_columns, memory_of
from memlane.models.tables import (
    EpisodeRow,
    MemoryRow,
    ProcedureRow,
    RemovedItem,
    SoulBlockRow,
    UserState,
)
from memlane.pipeline.records import MemoryRecord

_STAMPS = "memlane_change_stamps"


def stamp(session: Session, user_id: str) -> int:
    """This transaction's change number for the user (the same for every write of the
    transaction). Takes the user's counter row lock until the transaction ends."""
    stamps: dict[str, int] = session.info.setdefault(_STAMPS, {})
    known = stamps.get(user_id)
    if known is not None:
        return known
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    statement = (
        insert(UserState)
        .values(user_id=user_id, next_ref=1, version=1)
        .on_conflict_do_update(index_elements=["user_id"], set_={"version": UserState.version + 1})
        .returning(UserState.version)
    )
    number = int(session.execute(statement).scalar_one())
    stamps[user_id] = number
    return number


@lru_cache(maxsize=4)
def _stamp_with_refs_statement(dialect: str) -> Any:
    insert = pg_insert if dialect == "postgresql" else sqlite_insert
    refs: BindParameter[int] = bindparam("refs")
    state = cast(Table, UserState.__table__).c
    return (
        insert(cast(Table, UserState.__table__))
        .values(user_id=bindparam("user_id"), next_ref=1 + refs, version=1)
        .on_conflict_do_update(
            index_elements=["user_id"],
            set_={"next_ref": state.next_ref + refs, "version": state.version + 1},
        )
        .returning(state.next_ref, state.version)
    )


def stamp_with_refs(session: Session, user_id: str, refs: int) -> tuple[int, int]:
    """`stamp` and store/memories/refs.py's `allocate(refs)` in one statement (the store stage
    takes both on the same counter row): (the first of the new refs, the change number).
    Only for a transaction that has no number yet."""
    stamps: dict[str, int] = session.info.setdefault(_STAMPS, {})
    if user_id in stamps or refs < 1:
        raise ValueError(f"a change number is taken once per transaction, refs ≥ 1: {refs}")
    statement = _stamp_with_refs_statement(session.get_bind().dialect.name)
    next_ref, number = session.execute(statement, {"user_id": user_id, "refs": refs}).one()
    stamps[user_id] = int(number)
    return int(next_ref) - refs, int(number)


def removed(session: Session, user_id: str, item_id: str) -> None:
    """Record that the user's item `item_id` was deleted outright."""
    number = stamp(session, user_id)
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    session.execute(
        insert(RemovedItem)
        .values(user_id=user_id, item_id=item_id, change_seq=number)
        .on_conflict_do_update(index_elements=["user_id", "item_id"], set_={"change_seq": number})
    )


NO_USER = -1  # the change number of a user with no counter row: never written, or erased


def version(session: Session, user_id: str) -> int:
    """The user's latest change number (NO_USER: never written, or erased)."""
    found = session.scalar(select(UserState.version).where(UserState.user_id == user_id))
    return NO_USER if found is None else int(found)


_VERSION = select(UserState.version).where(UserState.user_id == bindparam("user_id"))


@lru_cache(maxsize=1)
def _version_read() -> CompiledRead:
    return compile_read(_VERSION)


def latest(url: str, user_id: str) -> int:
    """`version` in one round trip, the read every assembly of a working-set user pays:
    on PostgreSQL one statement on an autocommit connection (a connection the server
    dropped is replaced and the read runs once more, then the error is raised); on SQLite
    a plain read."""
    if url.startswith("postgresql"):
        [(_, rows)] = run_reads(autocommit_engine(url), [(_version_read(), {"user_id": user_id})])
    else:
        with get_engine(url, pre_ping=False).connect() as conn:
            rows = list(conn.execute(_VERSION, {"user_id": user_id}))
    return int(rows[0][0]) if rows else NO_USER


MemoryChange = tuple[MemoryRecord, str, "Vectors"]  # record, status, (embedder, vector)


@dataclass(slots=True)
class Changes:
    """What changed for a user after some change number, each list by change number."""

    version: int
    memories: list[MemoryChange] = field(default_factory=list)  # any status
    episodes: list[EpisodeRow] = field(default_factory=list)
    procedures: list[ProcedureRow] = field(default_factory=list)
    soul_blocks: list[SoulBlockRow] = field(default_factory=list)
    removed: list[RemovedItem] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(
            self.memories or self.episodes or self.procedures or self.soul_blocks or self.removed
        )


def since(session: Session, user_id: str, after: int) -> Changes:
    """The rows of the user written after change number `after` (module docstring); the
    returned version is the highest number read, at least `after`."""
    postgres = session.get_bind().dialect.name == "postgresql"

    def changed(table: Any) -> list[Any]:
        return list(
            session.scalars(
                select(table)
                .where(table.user_id == user_id, table.change_seq > after)
                .order_by(table.change_seq)
            )
        )

    memories_read, others_read = _since_reads(postgres)
    params = {"user_id": user_id, "after": after}
    connection = session.connection()  # Core reads: the ORM's execute costs more than they do
    memory_rows = connection.execute(memories_read, params).all()
    # One row says which other tables changed (most often none: a memory was stored or
    # bumped), so only those are read as objects.
    flags = connection.execute(others_read, params).one()
    read = {
        table: changed(table) if flag else [] for table, flag in zip(_OTHERS, flags, strict=True)
    }
    found = Changes(
        version=max([after, *(int(row[-1]) for row in memory_rows)]),
        memories=[memory_of(row[:-1], postgres) for row in memory_rows],
        episodes=read[EpisodeRow],
        procedures=read[ProcedureRow],
        soul_blocks=read[SoulBlockRow],
        removed=read[RemovedItem],
    )
    for rows in (found.episodes, found.procedures, found.soul_blocks, found.removed):
        found.version = max([found.version, *(row.change_seq for row in rows)])
    return found


def read_since(url: str, user_id: str, after: int) -> Changes:
    """`since` in a read of its own: on PostgreSQL a unit of work (`read_unit`: a dropped
    connection is replaced and the read runs once more); on SQLite a session on a plain
    connection, whose transaction and checkout cost a change read less than a unit of
    work's (SQLite reads outside a transaction see each statement's own snapshot either
    way)."""
    if url.startswith("postgresql"):
        return read_unit(url, lambda session: since(session, user_id, after))
    with get_engine(url, pre_ping=False).connect() as connection, Session(connection) as session:
        return since(session, user_id, after)


_OTHERS: tuple[Any, ...] = (EpisodeRow, ProcedureRow, SoulBlockRow, RemovedItem)


def _changed_memories(
    postgres: bool, user: BindParameter[str], after: BindParameter[int]
) -> Select[*tuple[Any, ...]]:
    """The user's memories written after the number `after`, as the view loads them."""
    return (
        select(*memory_columns(postgres), MemoryRow.change_seq)
        .where(MemoryRow.user_id == user, MemoryRow.change_seq > after)
        .order_by(MemoryRow.change_seq)
    )


@lru_cache(maxsize=2)
def _since_reads(
    postgres: bool,
) -> tuple[Select[*tuple[Any, ...]], Select[*tuple[Any, ...]]]:
    """`since`'s two reads, built once (building them was most of a change's cost)."""
    user: BindParameter[str] = bindparam("user_id")
    after: BindParameter[int] = bindparam("after")
    others = select(
        *(exists().where(table.user_id == user, table.change_seq > after) for table in _OTHERS)
    )
    return _changed_memories(postgres, user, after), others


@lru_cache(maxsize=1)
def _poll_reads() -> tuple[CompiledRead, CompiledRead]:
    user: BindParameter[str] = bindparam("user_id")
    after: BindParameter[int] = bindparam("after")
    memories = _changed_memories(True, user, after)
    # the number read again and whether another table changed, in one row (a statement
    # of its own in the pipeline costs the client more than the reads do the server)
    number = _VERSION.scalar_subquery()
    others = select(
        number.label("version"),
        *(
            exists()
            .where(table.user_id == user, table.change_seq > after)
            .label(table.__tablename__)
            for table in _OTHERS
        ),
    )
    return compile_read(memories), compile_read(others)


def poll(url: str, user_id: str, after: int) -> tuple[int, Changes | None]:
    """The user's change number (`latest`: the one read most assemblies pay) and, when it
    moved past `after`, what changed: on PostgreSQL in one more round trip when only
    memories changed (the common case), the number read again beside the rows, in one
    snapshot. Returns (version, None) when the rows must be read with `since` (SQLite, or
    another table changed)."""
    number = latest(url, user_id)
    if number <= after:
        return number, Changes(version=after)
    if not url.startswith("postgresql"):
        return number, None
    params = {"user_id": user_id, "after": after}
    memories_read, others_read = _poll_reads()
    [(_, memories), (_, [(again, *others)])] = run_reads(
        autocommit_engine(url), [(memories_read, params), (others_read, params)]
    )
    number = max(number, NO_USER if again is None else int(again))
    if any(others):
        return number, None
    # every number up to `number` is committed, and its rows are in this snapshot
    found = Changes(version=number, memories=[memory_of(row[:-1], True) for row in memories])
    return number, found
