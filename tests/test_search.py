"""End-to-end search of the sample vault with the real model: known answers, modes, safety."""

from __future__ import annotations

import pytest

from vaultseek.config import SearchSettings
from vaultseek.errors import UsageError
from vaultseek.query import fts_match
from vaultseek.search import Searcher, fit_to_budget


@pytest.fixture
def searcher(index):
    _, store = index()
    return Searcher(store)


@pytest.mark.parametrize(
    "query, expected",
    [
        ("how do I renew an expired access token", "Security/OAuth Token Rotation.md"),
        ("useEffect cleanup", "Engineering/React useEffect cleanup.md"),
        ("asyncio.timeout", "Engineering/Python asyncio patterns.md"),
        ("bake bread in a dutch oven", "Personal/Sourdough bread.md"),
        ("clock skew broke logins", "Security/Incident 2025-04 Login Outage.md"),
        ("认证失败", "中文笔记/认证失败排查.md"),
        ("数据库 恢复演练", "中文笔记/数据库备份.md"),
        ("如何设置 Dataview 插件", "中文笔记/Obsidian 插件设置.md"),
    ],
)
def test_known_answers_rank_first(searcher, query, expected):
    result = searcher.search(query)
    assert result.hits and result.hits[0].path == expected


def test_hybrid_fuses_both_lists(index):
    _, store = index()
    rrf = SearchSettings(fusion="rrf", bm25_weight=1.0, vector_weight=1.0, short_chunk_penalty=0.0, note_support=0.0)
    result = Searcher(store, rrf).search("refresh token rotation")
    top = result.hits[0]
    assert top.bm25_rank is not None and top.vec_rank is not None
    assert top.score == pytest.approx(1 / (60 + top.bm25_rank) + 1 / (60 + top.vec_rank))
    assert sum(top.terms.values()) == pytest.approx(top.score)
    # the default (convex) fusion: see tests/test_ranking.py


def test_modes(searcher):
    bm25 = searcher.search("sourdough", mode="bm25")
    assert bm25.hits[0].path == "Personal/Sourdough bread.md" and bm25.hits[0].vec_rank is None
    vec = searcher.search("baking a loaf at home", mode="vector")
    assert vec.hits[0].path == "Personal/Sourdough bread.md" and vec.hits[0].bm25_rank is None
    with pytest.raises(UsageError):
        searcher.search("x", mode="fuzzy")


def test_k_and_paths_are_relative(searcher):
    result = searcher.search("token", k=3)
    assert len(result.hits) == 3
    assert all(not h.path.startswith("/") for h in result.hits)


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "a*", "col:umn", "^start", "NEAR(a b)", "x AND", "OR", "NOT token", "(((", ")", "a - b", "'", '""', "token\"", "*", "-"],
)
def test_query_syntax_cannot_break_fts(searcher, query):
    """Any input either searches or is refused with a message that says what to do; FTS5 never errs."""
    for mode in ("bm25", "hybrid"):
        try:
            searcher.search(query, mode=mode)
        except UsageError as exc:
            assert "nothing to search for" in str(exc) and exc.hint


def test_operators_are_searched_as_text(searcher):
    assert fts_match("NOT token") == '"token"'  # NOT is a word (a stopword here), never an operator
    assert fts_match('rotate AND (oauth OR key)') == '"rotate" OR "oauth" OR "key"'
    hits = searcher.search("NOT token", mode="bm25").hits
    assert hits  # "token" is still searched; NOT is just a word


def test_empty_query_is_a_usage_error(searcher):
    with pytest.raises(UsageError, match="empty"):
        searcher.search("   ")


def test_max_tokens_cuts_the_list(searcher):
    full = searcher.search("token", k=10)
    cut = searcher.search("token", k=10, max_tokens=100)
    assert 1 <= len(cut.hits) < len(full.hits)
    assert sum(len(h.text) for h in cut.hits) <= 100 * 4
    one = fit_to_budget(full.hits[:1], 5)
    assert len(one) == 1 and len(one[0].text) == 20


def test_falls_back_to_bm25_when_the_model_cannot_load(index, tmp_path):
    _, store = index()
    searcher = Searcher(store, SearchSettings(), model=str(tmp_path / "no-such-model"))
    result = searcher.search("sourdough")
    assert result.mode == "bm25"
    assert result.warnings and "keyword (BM25) results only" in result.warnings[0]
    assert result.hits[0].path == "Personal/Sourdough bread.md"


def test_search_sees_new_notes_without_restart(index, vault):
    _, store = index()
    searcher = Searcher(store)
    assert searcher.search("kombucha fermentation", mode="hybrid").hits[0].path != "Personal/Kombucha.md"
    (vault / "Personal" / "Kombucha.md").write_text("## Brewing\nKombucha fermentation takes ten days at room temperature.\n")
    _, writer = index()
    assert searcher.search("kombucha fermentation", mode="vector").hits[0].path == "Personal/Kombucha.md"
