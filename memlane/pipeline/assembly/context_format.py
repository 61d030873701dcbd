"""The format contract of a context block: XML, one shape per item kind, one item per line.

Default style:

    <memlane_context user="u_1">
    <soul>
    <block kind="identity">…</block>
    </soul>
    <memories>
    <m id="12" importance="high" date="7 May 2023">…</m>
    </memories>
    <episodes>
    <e id="57" date="7 May 2023">…</e>
    </episodes>
    <procedures>
    <p id="3" name="…">…</p>
    </procedures>
    </memlane_context>

Every item carries an identifier, and memories and episodes a date a model reads ("7 May
2023", UTC: when the memory was stated, when the episode's last message was said) and an
importance (memories: critical ≥ 0.9, high ≥ 0.7, medium ≥ 0.5, low below, the
extraction guide's bands). Markup is budget taken from content, so it is lean: `id` is
the item's short id within the user (`ref`, one numbering for memories, episodes and
procedures; the pack maps it to the full id), each attribute name and value one token
where a word will do; a memory line costs about 19 tokens of markup in o200k_base
(bench.locomo measures it), where 24-hex ids and five attributes cost 46.

Compact style (`style="compact"`, for tight budgets): the identifier and the content only,
`<m id="12">…</m>`, about 7 tokens; the order still carries the ranking.

Sections come in that order and an empty section is left out; the root is always there,
so the block parses as one XML document. Text is escaped like xml.sax.saxutils.escape,
attribute values like quoteattr but always in double quotes (one shape whatever the value
holds), and characters XML 1.0 cannot carry (NUL, other C0 controls, lone surrogates)
become U+FFFD. So no content — `<`, `&`, quotes, `</m>` — can break the structure.

Every line ends in `>` + newline and the next starts with `<`: tiktoken's pre-tokeniser
splits there in cl100k_base and o200k_base, so a document's token count is the sum of
its lines' counts. The assembler relies on that for its estimate and still recounts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Literal
from xml.sax.saxutils import escape

from memlane.pipeline.records import EpisodeRecord, MemoryRecord, Procedure, SoulBlock

Style = Literal["default", "compact"]
STYLES: tuple[Style, ...] = ("default", "compact")
SectionName = Literal["soul", "memories", "episodes", "procedures"]
SECTION_ORDER: tuple[SectionName, ...] = ("soul", "memories", "episodes", "procedures")
JsonDict = dict[str, list[dict[str, object]]]
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
# (lowest importance of the band, its word); the extraction prompt's guide, with its
# "useful" band split in two so each word is one token.
IMPORTANCE_BANDS = ((0.9, "critical"), (0.7, "high"), (0.5, "medium"), (0.0, "low"))

_NOT_XML_CLASS = "[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
_NOT_XML = re.compile(_NOT_XML_CLASS)
_TEXT_ENTITIES = {"\r": "&#13;"}
_ATTRIBUTE_ENTITIES = {'"': "&quot;", "\n": "&#10;", "\r": "&#13;", "\t": "&#9;"}


def _plain(value: str) -> bool:
    """Printable ASCII: no control character, nothing XML refuses (the hot path's test,
    a few times faster than a regular expression)."""
    return value.isascii() and value.isprintable()


def xml_safe(value: str) -> str:
    """Replace characters XML 1.0 cannot carry with U+FFFD."""
    return _NOT_XML.sub("\ufffd", value)


def text(value: str) -> str:
    """Element text: `&`, `<`, `>` escaped, and carriage returns, which a parser would
    otherwise turn into newlines."""
    if _plain(value):
        return (
            value if "&" not in value and "<" not in value and ">" not in value else escape(value)
        )
    return escape(xml_safe(value), _TEXT_ENTITIES)


def attr(value: str) -> str:
    """A double-quoted attribute value, quoteattr-escaped (quotes and whitespace too)."""
    if _plain(value) and not ('"' in value or "&" in value or "<" in value or ">" in value):
        return f'"{value}"'
    return '"' + escape(xml_safe(value), _ATTRIBUTE_ENTITIES) + '"'


def day(moment: datetime) -> str:
    """The calendar date of a moment as a model reads it ("7 May 2023"), in UTC when the
    moment carries a zone; English month names whatever the locale."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return f"{moment.day} {MONTHS[moment.month - 1]} {moment.year}"


def importance_word(importance: float) -> str:
    """The importance band's word (IMPORTANCE_BANDS)."""
    for lowest, word in IMPORTANCE_BANDS:
        if importance >= lowest:
            return word
    return IMPORTANCE_BANDS[-1][1]


def short_id(ref: int | None, full_id: str) -> str:
    """What a context shows as an item's id: its ref, or its full id before it has one."""
    return str(ref) if ref is not None else full_id


def soul_line(block: SoulBlock) -> str:
    return f"<block kind={attr(block.kind)}>{text(block.content)}</block>\n"


def memory_line(memory: MemoryRecord, style: Style = "default") -> str:
    return _memory_line(
        memory.ref, memory.id, memory.importance, memory.created_at, memory.content, style
    )


def memory_line_of(
    ref: int | None, full_id: str, importance: float, created: datetime, content: str, style: Style
) -> str:
    """`memory_line` of a memory of these fields, without its record."""
    return _memory_line(ref, full_id, importance, created, content, style)


# The assembler renders the same memories call after call; rendering is most of its
# cost, so lines are cached by the fields they are made of (a hit costs one lookup).
@lru_cache(maxsize=65_536)
def _memory_line(
    ref: int | None,
    full_id: str,
    importance: float,
    created: datetime,
    content: str,
    style: Style,
) -> str:
    ident = short_id(ref, full_id)
    if style == "compact":
        return f"<m id={attr(ident)}>{text(content)}</m>\n"
    return (
        f"<m id={attr(ident)} importance={attr(importance_word(importance))} "
        f"date={attr(day(created))}>{text(content)}</m>\n"
    )


def forget_memory_lines() -> None:
    """Empty the rendered-line cache (it holds memories' contents): after a purge or an
    erasure, the process keeps no copy of the removed text."""
    _memory_line.cache_clear()


def episode_text(episode: EpisodeRecord) -> str:
    """The episode as one text: its summary, then its outcome when it has one."""
    if episode.outcome:
        return f"{episode.summary} Outcome: {episode.outcome}"
    return episode.summary


def episode_line(episode: EpisodeRecord, style: Style = "default") -> str:
    ident = attr(short_id(episode.ref, episode.id))
    if style == "compact":
        return f"<e id={ident}>{text(episode_text(episode))}</e>\n"
    return f"<e id={ident} date={attr(day(episode.created_at))}>{text(episode_text(episode))}</e>\n"


def procedure_line(procedure: Procedure, style: Style = "default") -> str:
    ident = attr(short_id(procedure.ref, procedure.id))
    if style == "compact":
        return f"<p id={ident}>{text(procedure.name + ': ' + procedure.content)}</p>\n"
    return f"<p id={ident} name={attr(procedure.name)}>{text(procedure.content)}</p>\n"


def root_open(user_id: str) -> str:
    return f"<memlane_context user={attr(user_id)}>\n"


ROOT_CLOSE = "</memlane_context>"


def section_open(name: SectionName) -> str:
    return f"<{name}>\n"


def section_close(name: SectionName) -> str:
    return f"</{name}>\n"


def render_document(user_id: str, sections: Mapping[SectionName, Sequence[str]]) -> str:
    """Join already rendered item lines into the document (sections in SECTION_ORDER,
    empty ones left out)."""
    parts = [root_open(user_id)]
    for name in SECTION_ORDER:
        lines = sections.get(name, ())
        if lines:
            parts.append(section_open(name))
            parts.extend(lines)
            parts.append(section_close(name))
    parts.append(ROOT_CLOSE)
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class Selection:
    """The items of one context block, each list already in its final order."""

    user_id: str
    soul: Sequence[SoulBlock] = ()
    memories: Sequence[MemoryRecord] = ()
    episodes: Sequence[EpisodeRecord] = ()
    procedures: Sequence[Procedure] = ()
    style: Style = "default"


def render_xml(selection: Selection) -> str:
    """The XML document of a selection (see the module docstring)."""
    style = selection.style
    return render_document(
        selection.user_id,
        {
            "soul": [soul_line(block) for block in selection.soul],
            "memories": [memory_line(memory, style) for memory in selection.memories],
            "episodes": [episode_line(episode, style) for episode in selection.episodes],
            "procedures": [procedure_line(p, style) for p in selection.procedures],
        },
    )


def as_json(selection: Selection) -> JsonDict:
    """The same selection as plain JSON-ready data: one list per section, in order, with
    the values the default XML carries (content unescaped), full ids beside short ones."""
    return {
        "soul": [{"kind": block.kind, "content": block.content} for block in selection.soul],
        "memories": [
            {
                "id": memory.id,
                "ref": memory.ref,
                "tier": memory.tier,
                "importance": round(memory.importance, 2),
                "category": memory.category,
                "date": day(memory.created_at),
                "content": memory.content,
            }
            for memory in selection.memories
        ],
        "episodes": [
            {
                "id": episode.id,
                "ref": episode.ref,
                "date": day(episode.created_at),
                "topics": list(episode.topics),
                "outcome": episode.outcome,
                "summary": episode.summary,
            }
            for episode in selection.episodes
        ],
        "procedures": [
            {
                "id": procedure.id,
                "ref": procedure.ref,
                "name": procedure.name,
                "content": procedure.content,
            }
            for procedure in selection.procedures
        ],
    }
