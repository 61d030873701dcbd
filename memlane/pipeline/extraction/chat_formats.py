"""Messages as chat apps hold them: the OpenAI chat format and the Anthropic messages
format read into memlane's plain message (a role and one text).

- content as a list of parts: text parts joined with blank lines; images, audio, files
  and documents noted as placeholders (`[image]`, `[file: report.pdf]`); Anthropic
  `thinking` blocks dropped.
- tool calls (OpenAI `tool_calls` / `function_call`, Anthropic `tool_use` parts) and tool
  results (the OpenAI `tool` / `function` role, Anthropic `tool_result` parts) kept as
  context, rendered as `<tool_call …>…</tool_call>` and `<tool_result …>…</tool_result>`
  segments so the extraction prompt can say what they are and the offline extractor can
  leave them out (`without_tool_segments`).
- a message that carries nothing but tool calls or tool results gets the role `tool`:
  it is never read as something the user said, and an assistant message counts toward
  the extraction cadence only when it carries text.
- an OpenAI assistant message may have `content: null` beside `refusal` (read as what
  the assistant said), `audio` (kept as the placeholder `[audio]`; the field itself is
  ignored) or `tool_calls` (an empty list is no tool activity).
- tool segments come only from structured fields: text that merely spells a tool tag
  (a user pasting `<tool_call name="a">…</tool_call>`) stays that speaker's words, its
  tags' spelling broken (`<\\tool_call`, `<\\/tool_call`) so nothing downstream reads it
  as tool activity.
- Anthropic server tool parts (`server_tool_use`, `mcp_tool_use`, and their results,
  `web_search_tool_result`, `mcp_tool_result`, any `*_tool_result`) are tool activity,
  never said text.
- `developer` is read as `system`.
- fields of a message that neither format nor memlane knows are ignored and reported,
  never fatal.
- Anthropic's top-level `system` (a string, or a list of text blocks, `cache_control`
  allowed) becomes the conversation's first message, role `system` (`system_message`).

Pure: plain data in, plain data out. A shape that cannot be read raises ValueError
naming the field (`content.2.text: …`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from xml.sax.saxutils import escape

Flavor = Literal["openai", "anthropic"]
ChatFormat = Literal["auto", "openai", "anthropic"]
CHAT_FORMATS: tuple[ChatFormat, ...] = ("auto", "openai", "anthropic")

# Fields a message may carry that are read (or deliberately not needed); anything else is
# ignored and counted. `name` (a participant's name, or the tool's on a tool message) is
# accepted by both formats.
_KNOWN_FIELDS = frozenset(
    {"id", "role", "content", "created_at", "name", "tool_calls", "tool_call_id"}
    | {"function_call", "refusal"}
)
_ROLE_ALIASES: dict[str, tuple[str, Flavor | None]] = {
    "developer": ("system", "openai"),
    "tool": ("tool", "openai"),
    "function": ("tool", "openai"),
}
_PLACEHOLDERS: dict[str, tuple[str, Flavor | None]] = {
    "image_url": ("image", "openai"),
    "input_audio": ("audio", "openai"),
    "file": ("file", "openai"),
    "image": ("image", "anthropic"),
    "document": ("document", "anthropic"),
}
_TEXT_PARTS: dict[str, Flavor | None] = {
    "text": None,
    "input_text": "openai",
    "output_text": "openai",
}
_DROPPED_PARTS: dict[str, Flavor | None] = {
    "thinking": "anthropic",
    "redacted_thinking": "anthropic",
}
_SEGMENT = re.compile(r"<tool_(call|result)\b[^>]*>.*?</tool_\1>", re.DOTALL)
_CLOSING = re.compile(r"</(tool_(?:call|result))", re.IGNORECASE)
_LITERAL_TAG = re.compile(r"<(/?)(tool_(?:call|result))", re.IGNORECASE)
# A tag said_text broke: markup a speaker typed, around words that are theirs.
_BROKEN_TAG = re.compile(r"<\\/?tool_(?:call|result)\b[^>]*>", re.IGNORECASE)
# Anthropic's server tools (run by the provider, not the app): a call and its result.
_SERVER_TOOL_CALLS = frozenset({"server_tool_use", "mcp_tool_use"})


@dataclass(slots=True)
class _Pieces:
    """The message's text pieces in their order, and whether any is said text."""

    items: list[str]
    said: bool = False

    def text(self, value: str) -> None:
        self.items.append(said_text(value))
        self.said = True

    def tool(self, value: str) -> None:
        self.items.append(value)


@dataclass(frozen=True, slots=True)
class ReadMessage:
    """A message in memlane's shape, with what was left out and which provider's shape it
    used (None when it could be either's, such as a plain string content)."""

    data: dict[str, Any]
    ignored: tuple[str, ...]
    flavor: Flavor | None


def read_message(raw: Mapping[str, Any]) -> ReadMessage:
    """`raw` (a message as OpenAI, Anthropic or memlane spells it) as memlane's message.

    Values of the wrong type for memlane's own fields (a number as content, a list as
    role) are passed on unchanged so the schema reports them where they are."""
    flavors: set[Flavor] = set()
    ignored = [f"field:{key}" for key in raw if key not in _KNOWN_FIELDS]
    data = {key: raw[key] for key in ("id", "created_at") if key in raw}

    role = raw.get("role")
    if isinstance(role, str) and role in _ROLE_ALIASES:
        role, flavor = _ROLE_ALIASES[role]
        if flavor:
            flavors.add(flavor)
    data["role"] = role

    pieces = _Pieces([])
    content = raw.get("content")
    if isinstance(content, list):
        _read_parts(content, pieces, ignored, flavors)
    elif isinstance(content, str):
        if content.strip():
            pieces.text(content)
    elif content is not None:
        data["content"] = content  # wrong type: the schema names it
    elif "audio" in raw and isinstance(raw["audio"], Mapping):
        # An assistant's spoken reply: its audio is the provider's, a placeholder is kept
        # (as for an `input_audio` part); the field is still counted as ignored.
        pieces.text("[audio]")
        flavors.add("openai")
    if "refusal" in raw and isinstance(raw["refusal"], str) and raw["refusal"].strip():
        pieces.text(raw["refusal"])
        flavors.add("openai")
    for call in _openai_tool_calls(raw, flavors):
        pieces.tool(call)

    if role == "tool" and "content" not in data:  # an OpenAI tool result: all of it
        result = _segment(
            "tool_result",
            "\n\n".join(pieces.items),
            id=_opt_str(raw.get("tool_call_id")),
            name=_opt_str(raw.get("name")),
        )
        pieces = _Pieces([result])

    if "content" not in data:
        # "" when nothing was read: the schema then says "content is empty"
        data["content"] = "\n\n".join(pieces.items)
        if pieces.items and not pieces.said and role in ("user", "assistant"):
            data["role"] = "tool"
    if len(flavors) > 1:
        raise ValueError("the message mixes OpenAI and Anthropic shapes")
    return ReadMessage(data, tuple(ignored), next(iter(flavors), None))


def _read_parts(
    parts: list[Any],
    pieces: _Pieces,
    ignored: list[str],
    flavors: set[Flavor],
) -> None:
    for index, part in enumerate(parts):
        where = f"content.{index}"
        kind = part.get("type") if isinstance(part, Mapping) else None
        if not isinstance(kind, str):
            raise ValueError(f"{where}: a content part must be an object with a 'type'")
        assert isinstance(part, Mapping)
        if kind in _TEXT_PARTS:
            text = part.get("text")
            if not isinstance(text, str):
                raise ValueError(f"{where}.text: a '{kind}' part needs its text as a string")
            if text.strip():
                pieces.text(text)
            if flavor := _TEXT_PARTS[kind]:
                flavors.add(flavor)
        elif kind == "refusal":
            flavors.add("openai")
            if isinstance(part.get("refusal"), str):
                pieces.text(part["refusal"])
        elif kind in _PLACEHOLDERS:
            label, flavor = _PLACEHOLDERS[kind]
            if flavor:
                flavors.add(flavor)
            pieces.text(_placeholder(label, part))
        elif kind in _DROPPED_PARTS:
            if flavor := _DROPPED_PARTS[kind]:
                flavors.add(flavor)
        elif kind == "tool_use":
            flavors.add("anthropic")
            name = part.get("name")
            if not isinstance(name, str):
                raise ValueError(f"{where}.name: a 'tool_use' part needs the tool's name")
            pieces.tool(
                _segment(
                    "tool_call",
                    _arguments(part.get("input")),
                    id=_opt_str(part.get("id")),
                    name=name,
                )
            )
        elif kind in _SERVER_TOOL_CALLS:
            flavors.add("anthropic")
            pieces.tool(
                _segment(
                    "tool_call",
                    _arguments(part.get("input")),
                    id=_opt_str(part.get("id")),
                    name=_opt_str(part.get("name")) or kind,
                    server="true",
                )
            )
        elif kind != "tool_result" and kind.endswith("_tool_result"):
            flavors.add("anthropic")
            pieces.tool(
                _segment(
                    "tool_result",
                    _server_result(part.get("content")),
                    id=_opt_str(part.get("tool_use_id")),
                    kind=kind,
                )
            )
        elif kind == "tool_result":
            flavors.add("anthropic")
            inner = part.get("content")
            if isinstance(inner, list):
                nested = _Pieces([])
                _read_parts(inner, nested, ignored, flavors)
                inner = "\n\n".join(nested.items)
            elif inner is None:
                inner = ""
            elif not isinstance(inner, str):
                raise ValueError(f"{where}.content: a tool result is a string or a list of parts")
            error = part.get("is_error") is True
            pieces.tool(
                _segment(
                    "tool_result",
                    inner,
                    id=_opt_str(part.get("tool_use_id")),
                    error="true" if error else None,
                )
            )
        else:
            ignored.append(f"part:{kind}")
            pieces.text(f"[{kind}]")


def said_text(text: str) -> str:
    """`text` as a speaker's words: a tool tag it spells has its spelling broken, so only
    the reader's own segments (from structured fields) are ever tool activity."""
    return _LITERAL_TAG.sub(lambda m: f"<\\{m[1]}{m[2]}", text)


def _server_result(content: Any) -> str:
    """A server tool's result as text: a web search's results one `title <url>` a line
    (their encrypted page content is the provider's), anything else as JSON."""
    if isinstance(content, list):
        lines = []
        for item in content:
            if isinstance(item, Mapping) and isinstance(item.get("url"), str):
                title = item.get("title")
                lines.append(f"{title} <{item['url']}>" if isinstance(title, str) else item["url"])
            elif isinstance(item, Mapping) and isinstance(item.get("text"), str):
                lines.append(item["text"])
            else:
                lines.append(_arguments(item))
        return "\n".join(lines)
    if isinstance(content, str):
        return content
    return _arguments(content)


def _openai_tool_calls(raw: Mapping[str, Any], flavors: set[Flavor]) -> list[str]:
    calls = raw.get("tool_calls")
    legacy = raw.get("function_call")
    if calls is None and legacy is None:
        return []
    flavors.add("openai")
    found: list[str] = []
    if calls is not None:
        if not isinstance(calls, list):
            raise ValueError("tool_calls: expected a list of tool calls")
        for index, call in enumerate(calls):
            function = call.get("function") if isinstance(call, Mapping) else None
            name = function.get("name") if isinstance(function, Mapping) else None
            if not isinstance(name, str):
                raise ValueError(f"tool_calls.{index}.function.name: expected the tool's name")
            assert isinstance(call, Mapping) and isinstance(function, Mapping)
            found.append(
                _segment(
                    "tool_call",
                    _arguments(function.get("arguments")),
                    id=_opt_str(call.get("id")),
                    name=name,
                )
            )
    if legacy is not None:
        if not isinstance(legacy, Mapping) or not isinstance(legacy.get("name"), str):
            raise ValueError("function_call.name: expected the function's name")
        found.append(
            _segment("tool_call", _arguments(legacy.get("arguments")), name=legacy["name"])
        )
    return found


def _arguments(value: Any) -> str:
    # OpenAI sends arguments as a JSON string, Anthropic as an object: both end up as text.
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _placeholder(label: str, part: Mapping[str, Any]) -> str:
    title = None
    if label == "file" and isinstance(part.get("file"), Mapping):
        title = part["file"].get("filename")
    elif label == "document":
        title = part.get("title")
    return f"[{label}: {title}]" if isinstance(title, str) and title.strip() else f"[{label}]"


def _segment(tag: str, body: str, **attributes: str | None) -> str:
    attrs = "".join(
        f" {key}={_quoted(value)}" for key, value in attributes.items() if value is not None
    )
    # A body that spells the closing tag would end the segment early: break the spelling.
    safe_body = _CLOSING.sub(r"<\\/\1", body)
    return f"<{tag}{attrs}>{safe_body}</{tag}>"


def _quoted(value: str) -> str:
    return '"' + escape(value, {'"': "&quot;"}) + '"'


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def without_tool_segments(text: str) -> str:
    """`text` with its tool call and tool result segments removed: what a speaker said
    (tool tags a speaker typed are dropped too, the words between them kept)."""
    return _BROKEN_TAG.sub(" ", _SEGMENT.sub(" ", text))


def check_format(flavors: list[Flavor | None], chat_format: ChatFormat) -> None:
    """Refuse messages whose shapes contradict the named format, or (auto) mix both
    providers' shapes: such a transcript was almost certainly assembled by mistake."""
    if chat_format == "auto":
        seen = {f: i for i, f in reversed(list(enumerate(flavors))) if f is not None}
        if len(seen) > 1:
            raise ValueError(
                f"messages.{seen['openai']} has an OpenAI shape and messages."
                f"{seen['anthropic']} an Anthropic one; send one format (or name it in"
                " 'format')"
            )
        return
    for index, flavor in enumerate(flavors):
        if flavor is not None and flavor != chat_format:
            names = {"openai": "OpenAI", "anthropic": "Anthropic"}
            raise ValueError(
                f"messages.{index} has an {names[flavor]} shape but format is {chat_format!r}"
            )


def read_system(value: Any) -> str:
    """Anthropic's top-level `system` as one text: a string as it is, a list of text
    blocks joined with blank lines (their `cache_control` and other fields are the
    provider's business, not memlane's). ValueError says what is wrong with it."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise ValueError("expected a string or a list of text blocks")
    texts = []
    for index, block in enumerate(value):
        text = block.get("text") if isinstance(block, Mapping) else None
        if not isinstance(block, Mapping) or block.get("type") != "text":
            raise ValueError(f"block {index} is not a text block {{'type': 'text', 'text': ...}}")
        if not isinstance(text, str):
            raise ValueError(f"block {index}: its text must be a string")
        if text.strip():
            texts.append(text)
    return "\n\n".join(texts)


def system_message(system: Any, *, first: tuple[str, str], with_ids: bool) -> dict[str, Any] | None:
    """The message Anthropic's top-level `system` becomes, to go before the transcript's
    messages (`first` is the first one's role and text), or None: a blank system adds
    nothing, and neither does one the first message already is (a transcript re-sent in
    memlane's shape). A system message elsewhere in the messages stays where it is. With
    message ids the system message gets one from its text, so the same system prompt
    re-sent is skipped and a changed one is appended."""
    text = read_system(system)
    if not text.strip() or first == ("system", text):
        return None
    message: dict[str, Any] = {"role": "system", "content": text}
    if with_ids:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        message["id"] = f"system-{digest[:16]}"
    return message
