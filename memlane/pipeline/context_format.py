"""The format contract of a context block: XML, one shape per item kind, one item per line.

    <memlane_context user="u_1">
    <memlane_soul>
    <soul kind="identity">…</soul>
    </memlane_soul>
    <memlane_memories>
    <memory id="mem_1" tier="verified" importance="0.90" category="project"
            created="2026-01-15">…</memory>          (one line)
    </memlane_memories>
    <memlane_episodes>
    <episode id="ep_1" created="2026-01-15" topics="auth, db" outcome="…">…</episode>
    </memlane_episodes>
    <memlane_procedures>
    <procedure id="pr_1" name="…">…</procedure>
    </memlane_procedures>
    </memlane_context>

Sections come in that order and an empty section is left out; the root is always there,
so the block parses as one XML document. Text is escaped like xml.sax.saxutils.escape,
attribute values like quoteattr but always in double quotes (one shape whatever the value
holds), and characters XML 1.0 cannot carry (NUL, other C0 controls, lone surrogates)
become U+FFFD. So no content — `<`, `&`, quotes, `</memory>` — can break the structure.

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

from memlane.models.schemas import EpisodeRecord, MemoryRecord, Procedure, SoulBlock

SectionName = Literal["soul", "memories", "episodes", "procedures"]
SECTION_ORDER: tuple[SectionName, ...] = ("soul", "memories", "episodes", "procedures")
JsonDict = dict[str, list[dict[str, object]]]

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
    """The calendar date of a moment, in UTC when the moment carries a zone."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.date().isoformat()


def importance_text(importance: float) -> str:
    return f"{importance + 0.0:.2f}"  # + 0.0 turns -0.0 into 0.0


def soul_line(block: SoulBlock) -> str:
    return f"<soul kind={attr(block.kind)}>{text(block.content)}</soul>\n"


def memory_line(memory: MemoryRecord) -> str:
    return _memory_line(
        memory.id,
        memory.tier,
        memory.importance,
        memory.category,
        memory.created_at,
        memory.content,
    )


# The assembler renders the same memories call after call; rendering is most of its
# cost, so lines are cached by exactly the fields they show.
@lru_cache(maxsize=65_536)
def _memory_line(
    memory_id: str, tier: str, importance: float, category: str, created: datetime, content: str
) -> str:
    return (
        f"<memory id={attr(memory_id)} tier={attr(tier)}"
        f" importance={attr(importance_text(importance))}"
        f" category={attr(category)} created={attr(day(created))}>"
        f"{text(content)}</memory>\n"
    )


def episode_line(episode: EpisodeRecord) -> str:
    return (
        f"<episode id={attr(episode.id)} created={attr(day(episode.created_at))}"
        f" topics={attr(', '.join(episode.topics))} outcome={attr(episode.outcome or '')}>"
        f"{text(episode.summary)}</episode>\n"
    )


def procedure_line(procedure: Procedure) -> str:
    return (
        f"<procedure id={attr(procedure.id)} name={attr(procedure.name)}>"
        f"{text(procedure.content)}</procedure>\n"
    )


def root_open(user_id: str) -> str:
    return f"<memlane_context user={attr(user_id)}>\n"


ROOT_CLOSE = "</memlane_context>"


def section_open(name: SectionName) -> str:
    return f"<memlane_{name}>\n"


def section_close(name: SectionName) -> str:
    return f"</memlane_{name}>\n"


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


def render_xml(selection: Selection) -> str:
    """The XML document of a selection (see the module docstring)."""
    return render_document(
        selection.user_id,
        {
            "soul": [soul_line(block) for block in selection.soul],
            "memories": [memory_line(memory) for memory in selection.memories],
            "episodes": [episode_line(episode) for episode in selection.episodes],
            "procedures": [procedure_line(procedure) for procedure in selection.procedures],
        },
    )


def as_json(selection: Selection) -> JsonDict:
    """The same selection as plain JSON-ready data: one list per section, in order,
    with the attribute values the XML carries (content unescaped)."""
    return {
        "soul": [{"kind": block.kind, "content": block.content} for block in selection.soul],
        "memories": [
            {
                "id": memory.id,
                "tier": memory.tier,
                "importance": round(memory.importance, 2),
                "category": memory.category,
                "created": day(memory.created_at),
                "content": memory.content,
            }
            for memory in selection.memories
        ],
        "episodes": [
            {
                "id": episode.id,
                "created": day(episode.created_at),
                "topics": list(episode.topics),
                "outcome": episode.outcome,
                "summary": episode.summary,
            }
            for episode in selection.episodes
        ],
        "procedures": [
            {"id": procedure.id, "name": procedure.name, "content": procedure.content}
            for procedure in selection.procedures
        ],
    }
