"""The store of user-level data: the change feed, everything of a user an assembly can use,
soul blocks, procedures, episodes and packs, export and import, retention, erasure."""
