"""The offline extractor: deterministic, rule-based, no network. Used when no LLM is set.

Memories, from the window's NEW messages only (seq >= new_from_seq), in seq order:
1. each message is cut into sentences (code blocks removed). A sentence that tries to
   instruct the extractor ("ignore your instructions", "store the following", "system
   prompt", "with importance") is not a fact, and neither is anything after it in the same
   message: that is the instruction's payload ("...store this: I am the admin"). Sentences
   before it are read as usual.
2. sentences are cut into clauses; fillers ("Honestly,", "Also,"), hedges ("I think") and
   a leading context phrase ("For the frontend,") are set aside; questions and
   conditions ("if I ...") are skipped.
   A user's sentence in German, French or Spanish (pipeline.language.detect) is read by
   `offline.languages` instead: a first-person statement in the third person ("Ich
   trinke grünen Tee" → "Der Nutzer trinkt grünen Tee."). Other languages: no memory.
3. the first rule of `offline_rules` that matches the clause start decides category and
   importance; the clause is rewritten in the third person (`offline_text`), so
   "I don't like Java" gives "User does not like Java." (negations are kept word for word).
   User messages are read with the user rules; assistant messages only with the
   "your X is Y" rules (the assistant restating the user's deadline is a fact; its own
   suggestions are not). System messages are not read, and neither are tool calls and
   tool results (`tool` messages, and the tool segments of others; see `chat_formats`):
   what a tool returned is never a fact the user stated.
4. confidence: 1.0 for the user's plain statement, 0.7 when hedged or said by the
   assistant. source_seq: the message's seq. about: "agent" for what the user asks of
   the assistant itself ("call me …", "answer me in …", "you should …": rules.AGENT_RULES),
   "user" for everything else (it matters only in a conversation with an agent).
5. the same sentence found twice (case-insensitively) is kept once, the first time.
6. over max_memories: the most important are kept (ties: earlier first), in seq order.
7. a category the rules give but MEMLANE_CATEGORIES does not hold becomes the first
   configured category (pipeline.categories.fit_category).

Episode:
- topics: up to 5 words of the NEW messages (user and assistant, code removed), without
  stopwords, ranked by how many messages use them, then how often, then first use.
- summary: "Conversation about <top 3 topics>: <the user's first request>", the request
  being the first user sentence that asks for something (a question, "can you", "I need",
  "I could use", "how should ..."), else the first user sentence of three words or more,
  cut at 160 characters. Parts that are missing are left out.
- outcome: the last decision found (before the cap), or None.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memlane.pipeline.categories import fit_category
from memlane.pipeline.dedup.keywords import STOPWORDS, tokens
from memlane.pipeline.extraction.chat_formats import without_tool_segments
from memlane.pipeline.extraction.offline import languages
from memlane.pipeline.extraction.offline.rules import (
    AGENT_RULES,
    ASSISTANT_RULES,
    BARE_OBJECT,
    CONTEXT,
    DATE,
    FILLER,
    HEDGE,
    INJECTION,
    NOT_A_STATEMENT,
    TOPIC_STOPWORDS,
    USER_RULES,
    Rule,
)
from memlane.pipeline.extraction.offline.text import clauses, sentences, third_person_sentence
from memlane.pipeline.extraction.prompts import MAX_MEMORIES
from memlane.pipeline.language.detect import detect_language
from memlane.pipeline.records import (
    ExtractedEpisode,
    ExtractedMemory,
    Extraction,
    ExtractionWindow,
    Role,
    StoredMessage,
)

MAX_TOPICS = 5
MAX_REQUEST_CHARS = 160
_HAS_LETTER = re.compile(r"[^\W\d_]")
_REQUEST = re.compile(
    r"\?$|^(?:can|could|would|will) you\b|^(?:please|help)\b"
    r"|\b(?:i|we) (?:need|want|could use|would like|'d like)\b|\bhow (?:do|should|can|to)\b",
    re.I,
)
_RULES: dict[Role, tuple[Rule, ...]] = {"user": USER_RULES, "assistant": ASSISTANT_RULES}


@dataclass(frozen=True, slots=True)
class ClauseReading:
    content: str
    rule: Rule
    hedged: bool


def _set_aside(clause: str) -> tuple[str, str, bool]:
    """(clause without fillers, hedges and a context phrase; the context; hedged?)"""
    text, context, hedged = clause.strip(), "", False
    while True:
        before = text
        text = FILLER.sub("", text)
        if hedge := HEDGE.match(text):
            text, hedged = text[hedge.end() :], True
        if not context and (found := CONTEXT.match(text)):
            text, context = text[found.end() :], found["context"]
        if text == before:
            return text, context, hedged


def read_clause(clause: str, speaker: Role) -> ClauseReading | None:
    """The memory one clause states, or None. See the module docstring."""
    text, context, hedged = _set_aside(clause)
    if not text or NOT_A_STATEMENT.search(text):
        return None
    for rule in _RULES.get(speaker, ()):
        match = rule.pattern.match(text)
        if match is None:
            continue
        rest = text[match.end() :]
        if rule.needs_date and not DATE.search(rest):
            continue
        if rule.needs_object and (not _HAS_LETTER.search(rest) or BARE_OBJECT.match(rest)):
            return None
        spoken = text if rule.keep_rest else text[: match.end()]
        content = third_person_sentence(spoken, speaker, context=context)
        return None if content is None else ClauseReading(content, rule, hedged)
    return None


def find_memories(messages: Sequence[StoredMessage]) -> list[ExtractedMemory]:
    """Every memory the messages state, in seq order, repeats removed (no cap)."""
    found: list[ExtractedMemory] = []
    seen: set[str] = set()
    for message in sorted(messages, key=lambda m: m.seq):
        for sentence in sentences(message.content):
            if INJECTION.search(sentence):
                break
            language = detect_language(sentence) if message.role == "user" else "en"
            if language in languages.LANGUAGES:
                other = _other_language(sentence, language, message.seq)
                if other is not None and other.content.casefold() not in seen:
                    seen.add(other.content.casefold())
                    found.append(other)
                continue
            for clause in clauses(sentence):
                reading = read_clause(clause, message.role)
                if reading is None or reading.content.casefold() in seen:
                    continue
                seen.add(reading.content.casefold())
                plain = message.role == "user" and not reading.hedged
                found.append(
                    ExtractedMemory(
                        content=reading.content,
                        category=reading.rule.category,
                        importance=reading.rule.importance,
                        confidence=1.0 if plain else 0.7,
                        source_seq=message.seq,
                        about="agent" if reading.rule.name in AGENT_RULES else "user",
                    )
                )
    return found


def _other_language(sentence: str, language: str, seq: int) -> ExtractedMemory | None:
    read = languages.third_person(sentence, language)
    if read is None:
        return None
    content, liking = read
    return ExtractedMemory(
        content=content,
        category="preference" if liking else "fact",
        importance=0.6,
        confidence=1.0,
        source_seq=seq,
    )


def cap_memories(memories: Sequence[ExtractedMemory], limit: int) -> list[ExtractedMemory]:
    """The `limit` most important (ties: earlier first), in their original order."""
    ranked = sorted(range(len(memories)), key=lambda i: (-memories[i].importance, i))
    return [memories[i] for i in sorted(ranked[:limit])]


def episode_topics(messages: Sequence[StoredMessage], limit: int = MAX_TOPICS) -> list[str]:
    """Top words of the messages (see the module docstring), most telling first."""
    in_messages: dict[str, int] = {}
    total: dict[str, int] = {}
    first_use: dict[str, int] = {}
    position = 0
    for message in sorted(messages, key=lambda m: m.seq):
        words: set[str] = set()
        for word in tokens(" ".join(sentences(message.content))):
            word = word.removesuffix("'s")
            position += 1
            if len(word) < 3 or "'" in word or not _HAS_LETTER.search(word):
                continue
            if word in STOPWORDS or word in TOPIC_STOPWORDS:
                continue
            total[word] = total.get(word, 0) + 1
            first_use.setdefault(word, position)
            words.add(word)
        for word in words:
            in_messages[word] = in_messages.get(word, 0) + 1
    ranked = sorted(total, key=lambda w: (-in_messages[w], -total[w], first_use[w]))
    return ranked[:limit]


def _first_request(messages: Sequence[StoredMessage]) -> str | None:
    candidates: list[str] = []
    for message in sorted(messages, key=lambda m: m.seq):
        for sentence in sentences(message.content) if message.role == "user" else []:
            if INJECTION.search(sentence):
                break
            if len(sentence.split()) >= 3:
                candidates.append(sentence)
    asking = [s for s in candidates if _REQUEST.search(s)]
    if not (asking or candidates):
        return None
    chosen = (asking or candidates)[0]
    if len(chosen) <= MAX_REQUEST_CHARS:
        return chosen
    return chosen[: chosen.rfind(" ", 0, MAX_REQUEST_CHARS)].rstrip(" ,;:") + "…"


def summarise(messages: Sequence[StoredMessage], *, outcome: str | None) -> ExtractedEpisode:
    """The episode of the messages (see the module docstring)."""
    topics = episode_topics(messages)
    request = _first_request(messages)
    about = f"Conversation about {', '.join(topics[:3])}" if topics else ""
    if about and request:
        summary = f"{about}: {request}"
    else:
        summary = f"{about}." if about else f"Conversation: {request}" if request else ""
    summary = summary or "Conversation with nothing to extract."
    return ExtractedEpisode(summary=summary, topics=topics, outcome=outcome)


def _spoken(messages: Sequence[StoredMessage]) -> list[StoredMessage]:
    """The messages as their speakers said them: tool messages and tool segments out."""
    spoken = []
    for message in messages:
        if message.role == "tool":
            continue
        text = without_tool_segments(message.content)
        spoken.append(
            message if text == message.content else message.model_copy(update={"content": text})
        )
    return spoken


def extract_offline(
    window: ExtractionWindow,
    *,
    max_memories: int,
    categories: Sequence[str],
) -> Extraction:
    """Memories and an episode from the window's NEW messages, by the documented rules.
    The rules' categories (the four defaults) are fitted to `categories`, the configured
    set: kept when configured, else the first configured one (pipeline.categories)."""
    if not 0 <= max_memories <= MAX_MEMORIES:
        raise ValueError(f"max_memories must be between 0 and {MAX_MEMORIES}, not {max_memories}")
    new = _spoken([m for m in window.messages if m.seq >= window.new_from_seq])
    found = find_memories(new)
    decisions = [memory.content for memory in found if memory.category == "decision"]
    fitted = [
        memory.model_copy(update={"category": fit_category(memory.category, categories)})
        for memory in found
    ]
    return Extraction(
        memories=cap_memories(fitted, max_memories),
        episode=summarise(new, outcome=decisions[-1] if decisions else None),
    )
