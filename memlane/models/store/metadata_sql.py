"""Metadata filters (memlane.pipeline.metadata.filters) as SQL: the condition a store read
adds to select the rows `matches` passes, on PostgreSQL and on SQLite.

PostgreSQL (JSONB): equality is containment, `metadata @> {"k": v}` or, for a list,
`metadata @> {"k": [v]}`, and presence is `metadata ? 'k'`, both answered by the GIN index;
a range reads the key's value or list elements (jsonb_array_elements), numbers as numeric
and strings in the "C" collation (the code-point order `matches` compares in).

SQLite (JSON text): each condition reads the key's value or list elements with json_each,
whose `type` keeps JSON's kinds apart (`true` is not `1`), strings in BINARY order (UTF-8
bytes: the code-point order). No index: SQLite has no index over arbitrary keys short of a
side table written with every memory, and its reads are one user's rows (the
user_id indexes narrow them first) or the working set's, which filters in memory.

Every condition is true or false, never NULL (the column is never NULL, json_each of a
missing key is no row), so `NOT` is the negation `matches` takes.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.sql.elements import ColumnElement

from memlane.pipeline.metadata.filters import All, Any_, Equals, Exists, Filter, Not, Within
from memlane.pipeline.metadata.values import Scalar

_OPS = {"gt": "__gt__", "gte": "__ge__", "lt": "__lt__", "lte": "__le__"}


def condition(column: Any, f: Filter, *, dialect: str) -> ColumnElement[bool]:
    """The SQL condition of `f` on a metadata `column` (models.tables.METADATA_JSON), for
    the dialect named ("postgresql" or "sqlite")."""
    if isinstance(f, All):
        if not f.parts:
            return sa.true()
        return sa.and_(*(condition(column, part, dialect=dialect) for part in f.parts))
    if isinstance(f, Any_):
        return sa.or_(*(condition(column, part, dialect=dialect) for part in f.parts))
    if isinstance(f, Not):
        return sa.not_(condition(column, f.part, dialect=dialect))
    if dialect == "postgresql":
        return _postgres(column, f)
    return _sqlite(column, f)


def _postgres(column: Any, f: Equals | Within | Exists) -> ColumnElement[bool]:
    column = sa.type_coerce(column, JSONB)  # a variant of JSON: JSONB's operators
    if isinstance(f, Exists):
        present: ColumnElement[bool] = column.has_key(f.key)
        return present if f.present else sa.not_(present)
    if isinstance(f, Equals):
        # JSON text cast in SQL: the assembly's reads run on psycopg without SQLAlchemy's
        # JSONB binding (models/pipelined.py)
        return sa.or_(
            *(_contains(column, {f.key: v}) for v in f.values),
            *(_contains(column, {f.key: [v]}) for v in f.values),
        )
    held = column[f.key]
    elements = sa.func.jsonb_array_elements(
        sa.case(
            (sa.func.jsonb_typeof(held) == "array", held), else_=sa.func.jsonb_build_array(held)
        )
    ).table_valued("value")
    value = elements.c.value
    kind = "number" if f.numeric else "string"
    # PostgreSQL may cast before it checks the type: a cast of a string to numeric would
    # fail, so only numbers are cast (NULL otherwise, no element)
    of_kind = sa.func.jsonb_typeof(value) == kind
    if f.numeric:
        read: Any = sa.case((of_kind, sa.cast(value, sa.Numeric)))
    else:
        read = value.op("#>>")(sa.text("'{}'::text[]")).collate("C")
    wheres = [of_kind]
    for op, bound in f.bounds:
        bound_value: Any = Decimal(repr(bound)) if f.numeric else bound
        literal = sa.literal(bound_value, sa.Numeric if f.numeric else sa.Text)
        wheres.append(getattr(read, _OPS[op])(literal))
    return sa.exists(sa.select(sa.literal(1)).select_from(elements).where(*wheres))


def _contains(column: Any, value: object) -> ColumnElement[bool]:
    text = sa.literal(json.dumps(value), sa.Text)
    contained: ColumnElement[bool] = column.op("@>", return_type=sa.Boolean)(sa.cast(text, JSONB))
    return contained


def _path(key: str) -> str:
    # keys hold no quote (pipeline.metadata.values' key pattern): quoted, a dot is no step
    return f'$."{key}"'


def _sqlite_kind(value: Scalar) -> tuple[str, ...]:
    if isinstance(value, bool):
        return ("true",) if value else ("false",)
    if isinstance(value, str):
        return ("text",)
    return ("integer", "real")


def _sqlite(column: Any, f: Equals | Within | Exists) -> ColumnElement[bool]:
    if isinstance(f, Exists):
        present = sa.func.json_type(column, _path(f.key)).is_not(None)
        return present if f.present else sa.not_(present)
    elements = sa.func.json_each(column, _path(f.key)).table_valued("value", "type")
    value, kind = elements.c.value, elements.c.type
    if isinstance(f, Equals):
        matched = []
        for want in f.values:
            if isinstance(want, bool):
                matched.append(kind == ("true" if want else "false"))
            else:
                matched.append(sa.and_(kind.in_(_sqlite_kind(want)), value == want))
        where: ColumnElement[bool] = sa.or_(*matched)
    else:
        wheres = [kind.in_(("integer", "real") if f.numeric else ("text",))]
        for op, bound in f.bounds:
            wheres.append(getattr(value, _OPS[op])(bound))
        where = sa.and_(*wheres)
    return sa.exists(sa.select(sa.literal(1)).select_from(elements).where(where))
