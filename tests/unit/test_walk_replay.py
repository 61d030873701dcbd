"""bench.walk_replay: its rank-order replay takes what the assembler takes (so the other
rules are compared with the real walk), and each other rule does what it says."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

import pytest

from bench import walk_replay as replay
from memlane.pipeline.assembly.assembler import assemble_context
from tests.defaults import RELEVANCE_FLOOR, WEIGHTS
from tests.unit.assembly_helpers import ENCODING, episode, mem, request

WORDS = [
    "tea",
    "garden",
    "river",
    "stone",
    "lamp",
    "violin",
    "harbour",
    "pepper",
    "orbit",
    "candle",
]


def _pool(seed: int) -> tuple[list, list, dict[str, float]]:
    rng = random.Random(seed)
    memories = [
        mem(
            f"m{k:02d}",
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 60))) + ".",
            importance=rng.choice((0.3, 0.5, 0.9)),
            age_days=rng.uniform(0.5, 60),
            tier="verified" if k in (3, 17) else "candidate",  # taken before the pool
        )
        for k in range(30)
    ]
    # some episodes quote a memory (said again once it is taken), some say something new
    episodes = [
        episode(f"e{k}", memories[k].content if k % 2 else f"Planned the {WORDS[k]} trip.")
        for k in range(6)
    ]
    relevance = {m.id: round(rng.uniform(0.05, 1.0), 3) for m in memories}
    relevance |= {e.id: round(rng.uniform(0.05, 1.0), 3) for e in episodes}
    return memories, episodes, relevance


def _items(pack: dict, texts: dict[str, str], tier: str) -> list[replay.Item]:
    return [
        replay.Item(
            id=i["id"],
            section=i["section"],
            relevance=i["components"]["relevance"],
            composite=i["score"],
            tokens=i["tokens"],
            text=texts[i["id"]],
        )
        for i in pack["items"]
        if i["section"] in ("memory", "episode")
        and (i["tier"] or "candidate") == tier
        and (tier == "candidate" or i["included"])
    ]


@pytest.mark.parametrize(("seed", "budget"), list(itertools.product(range(8), (150, 400, 900))))
def test_the_rank_order_replay_takes_what_the_assembler_takes(seed: int, budget: int) -> None:
    memories, episodes, relevance = _pool(seed)
    result = assemble_context(
        request(
            query="tea",
            strategy="scored",
            weights=WEIGHTS,
            budget_tokens=budget,
            memories=memories,
            episodes=episodes,
            relevance=relevance,
            retrieval_mode="working-set",
        )
    )
    texts = {m.id: m.content for m in memories} | {e.id: e.summary for e in episodes}
    first = _items(result.pack_data, texts, "verified")
    items = _items(result.pack_data, texts, "candidate")
    room = replay.Room.of(budget, "u1", ENCODING).after(first)
    taken = replay.rank_order(items, room, RELEVANCE_FLOOR)
    included = {i["id"] for i in result.pack_data["items"] if i["included"]}
    assert first  # the premise: memories went in before the pool
    assert {i.id for i in [*first, *taken]} == included
    assert any(i["drop_reason"] == "over_budget" for i in result.pack_data["items"])


def _item(item_id: str, relevance: float, tokens: int, composite: float = 0.5, text: str = ""):
    return replay.Item(item_id, "memory", relevance, composite, tokens, text or item_id)


ROOM = replay.Room(lines=100, wrapper={"memory": 4, "episode": 4, "procedure": 4})


def test_value_per_token_takes_short_lines_first_within_the_floor_and_rank_order_does_not() -> None:
    long = _item("long", 1.0, 60, composite=0.9)
    short = [_item("s1", 0.9, 30, composite=0.5), _item("s2", 0.85, 30, composite=0.4)]
    below = _item("low", 0.3, 10)
    pool = [long, *short, below]
    assert [i.id for i in replay.rank_order(pool, ROOM, 0.8)] == ["long", "s1"]
    assert [i.id for i in replay.value_per_token(pool, ROOM, 0.8)] == ["s1", "s2", "low"]


def test_stop_at_skip_fills_nothing_after_the_first_line_that_does_not_fit() -> None:
    pool = [_item("a", 1.0, 60), _item("b", 0.7, 50), _item("c", 0.6, 20)]
    assert [i.id for i in replay.rank_order(pool, ROOM, 0.8)] == ["a", "c"]
    assert [i.id for i in replay.stop_at_skip(pool, ROOM, 0.8)] == ["a"]


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("weighted", [False, True])
def test_the_knapsack_finds_the_most_valuable_set_that_fits(seed: int, weighted: bool) -> None:
    rng = random.Random(seed)
    pool = [_item(f"i{k}", round(rng.uniform(0.1, 1), 2), rng.randint(5, 50)) for k in range(9)]
    capacity = ROOM.lines - ROOM.wrapper["memory"]

    def value(chosen: tuple[replay.Item, ...]) -> float:
        return sum(i.relevance * (i.tokens if weighted else 1) for i in chosen)

    best = max(
        value(chosen)
        for n in range(len(pool) + 1)
        for chosen in itertools.combinations(pool, n)
        if sum(i.tokens for i in chosen) <= capacity
    )
    taken = replay.knapsack(pool, ROOM, 0.8, weighted=weighted)
    assert sum(i.tokens for i in taken) <= capacity
    assert value(tuple(taken)) == pytest.approx(best)


def test_a_line_that_does_not_fit_goes_in_cut_to_the_sentences_that_match() -> None:
    text = "Ana: We moved in May. The garden has tomatoes now. Work is busy."
    cut = replay.trimmed(text, {"garden"})
    assert cut == "Ana: … The garden has tomatoes now."
    assert replay.trimmed(text, {"violin"}) is None  # nothing matches
    assert replay.trimmed("Ana: The garden grows.", {"garden"}) is None  # all of it matches
    full = _item("long", 1.0, 40, text=text)  # 19 tokens of markup, 21 of text
    first = _item("first", 1.0, 60, composite=0.9)
    taken = replay.trim_to_fit([first, full], ROOM, 0.8, query_words={"garden"}, encoding=ENCODING)
    assert [i.text for i in taken] == ["first", cut]
    assert sum(i.tokens for i in taken) + ROOM.wrapper["memory"] <= ROOM.lines


def test_missing_evidence_is_told_where_it_stood_in_the_walk() -> None:
    pool = [
        _item("a", 1.0, 60, text="alpha"),
        _item("ev", 0.7, 50, text="the evidence"),
        _item("c", 0.6, 20, text="filler"),
        _item("d", 0.5, 20, text="the tail"),
    ]
    assert replay.fate("the evidence", pool, {"a", "c"}, 0.8) == "skipped for room"
    assert replay.fate("the tail", pool, {"a", "c"}, 0.8) == "past the last taken"
    assert replay.fate("elsewhere", pool, {"a", "c"}, 0.8) == "not walked"


def test_the_line_said_next_is_walked_right_after_the_first_line_taken() -> None:
    pool = [_item("q", 1.0, 30), _item("b", 0.7, 40), _item("c", 0.6, 20)]
    reply = _item("reply", 0.0, 30)
    taken = replay.with_next(pool, ROOM, 0.8, next_of={"q": reply, "b": _item("x", 0.0, 5)})
    assert [i.id for i in taken] == ["q", "reply", "c"]  # b no longer fits; x follows b only
    # a reply in the pool is walked once, at its new place
    pool_reply = _item("c", 0.6, 20)
    taken = replay.with_next(pool, ROOM, 0.8, next_of={"q": pool_reply})
    assert [i.id for i in taken] == ["q", "c", "b"]
    assert replay.with_next(pool, ROOM, 0.8, next_of={}) == replay.rank_order(pool, ROOM, 0.8)


def test_replies_at_the_floor_never_displace_an_item_above_it() -> None:
    # q and b are above the floor (0.8 × 1.0), c below; q's reply would fit only in b's room
    pool = [_item("q", 1.0, 30, 0.9), _item("b", 0.85, 40, 0.8), _item("c", 0.6, 20)]
    next_of = {"q": _item("reply", 0.0, 30), "b": _item("b-reply", 0.0, 10)}
    assert [i.id for i in replay.with_next(pool, ROOM, 0.8, next_of=next_of)] == [
        "q",
        "reply",
        "c",
    ]
    taken = replay.replies_at_floor(pool, ROOM, 0.8, next_of=next_of)
    assert [i.id for i in taken] == ["q", "b", "b-reply"]  # the replies in the order of their
    # lines, q's no longer fitting; c, below the floor, comes after the replies: no room left
    first = replay.reply_of_first_at_floor(pool, ROOM, 0.8, next_of=next_of)
    assert [i.id for i in first] == ["q", "b", "c"]  # q's reply did not fit; b's is not walked


def test_a_reply_is_walked_once_and_only_after_lines_that_ask_when_so_told() -> None:
    pool = [
        _item("q", 1.0, 20, 0.9, text="Ana: Where did you go?"),
        _item("s", 0.9, 20, 0.8, text="Ana: I went home."),
        _item("low", 0.3, 10),
        _item("lower", 0.2, 10),
    ]
    next_of = {"q": _item("low", 0.3, 10), "s": _item("comment", 0.0, 10)}
    taken = replay.replies_at_floor(pool, ROOM, 0.8, next_of=next_of)
    assert [i.id for i in taken] == ["q", "s", "low", "comment", "lower"]  # low walked once
    asked = replay.replies_to_questions_at_floor(pool, ROOM, 0.8, next_of=next_of)
    assert [i.id for i in asked] == ["q", "s", "low", "lower"]
    # the reply of an item above the floor is that item: already walked at its own place
    assert replay.replies_at_floor(pool, ROOM, 0.8, next_of={"q": pool[1]}) == replay.rank_order(
        pool, ROOM, 0.8
    )


def test_replies_walked_last_displace_nothing() -> None:
    pool = [
        _item("q", 1.0, 30, 0.9, text="Ana: Where did you go?"),
        _item("b", 0.6, 40),
        _item("c", 0.5, 10),
    ]
    next_of = {"q": _item("reply", 0.0, 10), "c": _item("c-reply", 0.0, 5)}
    at_floor = replay.replies_to_questions_at_floor(pool, ROOM, 0.8, next_of=next_of)
    assert [i.id for i in at_floor] == ["q", "reply", "b", "c"]
    last = replay.replies_to_questions_last(pool, ROOM, 0.8, next_of=next_of)
    assert [i.id for i in last] == ["q", "b", "c", "reply"]  # c asks nothing: no c-reply
    tight = replace(ROOM, lines=84)  # 80 for lines: q, b and c fill it
    assert replay.replies_to_questions_last(pool, tight, 0.8, next_of=next_of) == (
        replay.rank_order(pool, tight, 0.8)
    )
