"""Deduplication: keywords, Jaccard similarity and polarity, the prefix filter of the dedup
lookup, which found memories the plan needs, the plan itself, purged memories' fingerprints,
and redacting a removed fact out of the texts derived from it."""
