"""The offline extractor: deterministic, rule-based, no network (extractor), its rules as data
(rules) and its text handling (text)."""
