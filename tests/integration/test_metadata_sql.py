"""Metadata filters select the same rows in SQL on PostgreSQL and SQLite as `matches`
does in memory (the working set's filter): a property test over random metadata and
filters."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlane.models import migrate
from memlane.models.db import get_engine
from memlane.models.store.metadata_sql import condition
from memlane.models.tables import Conversation
from memlane.pipeline.metadata.filters import matches, parse_filter
from memlane.pipeline.metadata.values import check_metadata
from tests.metadata_cases import FILTERS, METADATA

T0 = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def stores(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    sqlite = f"sqlite:///{Path(tmp_path_factory.mktemp('meta')) / 'memlane.db'}"
    migrate.upgrade(sqlite)
    return [pg_url, sqlite]


def _selected(url: str, user_id: str, raw_filter: Any) -> set[str]:
    engine = get_engine(url)
    where = condition(Conversation.meta, parse_filter(raw_filter), dialect=engine.dialect.name)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(Conversation.id).where(Conversation.user_id == user_id, where)
        ).scalars()
        return set(rows)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(items=st.lists(METADATA, min_size=1, max_size=12), raw_filter=FILTERS)
def test_sql_on_both_stores_selects_what_matches_passes(
    stores: list[str], items: list[dict[str, Any]], raw_filter: dict[str, Any]
) -> None:
    user_id = f"prop-{uuid.uuid4().hex}"
    metadata = [check_metadata(m) for m in items]
    parsed = parse_filter(raw_filter)
    expected = {f"{user_id}-{i}" for i, m in enumerate(metadata) if matches(m, parsed)}
    for url in stores:
        with get_engine(url).begin() as conn:
            conn.execute(
                sa.insert(Conversation.__table__),
                [
                    {
                        "id": f"{user_id}-{i}",
                        "user_id": user_id,
                        "message_count": 0,
                        "assistant_count": 0,
                        "extracted_to_seq": -1,
                        "final": False,
                        "created_at": T0,
                        "last_message_at": T0,
                        "metadata": m,
                    }
                    for i, m in enumerate(metadata)
                ],
            )
        assert _selected(url, user_id, raw_filter) == expected, url


@pytest.mark.parametrize(
    ("raw_filter", "expected"),
    [
        ({"team": "eng"}, {"list", "scalar"}),
        ({"not": {"team": "eng"}}, {"none", "other", "flag"}),
        ({"team": {"exists": False}}, {"none", "flag"}),
        ({"flag": 1}, set()),  # true is no number
        ({"flag": True}, {"flag"}),
        ({"score": {"gte": 2, "lt": 3}}, {"scalar"}),  # 2.0 equals 2
        ({"score": {"gt": 1, "lt": 3}}, {"scalar"}),  # one element within both bounds
        ({"day": {"gte": "2026-02-01"}}, {"list"}),
        ({"missing": "x"}, set()),
        ({}, {"list", "scalar", "none", "other", "flag"}),
    ],
)
def test_filters_by_example_on_both_stores(
    stores: list[str], raw_filter: dict[str, Any], expected: set[str]
) -> None:
    user_id = f"ex-{uuid.uuid4().hex}"
    rows = {
        "list": {"team": ["ops", "eng"], "score": [0, 5], "day": ["2026-01-31", "2026-02-03"]},
        "scalar": {"team": "eng", "score": 2.0, "day": "2026-01-15"},
        "none": {},
        "other": {"team": "ops", "score": "2"},
        "flag": {"flag": True},
    }
    for url in stores:
        with get_engine(url).begin() as conn:
            conn.execute(
                sa.insert(Conversation.__table__),
                [
                    {
                        "id": f"{user_id}-{name}",
                        "user_id": user_id,
                        "message_count": 0,
                        "assistant_count": 0,
                        "extracted_to_seq": -1,
                        "final": False,
                        "created_at": T0,
                        "last_message_at": T0,
                        "metadata": m,
                    }
                    for name, m in rows.items()
                ],
            )
        found = {i.removeprefix(f"{user_id}-") for i in _selected(url, user_id, raw_filter)}
        assert found == expected, url
        parsed = parse_filter(raw_filter)
        assert {n for n, m in rows.items() if matches(m, parsed)} == expected
