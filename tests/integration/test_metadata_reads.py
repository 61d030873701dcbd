"""Metadata filters give the same results on SQLite, PostgreSQL and through the working
set: a property test over random metadata and filters, each assembly's included
memories and episodes (with a budget that holds them all) against `matches`; and search
and the HTTP doors take the filter."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlane.api.app import create_app
from memlane.config.settings import load_settings
from memlane.models import migrate
from memlane.models.db import get_engine
from memlane.models.tables import EpisodeRow
from memlane.pipeline.metadata.filters import matches, parse_filter
from memlane.service.facade import Memlane
from tests.integration.conftest import _truncate
from tests.integration.test_api import error_of
from tests.metadata_cases import FILTERS, METADATA

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
FACTS = [
    "User keeps bees on the roof of the office building.",
    "User plays chess online every Thursday evening.",
    "User prefers dark roast coffee without any sugar.",
    "User drives an electric cargo bike to the harbour.",
    "User studies Portuguese grammar with a private tutor.",
    "User grows chili peppers in the kitchen window box.",
    "User repairs vintage radios as a weekend hobby.",
    "User runs the quarterly budget review for finance.",
]
# a lane per store and read path: the working set, and the store read it falls back to
PATHS = [("postgresql", 64.0), ("postgresql", 0.0), ("sqlite", 64.0), ("sqlite", 0.0)]


@pytest.fixture(scope="module")
def lanes(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Memlane]]:
    sqlite = f"sqlite:///{Path(tmp_path_factory.mktemp('reads')) / 'memlane.db'}"
    migrate.upgrade(sqlite)
    urls = {"postgresql": pg_url, "sqlite": sqlite}
    _truncate(pg_url)
    made = [
        Memlane(load_settings(database_url=urls[db], working_set_mb=mb, embedding_model="hashing"))
        for db, mb in PATHS
    ]
    yield made
    for lane in made:
        lane.close()


def _included(lane: Memlane, user_id: str, raw_filter: Any) -> set[str]:
    context = lane.assemble(user_id, None, budget_tokens=20_000, now=NOW, filter=raw_filter)
    from_view = context.pack.retrieval_mode == "working-set"
    assert from_view == (lane.settings.working_set_mb > 0), context.pack.retrieval_mode
    return {
        item.id
        for item in context.pack.items
        if item.included and item.section in ("memory", "episode")
    }


def _store(
    lane: Memlane, user_id: str, memories: list[dict[str, Any]], episode: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """The user's memories (the facts, of these metadata) and one episode, by id."""
    stored = {
        lane.add_memory(user_id, {"content": fact, "metadata": m}).id: m
        for fact, m in zip(FACTS, memories, strict=True)
    }
    with get_engine(lane.url).begin() as conn:
        conn.execute(
            sa.insert(EpisodeRow.__table__).values(
                id=f"ep_{user_id}",
                user_id=user_id,
                conversation_id="c1",
                summary="Talked about hobbies and the weekend plans.",
                topics=["hobbies"],
                created_at=NOW - timedelta(days=1),
                ref=1000,
                change_seq=0,
                metadata=episode,
            )
        )
    stored[f"ep_{user_id}"] = episode
    return stored


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    data=st.data(),
    memory_metadata=st.lists(METADATA, min_size=len(FACTS), max_size=len(FACTS)),
    episode_metadata=METADATA,
)
def test_every_read_path_on_both_stores_includes_what_matches_passes(
    lanes: list[Memlane],
    data: st.DataObject,
    memory_metadata: list[dict[str, Any]],
    episode_metadata: dict[str, Any],
) -> None:
    user_id = f"u-{uuid.uuid4().hex}"  # a replayed example writes afresh
    # one of each store: the lane beside it reads the same database
    stored = {
        lane.url: _store(lane, user_id, memory_metadata, episode_metadata) for lane in lanes[::2]
    }
    for _ in range(3):
        raw_filter = data.draw(FILTERS)
        parsed = parse_filter(raw_filter)
        for lane in lanes:
            want = {i for i, m in stored[lane.url].items() if matches(m, parsed)}
            got = _included(lane, user_id, raw_filter)
            assert got == want, (lane.url, lane.settings.working_set_mb, raw_filter)


def test_the_working_set_follows_metadata_written_after_it_loaded(db_url: str) -> None:
    with Memlane(load_settings(database_url=db_url, embedding_model="hashing")) as lane:
        lane.add_memory("u1", {"content": FACTS[0], "metadata": {"team": "eng"}})
        assert _included(lane, "u1", {"team": "ops"}) == set()  # loaded
        second = lane.add_memory("u1", {"content": FACTS[1], "metadata": {"team": "ops"}})
        assert _included(lane, "u1", {"team": "ops"}) == {second.id}
        # confirmed with other metadata: merged, and the view follows
        lane.add_memory("u1", {"content": FACTS[1], "metadata": {"team": "web"}})
        assert _included(lane, "u1", {"team": "web"}) == {second.id}
        lane.forget("u1", second.id)
        assert _included(lane, "u1", {"team": "ops"}) == set()


def test_search_and_the_http_doors_take_a_filter(db_url: str) -> None:
    with Memlane(load_settings(database_url=db_url, embedding_model="hashing")) as lane:
        bees = lane.add_memory("u1", {"content": FACTS[0], "metadata": {"team": "eng"}})
        lane.add_memory("u1", {"content": FACTS[1], "metadata": {"team": "ops"}})
        hits = lane.search("u1", "bees chess", filter={"team": "eng"})
        assert [h.memory.id for h in hits] == [bees.id]
        assert lane.search("u1", "bees chess", filter='{"team": "eng"}')[0].memory.id == bees.id
        with TestClient(create_app(lane)) as client:
            found = client.post(
                "/v1/search", json={"user_id": "u1", "query": "bees", "filter": {"team": "eng"}}
            )
            assert found.status_code == 200, found.text
            assert [h["memory"]["id"] for h in found.json()] == [bees.id]
            context = client.post(
                "/v1/context", json={"user_id": "u1", "filter": {"not": {"team": "eng"}}}
            )
            assert context.status_code == 200, context.text
            assert FACTS[1] in context.json()["context"]
            assert FACTS[0] not in context.json()["context"]
            for path in ("/v1/search", "/v1/context"):
                bad = client.post(
                    path, json={"user_id": "u1", "filter": {"and": [{"team": {"gte": True}}]}}
                )
                assert bad.status_code == 422, bad.text
                message = error_of(bad)["message"]
                assert "filter: at and.0.team.gte: a range's bound is a number" in message
