"""Languages of texts: detection (detect), per-language keywords and polarity (analyser),
the cue words of polarity as data (cues), and the CJK segmenter (cjk)."""
