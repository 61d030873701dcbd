"""Extraction: when it is due (cadence), the prompt, the LLM answer parsed and validated, chat
formats read, and the offline extractor used when no LLM is set."""
