"""A working set's assembly includes exactly what walking every ranked item includes
(pipeline.assembly.exact_walk): the same context and the same decisions in its pack, whatever
the walk margin, on users built to make a cut walk miss (long items ranked first, many
short ones far down, tight budgets, near-ties, items out of id order)."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import numpy as np
import tiktoken
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from memlane.pipeline.assembly import exact_walk, shortlists, walk_rows
from memlane.pipeline.assembly.exact_walk import assemble_from_view
from memlane.pipeline.assembly.tokens import get_encoding
from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.errors import BudgetError
from memlane.pipeline.ranking.user_view import UserView
from tests.defaults import WEIGHTS
from tests.unit.assembly_helpers import NOW, episode, mem, procedure, request, soul
from tests.unit.test_user_view import MODEL, WORDS, vector

P50K = get_encoding("p50k_base")
# a pattern no bound is known for (every run is its own piece): the walk goes on over all
WORDY = tiktoken.Encoding(
    "wordy", pat_str=r"\S+|\s+", mergeable_ranks=P50K._mergeable_ranks, special_tokens={}
)
ENCODINGS = [get_encoding("o200k_base"), get_encoding("cl100k_base"), P50K, WORDY]


item = st.tuples(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),  # words
    st.integers(min_value=0, max_value=30),  # filler words: long or short lines
    st.sampled_from(["candidate"] * 10 + ["pinned", "verified"]),
    st.sampled_from([0.1, 0.5, 0.5, 0.7, 0.9]),  # importance: many ties
    st.integers(min_value=0, max_value=10**7),  # age in seconds, to the microsecond below
    st.integers(min_value=0, max_value=20),  # confirmations
    st.sampled_from([None, None, None, -1, 1]),  # expires (days from now)
    st.booleans(),  # sensitive
)


def build(items, n_episodes: int, shuffle: list[int], asking: frozenset[int] = frozenset()):
    memories = []
    for i, (words, filler, tier, importance, age, confirmations, expires, sensitive) in enumerate(
        items
    ):
        text = " ".join(words)
        moment = NOW - timedelta(seconds=age, microseconds=age % 997)
        memories.append(
            mem(
                # ids out of row order: the assembler breaks ties by id
                f"mem_{shuffle[i % len(shuffle)]:02d}_{i:03d}",
                f"{text} " + "and so on " * filler + ("?" if i in asking else ""),
                tier=tier,
                importance=importance,
                created_at=moment,
                confirmed_at=moment,
                access_count=confirmations,
                keywords=keywords(text),
                embedding=vector(words),
                expires_at=None if expires is None else NOW + timedelta(days=expires),
                sensitive=sensitive and tier == "candidate",
                ref=i + 1,
            )
        )
    episodes = [
        episode(f"ep_{j:02d}", f"Talked about {WORDS[j % 10]}.", age_days=j * 3)
        for j in range(n_episodes)
    ]
    procedures = [
        procedure("pr_0", "garden", {"garden", "water"}),
        procedure("pr_1", "dance class", {"dance", "studio"}),
    ]
    view = UserView.build(
        memories=memories,
        memory_vectors=[(MODEL, m.embedding) for m in memories],
        episodes=episodes,
        episode_vectors=[None] * len(episodes),
        procedures=procedures,
        soul_blocks=[soul()],
        model=MODEL,
        dim=4,
    )
    return view


def decisions(result) -> dict:
    pack = result.pack_data
    return {
        "text": result.text,
        "included": result.included_memory_ids,
        "used": pack["used_tokens"],
        "events": pack["events"],
        "items": [i for i in pack["items"] if i["included"]],
    }


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=st.lists(item, min_size=5, max_size=90),
    n_episodes=st.integers(min_value=0, max_value=12),
    shuffle=st.permutations(list(range(10))),
    query=st.lists(st.sampled_from(WORDS), max_size=3),
    strategy=st.sampled_from(["scored", "important", "balanced"]),
    budget=st.integers(min_value=120, max_value=700),
    floor=st.sampled_from([0.0, 0.5, 0.8, 1.0]),
    style=st.sampled_from(["default", "compact"]),
    encoding=st.sampled_from(ENCODINGS),
    margin=st.sampled_from([0.05, 0.3, 1.5]),
    min_walk=st.sampled_from([1, 3, 50]),
    chunk=st.sampled_from([1, 2, 32]),  # the walk on past the shortlist, ordered so
    # relevance as drawn, not from the query: outside [0, 1] and tied too
    drawn=st.none()
    | st.lists(
        st.sampled_from([-0.1, 0.0, 0.3, 0.79, 0.8, 1.0, 1.2]) | st.floats(0, 1),
        min_size=120,
        max_size=120,
    ),
    # memory i asks and memory j is said after it (assembly rule 4's replies)
    said=st.none()
    | st.dictionaries(st.integers(0, 89), st.integers(0, 89), min_size=3, max_size=60),
)
def test_the_exact_walk_decides_as_a_walk_of_every_item(
    items,
    n_episodes,
    shuffle,
    query,
    strategy,
    budget,
    floor,
    style,
    encoding,
    margin,
    min_walk,
    chunk,
    drawn,
    said,
) -> None:
    view = build(items, n_episodes, shuffle, frozenset(said or ()))
    memory_ids = [m.id for m in view.memories]
    by_row = {i: memory_ids[i] for i in range(len(memory_ids))}
    replies = {by_row[i]: by_row.get(j) for i, j in (said or {}).items() if i in by_row}

    def said_next(askers):
        assert set(askers) <= set(memory_ids)
        return {a: replies[a] for a in askers if a in replies}

    def assemble_from_view(*args, **kwargs):
        if said is not None:
            kwargs["said_next"] = said_next
            args[0].replies.clear()  # each walk asks the store anew
        return exact_walk.assemble_from_view(*args, **kwargs)

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
    if text and drawn is not None:
        relevance = np.array(drawn[: len(view.corpus)])
    ask = request(
        query=text,
        strategy=strategy,
        budget_tokens=budget,
        weights=WEIGHTS,
        relevance_floor=floor,
        style=style,
        encoding=encoding,
        retrieval_mode="working-set",
    )
    try:
        every = assemble_from_view(view, ask, relevance, walk_margin=0)
    except BudgetError:
        return  # soul and pinned alone over the budget: nothing ranked to compare
    with (
        mock.patch.object(shortlists, "MIN_WALK", min_walk),
        mock.patch.object(walk_rows, "FIRST_CHUNK", chunk),
    ):
        exact = assemble_from_view(view, ask, relevance, walk_margin=margin)
    assert decisions(exact) == decisions(every)
    event(f"replies walked: {any(i['reply_to'] for i in every.pack_data['items'])}")
    # what it considered, it decided as the walk of every item did
    considered = {i["id"]: i for i in every.pack_data["items"]}
    assert all(considered[i["id"]] == i for i in exact.pack_data["items"])
    # the walk gone on past the shortlist (pipeline.assembly.walk_on) is the assembly of the
    # widened shortlist anew, pack and all
    with (
        mock.patch.object(shortlists, "MIN_WALK", min_walk),
        mock.patch.object(walk_rows, "FIRST_CHUNK", chunk),
        mock.patch.object(exact_walk, "walk_on", lambda *_, **__: None),
    ):
        anew = assemble_from_view(view, ask, relevance, walk_margin=margin)
    assert (exact.text, exact.pack_data, exact.room) == (anew.text, anew.pack_data, anew.room)
    # every line counted ahead (Memlane.warm) changes no decision
    exact_walk.count_lines(view, encoding, style)
    with (
        mock.patch.object(shortlists, "MIN_WALK", min_walk),
        mock.patch.object(walk_rows, "FIRST_CHUNK", chunk),
    ):
        counted = assemble_from_view(view, ask, relevance, walk_margin=margin)
    assert (counted.text, counted.pack_data) == (exact.text, exact.pack_data)
    assert counted.room == exact.room


def test_lines_counted_ahead_are_each_lines_tokens_and_counted_once() -> None:
    items = [([WORDS[i % 10]], i % 7, "candidate", 0.5, i, 0, None, False) for i in range(40)]
    view = build(items, 3, list(range(10)))
    encoding = get_encoding("o200k_base")
    assert exact_walk.count_lines(view, encoding, "default") == len(view.corpus)
    counts = view.line_tokens[(encoding, "default")]
    for row in range(len(view.corpus)):
        line = exact_walk._counted_line(view, row, "default")
        assert counts[row] == len(encoding.encode_ordinary(line))
    assert exact_walk.count_lines(view, encoding, "default") == 0  # kept: none again
    assert (encoding, "compact") not in view.line_tokens  # another style is its own
    assert exact_walk.count_lines(view, encoding, "compact") == len(view.corpus)


def test_a_short_item_far_down_the_ranking_fills_the_last_tokens() -> None:
    # 60 long memories ranked first by importance, then one short one at the very bottom
    items = [(["paris"], 25, "candidate", 0.9 - i / 1000, i, 0, None, False) for i in range(60)]
    items.append((["tea"], 0, "candidate", 0.1, 10**6, 0, None, False))
    view = build(items, 0, list(range(10)))
    ask = request(strategy="important", budget_tokens=700, retrieval_mode="working-set")
    every = assemble_from_view(view, ask, None, walk_margin=0)
    with mock.patch.object(shortlists, "MIN_WALK", 5):
        exact = assemble_from_view(view, ask, None, walk_margin=0.3)
    last = view.corpus.ids[60]
    assert last in every.included_memory_ids  # the premise: it fits what the long ones left
    assert exact.text == every.text
    # the first walk stopped long before it: the pack lists far fewer of the 61
    assert len(exact.pack_data["items"]) < len(every.pack_data["items"])


def test_the_first_walk_holds_the_most_relevant_item_and_a_memory() -> None:
    # the assembler's floor is relative to the best relevance it sees, and its
    # no_candidates_fit event to the memories it sees: both must be walked first
    items = [(["paris"], 0, "candidate", 0.9, i, 0, None, False) for i in range(20)]
    items.append((["tea"], 0, "candidate", 0.0, 10**7, 0, None, False))
    view = build(items, 8, list(range(10)))
    relevance = np.zeros(len(view.corpus))
    relevance[:20] = 0.9
    relevance[20] = 1.0  # the most relevant, ranked last by its composite
    relevance[21:29] = 0.95  # the episodes
    ranked = dict(now=NOW, weights=WEIGHTS, half_life_hours=168.0, include_sensitive=False)
    with mock.patch.object(shortlists, "MIN_WALK", 1):
        shortlist = shortlists.make(
            view, relevance, strategy="scored", relevance_floor=0.9, limit=3, **ranked
        )
        assert view.corpus.ids[20] in shortlist.added
        assert view.corpus.ids[20] in {m.id for m in shortlist.memories}
        # now only the episodes are above the floor: the three best are walked, and the
        # best memory with them
        relevance[20] = 0.5
        shortlist = shortlists.make(
            view, relevance, strategy="scored", relevance_floor=0.99, limit=3, **ranked
        )
    assert len(shortlist.episodes) == 3
    assert [m.id for m in shortlist.memories] == [view.corpus.ids[0]]
