"""Forgiving lexical search: CJK in three scripts, prefixes, substrings, typos, phrases,
exclusions, filters, grouping, proximity and snippets."""

from __future__ import annotations

import pytest

from vaultseek.errors import UsageError
from vaultseek.lexical import closeness, edit_distance
from vaultseek.query import Filters, parse_query
from vaultseek.search import Searcher
from vaultseek.snippet import highlight_spans, make_snippet, term_pattern

EXTRA_NOTES = {
    "日本語/リンクの使い方.md": "---\ntitle: リンクの使い方\ntags: [obsidian]\n---\n## 内部リンク\nノート同士をつなぐには内部リンクを使います。バックリンクパネルで逆方向のリンクも確認できます。\n",
    "한국어/동기화 설정.md": "---\ntitle: 동기화 설정\n---\n## 동기화\n여러 기기에서 노트를 동기화하려면 설정에서 동기화를 켜고 보관소를 선택하세요.\n",
    "Engineering/Win32 files.md": "---\ntitle: Win32 files\ntype: reference\ntags: [windows, project/alpha]\ndate: 2024-06-01\n---\n## Opening files\nCall CreateFileW with OPEN_EXISTING to open a file; check GetLastError when it returns INVALID_HANDLE_VALUE.\n",
    "Engineering/Long note.md": "---\ntitle: Long note\n---\n"
    + "".join(f"## Part {i}\nThe deployment checklist item {i} covers canary releases and rollback plans in detail.\n\n" for i in range(6)),
}


@pytest.fixture
def searcher(index, vault):
    for rel, text in EXTRA_NOTES.items():
        path = vault / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    _, store = index()
    return Searcher(store)


def top(searcher, query, **kw):
    return [h.path for h in searcher.search(query, **kw).hits]


# -- CJK -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query, expected",
    [
        ("认证失败", "中文笔记/认证失败排查.md"),  # Chinese: words inside an unsegmented run
        ("令牌 过期", "中文笔记/认证失败排查.md"),
        ("リンク", "日本語/リンクの使い方.md"),  # katakana inside longer runs (バックリンクパネル)
        ("バックリンク", "日本語/リンクの使い方.md"),
        ("동기화", "한국어/동기화 설정.md"),  # Korean
        ("보관소 선택", "한국어/동기화 설정.md"),
        ("如何设置 Dataview 插件", "中文笔记/Obsidian 插件设置.md"),  # mixed Chinese and English
    ],
)
def test_cjk_words_inside_unsegmented_text(searcher, query, expected):
    assert top(searcher, query, mode="bm25")[0] == expected
    assert top(searcher, query)[0] == expected


# -- partial words and typos -----------------------------------------------------------------


@pytest.mark.parametrize(
    "query, expected",
    [
        ("useEff", "Engineering/React useEffect cleanup.md"),
        ("dataviewj", "中文笔记/Obsidian 插件设置.md"),
        ("CreateFil", "Engineering/Win32 files.md"),
        ("FileW", "Engineering/Win32 files.md"),  # inside a longer identifier
    ],
)
def test_prefix_and_substring(searcher, query, expected):
    result = searcher.search(query, mode="bm25")
    assert result.hits and result.hits[0].path == expected
    assert not result.corrections


def test_typo_is_corrected_and_shown(searcher):
    result = searcher.search("zettelkastn", mode="bm25")
    assert result.corrections == {"zettelkastn": "zettelkasten"}
    assert result.hits[0].path == "Personal/Zettelkasten method.md"
    assert searcher.search("sourdouhg bread", mode="bm25").hits[0].path == "Personal/Sourdough bread.md"


def test_typo_correction_can_be_turned_off(searcher):
    result = searcher.search("zettelkastn", mode="bm25", fix_typos=False)
    assert not result.corrections and result.hits == []


def test_known_words_are_never_corrected(searcher):
    assert searcher.search("token rotation", mode="bm25").corrections == {}


def test_edit_distance():
    assert edit_distance("kitten", "sitting", 5) == 3
    assert edit_distance("zettelkastn", "zettelkasten", 2) == 1
    assert edit_distance("recieve", "receive", 2) == 1  # a transposition counts once
    assert edit_distance("abcdef", "uvwxyz", 2) == 3  # stops early past the limit


# -- phrases, exclusions, filters --------------------------------------------------------------


def test_exact_phrase_must_occur(searcher):
    hits = searcher.search('"refresh token rotation"').hits
    assert [h.path for h in hits] == ["Security/OAuth Token Rotation.md"]
    assert "refresh token rotation" in hits[0].text.lower()


def test_exclusion_removes_results_from_both_lists(searcher):
    for mode in ("bm25", "vector", "hybrid"):
        hits = searcher.search("token -refresh", mode=mode).hits
        assert hits and all("refresh" not in h.text.lower() for h in hits)


def test_filters_apply_to_both_lists(searcher):
    for mode in ("bm25", "vector", "hybrid"):
        assert set(top(searcher, "token tag:incident", mode=mode)) == {"Security/Incident 2025-04 Login Outage.md"}
        assert set(top(searcher, "notes path:Engineering/", mode=mode)) <= {p for p in EXTRA_NOTES if p.startswith("Engineering")} | {
            "Engineering/Docker Networking.md", "Engineering/Python asyncio patterns.md", "Engineering/React useEffect cleanup.md"}
    assert set(top(searcher, "files", filters=Filters(types=("reference",)))) == {"Engineering/Win32 files.md"}
    # tag:project finds #project and the nested #project/alpha; tag:project/alpha only the latter
    assert set(top(searcher, "files tag:project")) == {"Engineering/Win32 files.md", "Projects/Vaultseek roadmap.md"}
    assert set(top(searcher, "files tag:project/alpha")) == {"Engineering/Win32 files.md"}
    assert "Engineering/Win32 files.md" in top(searcher, "files before:2024-12-31")
    assert "Engineering/Win32 files.md" not in top(searcher, "files after:2025-01-01")


def test_query_language_parsing():
    q = parse_query('"exact phrase" -draft tag:security path:"My Folder/" after:2025-01-01 std::vector')
    assert q.phrases == ("exact phrase",) and q.excluded == ("draft",)
    assert q.filters.tags == ("security",) and q.filters.paths == ("My Folder/",) and q.filters.after == "2025-01-01"
    assert q.text == "exact phrase std::vector"
    assert parse_query('unbalanced "quote').text == "unbalanced quote"
    with pytest.raises(UsageError, match="needs a date"):
        parse_query("after:yesterday")


# -- grouping, proximity, snippets -------------------------------------------------------------


def test_one_note_cannot_fill_the_page(searcher):
    paths = top(searcher, "deployment checklist canary rollback", k=10)
    assert paths.count("Engineering/Long note.md") == 2
    paths = top(searcher, "deployment checklist canary rollback", k=10, per_note=0)
    assert paths.count("Engineering/Long note.md") == 6


def test_closeness():
    pats = [term_pattern(["token"]), term_pattern(["rotation"])]
    assert closeness("token rotation", pats) == 1.0
    assert 0 < closeness("token " + "word " * 50 + "rotation", pats) < 0.1
    assert closeness("only token here", pats) == 0.0


def test_proximity_moves_close_matches_up(searcher):
    plan = searcher.lex.plan(parse_query("canary releases rollback"))
    plain = searcher.lex.search(plan, 10)
    boosted = searcher.lex.search(plan, 10, proximity=1.0)
    assert sorted(c for c, _ in plain) == sorted(c for c, _ in boosted)
    assert all(b <= a for (_, a), (_, b) in zip(sorted(plain), sorted(boosted)))  # scores only improve


def test_snippet_window_and_highlights():
    text = "Intro words. " * 40 + "The refresh token is rotated on every use, so the old refresh token stops working. " + "Filler. " * 40
    snippet = make_snippet(text, ["refresh", "token"])
    assert 150 <= len(snippet) <= 300 and "refresh token" in snippet
    assert snippet.startswith("…") and snippet.endswith("…")
    spans = highlight_spans(snippet, ["refresh", "token"])
    assert [snippet[a:b].lower() for a, b in spans][:2] == ["refresh", "token"]
    assert highlight_spans("用户认证失败排查", ["认证失败"]) == [[2, 4], [4, 6]]


def test_review_regressions(searcher, index, vault):
    # an exclusion that matches nothing must not empty the vector list (review #3)
    hits = searcher.search("token -zzqqxx", mode="vector").hits
    assert hits and searcher.search("token -zzqqxx").hits[0].vec_rank is not None
    # a NUL in a query is searched around, never an FTS5 error
    searcher.search("token -a\x00b")
    # a correction never lands on a stopword
    assert "for" not in searcher.search("fro", mode="bm25").corrections.values()
    # -k larger than the candidates and than SQLite's variable limit
    assert len(searcher.search("the", k=5000, per_note=0).hits) > 30


def test_k_results_survive_the_per_note_cap(index, vault):
    """One note with many matching chunks cannot leave fewer than k notes in the list (review #4)."""
    for i in range(3):
        (vault / f"big{i}.md").write_text("".join(f"## Part {j}\nThe zephyr wind report number {j} for the coast.\n\n" for j in range(40)))
    for i in range(10):
        (vault / f"small{i}.md").write_text(f"A single zephyr sighting, entry {i}, was logged at dawn.")
    _, store = index()
    s = Searcher(store)
    for mode in ("bm25", "vector", "hybrid"):
        paths = [h.path for h in s.search("zephyr", k=10, mode=mode).hits]
        assert len(paths) == 10 and max(paths.count(p) for p in paths) <= 2


def test_common_words_count_in_small_vaults(index, vault):
    """Words in most chunks are only dropped when a big vault needs it (review #5)."""
    for i in range(30):
        (vault / f"k{i}.md").write_text(f"Kubernetes cluster note {i} with enough words to be a chunk.")
    (vault / "both.md").write_text("Kubernetes backup runbook: restore etcd from the nightly backup.")
    _, store = index()
    hits = Searcher(store).search("kubernetes backup", mode="bm25").hits
    assert hits[0].path == "both.md"


def test_path_filter_with_trailing_slash_is_that_folder(index, vault):
    (vault / "Proj").mkdir()
    (vault / "Proj" / "b.md").write_text("Roadmap for the widget project, second draft.")
    _, store = index()
    s = Searcher(store)
    assert {h.path for h in s.search("roadmap path:Proj/").hits} == {"Proj/b.md"}
    assert "Projects/Vaultseek roadmap.md" in {h.path for h in s.search("roadmap path:Proj").hits}
