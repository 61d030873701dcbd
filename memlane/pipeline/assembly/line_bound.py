"""A lower bound of an item's line tokens, from one number stored per item (`runs` of its
text) and a floor per style, kind and encoding: the working set's exact walk skips
every ranked item whose bound exceeds the tokens left (pipeline.assembly.exact_walk).

Why it is a bound, for the encodings whose pre-tokeniser is known (ADDITIVE_PATTERNS:
o200k_base, cl100k_base, p50k_base). tiktoken splits a line into pieces with its
pattern and encodes each piece alone, so a line costs at least one token per piece.
A line is `P + text + S`: markup P (`<m id="12" … >`), the escaped text, markup S
(`</m>` + newline).
- A piece of these patterns holds a space only as its first character, unless it is
  all whitespace. So a *run start* of the text — a character that is not whitespace,
  first in the text or right after a space — begins a piece no other run start is in:
  a piece holding two would hold the space before the second not in first place.
  Escaping keeps spaces and turns no character into whitespace (`&` → `&amp;`, a
  character XML refuses → U+FFFD), and Python's whitespace holds the patterns' `\\s`
  (test_line_bound checks every code point).
- The pieces of P, except its last (which may run on into the text), are the same in
  the line as in P alone: the patterns look ahead only past whitespace, and P ends in
  `>`. The pieces of S after its first (`</` may take in the text's last characters)
  are `m` (the letter) and `>` + newline whatever comes before.
So tokens(line) ≥ tokens of P's pieces but the last + runs(text) + tokens of S's pieces
but the first. P varies with the item's ref, importance band, date and (procedures) name:
the floor is the least over variants that each have the fewest pieces (refs of one to
three digits are one piece, years of up to three digits one piece, one-character ids
and empty names). The run starts counted are those of the content alone (a procedure's
compact line puts its name and `: ` before it, an episode's the outcome after the
summary: more runs, never fewer). Any other encoding: no bound (0), so the exact walk
walks every item.

A row's own markup adds to that floor (`markup_extra`): its ref's digits and its date's
year (a 10k user's refs and this century's years have four digits) are made of as many
pieces as the pattern makes of that many digits alone (they sit between `="`, a space
and `"`, none a digit or a letter), at least a token each, where the floor's variant with
the same band, month and a one-digit day, ref and year has one one-token piece for each.
So a ref of d digits adds pieces(d) − 1 tokens for sure, a year of four digits
pieces(4) − 1 (o200k_base and cl100k_base cut digits in threes: 1 each; p50k_base
keeps them whole: 0); rows gain tokens of the bound, never a margin of error (a year
near 1000 or 9999, a row without a ref: nothing added).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache
from itertools import product
from typing import Any

import numpy as np
import numpy.typing as npt
import regex  # type: ignore[import-untyped]  # tiktoken's own dependency: its patterns' syntax
import tiktoken

from memlane.pipeline.assembly import context_format as fmt
from memlane.pipeline.assembly.tokens import ENCODING_SPECS
from memlane.pipeline.records import EpisodeRecord, MemoryRecord, Procedure

KNOWN_PATTERNS = frozenset(spec.pat_str for spec in ENCODING_SPECS.values())
_RUN = re.compile(r"(?:^| )\S")
# The variants whose markup has the fewest pieces (module docstring).
_IDS = ("1", "999", "_", "x")
_NAMES = ("", "_", "x")
_DATES = tuple(
    datetime(year, month, day, tzinfo=UTC)
    for year, month, day in product((1, 999, 2023), range(1, 13), (1, 28))
)
_BANDS = (0.95, 0.8, 0.6, 0.1)


def runs(text: str) -> int:
    """The run starts of `text`: characters that are not whitespace, first or right after
    a space. Printable ASCII (most contents) holds no whitespace but the space: its
    words are its runs."""
    if text.isascii() and text.isprintable():
        if text and "  " not in text and text[0] != " " and text[-1] != " ":
            return text.count(" ") + 1  # single spaces between words: a third of split's time
        return len(text.split())
    return len(_RUN.findall(text))


def runs_of(texts: Sequence[str]) -> npt.NDArray[np.float64]:
    """`runs` of each text, as floats: a loaded user's contents at once. Texts of
    printable ASCII (where the space is the only whitespace) are counted together over
    their bytes joined by spaces (a run start: a byte other than a space, after a space
    or first), the others one by one; ~4 times faster than `runs` per text at 10k."""
    n = len(texts)
    if not n:
        return np.zeros(0, dtype=np.float64)
    # one byte per character: a character beyond ASCII becomes "?", its text counted alone
    text = np.frombuffer(" ".join(texts).encode("ascii", "replace") + b" ", dtype=np.uint8)
    starts = np.zeros(n, dtype=np.intp)
    np.cumsum(np.fromiter(map(len, texts), np.intp, n)[:-1] + 1, out=starts[1:])
    space = text == 32
    run = ~space
    run[1:] &= space[:-1]
    counts = np.add.reduceat(run.view(np.uint8), starts, dtype=np.intp).astype(np.float64)
    unprintable = (text < 32) | (text > 126)
    alone = np.add.reduceat(unprintable.view(np.uint8), starts, dtype=np.intp) > 0
    alone |= np.fromiter((not t.isascii() for t in texts), np.bool_, n)
    for at in np.flatnonzero(alone):
        counts[at] = runs(texts[int(at)])
    return counts


def _markup_tokens(encoding: tiktoken.Encoding, markup: str, *, drop_first: bool) -> int:
    pieces = regex.findall(encoding._pat_str, markup)
    kept = pieces[1:] if drop_first else pieces[:-1]
    return sum(len(encoding.encode_ordinary(piece)) for piece in kept)


def _split(line: str, text: str) -> tuple[str, str]:
    """P and S of a line rendered around `text` (its only occurrence)."""
    start = line.index(text)
    return line[:start], line[start + len(text) :]


_MARK = "QQQ"  # letters no markup holds: where the text sits in a rendered line


def _fields(**values: Any) -> dict[str, Any]:
    return values


def _lines(kind: str, style: fmt.Style) -> list[str]:
    if kind == "memory":
        return [
            fmt.memory_line(
                MemoryRecord.model_construct(
                    **_fields(id=i, ref=None, importance=band, created_at=date, content=_MARK)
                ),
                style,
            )
            for i, band, date in product(_IDS, _BANDS, _DATES)
        ]
    if kind == "episode":
        return [
            fmt.episode_line(
                EpisodeRecord.model_construct(
                    **_fields(id=i, ref=None, created_at=date, summary=_MARK, outcome=None)
                ),
                style,
            )
            for i, date in product(_IDS, _DATES)
        ]
    return [
        fmt.procedure_line(
            Procedure.model_construct(**_fields(id=i, ref=None, name=name, content=_MARK)),
            style,
        ).replace(f"{name}: {_MARK}", _MARK)
        for i, name in product(_IDS, _NAMES)
    ]


@lru_cache(maxsize=64)
def floor(encoding: tiktoken.Encoding, style: fmt.Style, kind: str) -> int:
    """The least tokens a line of `kind` ("memory", "episode", "procedure") in `style`
    costs besides its text's runs; 0 for an encoding of unknown pattern."""
    if getattr(encoding, "_pat_str", None) not in KNOWN_PATTERNS:
        return 0
    least = None
    for line in _lines(kind, style):
        before, after = _split(line, _MARK)
        tokens = _markup_tokens(encoding, before, drop_first=False) + _markup_tokens(
            encoding, after, drop_first=True
        )
        least = tokens if least is None else min(least, tokens)
    return least or 0


# epoch seconds of 1001-01-01 and 9998-12-31 (UTC): a time between is dated in a year
# of four digits, whatever the float's rounding
_FOUR_DIGIT_YEARS = (
    datetime(1001, 1, 1, tzinfo=UTC).timestamp(),
    datetime(9998, 12, 31, tzinfo=UTC).timestamp(),
)
_REF_DIGITS = 19  # refs are below 10**18: a float column holds them exactly


@lru_cache(maxsize=64)
def _digit_extra(encoding: tiktoken.Encoding) -> npt.NDArray[np.float64]:
    """[d]: the pieces the pattern makes of d digits beyond one (0 for no digits)."""
    pattern = encoding._pat_str
    return np.array(
        [0.0, *(len(regex.findall(pattern, "1" * d)) - 1.0 for d in range(1, _REF_DIGITS + 1))]
    )


def markup_extra(
    encoding: tiktoken.Encoding,
    refs: npt.NDArray[np.float64],
    dates: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """The tokens each row's line costs for sure beyond `floor` and its runs (module
    docstring): `refs` the rows' refs (NaN: none), `dates` the epoch seconds of the date
    their line shows (NaN: none). Zeros for an encoding of unknown pattern."""
    if not known(encoding):
        return np.zeros(len(refs))
    extra = _digit_extra(encoding)
    digits = np.zeros(len(refs), dtype=np.intp)
    with np.errstate(invalid="ignore"):  # NaN compares false: no digits, no year
        for d in range(_REF_DIGITS):
            digits += refs >= 10**d
        four = (dates >= _FOUR_DIGIT_YEARS[0]) & (dates < _FOUR_DIGIT_YEARS[1])
    return extra[digits] + np.where(four, extra[4], 0.0)


def dated(style: fmt.Style, kind: str) -> bool:
    """Whether a line of `kind` in `style` shows a date (its item's created_at)."""
    return style == "default" and kind in ("memory", "episode")


def known(encoding: tiktoken.Encoding) -> bool:
    return getattr(encoding, "_pat_str", None) in KNOWN_PATTERNS
