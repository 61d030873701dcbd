"""A user's data as JSON lines, out of one store and into another (`memlane users
export` / `import`), ids, short ids, counts, times and histories preserved.

The first line is a header (`{"kind": "memlane-export", "version": 1, "user_id": …}`);
each other line is one row, `{"kind": <table>, "row": {column: value}}`: memories (with
their keywords and vectors), their history, episodes, procedures, soul blocks, and with
`messages` the conversations and their messages. Times are ISO 8601, vectors lists of
floats (float32 values, exact in JSON). What a store makes for itself is left out and
made again on import: the keyword index, the change numbers, event and message row ids.
Jobs and context packs are not exported: they describe work done in the old store.

An import is a door like the others: each row is read by a strict schema
(import_rows.py), placed among the target user's own data (import_owners.py: another
user's ids are copied under new ones) and screened by the dedup rule and the purges'
fingerprints (import_screen.py), all before the first row is written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import and_, insert, select
from sqlalchemy.orm import Session

from memlane.models.schemas import UserIdIn
from memlane.models.store import metadata_sql
from memlane.models.store.memories import keyword_index, memories, refs
from memlane.models.store.memories.scopes import seen_by
from memlane.models.store.users import change_feed as changes
from memlane.models.store.users import import_owners, import_screen
from memlane.models.store.users import import_rows as import_rows_schema
from memlane.models.store.users.import_owners import Placement
from memlane.models.store.users.import_rows import Scan
from memlane.models.tables import (
    Conversation,
    Embedding,
    EpisodeRow,
    MemoryEventRow,
    MemoryRow,
    Message,
    ProcedureRow,
    SoulBlockRow,
    UserState,
    UTCDateTime,
)
from memlane.pipeline.errors import ConflictError, InvalidInputError
from memlane.pipeline.metadata.filters import Filter

FORMAT = "memlane-export"
VERSION = 1
# In import order: parents first.
TABLES: dict[str, Any] = {
    "conversations": Conversation,
    "messages": Message,
    "memories": MemoryRow,
    "memory_events": MemoryEventRow,
    "episodes": EpisodeRow,
    "procedures": ProcedureRow,
    "soul_blocks": SoulBlockRow,
}
_MESSAGE_TABLES = ("conversations", "messages")
_LEFT_OUT = {
    "change_seq",
    "embedding_next",
    "embedding_next_model",
    "embedding_next_dim",
}
# The tables whose rows belong to one agent or to all (agent_id; pipeline.scope).
_SCOPED = ("conversations", "memories", "episodes")
_ROW_IDS = {"memory_events", "messages"}  # their ids are the store's own counters
_WITH_REF = ("memories", "episodes", "procedures")
_EVENT_MEMORY = ("memory_events", "memory_id")

_BATCH = 500
_USER_ID: TypeAdapter[str] = TypeAdapter(UserIdIn)
# What import_rows counts beside the rows added per table (TABLES).
LEFT_OUT_COUNTS = (
    "stored_rows_kept",
    "copied_with_new_ids",
    "duplicate_memories",
    "purged_memories",
)

Embed = Callable[[Sequence[str]], list[list[float]]]


def _columns(kind: str) -> list[Any]:
    table = TABLES[kind].__table__
    return [
        c
        for c in table.columns
        if c.name not in _LEFT_OUT and not (kind in _ROW_IDS and c.name == "id")
    ]


def _out(column: Any, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(column.type, UTCDateTime):
        return value.isoformat()
    if isinstance(column.type, Embedding):
        return [float(x) for x in value]
    return value


def export_rows(
    session: Session,
    user_id: str,
    *,
    messages: bool,
    agent_id: str | None = None,
    only: Filter | None = None,
) -> Iterator[dict[str, Any]]:
    """The header, then every exported row of the user, each table in a stable order.
    With `agent_id`, what that agent sees (pipeline.scope): the shared rows and its own;
    without, every row of every agent (the export moves the user whole). `only`: the
    conversations, memories and episodes whose metadata passes it (procedures and soul
    blocks carry none: all). Of conversations and memories kept, their messages and
    histories."""
    yield {"kind": FORMAT, "version": VERSION, "user_id": user_id, "messages": messages}
    dialect = session.get_bind().dialect.name

    def passing(table: Any) -> Any:  # of the _SCOPED tables
        conditions = [table.user_id == user_id]
        if agent_id is not None:
            conditions.append(seen_by(table.agent_id, agent_id))
        if only is not None:
            conditions.append(metadata_sql.condition(table.meta, only, dialect=dialect))
        return and_(*conditions)

    conversation_ids = select(Conversation.id).where(passing(Conversation))
    memory_ids = select(MemoryRow.id).where(passing(MemoryRow))
    narrowed = agent_id is not None or only is not None
    for kind, table in TABLES.items():
        if kind in _MESSAGE_TABLES and not messages:
            continue
        if kind == "messages":
            where = table.conversation_id.in_(conversation_ids)
        elif kind in _SCOPED:
            where = passing(table)
        elif kind == "memory_events" and narrowed:
            where = and_(table.user_id == user_id, table.memory_id.in_(memory_ids))
        else:
            where = table.user_id == user_id
        order = [c for c in table.__table__.primary_key.columns]
        columns = _columns(kind)
        for row in session.execute(select(*columns).where(where).order_by(*order)):
            yield {
                "kind": kind,
                "row": {c.name: _out(c, v) for c, v in zip(columns, row, strict=True)},
            }


def read_header(record: dict[str, Any]) -> str:
    """The exported user's id, from the first line, read as every door reads a user id."""
    if record.get("kind") != FORMAT or record.get("version") != VERSION:
        raise InvalidInputError(
            f"line 1: not a memlane export (version {VERSION}): starts with {record.get('kind')!r}"
        )
    user_id = record.get("user_id")
    if not isinstance(user_id, str):
        raise InvalidInputError("line 1: user_id: the header names the exported user")
    try:
        return _USER_ID.validate_python(user_id)
    except ValidationError as exc:
        problem = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise InvalidInputError(f"line 1: user_id: {problem}") from None


def import_rows(
    session: Session,
    records: Iterable[tuple[int, dict[str, Any]]],
    again: Callable[[], Iterable[tuple[int, dict[str, Any]]]],
    *,
    user_id: str,
    exported: str,
    merge: bool,
    embedder: tuple[str, int],
    embed: Embed,
    dedup: tuple[float, int],
) -> dict[str, int]:
    """Insert the exported rows (line number, record) as the user's, under the user's
    lock; the rows added per table, and what was left out (LEFT_OUT_COUNTS). Every row is
    validated (import_rows.py) and placed (import_owners.py: a row of another user's is
    copied under a new id) before anything is written. Rows whose id the user holds
    already refuse the import (ConflictError) unless `merge`, which keeps the stored
    ones and adds the rest; active memories the dedup rule or a purge's fingerprint
    keeps out are left out (import_screen.py). Vectors of another embedder than
    `embedder` (name, dim), or none, are computed with `embed`. `dedup`: the dedup
    threshold and minimum keywords.

    In bounded memory: the first reading (`records`) checks every row and keeps only
    ids and keys; the rows are read again (`again()`: the same records from the first
    row after the header) and written in batches, in this one transaction."""
    memories.user_lock(session, user_id)
    found = import_rows_schema.scan(records, exported=exported, tables=TABLES)
    placement = import_owners.place(session, found, user_id=user_id, copy=user_id != exported)
    taken = _taken(session, found, placement, user_id=user_id, merge=merge)
    threshold, min_keywords = dedup
    active = [
        (new, content)
        for old, content in found.active
        if (new := placement.id_of("memories", old)) not in taken["memories"]
    ]
    found.active = []
    screened = import_screen.screen(
        session, active, user_id=user_id, threshold=threshold, min_keywords=min_keywords
    )
    dropped, left_out = screened.dropped, screened.counts
    del active
    refs = _renumber_if_taken(session, found, placement, taken, dropped, user_id)
    number = changes.stamp(session, user_id)
    counts = dict.fromkeys(TABLES, 0)
    kept = 0
    # One more reading, each table's rows in batches, a message's conversation written
    # before it (a foreign key); when conversations come after messages in the file, a
    # reading for the conversations first.
    kinds = tuple(TABLES)
    groups = [kinds] if found.in_order else [kinds[:1], kinds[1:]]
    batches: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}

    def flush(kind: str) -> None:
        _write(session, kind, batches[kind], user_id, number, embedder, embed)
        counts[kind] += len(batches[kind])
        batches[kind] = []

    for group in groups:
        for kind, values in import_rows_schema.rows_of(again(), group):
            placement.apply(kind, values)
            if _left_out(kind, values, taken):
                kept += 1
                continue
            if kind == "memories" and values["id"] in dropped:
                continue
            if kind == "memory_events" and values["memory_id"] in dropped:
                continue
            if kind == "episodes" and screened.purged_facts:
                import_screen.redact(values, screened.purged_facts)
            if kind in _WITH_REF:
                values["ref"] = refs.get((kind, values["id"]), values["ref"])
            batches[kind].append(values)
            if len(batches[kind]) >= _BATCH:
                if kind == "messages":
                    flush("conversations")
                flush(kind)
        for kind in group:
            flush(kind)
    extra = {"stored_rows_kept": kept, "copied_with_new_ids": placement.copied, **left_out}
    return counts | {key: n for key, n in extra.items() if n}


def _write(
    session: Session,
    kind: str,
    rows: list[dict[str, Any]],
    user_id: str,
    number: int,
    embedder: tuple[str, int],
    embed: Embed,
) -> None:
    """One batch of one table: vectors computed where needed, then one Core insert (no
    ORM object per row), and a memory's keywords indexed."""
    if not rows:
        return
    table = TABLES[kind]
    columns = table.__table__.columns
    for values in rows:
        if "user_id" in columns:
            values["user_id"] = user_id
        if "change_seq" in columns:
            values["change_seq"] = number
        if "metadata" in values:  # the ORM insert takes the attribute's name
            values["meta"] = values.pop("metadata")
    _embed_where_needed(kind, rows, embedder, embed)
    session.execute(insert(table), rows)
    if kind == "memories":
        words = {values["id"]: values.get("keywords") or () for values in rows}
        keyword_index.index(session, user_id, words)


def _taken(
    session: Session, found: Scan, placement: Placement, *, user_id: str, merge: bool
) -> dict[str, set[Any]]:
    """What the store holds of the export (after placement), by kind: refused, or with
    `merge` left out (with the history and messages of what is left out)."""
    taken: dict[str, set[Any]] = {}
    for kind in ("conversations", "memories", "episodes", "procedures"):
        ids = sorted(placement.id_of(kind, old) for old in found.ids[kind])
        table = TABLES[kind]
        held: set[Any] = set()
        for start in range(0, len(ids), 500):
            held |= set(session.scalars(select(table.id).where(table.id.in_(ids[start:][:500]))))
        taken[kind] = held
    stored_kinds = select(SoulBlockRow.kind).where(SoulBlockRow.user_id == user_id)
    taken["soul_blocks"] = found.soul_kinds & set(session.scalars(stored_kinds))
    stored_names = select(ProcedureRow.name).where(
        ProcedureRow.user_id == user_id,
        ProcedureRow.name.in_(sorted(set(found.procedure_names.values()))),
    )
    taken["procedure names"] = set(session.scalars(stored_names))
    # a purged memory's event, exported without its memory: stored once already?
    in_file = {placement.id_of("memories", old) for old in found.ids["memories"]}
    named = {placement.id_of("memories", old) for old in found.named[_EVENT_MEMORY]}
    orphans = sorted(named - in_file)
    stored_orphans = select(MemoryEventRow.memory_id).where(
        MemoryEventRow.user_id == user_id, MemoryEventRow.memory_id.in_(orphans)
    )
    taken["purged memories' events"] = set(session.scalars(stored_orphans)) if orphans else set()
    clashes = {kind: ids for kind, ids in taken.items() if ids}
    if clashes and not merge:
        listed = "; ".join(
            f"{kind}: {', '.join(sorted(map(str, ids))[:3])}" for kind, ids in clashes.items()
        )
        raise ConflictError(
            f"the store already holds rows of this export ({listed}); import with merge "
            "to keep the stored ones and add the rest"
        )
    return taken


def _left_out(kind: str, values: dict[str, Any], taken: dict[str, set[Any]]) -> bool:
    """Whether `merge` keeps the stored row instead of this one (`_taken`)."""
    if kind == "messages":
        return values["conversation_id"] in taken["conversations"]
    if kind == "memory_events":
        memory_id = values["memory_id"]
        return memory_id in taken["memories"] or memory_id in taken["purged memories' events"]
    if kind == "soul_blocks":
        return values["kind"] in taken["soul_blocks"]
    if kind == "procedures" and values["name"] in taken["procedure names"]:
        return True
    return values["id"] in taken[kind]


def _renumber_if_taken(
    session: Session,
    found: Scan,
    placement: Placement,
    taken: dict[str, set[Any]],
    dropped: set[str],
    user_id: str,
) -> dict[tuple[str, str], int]:
    """Keep the exported short ids when the user has none of them (no change: {}), else
    number the imported items after the user's ((table, id) -> the new short id); the
    user's counter moves past them either way."""
    rows: list[tuple[int, str, str]] = []  # (ref, id, table) of what is written
    for (kind, old), ref in found.refs.items():
        new = placement.id_of(kind, old)
        if new in taken[kind] or (kind == "memories" and new in dropped):
            continue
        if kind == "procedures" and found.procedure_names[old] in taken["procedure names"]:
            continue
        rows.append((ref, new, kind))
    found.refs = {}
    if not rows:
        return {}
    used: set[int] = set()
    for kind in _WITH_REF:
        table = TABLES[kind]
        used |= set(session.scalars(select(table.ref).where(table.user_id == user_id)))
    if used & {ref for ref, _, _ in rows}:
        first = refs.allocate(session, user_id, len(rows))
        return {(kind, new): first + offset for offset, (_, new, kind) in enumerate(sorted(rows))}
    top = max(ref for ref, _, _ in rows)
    state = session.get(UserState, user_id)
    if state is None:
        session.add(UserState(user_id=user_id, next_ref=top + 1, version=0))
        session.flush()
    elif state.next_ref <= top:
        state.next_ref = top + 1
    return {}


def _embed_where_needed(
    kind: str, rows: list[dict[str, Any]], embedder: tuple[str, int], embed: Embed
) -> None:
    text_of = {"memories": "content", "episodes": "summary"}.get(kind)
    if text_of is None:
        return
    name, dim = embedder
    stale = [
        values
        for values in rows
        if values.get("embedding") is None
        or (values.get("embedding_model"), values.get("embedding_dim")) != (name, dim)
    ]
    if kind == "memories":  # forgotten ones are not sent to an embedding provider
        for values in stale:
            if values.get("status") == "deleted":
                values.update(embedding=None, embedding_model=None, embedding_dim=None)
        stale = [v for v in stale if v.get("status") != "deleted"]
    if not stale:
        return
    vectors = embed([values[text_of] for values in stale])
    for values, vector in zip(stale, vectors, strict=True):
        values.update(embedding=vector, embedding_model=name, embedding_dim=len(vector))
