"""A rule-4 walk's items replayed under other selection rules (issue 39): what a context
would hold if the budget were spent another way, over the same walked items and the same
tokens, and where a missing item stood in the walk. Plain data in, plain data out;
bench.locomo_walks reads the items from LoCoMo's context packs.

Rules (each returns the ids it takes, in the order it takes them):
- `rank_order`: the assembler's own (assembly rule 4): the pool in its order (at or above
  the relevance floor by composite, then the rest by relevance; section, then id, break
  ties), each item taken when it fits what is left, an episode the memories taken say
  again left out. tests/unit/test_walk_replay.py checks it takes what the assembler takes.
- `value_per_token`: the items at or above the floor by relevance per token (the issue's
  "greedy by relevance per token within the relevance floor"), then the rest in rank order.
- `knapsack`: the set of most value that fits, value = relevance (Σ relevance) or
  relevance × tokens (`weighted`: relevance read as a density, the item's tokens as its
  size), solved exactly over the first `KNAPSACK_ITEMS` of the rank order; both sections'
  wrappers are counted as spent first.
- `trim_to_fit`: rank order; an item that does not fit is cut to its sentences that share
  a keyword with the query (joined by " … ") and taken if that fits.
- `stop_at_skip`: rank order up to the first item that does not fit (no filling with
  lower-ranked lines after a skip).
- `with_next`: rank order, and right after the first line taken, the memory said next in
  its conversation (the reply to it), when it fits: not a selection rule over the same
  items but a measure of what a taken line's conversational neighbours hold.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, replace

import numpy as np
import tiktoken

from memlane.pipeline.assembly import context_format as fmt
from memlane.pipeline.assembly.coverage import SAID_AGAIN_SHARE
from memlane.pipeline.dedup.keywords import keywords

# Sections in the text's order: ties of rank 4's key break by it.
_PLACE = {"memory": 1, "episode": 2, "procedure": 3}
_SECTION: dict[str, fmt.SectionName] = {
    "memory": "memories",
    "episode": "episodes",
    "procedure": "procedures",
}
KNAPSACK_ITEMS = 60
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_SPEAKER = re.compile(r"^[^:]{1,40}:\s")
ELLIPSIS = " … "


@dataclass(frozen=True, slots=True)
class Item:
    """One walked item of a pack: its section ("memory", "episode", "procedure"), its
    relevance and composite, its line's tokens and its text."""

    id: str
    section: str
    relevance: float
    composite: float
    tokens: int
    text: str


@dataclass(frozen=True, slots=True)
class Room:
    """The tokens a walk may spend on lines: the budget less the root (and what was taken
    before the pool: `after`), what each section's wrapper costs its first item, the
    sections already open and the keywords of the memories already taken."""

    lines: int
    wrapper: dict[str, int]
    opened: frozenset[str] = frozenset()
    said: frozenset[str] = frozenset()

    @classmethod
    def of(cls, budget: int, user_id: str, encoding: tiktoken.Encoding) -> Room:
        def count(text: str) -> int:
            return len(encoding.encode_ordinary(text))

        root = count(fmt.root_open(user_id)) + count(fmt.ROOT_CLOSE)
        wrapper = {
            kind: count(fmt.section_open(name)) + count(fmt.section_close(name))
            for kind, name in _SECTION.items()
        }
        return cls(budget - root, wrapper)

    def after(self, first: Sequence[Item]) -> Room:
        """What is left once `first` (pinned and verified memories, rules 2 and 3) is in."""
        opened = self.opened | {i.section for i in first}
        wrappers = sum(self.wrapper[s] for s in opened - self.opened)
        said = set(self.said)
        for item in first:
            said |= keywords(item.text)
        return replace(
            self,
            lines=self.lines - sum(i.tokens for i in first) - wrappers,
            opened=opened,
            said=frozenset(said),
        )


def rank_key(floor: float) -> Callable[[Item], tuple[bool, float, float, int, str]]:
    """Assembly rule 4's order (the assembler's `pool_key`) for a floor in relevance."""

    def key(item: Item) -> tuple[bool, float, float, int, str]:
        if item.relevance >= floor:
            return (False, -item.composite, 0.0, _PLACE[item.section], item.id)
        return (True, -item.relevance, -item.composite, _PLACE[item.section], item.id)

    return key


def ranked(items: Sequence[Item], relevance_floor: float) -> list[Item]:
    best = max((i.relevance for i in items), default=0.0)
    return sorted(items, key=rank_key(relevance_floor * best))


def _said_again(item: Item, said: Set[str]) -> bool:
    if item.section != "episode":
        return False
    words = keywords(item.text)
    return bool(words) and len(words & said) >= SAID_AGAIN_SHARE * len(words)


def greedy(order: Sequence[Item], room: Room, *, stop_at_skip: bool = False) -> list[Item]:
    """Each item in `order` taken when it fits what is left (its section's wrapper with
    the first of a section), an episode the memories taken say again left out."""
    left, used, said, taken = room.lines, set(room.opened), set(room.said), list[Item]()
    for item in order:
        if _said_again(item, said):
            continue
        cost = item.tokens + (0 if item.section in used else room.wrapper[item.section])
        if cost > left:
            if stop_at_skip:
                break
            continue
        left -= cost
        used.add(item.section)
        taken.append(item)
        if item.section == "memory":
            said |= keywords(item.text)
    return taken


def rank_order(items: Sequence[Item], room: Room, relevance_floor: float) -> list[Item]:
    return greedy(ranked(items, relevance_floor), room)


def stop_at_skip(items: Sequence[Item], room: Room, relevance_floor: float) -> list[Item]:
    return greedy(ranked(items, relevance_floor), room, stop_at_skip=True)


def with_next(
    items: Sequence[Item], room: Room, relevance_floor: float, *, next_of: Mapping[str, Item]
) -> list[Item]:
    """Rank order, with the line said after the first line taken (`next_of`: a memory's
    id → the next memory of its conversation) walked right after it."""
    order = ranked(items, relevance_floor)
    taken = greedy(order, room)
    after = next_of.get(taken[0].id) if taken else None
    if after is None:
        return taken
    rest = [i for i in order if i.id != after.id]
    at = rest.index(taken[0]) + 1
    return greedy([*rest[:at], after, *rest[at:]], room)


def replies_at_floor(
    items: Sequence[Item],
    room: Room,
    relevance_floor: float,
    *,
    next_of: Mapping[str, Item],
    answers: Callable[[Sequence[Item]], Sequence[Item]] = lambda taken: taken,
    last: bool = False,
) -> list[Item]:
    """Rank order within the floor, then the replies (`next_of`: a memory's id → the next
    memory of its conversation) of the lines `answers` picks of those taken, in the order
    they were taken, then the rest in rank order (module docstring)."""
    order = ranked(items, relevance_floor)
    floor = relevance_floor * max((i.relevance for i in items), default=0.0)
    above = [i for i in order if i.relevance >= floor]
    walked = {i.id for i in above}
    replies: list[Item] = []
    if last:
        above, walked = order, {i.id for i in order}
    for line in answers(greedy(above, room)):
        reply = next_of.get(line.id)
        if reply is not None and reply.id not in walked:
            walked.add(reply.id)
            replies.append(reply)
    return greedy([*above, *replies, *(i for i in order if i.id not in walked)], room)


def reply_of_first_at_floor(
    items: Sequence[Item], room: Room, relevance_floor: float, *, next_of: Mapping[str, Item]
) -> list[Item]:
    return replies_at_floor(items, room, relevance_floor, next_of=next_of, answers=_first)


def replies_to_questions_at_floor(
    items: Sequence[Item], room: Room, relevance_floor: float, *, next_of: Mapping[str, Item]
) -> list[Item]:
    return replies_at_floor(items, room, relevance_floor, next_of=next_of, answers=_questions)


def replies_to_questions_last(
    items: Sequence[Item], room: Room, relevance_floor: float, *, next_of: Mapping[str, Item]
) -> list[Item]:
    return replies_at_floor(
        items, room, relevance_floor, next_of=next_of, answers=_questions, last=True
    )


def _first(taken: Sequence[Item]) -> Sequence[Item]:
    return taken[:1]


def _questions(taken: Sequence[Item]) -> Sequence[Item]:
    return [i for i in taken if "?" in i.text]


def value_per_token(items: Sequence[Item], room: Room, relevance_floor: float) -> list[Item]:
    order = ranked(items, relevance_floor)
    floor = relevance_floor * max((i.relevance for i in items), default=0.0)
    above = [i for i in order if i.relevance >= floor]
    above.sort(key=lambda i: (-i.relevance / max(1, i.tokens), _PLACE[i.section], i.id))
    return greedy([*above, *(i for i in order if i.relevance < floor)], room)


def knapsack(
    items: Sequence[Item], room: Room, relevance_floor: float, *, weighted: bool
) -> list[Item]:
    """The most valuable set that fits (module docstring), exactly, by dynamic
    programming over the tokens; ties go to the set found first in rank order."""
    order = ranked(items, relevance_floor)[:KNAPSACK_ITEMS]
    capacity = room.lines - sum(room.wrapper[s] for s in {i.section for i in order})
    if capacity <= 0 or not order:
        return []
    best = np.zeros(capacity + 1)
    took = np.zeros((len(order), capacity + 1), dtype=np.bool_)
    for k, item in enumerate(order):
        w = item.tokens
        if w > capacity:
            continue
        value = item.relevance * (w if weighted else 1.0)
        with_it = best[: capacity + 1 - w] + value
        better = with_it > best[w:]
        took[k, w:] = better
        best[w:] = np.where(better, with_it, best[w:])
    chosen, left = [], capacity
    for k in range(len(order) - 1, -1, -1):
        if took[k, left]:
            chosen.append(order[k])
            left -= order[k].tokens
    return chosen[::-1]


def trimmed(text: str, query_words: Set[str]) -> str | None:
    """`text` cut to its sentences that share a keyword with the query, joined by an
    ellipsis (a speaker's "Name: " kept in front); None when that would keep all of it
    or nothing."""
    parts = [p for p in _SENTENCE_END.split(text) if p]
    keep = [p for p in parts if keywords(p) & query_words]
    if not keep or len(keep) == len(parts):
        return None
    out = ELLIPSIS.join(keep)
    speaker = _SPEAKER.match(text)
    if speaker and not out.startswith(speaker.group(0)):
        out = speaker.group(0) + ELLIPSIS.lstrip() + out
    return out


def trim_to_fit(
    items: Sequence[Item],
    room: Room,
    relevance_floor: float,
    *,
    query_words: Set[str],
    encoding: tiktoken.Encoding,
) -> list[Item]:
    """Rank order; an item that does not fit goes in cut to what matches the query
    (`trimmed`) when that fits: its line's tokens less those of the text cut away."""
    left, used, said, taken = room.lines, set(room.opened), set(room.said), list[Item]()
    for item in ranked(items, relevance_floor):
        if _said_again(item, said):
            continue
        wrapper = 0 if item.section in used else room.wrapper[item.section]
        if item.tokens + wrapper > left:
            cut = trimmed(item.text, query_words)
            if cut is None:
                continue
            cost = item.tokens - _tokens(encoding, item.text) + _tokens(encoding, cut)
            if cost + wrapper > left:
                continue
            item = replace(item, tokens=cost, text=cut)
        left -= item.tokens + wrapper
        used.add(item.section)
        taken.append(item)
        if item.section == "memory":
            said |= keywords(item.text)
    return taken


def _tokens(encoding: tiktoken.Encoding, text: str) -> int:
    return len(encoding.encode_ordinary(fmt.text(text)))


def fate(evidence: str, items: Sequence[Item], taken_ids: Set[str], relevance_floor: float) -> str:
    """Where an evidence text missing from a context stood in its walk (`items` the
    walked items, `taken_ids` those the context holds): "not walked" (no walked item
    holds it), "past the last taken" (ranked after every line taken) or "skipped for
    room" (a line ranked after it went in: the issue's long evidence losing to filler)."""
    order = ranked(items, relevance_floor)
    at = next((k for k, i in enumerate(order) if evidence in " ".join(i.text.split())), None)
    if at is None:
        return "not walked"
    if any(i.id in taken_ids for i in order[at + 1 :]):
        return "skipped for room"
    return "past the last taken"
