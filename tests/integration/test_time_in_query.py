"""A query that names a time ranks what was said then first, on both reads (the working set
and the store), and the pack shows the window it used (pipeline.ranking.time_window)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memlane.config.settings import load_settings
from memlane.service.facade import Memlane

NOW = datetime(2024, 2, 10, 12, 0, tzinfo=UTC)
SAID = {
    "Went hiking in the Alps with my sister.": datetime(2023, 5, 3, 18, 0, tzinfo=UTC),
    "Went hiking in the Dolomites with my brother.": datetime(2023, 8, 20, 18, 0, tzinfo=UTC),
}


def _user(db_url: str) -> None:
    """User u1's two hiking memories, said in May and in August 2023 (through an export:
    a memory added by hand is dated now)."""
    with Memlane(load_settings(embedding_model="hashing", database_url=db_url)) as lane:
        for content in SAID:
            lane.add_memory("scratch", {"content": content})
        lines = [json.loads(line) for line in lane.export_user("scratch")]
    for line in lines:
        row = line.get("row", {})
        if row.get("content") in SAID:
            at = SAID[row["content"]].isoformat()
            row.update(created_at=at, confirmed_at=at, accessed_at=at)
    with Memlane(load_settings(embedding_model="hashing", database_url=db_url)) as lane:
        lane.import_user([json.dumps(line) for line in lines], user_id="u1")


@pytest.mark.parametrize("working_set_mb", [64, 0])
def test_what_was_said_in_the_named_window_ranks_first(db_url: str, working_set_mb: int) -> None:
    _user(db_url)
    settings = load_settings(
        embedding_model="hashing", database_url=db_url, working_set_mb=working_set_mb
    )
    with Memlane(settings) as lane:
        plain = lane.assemble("u1", "Where did I go hiking?", budget_tokens=500, now=NOW)
        assert plain.pack.time_window is None
        # the newer memory leads without a time in the question (recency)
        assert plain.text.index("Dolomites") < plain.text.index("Alps")
        dated = lane.assemble(
            "u1", "Where did I go hiking in May 2023?", budget_tokens=500, now=NOW
        )
        assert (dated.pack.retrieval_mode == "working-set") == (working_set_mb > 0)
        window = dated.pack.time_window
        assert window is not None
        assert (window.start, window.end) == (
            datetime(2023, 5, 1, tzinfo=UTC),
            datetime(2023, 6, 1, tzinfo=UTC),
        )
        assert window.phrase == "May 2023"
        assert dated.text.index("Alps") < dated.text.index("Dolomites")
        scores = {
            item.id: item.components.relevance
            for item in dated.pack.items
            if item.components is not None
        }
        plain_scores = {
            item.id: item.components.relevance
            for item in plain.pack.items
            if item.components is not None
        }
        # what was said outside the window keeps half its relevance to the words
        (outside,) = [m.id for m in lane.list_memories("u1") if "Dolomites" in m.content]
        assert scores[outside] < plain_scores[outside]
