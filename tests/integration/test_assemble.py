"""The assembler through the facade, on both backends: safety filters, determinism,
packs and access records."""

from __future__ import annotations

import json
import logging
import time
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta

import pytest
from sqlalchemy import Engine, event

from memlane.config.settings import load_settings
from memlane.pipeline.assembly.records import pack_json
from memlane.pipeline.assembly.tokens import count_tokens, encoding_for_model
from memlane.pipeline.errors import BudgetError, NotFoundError
from memlane.service.background import PackWriter
from memlane.service.facade import Memlane


@pytest.fixture(params=["working-set", "store-read"])
def lane(db_url: str, request: pytest.FixtureRequest):
    """Both read paths: the per-process working set and the store read it falls back to."""
    working_set_mb = 64 if request.param == "working-set" else 0
    with Memlane(load_settings(database_url=db_url, working_set_mb=working_set_mb)) as running:
        yield running


def seed(lane: Memlane, now: datetime) -> dict[str, str]:
    ids = {}
    for key, user, content, extra in [
        ("ts", "maya", "User prefers TypeScript for frontend work", {}),
        ("lisbon", "maya", "User lives in Lisbon", {}),
        ("other", "daniel", "User prefers TypeScript too, says Daniel", {}),
        ("expired", "maya", "User is on holiday in Crete", {"expires_at": now - timedelta(1)}),
        ("sensitive", "maya", "User's bank PIN is 4321", {"sensitive": True}),
        ("quarantined", "maya", "User prefers TypeScript quarantined", {}),
        ("forgotten", "maya", "User prefers TypeScript forgotten", {}),
        ("old", "maya", "User likes Java for backend services", {}),
    ]:
        ids[key] = lane.add_memory(user, {"content": content, "category": "preference", **extra}).id
    lane.quarantine("maya", ids["quarantined"])
    lane.forget("maya", ids["forgotten"])
    lane.update_memory("maya", ids["old"], status="superseded")
    return ids


def test_only_the_users_visible_memories_reach_the_context(lane: Memlane, now: datetime) -> None:
    ids = seed(lane, now)
    result = lane.assemble(
        "maya", "which language does the user prefer?", budget_tokens=2000, now=now
    )
    root = ET.fromstring(result.text)
    assert set(result.included_memory_ids) == {ids["ts"], ids["lisbon"]}
    refs = {lane.get_memory("maya", ids[key]).ref for key in ("ts", "lisbon")}
    assert {int(m.get("id", "")) for m in root.iter("m")} == refs
    for hidden in ("other", "expired", "sensitive", "quarantined", "forgotten", "old"):
        assert ids[hidden] not in result.included_memory_ids
    for word in ("Daniel", "4321", "Crete", "quarantined", "forgotten", "Java"):
        assert word not in result.text
    asked = lane.assemble("maya", "pin", budget_tokens=2000, now=now, include_sensitive=True)
    assert ids["sensitive"] in asked.included_memory_ids and "4321" in asked.text


def test_the_same_store_and_now_give_the_same_bytes_within_budget(
    lane: Memlane, now: datetime
) -> None:
    seed(lane, now)
    for n in range(40):
        lane.add_memory(
            "maya",
            {"content": f"User fact number {n} about project {n * 7}", "importance": (n % 10) / 10},
        )
    first = lane.assemble("maya", "project facts", budget_tokens=300, now=now)
    second = lane.assemble("maya", "project facts", budget_tokens=300, now=now)
    assert first.text == second.text
    assert first.pack == second.pack
    used = count_tokens(first.text, encoding_for_model("gpt-4o-mini"))
    assert used == first.pack.used_tokens <= 300
    assert first.pack.dropped_count > 0  # 42 memories do not fit 300 tokens


def test_pinned_memories_over_budget_raise_a_budget_error(lane: Memlane, now: datetime) -> None:
    lane.add_memory("maya", {"content": "User's name is Maya. " * 40, "tier": "pinned"})
    with pytest.raises(BudgetError) as raised:
        lane.assemble("maya", budget_tokens=50, now=now)
    assert raised.value.over_by > 0 and f"{raised.value.over_by:,}" in str(raised.value)


def test_the_pack_is_stored_and_accesses_are_recorded_off_the_request_path(
    lane: Memlane, now: datetime
) -> None:
    ids = seed(lane, now)
    before = lane.get_memory("maya", ids["ts"]).accessed_at
    later = before + timedelta(hours=3)
    result = lane.assemble("maya", "typescript", budget_tokens=2000, now=later)
    lane.flush()
    stored = lane.pack(result.pack.pack_id)
    assert stored["pack_id"] == result.pack.pack_id
    assert {i["id"] for i in stored["items"] if i["included"]} >= {ids["ts"]}
    assert lane.get_memory("maya", ids["ts"]).accessed_at == later


def test_the_info_log_line_of_an_assembly_holds_no_query_or_user(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with Memlane(load_settings(database_url=db_url)) as lane:
        lane.add_memory("u-secret-9", {"content": "Allergic to penicillin."})
        with caplog.at_level(logging.INFO, logger="memlane.assembly"):
            result = lane.assemble("u-secret-9", "what about my penicillin allergy?")
            lane.flush()
        info = [json.loads(r.getMessage()) for r in caplog.records if r.levelno == 20]
        assert [line["pack_id"] for line in info] == [result.pack.pack_id]
        assert info[0]["included"] == 1 and info[0]["used_tokens"] > 0
        assert "penicillin" not in caplog.text and "u-secret-9" not in caplog.text
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="memlane.assembly"):
            lane.assemble("u-secret-9", "penicillin?")
            lane.flush()
        assert "penicillin?" in caplog.text  # the whole pack, for debugging


def test_packs_handed_over_together_share_one_transaction_and_a_flush_does_not_wait(
    db_url: str, now: datetime
) -> None:
    with Memlane(load_settings(database_url=db_url, working_set_mb=64)) as lane:
        seed(lane, now)
        results = [
            lane.assemble("maya", query, budget_tokens=2000, now=now)
            for query in ("typescript", "lisbon", "java")
        ]
        lane.flush()
    commits: list[object] = []

    def committed(connection: object) -> None:
        commits.append(connection)

    # on every engine: which pool the writer takes its connection from is its own affair
    event.listen(Engine, "commit", committed)
    writer = PackWriter(db_url, linger_s=60.0)  # far longer than the flush below allows
    try:
        for result in results:
            writer.submit({**result.pack_data, "pack_id": result.pack_id + "_b"})
        started = time.monotonic()
        writer.flush(timeout=20.0)
        assert time.monotonic() - started < 20.0
    finally:
        event.remove(Engine, "commit", committed)
        writer.close()
    assert len(commits) == 1
    with Memlane(load_settings(database_url=db_url)) as reader:
        for result in results:
            stored = reader.pack(result.pack_id + "_b")
            assert stored == {**pack_json(result.pack_data), "pack_id": result.pack_id + "_b"}


def test_a_pack_that_cannot_be_serialised_is_logged_and_the_others_are_saved(
    db_url: str, now: datetime, caplog: pytest.LogCaptureFixture
) -> None:
    with Memlane(load_settings(database_url=db_url, working_set_mb=64)) as lane:
        seed(lane, now)
        first, second = (
            lane.assemble("maya", query, budget_tokens=2000, now=now)
            for query in ("typescript", "lisbon")
        )
    writer = PackWriter(db_url, linger_s=60.0)  # both in one batch
    broken = {**first.pack_data, "pack_id": first.pack_id + "_x", "events": [object()]}
    try:
        with caplog.at_level(logging.ERROR, logger="memlane.packs"):
            writer.submit(broken)  # type: ignore[arg-type]
            writer.submit({**second.pack_data, "pack_id": second.pack_id + "_x"})
            writer.flush(timeout=20.0)
    finally:
        writer.close()
    assert f"could not serialise context pack {first.pack_id}_x" in caplog.text
    with Memlane(load_settings(database_url=db_url)) as reader:
        assert reader.pack(second.pack_id + "_x")["query"] == "lisbon"
        with pytest.raises(NotFoundError):
            reader.pack(first.pack_id + "_x")


@pytest.mark.parametrize("query", [None, "which language does the user prefer?"])
def test_soul_blocks_open_the_context_on_either_read_path(
    lane: Memlane, now: datetime, query: str | None
) -> None:
    seed(lane, now)
    lane.set_soul_block("maya", "identity", "A frontend engineer in Lisbon.")
    result = lane.assemble("maya", query, budget_tokens=2000, now=now)
    assert "A frontend engineer in Lisbon." in result.text
    assert result.text.index("A frontend engineer") < result.text.index("TypeScript")
