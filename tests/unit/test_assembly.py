"""The context assembler with hand-built items: tiers, shares, order, safety, the pack."""

from __future__ import annotations

import math
import random
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from datetime import timedelta
from typing import cast

import pytest
import tiktoken

from memlane.pipeline.assembly import context_format as fmt
from memlane.pipeline.assembly.assembler import assemble_context
from memlane.pipeline.assembly.filters import procedures_for_query
from memlane.pipeline.assembly.records import PackEvent, pack_json
from memlane.pipeline.errors import BudgetError
from tests.unit.assembly_helpers import (
    NOW,
    document,
    episode,
    mem,
    procedure,
    request,
    soul,
    tokens,
    wrapper_tokens,
)


def ids_in_text(text: str) -> list[str]:
    root = ET.fromstring(text)
    return [item.get("id", "") for item in root.iter("m")]


# --------------------------------------------------------------------------- tiers


def test_pinned_are_in_even_past_the_memory_share() -> None:
    pinned = [mem("p_old", tier="pinned", age_days=5), mem("p_new", tier="pinned", age_days=1)]
    result = assemble_context(
        request(memories=[*pinned, mem("c1")], memory_share=0.0, soul_blocks=[soul()])
    )
    assert result.included_memory_ids == ["p_new", "p_old"]
    assert ids_in_text(result.text) == ["p_new", "p_old"]
    dropped = {i.id: i.drop_reason for i in result.pack.items if not i.included}
    assert dropped == {"c1": "over_memory_share"}
    assert result.pack.events == [PackEvent(type="no_candidates_fit")]


def test_pinned_and_soul_over_budget_is_a_budget_error_saying_by_how_much() -> None:
    blocks, pinned = [soul()], [mem("p1", "A pinned fact that is always needed.", tier="pinned")]
    required = tokens(document(soul_blocks=blocks, memories=pinned))
    with pytest.raises(BudgetError, match=r"over by 7\)") as caught:
        assemble_context(request(soul_blocks=blocks, memories=pinned, budget_tokens=required - 7))
    assert (caught.value.budget, caught.value.required, caught.value.over_by) == (
        required - 7,
        required,
        7,
    )
    exact = assemble_context(request(soul_blocks=blocks, memories=pinned, budget_tokens=required))
    assert exact.pack.used_tokens == required


def test_verified_newest_first_and_dropped_only_when_the_budget_cannot_hold_them() -> None:
    new, old = mem("v_new", tier="verified", age_days=1), mem("v_old", tier="verified", age_days=9)
    budget = tokens(document(memories=[new]))
    # memory_share 0: the share does not apply to verified, only the budget does
    result = assemble_context(request(memories=[old, new], budget_tokens=budget, memory_share=0.0))
    assert result.included_memory_ids == ["v_new"]
    assert result.pack.events == [PackEvent(type="verified_item_dropped", id="v_old")]
    (old_item,) = [i for i in result.pack.items if i.id == "v_old"]
    assert (old_item.included, old_item.drop_reason) == (False, "over_budget")
    assert result.pack.used_tokens == budget


def test_verified_go_in_before_a_better_scored_candidate() -> None:
    verified = mem("v1", tier="verified", importance=0.1)
    candidate = mem("c1", importance=1.0)
    budget = tokens(document(memories=[verified]))
    result = assemble_context(
        request(memories=[candidate, verified], budget_tokens=budget, memory_share=1.0)
    )
    assert result.included_memory_ids == ["v1"]
    assert result.pack.events == [PackEvent(type="no_candidates_fit")]


def test_a_candidate_that_does_not_fit_is_skipped_whole_and_the_next_is_tried() -> None:
    big = mem("c_big", "A long memory " + "with many extra words " * 10, importance=0.9)
    small = mem("c_small", "Short.", importance=0.2)
    budget = tokens(document(memories=[small]))
    result = assemble_context(
        request(memories=[big, small], budget_tokens=budget, memory_share=1.0)
    )
    assert result.included_memory_ids == ["c_small"]
    assert "long memory" not in result.text
    assert {i.id: i.drop_reason for i in result.pack.items} == {
        "c_big": "over_budget",
        "c_small": None,
    }
    assert result.pack.events == []
    ET.fromstring(result.text)


def test_no_candidates_fit_only_when_there_were_candidates() -> None:
    none_at_all = assemble_context(request(memories=[mem("p1", tier="pinned")]))
    assert none_at_all.pack.events == []
    one_fits = assemble_context(request(memories=[mem("c1")]))
    assert one_fits.pack.events == []
    assert one_fits.included_memory_ids == ["c1"]


# --------------------------------------------------------------------------- sections


def test_candidates_stay_within_the_memory_share_of_what_soul_leaves() -> None:
    # a long soul, so a share of the whole budget and a share of what soul leaves differ
    blocks = [soul("identity"), soul("style", "Terse and direct. " * 30)]
    candidates = [mem(f"c{i:02d}", importance=1 - i / 100) for i in range(30)]
    budget = 600
    result = assemble_context(
        request(memories=candidates, soul_blocks=blocks, budget_tokens=budget)
    )
    cap = math.floor(0.5 * (budget - tokens(document(soul_blocks=blocks))))
    section = wrapper_tokens("memories") + sum(
        i.tokens or 0 for i in result.pack.items if i.section == "memory" and i.included
    )
    assert 0 < section <= cap
    skipped = [i for i in result.pack.items if i.section == "memory" and not i.included]
    assert skipped and all(section + (i.tokens or 0) > cap for i in skipped)
    assert {i.drop_reason for i in skipped} == {"over_memory_share"}
    # the ranking decides who is in: the best candidates, in order
    assert result.included_memory_ids == [
        f"c{i:02d}" for i in range(len(result.included_memory_ids))
    ]


def test_what_memories_leave_unused_flows_to_episodes() -> None:
    memory = mem("c1", "Short.")
    episodes = [episode(f"e{i}", age_days=i + 1) for i in range(12)]
    budget = tokens(document(memories=[memory], episodes=episodes))
    result = assemble_context(request(memories=[memory], episodes=episodes, budget_tokens=budget))
    assert result.text == document(memories=[memory], episodes=episodes)
    episode_tokens = wrapper_tokens("episodes") + sum(
        i.tokens or 0 for i in result.pack.items if i.section == "episode"
    )
    assert episode_tokens > 0.5 * budget  # more than half: the memories' unused share flowed on


def test_episodes_newest_first_skipped_whole_and_procedures_get_the_rest() -> None:
    old_long = episode("e_old", "A long summary " + "of many things " * 20, age_days=9)
    newer = [episode("e_b", age_days=2), episode("e_a", age_days=2), episode("e_new", age_days=1)]
    deploy = procedure("pr1", "Deploy checklist", {"deploy"})
    expected = document(episodes=[newer[2], newer[1], newer[0]], procedures=[deploy])
    result = assemble_context(
        request(
            episodes=[old_long, *newer],
            procedures=[deploy],
            query="How do I deploy?",
            budget_tokens=tokens(expected),
        )
    )
    # newest first, ties by id (e_a before e_b); the old long one skipped, the procedure in
    assert result.text == expected
    assert [i.id for i in result.pack.items if i.section == "episode" and i.included] == [
        "e_new",
        "e_a",
        "e_b",
    ]
    assert {i.id: i.drop_reason for i in result.pack.items}["e_old"] == "over_budget"


# --------------------------------------------------------------------------- order


def test_order_inside_memories() -> None:
    memories = [
        mem("c_mid_b", importance=0.5),
        mem("v_y", tier="verified", age_days=3),
        mem("p_a", tier="pinned", age_days=5),
        mem("c_hi", importance=0.9),
        mem("v_x", tier="verified", age_days=3),
        mem("p_b", tier="pinned", age_days=1),
        mem("c_mid_a", importance=0.5),
        mem("v_z", tier="verified", age_days=1),
    ]
    result = assemble_context(request(memories=memories, strategy="important"))
    expected = ["p_b", "p_a", "v_z", "v_x", "v_y", "c_hi", "c_mid_a", "c_mid_b"]
    assert result.included_memory_ids == expected
    assert ids_in_text(result.text) == expected


def test_candidates_follow_the_strategy() -> None:
    # "recent": accessed most recently first, whatever the importance
    memories = [
        mem("c_old", importance=0.9, accessed_at=NOW - timedelta(days=3)),
        mem("c_new", importance=0.1, accessed_at=NOW - timedelta(hours=1)),
    ]
    result = assemble_context(request(memories=memories, strategy="recent"))
    assert result.included_memory_ids == ["c_new", "c_old"]


# --------------------------------------------------------------------------- safety


def test_only_the_users_active_unexpired_non_sensitive_items() -> None:
    memories = [
        mem("ok"),
        mem("theirs", "Another user's secret plan.", user="u2", tier="pinned"),
        mem("expired", expires_at=NOW, tier="pinned"),
        mem("not_yet", expires_at=NOW + timedelta(seconds=1)),
        mem("quarantined", status="quarantined"),
        mem("superseded", status="superseded"),
        mem("deleted", status="deleted", tier="verified"),
        mem("sensitive", sensitive=True),
    ]
    others = {
        "soul_blocks": [soul(user="u2", content="Their identity.")],
        "episodes": [episode("their_episode", user="u2")],
        "procedures": [procedure("their_proc", "Deploy", {"deploy"}, user="u2")],
        "query": "deploy",
    }
    result = assemble_context(request(memories=memories, **others))
    assert result.included_memory_ids == ["not_yet", "ok"]  # equal importance: by id
    assert result.text == document(memories=[memories[3], memories[0]])
    for foreign in ("theirs", "their_episode", "their_proc", "Their identity", "secret"):
        assert foreign not in result.text
        assert foreign not in result.pack.model_dump_json()
    assert result.pack.drop_reasons == {
        "deleted": 1,
        "expired": 1,
        "quarantined": 1,
        "sensitive": 1,
        "superseded": 1,
    }
    assert result.pack.dropped_count == 5

    with_sensitive = assemble_context(request(memories=memories, include_sensitive=True))
    assert with_sensitive.included_memory_ids == ["not_yet", "ok", "sensitive"]


def test_a_memory_read_twice_counts_once() -> None:
    twice = mem("c1")
    result = assemble_context(request(memories=[twice, twice, mem("p1", tier="pinned"), twice]))
    assert result.included_memory_ids == ["p1", "c1"]
    assert [i.id for i in result.pack.items] == ["p1", "c1"]


# --------------------------------------------------------------------------- procedures


def test_procedures_that_match_the_query() -> None:
    deploy = procedure("pr_deploy", "Release checklist", {"deploy", "release"})
    billing = procedure("pr_bill", "Invoices", {"billing"})
    by_name = procedure("pr_name", "Rollback the deploy", set())
    short_words = procedure("pr_short", "Do it", {"i"})
    items = {"procedures": [billing, deploy, by_name, short_words]}

    matched = assemble_context(request(query="How do I deploy and release?", **items))
    # two shared words beat one; "and"/"do"/"I" are too short to match anything
    assert [i.id for i in matched.pack.items] == ["pr_deploy", "pr_name"]
    assert assemble_context(request(query=None, **items)).pack.items == []
    chosen = assemble_context(
        request(query="deploy", procedure_ids=frozenset({"pr_bill"}), **items)
    )
    assert [i.id for i in chosen.pack.items] == ["pr_bill"]


def test_the_store_reads_procedures_match_by_stemmed_keywords() -> None:
    deploy = procedure("pr_deploy", "Release checklist", {"deploy", "releas"})
    billing = procedure("pr_bill", "Invoices", {"bill"})
    mine = [deploy, billing]
    # "deploying"/"releases" stem to the stored keywords; the name's words do not count
    assert procedures_for_query(mine, "Deploying the releases?") == {"pr_deploy"}
    assert procedures_for_query(mine, "Invoices") == frozenset()
    assert procedures_for_query(mine, None) == frozenset()


# --------------------------------------------------------------------------- determinism, pack


def mixed_request(**changes: object):
    memories = [
        mem("p1", tier="pinned"),
        mem("v1", tier="verified", age_days=2),
        *(mem(f"c{i}", importance=(i % 3) / 3) for i in range(8)),
    ]
    return request(
        memories=memories,
        soul_blocks=[soul("style", "Terse."), soul("identity")],
        episodes=[episode("e1"), episode("e2", age_days=2)],
        procedures=[procedure("pr1", "Deploy", {"deploy"})],
        query="deploy the auth service",
        strategy="scored",
        relevance={"c1": 0.9, "c2": 0.1},
        budget_tokens=300,
        retrieval_mode="vector+strategy",
        **changes,
    )


def test_same_input_gives_byte_identical_output_whatever_the_input_order() -> None:
    first = assemble_context(mixed_request())
    second = assemble_context(mixed_request())
    assert first.text == second.text
    assert first.pack.model_dump_json() == second.pack.model_dump_json()
    original = mixed_request()
    shuffled_memories = list(original.memories)
    random.Random(7).shuffle(shuffled_memories)
    shuffled = replace(
        original,
        memories=shuffled_memories,
        episodes=list(reversed(original.episodes)),
        soul_blocks=list(reversed(original.soul_blocks)),
    )
    assert assemble_context(shuffled).text == first.text
    assert assemble_context(shuffled).pack == first.pack
    assert re.fullmatch(r"pack_[0-9a-f]{32}", first.pack.pack_id)
    later = assemble_context(mixed_request(now=NOW + timedelta(seconds=1)))
    assert later.pack.pack_id != first.pack.pack_id


def test_the_pack_records_every_decision() -> None:
    result = assemble_context(mixed_request())
    pack = result.pack
    assert (pack.user_id, pack.query, pack.assembled_at, pack.strategy) == (
        "u1",
        "deploy the auth service",
        NOW,
        "scored",
    )
    assert (pack.budget_tokens, pack.retrieval_mode) == (300, "vector+strategy")
    assert pack.used_tokens == tokens(result.text) <= 300
    by_id = {item.id: item for item in pack.items}
    assert list(by_id)[:2] == ["soul:identity", "soul:style"]
    assert by_id["soul:identity"].tokens == tokens(fmt.soul_line(soul("identity")))
    c1 = by_id["c1"]
    assert c1.tier == "candidate" and c1.components is not None
    assert c1.components.relevance == 0.9
    assert c1.score == c1.components.composite
    assert c1.tokens == tokens(fmt.memory_line(mem("c1", importance=1 / 3)))
    not_in = [item for item in pack.items if not item.included]
    assert pack.dropped_count == len(not_in) > 0
    assert sum(pack.drop_reasons.values()) == len(not_in)
    assert all(item.drop_reason is not None for item in not_in)
    assert all(item.drop_reason is None for item in pack.items if item.included)
    included = [i.id for i in pack.items if i.included and i.section == "memory"]
    assert result.included_memory_ids == included


def test_text_and_json_describe_the_same_selection() -> None:
    result = assemble_context(mixed_request())
    original = mixed_request()
    included = {i.id for i in result.pack.items if i.included}
    selection = fmt.Selection(
        user_id="u1",
        soul=[soul("identity"), soul("style", "Terse.")],
        memories=[
            next(m for m in original.memories if m.id == memory_id)
            for memory_id in result.included_memory_ids
        ],
        episodes=[e for e in original.episodes if e.id in included],
        procedures=[p for p in original.procedures if p.id in included],
    )
    assert result.text == fmt.render_xml(selection)
    assert result.json == fmt.as_json(selection)


def test_invalid_requests() -> None:
    with pytest.raises(ValueError, match="budget_tokens must be from 1 to"):
        assemble_context(request(budget_tokens=0))
    with pytest.raises(ValueError, match="memory_share"):
        assemble_context(request(memory_share=1.5))


def test_a_budget_too_small_for_the_empty_root_is_a_budget_error() -> None:
    with pytest.raises(BudgetError) as caught:
        assemble_context(request(budget_tokens=3))
    assert caught.value.required == tokens(document())


# --------------------------------------------------------------------------- recount


class LumpyEncoding:
    """One token per character, plus `extra` for a whole document: not additive, so the
    assembler's estimate is `extra` short and only its final recount can notice."""

    name = "lumpy"

    def __init__(self, extra: int = 3) -> None:
        self.extra = extra
        self.documents_counted = 0

    def encode_ordinary(self, text: str) -> list[int]:
        whole = text.startswith("<memlane_context") and text.endswith("</memlane_context>")
        self.documents_counted += whole
        return [0] * (len(text) + (self.extra if whole else 0))


LUMPY = cast(tiktoken.Encoding, LumpyEncoding())


def test_the_recount_drops_the_lowest_ranked_candidate_first() -> None:
    memories = [mem("c_best", importance=0.9), mem("c_worst", importance=0.1)]
    episodes = [episode("e1")]
    budget = len(document(memories=memories, episodes=episodes))
    result = assemble_context(
        request(
            memories=memories,
            episodes=episodes,
            encoding=LUMPY,
            budget_tokens=budget,
            memory_share=1.0,
        )
    )
    assert result.included_memory_ids == ["c_best"]
    assert result.pack.used_tokens == len(result.text) + 3 <= budget
    assert {i.id: i.drop_reason for i in result.pack.items}["c_worst"] == "recount"
    assert "e1" in result.text


def test_the_recount_drops_verified_last_with_an_event() -> None:
    memories = [
        mem("p1", tier="pinned"),
        mem("v_new", tier="verified", age_days=1),
        mem("v_old", tier="verified", age_days=2),
    ]
    budget = len(document(memories=[memories[0], memories[1], memories[2]]))
    result = assemble_context(request(memories=memories, encoding=LUMPY, budget_tokens=budget))
    assert result.included_memory_ids == ["p1", "v_new"]
    assert result.pack.events == [PackEvent(type="verified_item_dropped", id="v_old")]
    assert result.pack.used_tokens <= budget


def test_the_recount_never_drops_pinned() -> None:
    pinned = [mem("p1", tier="pinned")]
    budget = len(document(memories=pinned))
    with pytest.raises(BudgetError, match=r"over by 3\)"):
        assemble_context(request(memories=pinned, encoding=LUMPY, budget_tokens=budget))


def test_the_recount_removes_enough_in_one_round() -> None:
    memories = [mem(f"c{i}", importance=1 - i / 10) for i in range(6)]
    line = len(fmt.memory_line(memories[5]))
    lumpy = LumpyEncoding(extra=2 * line + 1)  # over by more than two lines' worth
    budget = len(document(memories=memories))
    result = assemble_context(
        request(
            memories=memories,
            encoding=cast(tiktoken.Encoding, lumpy),
            budget_tokens=budget,
            memory_share=1.0,
        )
    )
    assert result.included_memory_ids == ["c0", "c1", "c2"]
    assert result.pack.drop_reasons == {"recount": 3}
    assert lumpy.documents_counted == 2  # over once, then within budget


def test_the_pack_data_is_the_pack_model_and_its_json_dump() -> None:
    """The request path hands on plain data; the model is built only when read, and the
    background writer stores `pack_json` of it: both must be what the model gives."""
    result = assemble_context(mixed_request())
    data = result.pack_data
    assert result.pack_id == result.pack.pack_id == data["pack_id"]
    assert result.pack.model_dump() == data
    assert pack_json(data) == result.pack.model_dump(mode="json")
    assert result.pack is result.pack  # built once


def test_an_additive_encoding_is_not_recounted_and_an_unknown_one_is() -> None:
    memories = [mem(f"c{i}") for i in range(3)]
    real = assemble_context(request(memories=memories))
    assert real.pack.used_tokens == tokens(real.text)
    lumpy = LumpyEncoding(extra=0)
    assemble_context(request(memories=memories, encoding=cast(tiktoken.Encoding, lumpy)))
    assert lumpy.documents_counted == 1
