"""The offline extractor in German, French and Spanish: a user's first-person statement
rewritten in the third person, the way the English rules do ("I drink green tea" →
"User drinks green tea."). Other languages give no memories offline.

Only a sentence that starts with its subject is read (the verb form tells the person):
- German: "Ich <verb> …" → "Der Nutzer <verb, 3rd person> …": irregular forms from a
  table (bin → ist, esse → isst, fahre → fährt, …), otherwise a verb ending in -e loses
  it and takes -t (-et after t or d: arbeite → arbeitet). "mein-" becomes "sein-",
  "mich"/"mir" "sich".
- French: "Je …" / "J'…" → "L'utilisateur …", a negation's "ne"/"n'" and a reflexive
  "me"/"m'" ("se"/"s'") kept in place; verbs in -e are the same in both persons (aime,
  travaille), irregular forms from a table (suis → est, ai → a, bois → boit), other verbs
  in -s end in -t (finis → finit). "mon/ma/mes" become "son/sa/ses".
- Spanish drops the subject: a sentence is read when it starts ("yo", "no" allowed) with
  a first-person form of the table (soy, tengo, vivo, trabajo, prefiero, …) or with
  "me gusta(n)", "me encanta(n)", "me llamo": "Al usuario le gusta…", "El usuario vive…";
  "mi/mis" become "su/sus".
Anything else, a question or a sentence of another person, gives nothing: a rule for
memory statements, not a parser. Category: preference for a liking or aversion, else fact;
importance 0.6 (useful), confidence 1.0 (the user said it).
"""

from __future__ import annotations

import re

from memlane.pipeline.extraction.offline.text import finish

_GERMAN_IRREGULAR = {
    "bin": "ist", "habe": "hat", "hab": "hat", "mag": "mag", "kann": "kann", "muss": "muss",
    "will": "will", "darf": "darf", "soll": "soll", "weiß": "weiß", "esse": "isst",
    "lese": "liest", "spreche": "spricht", "fahre": "fährt", "schlafe": "schläft",
    "laufe": "läuft", "sehe": "sieht", "nehme": "nimmt", "gebe": "gibt", "treffe": "trifft",
    "helfe": "hilft", "trage": "trägt", "halte": "hält", "werde": "wird",
    "vergesse": "vergisst", "wasche": "wäscht", "hasse": "hasst",
}  # fmt: skip
_GERMAN_PRONOUNS = {
    "mein": "sein", "meine": "seine", "meinen": "seinen", "meinem": "seinem",
    "meiner": "seiner", "meines": "seines", "mich": "sich", "mir": "sich",
}  # fmt: skip
_FRENCH_IRREGULAR = {
    "suis": "est", "ai": "a", "vais": "va", "peux": "peut", "veux": "veut", "sais": "sait",
    "dois": "doit", "fais": "fait", "bois": "boit", "vis": "vit", "prends": "prend",
    "apprends": "apprend", "viens": "vient", "connais": "connaît", "lis": "lit",
    "écris": "écrit", "cours": "court", "dors": "dort", "pars": "part", "sors": "sort",
}  # fmt: skip
_FRENCH_PRONOUNS = {"mon": "son", "ma": "sa", "mes": "ses"}
_SPANISH_VERBS = {
    "soy": "es", "estoy": "está", "tengo": "tiene", "voy": "va", "hago": "hace",
    "puedo": "puede", "quiero": "quiere", "prefiero": "prefiere", "vivo": "vive",
    "trabajo": "trabaja", "juego": "juega", "sé": "sabe", "conozco": "conoce",
    "bebo": "bebe", "estudio": "estudia", "odio": "odia", "detesto": "detesta",
    "necesito": "necesita", "uso": "usa", "hablo": "habla", "toco": "toca",
    "cocino": "cocina", "corro": "corre", "leo": "lee", "escribo": "escribe",
}  # fmt: skip
_SPANISH_PRONOUNS = {"mi": "su", "mis": "sus"}
_SPANISH_LIKING = re.compile(r"^(?:a mí\s+)?(no\s+)?me\s+(gusta|gustan|encanta|encantan)\b", re.I)
_LIKING = re.compile(
    r"\b(?:mag|mögen?|liebe|hasse|bevorzuge|gern|aime|adore|déteste|préfère|gusta|gustan|"
    r"encanta|encantan|prefiere|odia|detesta)\b",
    re.I,
)
_WORD = re.compile(r"\S+")


def _german(sentence: str) -> str | None:
    match = re.match(r"^ich\s+(\w+)\b(.*)$", sentence, re.I)
    if match is None:
        return None
    verb, rest = match[1].lower(), match[2]
    third = _GERMAN_IRREGULAR.get(verb)
    if third is None:
        if not verb.endswith("e") or len(verb) < 4:
            return None
        stem = verb[:-1]
        third = stem + ("et" if stem.endswith(("t", "d")) else "t")
    rest = _WORD.sub(lambda m: _GERMAN_PRONOUNS.get(m[0].lower(), m[0]), rest)
    return f"Der Nutzer {third}{rest}"


def _french_verb(verb: str) -> str:
    lowered = verb.lower()
    if lowered in _FRENCH_IRREGULAR:
        return _FRENCH_IRREGULAR[lowered]
    if lowered.endswith(("s", "x")) and not lowered.endswith("es"):
        return lowered[:-1] + "t"
    return lowered


def _french(sentence: str) -> str | None:
    match = re.match(r"^(?:je\s+|j')(ne\s+|n')?(me\s+|m')?(\w+)\b(.*)$", sentence, re.I)
    if match is None:
        return None
    # "ne"/"n'" and "me"/"m'" (→ "se"/"s'") stay elided as the user wrote them
    negation = {"ne": "ne ", "n'": "n'"}.get((match[1] or "").strip().lower(), "")
    reflexive = {"me": "se ", "m'": "s'"}.get((match[2] or "").strip().lower(), "")
    rest = _WORD.sub(lambda m: _FRENCH_PRONOUNS.get(m[0].lower(), m[0]), match[4])
    return f"L'utilisateur {negation}{reflexive}{_french_verb(match[3])}{rest}"


def _spanish(sentence: str) -> str | None:
    if liking := _SPANISH_LIKING.match(sentence):
        negation = "no " if liking[1] else ""
        return f"Al usuario {negation}le {liking[2].lower()}{sentence[liking.end() :]}"
    if named := re.match(r"^me\s+llamo\b(.*)$", sentence, re.I):
        return f"El usuario se llama{named[1]}"
    match = re.match(r"^(?:yo\s+)?(no\s+)?(\w+)\b(.*)$", sentence, re.I)
    if match is None or match[2].lower() not in _SPANISH_VERBS:
        return None
    negation = "no " if match[1] else ""
    rest = _WORD.sub(lambda m: _SPANISH_PRONOUNS.get(m[0].lower(), m[0]), match[3])
    return f"El usuario {negation}{_SPANISH_VERBS[match[2].lower()]}{rest}"


_REWRITERS = {"de": _german, "fr": _french, "es": _spanish}
LANGUAGES = frozenset(_REWRITERS)


def third_person(sentence: str, language: str) -> tuple[str, bool] | None:
    """(the statement in the third person, whether it is a liking or aversion), or None
    when the sentence is no first-person statement these rules read."""
    rewrite = _REWRITERS.get(language)
    text = sentence.strip()
    if rewrite is None or not text or text.endswith("?"):
        return None
    content = rewrite(text)
    if content is None:
        return None
    return finish(content.rstrip(" .!,;:")), bool(_LIKING.search(content))
