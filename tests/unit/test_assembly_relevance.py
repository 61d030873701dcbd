"""With a query, every item earns its place by relevance (assembly rule 4): one pool of
candidate memories, episodes and matching procedures, one budget, a relevance floor."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from hypothesis import given, settings
from hypothesis import strategies as st

from memlane.pipeline.assembly.assembler import assemble_context
from memlane.pipeline.ranking.scoring import Weights
from tests.unit.assembly_helpers import (
    episode,
    mem,
    procedure,
    request,
    soul,
    tokens,
    wrapper_tokens,
)

SECTIONS = {"memory": "memories", "episode": "episodes", "procedure": "procedures"}


def scored(**changes):
    return request(strategy="scored", query="what about the banker job?", **changes)


def tags(text: str) -> list[tuple[str, str]]:
    root = ET.fromstring(text)
    return [(item.tag, item.get("id", "")) for section in root for item in section]


def test_sections_share_one_budget_by_relevance() -> None:
    # the relevant episode goes in before memories the query did not ask for, and the
    # memories do not keep half the budget to themselves
    memories = [mem(f"m{i}", f"Small talk number {i}, nothing more.") for i in range(30)]
    result = assemble_context(
        scored(
            memories=memories,
            episodes=[episode("ep_job", "Talked about losing the banker job.")],
            relevance={"ep_job": 0.9, **{m.id: 0.1 for m in memories}},
            budget_tokens=400,
        )
    )
    assert ("e", "ep_job") in tags(result.text)
    pack = {item["id"]: item for item in result.pack_data["items"]}
    assert pack["ep_job"]["included"] and pack["ep_job"]["components"]["relevance"] == 0.9
    assert not any(item["drop_reason"] == "over_memory_share" for item in pack.values())
    # the rendered order is still soul, memories, episodes, procedures
    order = [tag for tag, _ in tags(result.text)]
    assert order == sorted(order, key=["m", "e", "p"].index)


def test_what_one_section_leaves_unused_the_others_take() -> None:
    episodes = [episode(f"ep{i}", f"Banker job talk, part {i} of many.") for i in range(40)]
    result = assemble_context(
        scored(
            memories=[mem("m1", "About the banker job.")],
            episodes=episodes,
            relevance={"m1": 0.8, **{e.id: 0.7 for e in episodes}},
            budget_tokens=600,
        )
    )
    episode_tokens = sum(
        item["tokens"]
        for item in result.pack_data["items"]
        if item["section"] == "episode" and item["included"]
    )
    assert episode_tokens > 600 * 0.5  # more than the seed's share of the memories
    assert ("m", "m1") in tags(result.text)


def test_an_item_below_the_floor_never_displaces_one_above_it() -> None:
    # important, just confirmed and confirmed often, but hardly about the query; against
    # an old, minor memory that is
    loud = mem("m_loud", "Take care, bye for now!", importance=1.0, age_days=0, access_count=50)
    quiet = mem("m_quiet", "Lost the banker job yesterday.", importance=0.1, age_days=300)
    room = tokens(fmt_line(quiet)) + 40  # room for one line and the XML around it
    result = assemble_context(
        scored(
            memories=[loud, quiet],
            relevance={"m_loud": 0.2, "m_quiet": 0.6},  # floor: 0.8 × 0.6 = 0.48
            budget_tokens=room,
            weights=Weights(0.4, 0.3, 0.2, 0.1),
        )
    )
    assert result.included_memory_ids == ["m_quiet"]
    # without a floor the composite alone decides, and the loud one wins
    unfloored = assemble_context(
        scored(
            memories=[loud, quiet],
            relevance={"m_loud": 0.2, "m_quiet": 0.6},
            budget_tokens=room,
            relevance_floor=0.0,
        )
    )
    assert unfloored.included_memory_ids == ["m_loud"]


def fmt_line(memory) -> str:
    from memlane.pipeline.assembly.context_format import memory_line

    return memory_line(memory)


def test_procedures_enter_only_when_the_query_is_about_them() -> None:
    deploy = procedure("pr_deploy", "deploy", {"deploy", "release"})
    backup = procedure("pr_backup", "backup", {"backup"})
    result = assemble_context(
        scored(procedures=[deploy, backup], relevance={"pr_deploy": 0.4}, budget_tokens=500)
    )
    assert [tag for tag in tags(result.text) if tag[0] == "p"] == [("p", "pr_deploy")]


def test_verified_memories_still_come_first_whatever_their_relevance() -> None:
    verified = mem("m_verified", "Prefers tea.", tier="verified")
    result = assemble_context(
        scored(
            memories=[verified, mem("m_rel", "The banker job.")],
            relevance={"m_verified": 0.0, "m_rel": 0.9},
            soul_blocks=[soul()],
        )
    )
    assert result.included_memory_ids == ["m_verified", "m_rel"]


def test_without_a_query_the_seed_shares_apply() -> None:
    memories = [mem(f"m{i}", f"Memory number {i} with a few words.") for i in range(40)]
    result = assemble_context(
        request(strategy="scored", memories=memories, budget_tokens=300, memory_share=0.5)
    )
    assert any(item["drop_reason"] == "over_memory_share" for item in result.pack_data["items"])


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=25),
    kinds=st.lists(st.sampled_from("mep"), min_size=25, max_size=25),
    relevances=st.lists(st.floats(min_value=0, max_value=1), min_size=25, max_size=25),
    budget=st.integers(min_value=40, max_value=900),
    floor=st.floats(min_value=0, max_value=1),
)
def test_no_fitting_item_is_left_out_while_budget_stays_unused(
    sizes: list[int], kinds: list[str], relevances: list[float], budget: int, floor: float
) -> None:
    memories, episodes, procedures, relevance = [], [], [], {}
    for i, size in enumerate(sizes):
        text = " ".join(["banker"] * size)
        if kinds[i] == "m":
            memories.append(mem(f"m{i:02d}", text))
        elif kinds[i] == "e":
            episodes.append(episode(f"e{i:02d}", text))
        else:
            procedures.append(procedure(f"p{i:02d}", text, {"banker"}))
        relevance[f"{kinds[i]}{i:02d}"] = relevances[i] or 0.01
    result = assemble_context(
        scored(
            memories=memories,
            episodes=episodes,
            procedures=procedures,
            relevance=relevance,
            budget_tokens=budget,
            relevance_floor=floor,
        )
    )
    left = budget - result.pack_data["used_tokens"]
    assert left >= 0
    items = result.pack_data["items"]
    best = max(relevance.values())
    below_in = sum(
        i["tokens"] for i in items if i["included"] and relevance[i["id"]] < floor * best
    )
    for item in items:
        if item["included"] or item["drop_reason"] == "redundant":
            continue  # (an episode the memories taken already say is left out, fitting or not)
        # it did not fit when its turn came (its line, and its section's wrapper when it
        # would have been the first), and nothing was taken back since
        most = item["tokens"] + wrapper_tokens(SECTIONS[item["section"]])
        assert most > left
        if relevance[item["id"]] >= floor * best:
            # above the floor: its turn came before every item below it
            assert most > left + below_in


def test_an_episode_the_memories_taken_already_say_is_left_out() -> None:
    said = mem("m1", "Moved to Lisbon in May for the new banker job.")
    again = episode("ep_again", "Moved to Lisbon for the banker job")
    new = episode("ep_new", "Planned the garden: tomatoes, basil and a lemon tree.")
    result = assemble_context(
        scored(
            memories=[said],
            episodes=[again, new],
            relevance={"m1": 0.9, "ep_again": 0.85, "ep_new": 0.3},
            budget_tokens=2_000,
        )
    )
    pack = {item["id"]: item for item in result.pack_data["items"]}
    assert pack["m1"]["included"]
    assert not pack["ep_again"]["included"]
    assert pack["ep_again"]["drop_reason"] == "redundant"
    assert pack["ep_new"]["included"]  # says something the memories do not
    assert ("e", "ep_again") not in tags(result.text)


def test_an_episode_walked_before_the_memories_that_repeat_it_stays() -> None:
    # the walk decides in its order: the episode came first, nothing had said it yet
    said = mem("m1", "Moved to Lisbon in May for the new banker job.")
    first = episode("ep_first", "Moved to Lisbon for the banker job")
    result = assemble_context(
        scored(
            memories=[said],
            episodes=[first],
            relevance={"m1": 0.5, "ep_first": 0.9},
            budget_tokens=2_000,
        )
    )
    pack = {item["id"]: item for item in result.pack_data["items"]}
    assert pack["ep_first"]["included"] and pack["m1"]["included"]
