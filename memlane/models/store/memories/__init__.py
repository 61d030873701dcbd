"""The store of memories and their history: inserts and reads, hand-made edits, events, refs,
the keyword and vector indexes, column reads, purged fingerprints, what a removed memory
leaves behind (scrub) and re-embedding."""
