"""Turning an LLM's answer into a validated Extraction: strict and total.

Finding the JSON (else ExtractionError):
- the whole answer, stripped, is a JSON object; or
- the first balanced top-level `{...}` that parses as JSON — which covers an object inside
  a ``` code fence and one preceded or followed by prose. The first object with a
  "memories" or "episode" key wins over an earlier object without either (prose such as
  "use {} for none" does not hide the answer).
- an answer that is empty, longer than MAX_ANSWER_CHARS, or holds no object raises.

The object (else ExtractionError):
- "memories" must be present and a list; "episode" must be present and valid:
  summary a non-empty string (whitespace collapsed, at most 2,000 characters); topics
  missing/null → [], else a list of strings (trimmed, empty and case-insensitive
  repeats removed, the first 20 kept); outcome missing/null/blank → None, else a string.

Each memory (a bad one is dropped with its reason in `dropped`, never silently):
- not an object → dropped.
- content: a string, trimmed and whitespace-collapsed; empty or over 1,000 characters
  → dropped.
- category: trimmed, lower-cased; one of the configured categories (`categories`, the
  four defaults unless told) or its plural with an "s" ("facts" → "fact"); anything
  else → dropped.
- importance, confidence: a number, or a string holding one ("0.8"); clamped into [0, 1];
  a boolean, NaN, a missing value or any other text → dropped.
- source_seq: kept when it is a non-negative integer, otherwise ignored.
- more than max_memories left → the max_memories most important are kept (ties: earlier
  first), in their original order; the others are dropped.

Every memory dropped is not an error (the answer is still usable) but is visible: its
reason is in ParsedExtraction.dropped. A non-JSON answer always raises.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from memlane.pipeline.errors import ExtractionError
from memlane.pipeline.extraction.prompts import MAX_MEMORIES
from memlane.pipeline.records import (
    About,
    ExtractedEpisode,
    ExtractedMemory,
    Extraction,
)

MAX_ANSWER_CHARS = 100_000
MAX_CONTENT_CHARS = 1_000
MAX_SUMMARY_CHARS = 2_000
MAX_TOPICS = 20
# Each '{' tried costs one scan of the rest of the answer; bounding the tries keeps a
# hostile answer (thousands of unclosed braces) linear in practice.
_MAX_OBJECT_STARTS = 256


@dataclass(frozen=True, slots=True)
class ParsedExtraction:
    extraction: Extraction
    dropped: list[str]  # one human-readable reason per memory (or topic) left out


def _collapse(text: str) -> str:
    return " ".join(text.split())


def find_json_object(raw: str) -> dict[str, Any]:
    """The answer's JSON object, by the rules in the module docstring."""
    text = raw.strip()
    if not text:
        raise ExtractionError("the extractor's answer is empty", raw=raw)
    if len(text) > MAX_ANSWER_CHARS:
        raise ExtractionError(
            f"the extractor's answer is {len(text):,} characters; at most "
            f"{MAX_ANSWER_CHARS:,} are read",
            raw=raw,
        )
    try:
        whole = json.loads(text)
    except (ValueError, RecursionError):
        whole = None
    else:
        if isinstance(whole, dict):
            return whole
        raise ExtractionError(
            f"the extractor's answer is JSON but a {type(whole).__name__}, not an object",
            raw=raw,
        )
    decoder = json.JSONDecoder()
    fallback: dict[str, Any] | None = None
    start = text.find("{")
    tries = 0
    while start != -1 and tries < _MAX_OBJECT_STARTS:
        tries += 1
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            if "memories" in value or "episode" in value:
                return value
            fallback = value if fallback is None else fallback
        start = text.find("{", end)
    if fallback is not None:
        return fallback
    raise ExtractionError("the extractor's answer holds no JSON object", raw=raw)


def _score(value: object) -> float | None:
    """A number in [0, 1] (clamped), or None when value is not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return float(min(1, max(0, value)))
    if isinstance(value, float):
        number = value
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    if math.isnan(number):
        return None
    return min(1.0, max(0.0, number))


def _memory(item: object, where: str, categories: Sequence[str]) -> ExtractedMemory | str:
    """The memory, or the reason it is dropped."""
    if not isinstance(item, dict):
        return f"{where}: not an object"
    content = item.get("content")
    if not isinstance(content, str) or not _collapse(content):
        return f"{where}: content is missing or empty"
    content = _collapse(content)
    if len(content) > MAX_CONTENT_CHARS:
        return f"{where}: content is {len(content):,} characters (at most {MAX_CONTENT_CHARS:,})"
    raw_category = item.get("category")
    key = raw_category.strip().lower() if isinstance(raw_category, str) else ""
    category = key if key in categories else key.removesuffix("s")
    if category not in categories:
        return f"{where}: category {raw_category!r} is not one of {', '.join(categories)}"
    scores: dict[str, float] = {}
    for name in ("importance", "confidence"):
        score = _score(item.get(name))
        if score is None:
            return f"{where}: {name} {item.get(name)!r} is not a number"
        scores[name] = score
    seq = item.get("source_seq")
    source_seq = seq if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0 else None
    # The safe reading of a missing or unknown scope is the default: about the user.
    raw_about = item.get("about")
    about: About = (
        "agent" if isinstance(raw_about, str) and raw_about.strip().lower() == "agent" else "user"
    )
    try:
        return ExtractedMemory(
            content=content,
            category=category,
            importance=scores["importance"],
            confidence=scores["confidence"],
            source_seq=source_seq,
            about=about,
        )
    except ValidationError as error:  # unreachable by the checks above; kept total
        return f"{where}: {error.errors()[0]['msg']}"


def _episode(value: object, raw: str, dropped: list[str]) -> ExtractedEpisode:
    if not isinstance(value, dict):
        raise ExtractionError("the answer's episode is missing or not an object", raw=raw)
    summary = value.get("summary")
    if not isinstance(summary, str) or not _collapse(summary):
        raise ExtractionError("the answer's episode has no summary", raw=raw)
    summary = _collapse(summary)
    if len(summary) > MAX_SUMMARY_CHARS:
        raise ExtractionError(
            f"the episode summary is {len(summary):,} characters (at most {MAX_SUMMARY_CHARS:,})",
            raw=raw,
        )
    raw_topics = value.get("topics")
    raw_topics = [] if raw_topics is None else raw_topics
    if not isinstance(raw_topics, list) or not all(isinstance(t, str) for t in raw_topics):
        raise ExtractionError("the episode's topics are not a list of strings", raw=raw)
    topics: list[str] = []
    seen: set[str] = set()
    for topic in (_collapse(t) for t in raw_topics):
        if topic and topic.casefold() not in seen:
            seen.add(topic.casefold())
            topics.append(topic)
    if len(topics) > MAX_TOPICS:
        dropped.append(f"episode.topics: {len(topics) - MAX_TOPICS} over the cap of {MAX_TOPICS}")
        topics = topics[:MAX_TOPICS]
    outcome = value.get("outcome")
    if outcome is not None and not isinstance(outcome, str):
        raise ExtractionError("the episode's outcome is neither a string nor null", raw=raw)
    outcome = _collapse(outcome) if outcome else None
    return ExtractedEpisode(summary=summary, topics=topics, outcome=outcome or None)


def parse_extraction(raw: str, *, max_memories: int, categories: Sequence[str]) -> ParsedExtraction:
    """The extractor's answer as a validated Extraction, plus what was dropped and why.
    `categories`: the configured set (MEMLANE_CATEGORIES) a memory's category must be in."""
    if not 0 <= max_memories <= MAX_MEMORIES:
        raise ValueError(f"max_memories must be between 0 and {MAX_MEMORIES}, not {max_memories}")
    if not isinstance(raw, str):
        raise ExtractionError(f"the extractor's answer is a {type(raw).__name__}, not text")
    data = find_json_object(raw)
    items = data.get("memories")
    if not isinstance(items, list):
        raise ExtractionError("the answer's memories are missing or not a list", raw=raw)
    dropped: list[str] = []
    episode = _episode(data.get("episode"), raw, dropped)
    kept: list[tuple[int, ExtractedMemory]] = []
    for index, item in enumerate(items):
        memory = _memory(item, f"memories[{index}]", categories)
        if isinstance(memory, str):
            dropped.append(memory)
        else:
            kept.append((index, memory))
    if len(kept) > max_memories:
        by_importance = sorted(kept, key=lambda pair: (-pair[1].importance, pair[0]))
        over = by_importance[max_memories:]
        dropped.extend(
            f"memories[{index}]: over the cap of {max_memories} (importance {memory.importance:g})"
            for index, memory in sorted(over, key=lambda pair: pair[0])
        )
        kept = sorted(by_importance[:max_memories], key=lambda pair: pair[0])
    extraction = Extraction(memories=[memory for _, memory in kept], episode=episode)
    return ParsedExtraction(extraction=extraction, dropped=dropped)
