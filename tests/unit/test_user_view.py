"""The working set's ranking at once (numpy) picks what the assembler's own rules pick:
an assembly from the shortlist equals one from every item of the store."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlane.pipeline.assembly import shortlists
from memlane.pipeline.assembly.assembler import assemble_context
from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.errors import BudgetError
from memlane.pipeline.ranking.memory_table import MemoryTable
from memlane.pipeline.ranking.relevance import cosines
from memlane.pipeline.ranking.user_view import UserView
from memlane.pipeline.records import MemoryRecord
from tests.defaults import WEIGHTS
from tests.unit.assembly_helpers import NOW, episode, mem, procedure, request

WORDS = ["banker", "dance", "studio", "job", "paris", "tea", "garden", "piano", "exam", "dog"]
MODEL = "toy-4"


def vector(rng_words: list[str]) -> tuple[float, ...]:
    return tuple(float(sum(1 for w in rng_words if w == word)) for word in WORDS[:4])


def build(memories, episodes, procedures, *, by_component: bool = False) -> UserView:
    return UserView.build(
        memories=memories,
        memory_vectors=[(MODEL, m.embedding) for m in memories],
        episodes=episodes,
        episode_vectors=[None] * len(episodes),
        procedures=procedures,
        soul_blocks=[],
        model=MODEL,
        dim=4,
        by_component=by_component,
    )


item = st.tuples(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),  # words
    st.sampled_from(["candidate"] * 6 + ["pinned", "verified"]),
    st.floats(min_value=0, max_value=1),  # importance
    st.integers(min_value=0, max_value=400),  # age in days
    st.integers(min_value=1, max_value=30),  # confirmations
    st.sampled_from([None, -1, 1]),  # expires (days from now)
    st.booleans(),  # sensitive
)


@settings(max_examples=200, deadline=None)
@given(
    items=st.lists(item, min_size=8, max_size=40),
    n_episodes=st.integers(min_value=0, max_value=8),
    query=st.lists(st.sampled_from(WORDS), max_size=3),
    strategy=st.sampled_from(["scored", "important", "balanced"]),
    budget=st.integers(min_value=60, max_value=700),
    floor=st.sampled_from([0.0, 0.5, 0.8, 1.0]),
)
def test_the_shortlist_assembles_what_the_whole_store_assembles(
    items, n_episodes, query, strategy, budget, floor
) -> None:
    memories = []
    for i, (words, tier, importance, age, confirmations, expires, sensitive) in enumerate(items):
        text = " ".join(words)
        memories.append(
            mem(
                f"mem_{i:03d}",
                f"Note {i}: {text}.",
                tier=tier,
                importance=round(importance, 2),
                age_days=age,
                access_count=confirmations,
                keywords=keywords(text),
                embedding=vector(words),
                expires_at=None if expires is None else NOW + timedelta(days=expires),
                sensitive=sensitive and tier == "candidate",
                ref=i + 1,
            )
        )
    episodes = [
        episode(f"ep_{j:02d}", f"Talked about {WORDS[j]} and {WORDS[-j - 1]}.", age_days=j * 9)
        for j in range(n_episodes)
    ]
    procedures = [procedure("pr_0", "garden", {"garden", "water"})]
    view = build(memories, episodes, procedures)
    text = " ".join(query) or None
    relevance = (
        view.relevance(
            query_vector=vector(query),
            query_model=MODEL,
            query_terms=keywords(text),
            lexical_weight=0.3,
        )
        if text
        else None
    )
    common = dict(
        user_id="u1",
        query=text,
        strategy=strategy,
        budget_tokens=budget,
        now=NOW,
        weights=WEIGHTS,
        relevance_floor=floor,
    )
    relevance_by_id = (
        {} if relevance is None else dict(zip(view.corpus.ids, relevance.tolist(), strict=True))
    )
    try:
        everything = assemble_context(
            request(
                **common,
                memories=memories,
                episodes=episodes,
                procedures=procedures,
                relevance=relevance_by_id,
            )
        )
    except BudgetError:
        return  # pinned alone over the budget: no ranking to compare
    every = len(memories) + len(episodes) + len(procedures)
    # whole; cut to a count; cut where the estimated lines fill a share of the budget
    for limit, walk_tokens in ((every, None), (5, None), (every, budget / 8)):
        shortlist = shortlists.make(
            view,
            relevance,
            strategy=strategy,
            now=NOW,
            weights=WEIGHTS,
            half_life_hours=168.0,
            relevance_floor=floor,
            include_sensitive=False,
            limit=limit,
            walk_tokens=walk_tokens,
        )
        if limit >= every and walk_tokens is None:
            # nothing cut: the same context, byte for byte
            chosen = assemble_context(
                request(
                    **common,
                    memories=shortlist.memories,
                    episodes=shortlist.episodes,
                    procedures=shortlist.procedures,
                    relevance=shortlist.relevance,
                )
            )
            assert chosen.text == everything.text
            continue
        # cut: what is kept of the ranked part is the assembler's own best
        kept = {m.id for m in shortlist.memories if m.tier == "candidate"}
        kept |= {e.id for e in shortlist.episodes} | {p.id for p in shortlist.procedures}
        by_relevance = relevance is not None and strategy == "scored"
        assert kept_ranked(kept, shortlist.added, everything, by_relevance, floor)


def kept_ranked(
    kept: set[str], added: frozenset[str], everything, by_relevance: bool, floor: float
) -> bool:
    """The items `kept`, but those `added` out of order (pipeline.assembly.walk_rows), are the
    first of the assembler's walk order (read from the pack of an assembly of the whole
    store), for the ranked part of the store."""
    kept = kept - added
    items = [
        i
        for i in everything.pack_data["items"]
        if i["components"] is not None and (i["section"] != "memory" or i["tier"] == "candidate")
    ]
    if not items:
        return True  # nothing ranked: only excluded memories, kept for the pack
    if by_relevance:
        best = max(i["components"]["relevance"] for i in items)
        section = {"memory": 0, "episode": 1, "procedure": 2}

        def key(i):
            r, c = i["components"]["relevance"], i["components"]["composite"]
            if r >= floor * best:
                return (False, -c, 0.0, section[i["section"]], i["id"])
            return (True, -r, -c, section[i["section"]], i["id"])

        order = [i["id"] for i in sorted(items, key=key)]
        ranked = [k for k in kept if k in set(order)]
        return set(order[: len(ranked)]) == set(ranked)
    memories = sorted(
        (i for i in items if i["section"] == "memory"), key=lambda i: (-i["score"], i["id"])
    )
    order = [i["id"] for i in memories]
    ranked = [k for k in kept if k in set(order)]
    return set(order[: len(ranked)]) == set(ranked)


@settings(max_examples=60, deadline=None)
@given(
    words=st.lists(
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=5), min_size=4, max_size=20
    ),
    changed=st.sets(st.integers(min_value=0, max_value=19), max_size=6),
    removed=st.sets(st.integers(min_value=0, max_value=19), max_size=6),
    added=st.integers(min_value=0, max_value=4),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    by_component=st.booleans(),
)
def test_a_patched_view_ranks_as_one_built_from_scratch(
    words, changed, removed, added, query, by_component
):
    def record(i: int, text: list[str], importance: float = 0.5):
        return mem(
            f"mem_{i:03d}",
            " ".join(text),
            importance=importance,
            keywords=keywords(" ".join(text)),
            ref=i + 1,
        )

    before = {i: record(i, w) for i, w in enumerate(words)}
    after = dict(before)
    upserts = []
    for i in sorted(changed):
        if i in before:
            after[i] = record(i, [*words[i], "paris"], importance=0.9)
            upserts.append(after[i])
    for n in range(added):
        i = len(words) + n
        after[i] = record(i, ["garden", WORDS[n]])
        upserts.append(after[i])
    gone = [i for i in sorted(removed) if i in after and i < len(words) and i not in changed]
    for i in gone:
        del after[i]
    text = " ".join(query)
    base = build(list(before.values()), [], [], by_component=by_component)
    # ranked before its patch: what the base corpus computes once for every query must
    # not carry over to the patched one
    base.relevance(
        query_vector=vector(query),
        query_model=MODEL,
        query_terms=keywords(text),
        lexical_weight=0.3,
    )
    view = base.patch(
        [(m, (MODEL, m.embedding)) for m in upserts],
        [f"mem_{i:03d}" for i in gone],
        [],
    )
    fresh = build(sorted(after.values(), key=lambda m: m.id), [], [], by_component=by_component)
    scores = {}
    exact = {}  # by component, a row's cosine does not depend on where the row is
    for each in (view, fresh):
        rel = each.relevance(
            query_vector=vector(query),
            query_model=MODEL,
            query_terms=keywords(text),
            lexical_weight=0.3,
        )
        live = each.corpus.live
        scores[id(each)] = {
            each.corpus.ids[i]: round(float(rel[i]), 9) for i in range(len(rel)) if live[i]
        }
        cosine = cosines(each.corpus, vector(query), MODEL)
        exact[id(each)] = {each.corpus.ids[i]: cosine[i] for i in range(len(rel)) if live[i]}
        assert {m.id for m in each.memories} == {m.id for m in after.values()}
    assert scores[id(view)] == scores[id(fresh)]
    assert not by_component or exact[id(view)] == exact[id(fresh)]
    picks = [
        shortlists.make(
            each,
            each.relevance(
                query_vector=vector(query),
                query_model=MODEL,
                query_terms=keywords(text),
                lexical_weight=0.3,
            ),
            strategy="scored",
            now=NOW,
            weights=WEIGHTS,
            half_life_hours=168.0,
            relevance_floor=0.8,
            include_sensitive=False,
            limit=5,
        )
        for each in (view, fresh)
    ]
    assert picks[0].relevance == picks[1].relevance


def test_the_walk_ends_where_the_estimated_lines_fill_the_tokens_asked() -> None:
    # 300 memories ranked by importance, each line about 18 + 60 / 4 = 33 tokens
    memories = [
        mem(f"mem_{i:03d}", f"Fact {i:03d}: " + "word " * 10, importance=1 - i / 1000, ref=i + 1)
        for i in range(300)
    ]
    view = build(memories, [], [])
    budget = 2000
    shortlist = shortlists.make(
        view,
        None,
        strategy="important",
        now=NOW,
        weights=WEIGHTS,
        half_life_hours=168.0,
        relevance_floor=0.8,
        include_sensitive=False,
        limit=shortlists.size(view, budget, "default", 1.5),
        walk_tokens=1.5 * budget,
    )
    line = 18 + len(memories[0].content) / 4
    expected = math.ceil(1.5 * budget / line)
    assert [m.id for m in shortlist.memories] == [m.id for m in memories[:expected]]
    # the walk went far enough: the same context as from every memory
    common = dict(user_id="u1", query=None, strategy="important", budget_tokens=budget, now=NOW)
    whole = assemble_context(request(**common, memories=memories))
    cut = assemble_context(request(**common, memories=shortlist.memories))
    assert cut.text == whole.text
    assert 0 < len(whole.included_memory_ids) < expected


def test_a_loaded_view_builds_only_the_records_an_assembly_reads() -> None:
    # a table whose records count how often each is built
    memories = [
        mem(f"mem_{i:03d}", f"Fact {i:03d}: " + "word " * 10, importance=1 - i / 1000, ref=i + 1)
        for i in range(300)
    ]
    built: list[int] = []

    def record(row: int) -> MemoryRecord:
        built.append(row)
        return memories[row]

    table = replace(
        MemoryTable.of_records(memories, [None] * 300, model=None, dim=None), record=record
    )
    view = UserView.load(
        memories=table,
        episodes=[],
        episode_vectors=[],
        procedures=[],
        soul_blocks=[],
        model=None,
        dim=None,
    )
    assert built == []  # loading builds no record
    ranked = dict(
        strategy="important",
        now=NOW,
        weights=WEIGHTS,
        half_life_hours=168.0,
        relevance_floor=0.8,
        include_sensitive=False,
        limit=20,
    )
    first = shortlists.make(view, None, **ranked)
    assert [m.id for m in first.memories] == [m.id for m in memories[:20]]
    assert sorted(built) == list(range(20))
    assert view.records.made == 20  # what the working set's bound counts beside the view
    # read again, and from a patched view: each record was built once
    patched = view.patch([(memories[5].model_copy(update={"importance": 0.0}), None)], [], [])
    again = shortlists.make(patched, None, **ranked)
    assert [m.id for m in again.memories] == [m.id for m in memories[:21] if m.id != "mem_005"]
    assert shortlists.make(view, None, **ranked) == first
    assert sorted(built) == list(range(21))
    assert view.records[5] is memories[5]  # the patch left the view it came from as it was


def test_a_margin_of_zero_lets_the_assembler_walk_every_item() -> None:
    memories = [mem(f"mem_{i:03d}", ref=i + 1) for i in range(120)]
    view = build(memories, [], [])
    assert shortlists.size(view, 100, "default", 0) == len(memories)
    assert shortlists.size(view, 100, "default", 1.5) == 50  # MIN_WALK
    assert shortlists.size(view, 4000, "compact", 1.5) == 751


def test_the_pack_names_the_excluded_memories_the_walk_would_have_reached() -> None:
    memories = [
        mem(
            f"mem_{i:03d}",
            f"Fact {i:03d}: " + "word " * 10,
            importance=1 - i / 1000,
            sensitive=i % 10 == 0,
            ref=i + 1,
        )
        for i in range(300)
    ]
    view = build(memories, [], [])
    shortlist = shortlists.make(
        view,
        None,
        strategy="important",
        now=NOW,
        weights=WEIGHTS,
        half_life_hours=168.0,
        relevance_floor=0.8,
        include_sensitive=False,
        limit=shortlists.size(view, 2000, "default", 1.5),
        walk_tokens=3000,
    )
    walked = [m for m in shortlist.memories if not m.sensitive]
    named = [m for m in shortlist.memories if m.sensitive]
    last = int(walked[-1].id.removeprefix("mem_"))
    assert len(walked) == math.ceil(3000 / (18 + len(memories[0].content) / 4))
    assert [m.id for m in named] == [f"mem_{i:03d}" for i in range(0, last, 10)]
    common = dict(user_id="u1", query=None, strategy="important", budget_tokens=2000, now=NOW)
    pack = assemble_context(request(**common, memories=shortlist.memories)).pack_data
    dropped = {i["id"] for i in pack["items"] if i["drop_reason"] == "sensitive"}
    assert dropped == {m.id for m in named}


@pytest.mark.parametrize("strategy", ["scored", "important"])
def test_an_empty_view_has_an_empty_shortlist(strategy) -> None:
    # a user erased or never written: nothing to rank, and no maximum of nothing
    view = build([], [], [], by_component=True)
    shortlist = shortlists.make(
        view,
        np.zeros(0),
        strategy=strategy,
        now=NOW,
        weights=WEIGHTS,
        half_life_hours=168.0,
        relevance_floor=0.8,
        include_sensitive=False,
        limit=50,
    )
    assert (shortlist.memories, shortlist.episodes, len(shortlist.rest)) == ([], [], 0)
