"""Hybrid relevance in the store read: lexical candidates (PostgreSQL full-text search,
SQLite's keyword index with BM25) beside the vector top-k, on both backends."""

from __future__ import annotations

from datetime import datetime

import pytest

from memlane.config.settings import load_settings
from memlane.models.db import unit_of_work
from memlane.models.schemas import MemoryCreate
from memlane.models.store.memories import memories
from memlane.models.store.reads import assembly as assembly_reads
from memlane.models.store.reads.assembly import QueryVector, websearch_terms
from memlane.pipeline.dedup.keywords import keywords
from memlane.pipeline.ranking.scoring import blend_relevance
from memlane.service.facade import Memlane


def add(url: str, now: datetime, content: str, vector: list[float], importance: float) -> str:
    with unit_of_work(url) as s:
        return memories.add(
            s,
            user_id="u1",
            memory=MemoryCreate(content=content, importance=importance),
            keywords=keywords(content),
            embedding=vector,
            embedding_model="test",
            now=now,
        ).id


def read(url: str, now: datetime, query: str, vector: list[float], top_k: int):
    with unit_of_work(url) as s:
        return assembly_reads.assembly_candidates(
            s,
            "u1",
            now=now,
            strategy="scored",
            query_vector=QueryVector("test", vector),
            query_text=query,
            top_k=top_k,
        )


def test_a_rare_word_is_found_outside_the_vector_and_strategy_top_k(
    db_url: str, now: datetime
) -> None:
    for i in range(12):
        add(db_url, now, f"User reviewed pull request number {i} for the team", [1.0, 0.0], 0.9)
    rare = add(db_url, now, "User's passport is kept in Reykjavik", [0.0, 1.0], 0.1)
    got = read(db_url, now, "Where is the passport kept, Reykjavik?", [1.0, 0.0], top_k=3)
    assert rare in {m.id for m in got.memories}
    assert max(got.lexical, key=lambda k: got.lexical[k]) == rare
    assert got.relevance[rare] == pytest.approx(0.0, abs=1e-6)  # the vectors never found it
    backend = "fts" if db_url.startswith("postgresql") else "bm25"
    assert got.retrieval_mode.startswith(
        f"{'pgvector-exact' if backend == 'fts' else 'numpy-cosine'}+{backend}+"
    )
    relevance = blend_relevance((m.id for m in got.memories), got.relevance, got.lexical, 0.3)
    assert relevance[rare] == pytest.approx(0.3)  # (1 − 0.3) · 0 + 0.3 · 1


def test_a_word_too_common_for_the_user_picks_no_lexical_candidates(
    db_url: str, now: datetime
) -> None:
    # 8 memories say "deploy" (the cap below is 5): its postings are not read, so the
    # lexical part keeps only the memory with the selective word.
    common = [add(db_url, now, f"User deploy step {i} done", [1.0, 0.0], 0.1) for i in range(8)]
    rare = add(db_url, now, "User deploy runbook lives in Confluence", [1.0, 0.0], 0.1)
    for i in range(12):  # the strategy parts (k=2) take these, most important first
        add(db_url, now, f"User important thing {i}", [1.0, 0.0], 0.9)

    def lexical_ids(cap: int) -> set[str]:
        with unit_of_work(db_url) as s:
            got = assembly_reads.assembly_candidates(
                s,
                "u1",
                now=now,
                strategy="important",
                query_vector=None,
                query_text="deploy confluence",
                top_k=2,
                lexical_top_k=20,
                max_word_postings=cap,
            )
        return {m.id for m in got.memories} & {*common, rare}

    assert lexical_ids(cap=5) == {rare}
    assert lexical_ids(cap=500) == {*common, rare}


def test_postgres_lexical_score_is_ts_rank_cd(pg: str, now: datetime) -> None:
    one = add(pg, now, "User flies to Reykjavik in May", [1.0, 0.0], 0.5)
    two = add(
        pg, now, "User books flights to Reykjavik for the Reykjavik marathon", [1.0, 0.0], 0.5
    )
    got = read(pg, now, "Reykjavik", [1.0, 0.0], top_k=10)
    # ts_rank_cd of a one-word query: 0.1 per occurrence of the lexeme
    assert got.lexical == {one: pytest.approx(0.1), two: pytest.approx(0.2)}


@pytest.mark.parametrize(
    "query",
    [
        "c++ & | ! ( ) : * 'x' <-> ² -- or and not 東京",
        "the of and a",  # only stop words: an empty tsquery
        "???",
        " ".join(f"word{i}" for i in range(500)),
    ],
)
def test_any_query_text_is_safe_for_the_full_text_search(
    db_url: str, now: datetime, query: str
) -> None:
    add(db_url, now, "User lives in 東京 and writes C++", [1.0, 0.0], 0.5)
    got = read(db_url, now, query, [1.0, 0.0], top_k=5)
    assert len(got.memories) == 1


def test_websearch_terms_keep_only_words() -> None:
    assert websearch_terms("C++ & (tea) or NOT coffee: 東京!") == "c or tea or coffee or 東京"
    assert websearch_terms("?! --") is None
    assert websearch_terms(" ".join(f"w{i}" for i in range(100))).count(" or ") == 31


@pytest.mark.parametrize("weight", [0.3, 0.0])
def test_an_exact_name_reaches_the_context_only_through_the_lexical_half(
    db_url: str, now: datetime, weight: float
) -> None:
    lane = Memlane(load_settings(database_url=db_url, hybrid_lexical_weight=weight))
    try:
        for i in range(40):  # distinct enough not to be duplicates of one another
            filler = f"User fixed flaky test number {i} in CI run r{i} on box b{i} at gate g{i}"
            lane.add_memory("u1", {"content": filler})
        with unit_of_work(db_url) as s:  # no vector: only its words can find it
            name = memories.add(
                s,
                user_id="u1",
                memory=MemoryCreate(content="User's landlord is Ingrid Solberg", importance=0.5),
                keywords=keywords("User's landlord is Ingrid Solberg"),
                embedding=None,
                embedding_model=None,
                now=now,
            ).id
        context = lane.assemble("u1", "Is Solberg the landlord?", budget_tokens=250, now=now)
        scores = {i.id: i.score for i in context.pack.items if i.score is not None}
        others = [score for memory_id, score in scores.items() if memory_id != name]
        assert len(others) == 40
        if weight > 0:
            # lexical 1.0 · 0.3 · 0.4 = 0.12 outweighs the 0.2 lower importance (· 0.3)
            assert scores[name] > max(others)
            assert "Ingrid Solberg" in context.text
        else:
            # whether it still fits beside the best ones depends on their ids' tokens
            assert scores[name] < min(others)
    finally:
        lane.close()
