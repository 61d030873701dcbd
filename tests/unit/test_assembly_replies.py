"""Replies to questions at the floor (assembly rule 4, issue 39): once every item at or
above the relevance floor has been walked, the memory said next after each line taken
that asks comes in, before anything below the floor."""

from __future__ import annotations

from datetime import timedelta

from memlane.pipeline.assembly.assembler import assemble_context
from memlane.pipeline.assembly.replies import askers
from memlane.pipeline.records import MemoryRecord
from tests.unit.assembly_helpers import NOW, episode, mem, request, tokens

QUESTION = mem("q", "Melanie: What did you paint last week, Caroline?")
ANSWER = mem("a", "Caroline: A sunset over the lake, with the two ducks.")


def scored(**changes: object):
    return request(strategy="scored", query="what did Caroline paint?", **changes)


def order_of(result) -> list[str]:
    """The ids the pack walked, in the walk's order (the candidates' pack order)."""
    return [i["id"] for i in result.pack_data["items"] if i["section"] == "memory"]


def test_the_reply_to_a_question_taken_comes_after_the_floor_and_before_the_rest() -> None:
    below = [mem(f"b{i}", f"Small talk number {i}, nothing more.") for i in range(3)]
    above = mem("m1", "Caroline paints on weekends.")
    result = assemble_context(
        scored(
            memories=[QUESTION, above, *below],
            relevance={"q": 0.9, "m1": 0.85, **{m.id: 0.3 for m in below}},
            replies={"q": ANSWER},
            budget_tokens=1000,
        )
    )
    pack = {i["id"]: i for i in result.pack_data["items"]}
    assert pack["a"]["included"] and pack["a"]["reply_to"] == "q"
    assert pack["q"]["reply_to"] is None and pack["b0"]["reply_to"] is None
    # the reply was not a candidate read: its relevance is none
    assert pack["a"]["components"]["relevance"] == 0.0
    assert order_of(result) == ["q", "m1", "a", "b0", "b1", "b2"]
    assert result.text.index(ANSWER.content) < result.text.index(below[0].content)


def test_a_reply_never_displaces_an_item_at_or_above_the_floor() -> None:
    # room for the question and one more line: the item above the floor keeps it
    above = mem("m1", "Caroline paints on weekends, mostly landscapes and lakes.")
    full = assemble_context(
        scored(
            memories=[QUESTION, above],
            relevance={"q": 0.9, "m1": 0.85},
            replies={"q": ANSWER},
            budget_tokens=1000,
        )
    )
    budget = full.pack_data["used_tokens"] - next(
        i["tokens"] for i in full.pack_data["items"] if i["id"] == "a"
    )
    tight = assemble_context(
        scored(
            memories=[QUESTION, above],
            relevance={"q": 0.9, "m1": 0.85},
            replies={"q": ANSWER},
            budget_tokens=budget,
        )
    )
    pack = {i["id"]: i for i in tight.pack_data["items"]}
    assert pack["q"]["included"] and pack["m1"]["included"]
    assert not pack["a"]["included"] and pack["a"]["drop_reason"] == "over_budget"


def test_a_reply_below_the_floor_is_moved_up_not_walked_twice() -> None:
    below = [mem(f"b{i}", f"Small talk number {i}, nothing more.") for i in range(3)]
    result = assemble_context(
        scored(
            memories=[QUESTION, ANSWER, *below],
            relevance={"q": 0.9, "a": 0.1, **{m.id: 0.3 for m in below}},
            replies={"q": ANSWER},
            budget_tokens=1000,
        )
    )
    assert order_of(result) == ["q", "a", "b0", "b1", "b2"]
    items = [i for i in result.pack_data["items"] if i["id"] == "a"]
    assert len(items) == 1 and items[0]["reply_to"] == "q"
    assert items[0]["components"]["relevance"] == 0.1


def test_no_reply_when_the_line_does_not_ask_or_was_not_taken() -> None:
    statement = mem("q", "Melanie: You painted last week, Caroline.")
    result = assemble_context(
        scored(memories=[statement], relevance={"q": 0.9}, replies={"q": ANSWER})
    )
    assert "a" not in {i["id"] for i in result.pack_data["items"]}
    # a question too long for the budget is not taken: its reply is not walked
    long_question = mem("q", "Melanie: " + "what did you paint? " * 200)
    result = assemble_context(
        scored(
            memories=[long_question],
            relevance={"q": 0.9},
            replies={"q": ANSWER},
            budget_tokens=300,
        )
    )
    assert "a" not in {i["id"] for i in result.pack_data["items"]}


def test_a_reply_above_the_floor_is_walked_in_its_place_once() -> None:
    result = assemble_context(
        scored(
            memories=[QUESTION, ANSWER],
            relevance={"q": 0.9, "a": 0.88},
            replies={"q": ANSWER},
        )
    )
    items = [i for i in result.pack_data["items"] if i["id"] == "a"]
    assert len(items) == 1 and items[0]["included"] and items[0]["reply_to"] is None


def reply_kept_out(reply: MemoryRecord, **changes: object) -> bool:
    result = assemble_context(
        scored(memories=[QUESTION], relevance={"q": 0.9}, replies={"q": reply}, **changes)
    )
    return reply.id not in {i["id"] for i in result.pack_data["items"]}


def test_a_reply_passes_every_filter_of_a_memory() -> None:
    assert not reply_kept_out(ANSWER)
    assert reply_kept_out(mem("a", ANSWER.content, status="deleted"))
    assert reply_kept_out(mem("a", ANSWER.content, status="superseded"))
    assert reply_kept_out(mem("a", ANSWER.content, sensitive=True))
    assert not reply_kept_out(mem("a", ANSWER.content, sensitive=True), include_sensitive=True)
    assert reply_kept_out(mem("a", ANSWER.content, expires_at=NOW - timedelta(hours=1)))
    assert reply_kept_out(mem("a", ANSWER.content, user="u2"))
    assert reply_kept_out(mem("a", ANSWER.content, agent_id="other"))
    assert not reply_kept_out(mem("a", ANSWER.content, agent_id="me"), agent_id="me")
    # pinned and verified memories went in by rules 2 and 3, never as a reply
    assert reply_kept_out(mem("a", ANSWER.content, tier="verified"))


def test_the_reply_of_a_reply_and_each_reply_once() -> None:
    # q asks, a answers and asks again, b answers a; two questions with one reply
    a = mem("a", "Caroline: A sunset. Why do you ask?")
    b = mem("b", "Melanie: I want one for my hall.")
    q2 = mem("q2", "Melanie: And the lake, was it the one by your house?")
    result = assemble_context(
        scored(
            memories=[QUESTION, q2],
            relevance={"q": 0.9, "q2": 0.89},
            replies={"q": a, "a": b, "q2": a},
        )
    )
    pack = [i for i in result.pack_data["items"] if i["section"] == "memory"]
    # replies of the lines taken at or above the floor only: b (a's reply) is not walked
    assert [(i["id"], i["reply_to"]) for i in pack] == [("q", None), ("q2", None), ("a", "q")]


def test_strategies_other_than_scored_and_no_query_walk_no_reply() -> None:
    for changes in ({"strategy": "important"}, {"query": None}):
        result = assemble_context(
            request(
                **{"strategy": "scored", "query": "what did Caroline paint?", **changes},
                memories=[QUESTION],
                relevance={"q": 0.9},
                replies={"q": ANSWER},
            )
        )
        assert "a" not in {i["id"] for i in result.pack_data["items"]}


def test_replies_are_deterministic_and_the_pack_model_holds_them() -> None:
    below = [mem(f"b{i}", f"Small talk number {i}, nothing more.") for i in range(5)]
    kwargs = {
        "memories": [QUESTION, *below],
        "relevance": {"q": 0.9, **{m.id: 0.3 for m in below}},
        "replies": {"q": ANSWER},
        "episodes": [episode("e1", "Talked about painting.")],
    }
    first = assemble_context(scored(**kwargs))
    again = assemble_context(scored(**{**kwargs, "memories": kwargs["memories"][::-1]}))
    assert first.text == again.text and first.pack_data == again.pack_data
    assert first.pack.items[[i.id for i in first.pack.items].index("a")].reply_to == "q"
    assert tokens(first.text) == first.pack_data["used_tokens"]


def test_the_askers_are_the_candidates_that_ask_at_or_above_the_floor() -> None:
    low = mem("low", "Did you ever paint before, Caroline?")
    pinned = mem("pin", "Which lake was it?", tier="pinned")
    statement = mem("s", "Caroline paints on weekends.")
    relevance = {"q": 0.9, "low": 0.1, "pin": 0.95, "s": 0.8}
    memories = [statement, low, pinned, QUESTION]
    # floor 0.5 of the best candidate (0.9): the pinned one is not a candidate
    assert askers(memories, relevance, 0.5) == ["q"]
    assert askers(memories, relevance, 0.1) == ["low", "q"]
    assert askers([statement], relevance, 0.0) == []
