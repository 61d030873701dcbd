"""Terms of Chinese and Japanese text, which has no spaces: a longest-match pass over the
cue words (pipeline.language.cues) and stopwords, and character pairs for the rest.

Scanning left to right, at each position the longest cue word or stopword that starts
there is taken: a stopword ends the current run, a cue word ends it and is a term itself.
Otherwise the character joins a run of its kind:
- Han characters: a run of n ≥ 2 gives its n − 1 overlapping pairs ("绿茶饮料" → 绿茶,
  茶饮, 饮料), a run of one the character itself: Lucene's CJK analyser's rule, which
  finds most two-character words without a dictionary;
- katakana (loan words, "コーヒー"): the run is one term;
- Latin letters and digits: a word, as in other languages ("python");
- hiragana (Japanese grammar: particles, verb endings), punctuation, spaces: end a run,
  no term.
A segmenter with a dictionary (jieba, 42 MB installed; janome, 203 MB) splits words
better, but pairs make paraphrases share most of their terms, cost no dependency, and are
deterministic (bench/README.md, multilingual). Japanese written in hiragana only
("りんご") leaves no term: a known limit.
"""

from __future__ import annotations

from itertools import pairwise


def _kind(char: str) -> str:
    code = ord(char)
    if 0x3400 <= code <= 0x9FFF or 0xF900 <= code <= 0xFAFF or char == "々":
        return "han"
    if 0x30A0 <= code <= 0x30FF or 0x31F0 <= code <= 0x31FF:
        return "katakana"
    if 0x3040 <= code <= 0x309F:
        return "hiragana"
    if char.isalnum():
        return "word"
    return "other"


def terms(text: str, cue_words: frozenset[str], stop: frozenset[str]) -> list[str]:
    """The terms of a prepared (NFKC, case-folded) text, in order; cue words included,
    stopwords not."""
    longest = max(map(len, cue_words | stop), default=1)
    found: list[str] = []
    run: list[str] = []
    run_kind = "other"

    def flush() -> None:
        if run_kind == "han":
            found.extend(a + b for a, b in pairwise(run)) if len(run) > 1 else found.extend(run)
        elif run_kind in ("katakana", "word") and run:
            found.append("".join(run))
        run.clear()

    i = 0
    while i < len(text):
        match = next(
            (
                text[i : i + n]
                for n in range(min(longest, len(text) - i), 0, -1)
                if text[i : i + n] in cue_words or text[i : i + n] in stop
            ),
            None,
        )
        if match is not None:
            flush()
            run_kind = "other"
            if match in cue_words:
                found.append(match)
            i += len(match)
            continue
        kind = _kind(text[i])
        if kind != run_kind:
            flush()
            run_kind = kind
        if kind in ("han", "katakana", "word"):
            run.append(text[i])
        i += 1
    flush()
    return found
