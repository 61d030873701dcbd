"""Reading transcripts from files, folders and stdin for `memlane enqueue` and the demo.

Accepted: JSON (one transcript object, or a list of them) and JSONL (one transcript per
line). A `.jsonl` file is read as JSONL; anything else (another file, stdin) as JSON, or
as JSONL when it holds several JSON values one after the other. A folder means its
`*.json` and `*.jsonl` files (not recursive), in sorted order.

Everything is read and validated before anything is returned, so a caller that enqueues
only after `read_transcripts` succeeded writes nothing when any input is bad. A bad input
raises TranscriptError whose message starts with where the problem is: `path`,
`path[2]` (the third item of a JSON list) or `path line 3` (JSONL, 1-based).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from memlane.models.schemas import TranscriptIn
from memlane.pipeline.errors import TranscriptError
from memlane.service.ingest import parse_transcript
from memlane.service.input_checks import check_text

STDIN = "-"
TOO_DEEP = "JSON nested more deeply than a transcript can be"
SUFFIXES = (".json", ".jsonl")


@dataclass(frozen=True, slots=True)
class SourcedTranscript:
    source: str  # where it came from, as error messages name it
    transcript: TranscriptIn


def expand_paths(paths: Sequence[str]) -> list[str]:
    """Files as given, folders replaced by their .json/.jsonl files (sorted), `-` kept."""
    expanded: list[str] = []
    for raw in paths:
        if raw == STDIN:
            expanded.append(raw)
            continue
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in SUFFIXES)
            if not found:
                raise TranscriptError(f"{raw}: folder has no .json or .jsonl files")
            expanded.extend(str(p) for p in found)
        elif path.is_file():
            expanded.append(raw)
        else:
            raise TranscriptError(f"{raw}: no such file or folder")
    if expanded.count(STDIN) > 1:
        raise TranscriptError("stdin (-) given more than once")
    return expanded


def read_transcripts(
    paths: Sequence[str],
    *,
    stdin: TextIO | None = None,
    final: bool = False,
    agent: str | None = None,
) -> list[SourcedTranscript]:
    """Every transcript of every input, validated, in input order; `final=True` marks each
    one final (its tail is extracted now); `agent`: the agent_id of those naming none."""
    found: list[SourcedTranscript] = []
    for source in expand_paths(paths):
        if source == STDIN:
            if stdin is None:
                raise TranscriptError("-: stdin is not available")
            text, name, as_lines = stdin.read().removeprefix("\ufeff"), "<stdin>", False
        else:
            text, name, as_lines = _read_text(source), source, source.endswith(".jsonl")
        found.extend(parse_text(text, name, jsonl=as_lines))
    if final:
        found = [
            SourcedTranscript(s.source, s.transcript.model_copy(update={"final": True}))
            for s in found
        ]
    if agent is not None:
        agent = check_text(agent, "agent_id")
        found = [
            SourcedTranscript(s.source, s.transcript.model_copy(update={"agent_id": agent}))
            if s.transcript.agent_id is None
            else s
            for s in found
        ]
    return found


def _read_text(path: str) -> str:
    try:
        raw = Path(path).read_bytes()
        # as the HTTP API reads a body: UTF-8 (a BOM is skipped), or UTF-16/32 with theirs
        return raw.decode(json.detect_encoding(raw)).removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise TranscriptError(
            f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read: {exc.strerror}") from None


def parse_text(text: str, name: str, *, jsonl: bool) -> list[SourcedTranscript]:
    """The transcripts in `text` (at least one), validated; `name` is used in errors."""
    if not text.strip():
        raise TranscriptError(f"{name}: empty, no transcripts")
    if jsonl:
        return _parse_lines(text, name)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":  # several values one after another: JSONL
            return _parse_lines(text, name)
        raise TranscriptError(
            f"{name}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise TranscriptError(f"{name}: {TOO_DEEP}") from None
    if isinstance(value, list):
        if not value:
            raise TranscriptError(f"{name}: the list of transcripts is empty")
        return [_validate(item, f"{name}[{index}]") for index, item in enumerate(value)]
    return [_validate(value, name)]


def _parse_lines(text: str, name: str) -> list[SourcedTranscript]:
    parsed: list[SourcedTranscript] = []
    # JSONL lines end at "\n" only: U+2028 and its kind are text inside a JSON string
    for number, line in _numbered(line.removesuffix("\r") for line in text.split("\n")):
        where = f"{name} line {number}"
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TranscriptError(
                f"{where}: invalid JSON at column {exc.colno}: {exc.msg}"
            ) from None
        except RecursionError:
            raise TranscriptError(f"{where}: {TOO_DEEP}") from None
        parsed.append(_validate(value, where))
    return parsed


def _numbered(lines: Iterable[str]) -> Iterable[tuple[int, str]]:
    return ((n, line) for n, line in enumerate(lines, start=1) if line.strip())


def _validate(value: Any, where: str) -> SourcedTranscript:
    if not isinstance(value, dict):
        raise TranscriptError(f"{where}: expected a transcript object, got {_json_kind(value)}")
    try:
        return SourcedTranscript(where, parse_transcript(value))
    except TranscriptError as exc:
        raise TranscriptError(f"{where}: {exc}") from None


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"
