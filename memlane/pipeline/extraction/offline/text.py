"""Text handling for the offline extractor: clauses, and first person → third person.

Clauses: code blocks are removed, the text is cut into sentences (after . ! ? or at a line
break), and sentences into clauses at ";", " — ", ": ", ", so ", ", if ", and at "," /
"and" / "but" when a first-person subject follows ("My name is Maya, and I live in Lisbon"
→ two clauses). A short leading phrase such as "For the frontend" is glued back onto the
clause it introduces.

Rewriting ("I prefer tabs over spaces" → "User prefers tabs over spaces."):
- the leading subject becomes "User": "I'm" → "User is", "I don't" → "User does not",
  "I no longer like" → "User no longer likes", "my"/"our" → "User's", "let's" →
  "User decided to", "call me" → "User prefers to be called"; from the assistant,
  "your" → "User's".
- in the rest, the speaker's pronouns move to the third person: from the user, I/my/me/
  we/our/us → they/their/them and you/your → the assistant/the assistant's; from the
  assistant, you/your → they/their.
- trailing fillers ("btw", "then", "too", "lol") and emoticons are dropped, one final "."
  is added, and a sentence over 200 characters is cut at its last comma or word.
"""

from __future__ import annotations

import re

from memlane.pipeline.records import Role

MAX_MEMORY_CHARS = 200

_CODE_BLOCK = re.compile(r"```.*?(?:```|\Z)", re.S)
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\s*\n+\s*")
_SUBJECT = r"(?:i|i'm|i've|i'd|i'll|my|we|we're|we've|we'll|let's|our)\b"
_CLAUSE_BREAK = re.compile(
    rf"\s*;\s*|\s+[—–]\s+|\s+-\s+|:\s+(?={_SUBJECT})|,\s+(?=so\s|if\s|in case\s)"
    rf"|,?\s+(?:and|but)\s+(?={_SUBJECT}|(?:she|he|they)\b)|,\s+(?={_SUBJECT})",
    re.I,
)
_CONTEXT_PHRASE = re.compile(
    r"^(?:for|in|at|on|with|during|outside|these days|nowadays|lately)\b[^,]{0,40}$", re.I
)
_HORIZONTAL_SPACE = re.compile(r"[^\S\n]+")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


def sentences(text: str) -> list[str]:
    """The sentences of a message's prose (code blocks removed), stripped, in order."""
    # Runs of spaces become one first, so no later pattern backtracks over a long run.
    prose = _HORIZONTAL_SPACE.sub(" ", _CODE_BLOCK.sub(" ", text.translate(_APOSTROPHES)))
    return [s.strip() for s in _SENTENCE_BREAK.split(prose) if s and s.strip()]


def clauses(sentence: str) -> list[str]:
    """The clauses of one sentence, in order; a leading context phrase stays attached."""
    pieces: list[str] = []
    for piece in (p.strip() for p in _CLAUSE_BREAK.split(sentence)):
        if pieces and _CONTEXT_PHRASE.match(pieces[-1]):
            piece = f"{pieces.pop()}, {piece}"
        if piece:
            pieces.append(piece)
    return pieces


# ----------------------------------------------------------------------- verbs

ADVERBS = (
    r"(?:(?:really|actually|definitely|strongly|much|absolutely|totally|generally|usually|"
    r"mostly|still|also|just|honestly|genuinely|truly|always|never|no longer|sometimes|often|"
    r"rarely|kind of|kinda|personally|particularly|currently|now|finally|recently|seriously)\s+)*"
)
_IRREGULAR = {"be": "is", "am": "is", "have": "has", "do": "does", "go": "goes"}
_UNCHANGED = frozenset(
    str.split(
        "can could should would must might may will shall was were did had chose went made"
        " took got found bought thought said knew began ran set put quit cut let"
    )
)


def third_person(verb: str) -> str:
    """The he/she form of a first-person verb: like → likes, watch → watches, try →
    tries, have → has; past tenses and modals are unchanged."""
    lower = verb.lower()
    if lower in _IRREGULAR:
        return _IRREGULAR[lower]
    if lower in _UNCHANGED or lower.endswith("ed"):
        return verb
    if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        return f"{verb}es"
    if len(lower) > 1 and lower.endswith("y") and lower[-2] not in "aeiou":
        return f"{verb[:-1]}ies"
    return f"{verb}s"


# ----------------------------------------------------------------------- subject

_USER_SUBJECTS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(p, re.I), r)
    for p, r in [
        (r"^let's\s+", "User decided to "),
        (r"^call me\s+", "User prefers to be called "),
        (
            r"^(?:please )?(?:always )?(?:answer|reply|respond|talk|write)(?: to)? me\s+",
            "User wants answers ",
        ),
        (r"^you should\s+", "User wants the assistant to "),
        (r"^migrating\s+", "User is migrating "),
        (r"^(?:the|our|my) (?:final )?decision is to\s+", "User decided to "),
        (r"^(?:my|our) (name|birthday|deadline)'s\s+", r"User's \1 is "),
        (r"^(?:i|we)(?:'m|'re| am| are)\s+", "User is "),
        (r"^(?:i|we)(?:'ve| have)\s+", "User has "),
        (r"^(?:i|we)(?:'d| would)\s+", "User would "),
        (r"^(?:i|we)(?:'ll| will)\s+(?!not\b)", "User will "),
        (r"^(?:i|we) (?:don't|do not)\s+", "User does not "),
        (r"^(?:i|we) (?:didn't|did not)\s+", "User did not "),
        (r"^(?:i|we) (?:can't|cannot|can not)\s+", "User cannot "),
        (r"^(?:i|we) (?:won't|will not)\s+", "User will not "),
        (r"^(?:i|we) (can|could|should|must|might|may)\s+", r"User \1 "),
        (r"^(?:i|we) (?:was|were)\s+", "User was "),
        (r"^(?:my|our)\s+", "User's "),
    ]
]
_USER_VERB_SUBJECT = re.compile(rf"^(?:i|we)\s+(?P<adverbs>{ADVERBS})(?P<verb>[a-z]+)\b", re.I)
_ASSISTANT_SUBJECTS = [(re.compile(r"^your\s+", re.I), "User's ")]


def _rewrite_subject(clause: str, speaker: Role) -> tuple[str, str] | None:
    """(third-person head, rest of the clause), or None when the subject is not known."""
    subjects = _USER_SUBJECTS if speaker == "user" else _ASSISTANT_SUBJECTS
    for pattern, head in subjects:
        match = pattern.match(clause)
        if match:
            return match.expand(head), clause[match.end() :]
    if speaker == "user":
        match = _USER_VERB_SUBJECT.match(clause)
        if match:
            head = f"User {match['adverbs'].lower()}{third_person(match['verb'])}"
            return head, clause[match.end() :]
    return None


# ----------------------------------------------------------------------- pronouns

_USER_PRONOUNS = {
    "i'm": "they're", "i am": "they are", "i've": "they've", "i'd": "they'd",
    "i'll": "they'll", "i was": "they were", "i": "they", "my": "their", "mine": "theirs",
    "me": "them", "myself": "themselves", "we're": "they're", "we've": "they've",
    "we'll": "they'll", "we'd": "they'd", "we": "they", "our": "their", "ours": "theirs",
    "us": "them", "ourselves": "themselves", "you're": "the assistant is",
    "you've": "the assistant has", "your": "the assistant's", "yours": "the assistant's",
    "you": "the assistant",
}  # fmt: skip
_ASSISTANT_PRONOUNS = {
    "you're": "they're", "you've": "they've", "you'll": "they'll", "you'd": "they'd",
    "you": "they", "your": "their", "yours": "theirs", "yourself": "themselves",
}  # fmt: skip


def _pronoun_pattern(table: dict[str, str]) -> re.Pattern[str]:
    words = sorted(table, key=len, reverse=True)  # longest first: "i'm" before "i"
    alternatives = "|".join(re.escape(word).replace(r"\ ", r"\s+") for word in words)
    return re.compile(rf"(?<![\w'/-])(?:{alternatives})(?![\w'/-])", re.I)


_PRONOUN_TABLES = {"user": _USER_PRONOUNS, "assistant": _ASSISTANT_PRONOUNS}
_PRONOUN_PATTERNS = {role: _pronoun_pattern(table) for role, table in _PRONOUN_TABLES.items()}


def shift_pronouns(text: str, speaker: Role) -> str:
    """text with the speaker's first/second-person pronouns in the third person."""
    if speaker not in _PRONOUN_TABLES:
        return text
    table = _PRONOUN_TABLES[speaker]

    def replace(match: re.Match[str]) -> str:
        word = match.group(0)
        if word == "US":  # the country, not "us"
            return word
        return table[" ".join(word.lower().split())]

    shifted = _PRONOUN_PATTERNS[speaker].sub(replace, text)
    if speaker == "user":
        shifted = _ASSISTANT_AS_SUBJECT.sub(_agree_with_assistant, shifted)
    return shifted


# "I like how you format code": after the shift the verb must agree with "the assistant".
_ASSISTANT_AS_SUBJECT = re.compile(
    r"\b(how|when|that|if|because|whenever|while|way) the assistant ([a-z]+)\b"
)
_NOT_VERBS = frozenset(str.split("to and or not also just always never really"))


def _agree_with_assistant(match: re.Match[str]) -> str:
    verb = match.group(2)
    if verb in _NOT_VERBS:
        return match.group(0)
    agreed = {"are": "is", "were": "was"}.get(verb) or third_person(verb)
    return f"{match.group(1)} the assistant {agreed}"


# ----------------------------------------------------------------------- finishing

_TRAILING_FILLER = re.compile(
    r"[\s,]+(?:btw|by the way|lol|haha|though|anyway|then|too|as well|honestly|i think|"
    r"i guess)$",
    re.I,
)
_EMOTICON = re.compile(r"[:;]-?[()DPp]$")
_KEPT_LAST = frozenset(")\"'%+#")


def _strip_trailing_noise(text: str) -> str:
    """Drop trailing punctuation, emoji, emoticons and fillers ("btw", "then", "too").

    A loop over the text's last characters rather than one regex: a single pattern with
    nested repetition backtracks exponentially on long runs of punctuation.
    """
    while True:
        before = text
        end = len(text)
        while end and not (text[end - 1].isalnum() or text[end - 1] in _KEPT_LAST):
            end -= 1
        text = text[:end]
        text = text[:-3] + _EMOTICON.sub("", text[-3:])
        tail_start = max(0, len(text) - 40)  # fillers are short: look at the tail only
        filler = _TRAILING_FILLER.search(text, tail_start)
        text = text[: filler.start()] if filler else text
        if text == before:
            return text


def finish(sentence: str) -> str:
    """One tidy sentence: trailing noise dropped, cut to MAX_MEMORY_CHARS, final '.'."""
    text = _strip_trailing_noise(" ".join(sentence.split()))
    if len(text) > MAX_MEMORY_CHARS:
        cut = text[:MAX_MEMORY_CHARS]
        comma = cut.rfind(", ")
        if comma > MAX_MEMORY_CHARS // 2:
            return f"{cut[:comma]}."
        return f"{cut[: cut.rfind(' ')]}…"
    return f"{text}."


def third_person_sentence(clause: str, speaker: Role, *, context: str = "") -> str | None:
    """The clause as a third-person sentence about the user, or None (unknown subject).

    context, a leading phrase such as "for the frontend", moves to the end:
    "For the frontend, I prefer React" → "User prefers React for the frontend."
    """
    rewritten = _rewrite_subject(clause, speaker)
    if rewritten is None:
        return None
    head, rest = rewritten
    body = f"{head}{shift_pronouns(rest, speaker)}".rstrip(" .!,;:")
    if context:
        body = f"{body} {shift_pronouns(context[0].lower() + context[1:], speaker)}"
    return finish(body)
