"""Ranking: relevance (embeddings and BM25), the composite score and strategies, search, the
verified tier, and a user's items as the assembler ranks them (memory table, user view)."""
