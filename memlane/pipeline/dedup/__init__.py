"""Deduplication: keywords, Jaccard similarity and polarity, the prefix filter of the dedup
lookup, which found memories the plan needs, the plan itself, and purged memories' fingerprints."""
