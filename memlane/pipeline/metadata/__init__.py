"""Metadata: a JSON object a transcript (or a memory added by hand) carries, kept by what
is learned from it, and the filter language every read takes.

`values`: what metadata may hold, and how two conversations' metadata merge.
`filters`: a filter parsed (errors name the bad part's path) and `matches`, the meaning
the store's SQL (models/store/metadata_sql.py) and the working set both follow.
"""
