"""Tests for vaultseek.evaluate: metrics, datasets, BEIR and golden-set runs, the self-test, explain."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest

from vaultseek import cli
from vaultseek.config import Config
from vaultseek.errors import UsageError, VaultseekError
from vaultseek.evaluate import (
    Dataset,
    build_corpus_vault,
    compare_runs,
    dcg,
    explain,
    index_vault,
    load_dataset,
    mrr_at_k,
    ndcg_at_k,
    note_file_name,
    ranked_chunks,
    recall_at_k,
    register_cli,
    run_dataset,
    self_test_dataset,
    summarize,
    write_dataset,
)
from vaultseek.markdown import parse_note
from vaultseek.search import Searcher

# -- metrics, against hand-worked examples ------------------------------------------------------


def test_dcg_uses_linear_gains_and_log2_discount() -> None:
    # ranks 1..3 with gains 3, 0, 1: 3/log2(2) + 0 + 1/log2(4) = 3 + 0.5
    assert dcg([3, 0, 1], 10) == pytest.approx(3.5)
    assert dcg([3, 0, 1], 1) == pytest.approx(3.0)


def test_ndcg_graded() -> None:
    qrels = {"a": 1, "c": 2}
    # DCG = 1/log2(2) + 0 + 2/log2(4) = 2; ideal order c, a: 2/1 + 1/log2(3) = 2.6309
    assert ndcg_at_k(["a", "b", "c"], qrels, 10) == pytest.approx(2 / (2 + 1 / math.log2(3)))
    assert ndcg_at_k(["c", "a"], qrels, 10) == pytest.approx(1.0)
    # at k=1 only "a" counts: 1 / 2 (the ideal first result has gain 2)
    assert ndcg_at_k(["a", "b", "c"], qrels, 1) == pytest.approx(0.5)


def test_ndcg_ideal_comes_from_the_qrels_not_the_ranking() -> None:
    # one relevant result found at rank 3 of three relevant ones: (1/log2(4)) / (1 + 1/log2(3) + 1/2)
    qrels = {"a": 1, "b": 1, "c": 1}
    assert ndcg_at_k(["x", "y", "a"], qrels, 10) == pytest.approx(0.5 / (1 + 1 / math.log2(3) + 0.5))


def test_zero_grades_and_unjudged_results_are_not_relevant() -> None:
    qrels = {"a": 0, "b": 1}
    assert ndcg_at_k(["a", "z"], qrels) == 0.0
    assert recall_at_k(["a", "z"], qrels) == 0.0
    assert mrr_at_k(["a", "z", "b"], qrels) == pytest.approx(1 / 3)
    assert ndcg_at_k(["a"], {"a": 0}) == 0.0  # nothing relevant: 0, not a division by zero


def test_recall_and_mrr_cut_offs() -> None:
    qrels = {"a": 1, "b": 1}
    ranking = ["x", "a", "y", "b"]
    assert recall_at_k(ranking, qrels, 2) == 0.5
    assert recall_at_k(ranking, qrels, 4) == 1.0
    assert mrr_at_k(ranking, qrels, 10) == 0.5
    assert mrr_at_k(ranking, qrels, 1) == 0.0


def test_summarize_means_overall_and_per_type() -> None:
    from vaultseek.evaluate import QueryResult

    rows = [
        QueryResult("1", "q", "title", [], {"ndcg@10": 1.0, "recall@10": 1.0, "mrr@10": 1.0, "recall@100": 1.0}),
        QueryResult("2", "q", "heading", [], {"ndcg@10": 0.0, "recall@10": 0.0, "mrr@10": 0.0, "recall@100": 1.0}),
    ]
    s = summarize(rows)
    assert s["ndcg@10"] == 0.5 and s["recall@100"] == 1.0 and s["queries"] == 2
    assert s["by_type"]["title"]["ndcg@10"] == 1.0 and s["by_type"]["heading"]["queries"] == 1


# -- datasets ---------------------------------------------------------------------------------

DOCS = [
    {"_id": "d1", "title": "Photosynthesis in kelp forests", "text": "Giant kelp converts sunlight into sugar along its fronds, feeding the forest ecosystem."},
    {"_id": "d2", "title": "Volcanic soil fertility", "text": "Ash from eruptions weathers into minerals that make farmland unusually productive."},
    {"_id": "d3", "title": "Sourdough starter microbiology", "text": "Wild yeast and lactobacilli ferment flour and water, leavening bread and souring it."},
    {"_id": "d4", "title": "Tidal energy turbines", "text": "Underwater rotors harvest the kinetic energy of tides, a predictable renewable source."},
    {"_id": "d5", "title": "Migratory routes of arctic terns", "text": "Arctic terns fly from pole to pole each year, the longest migration of any animal."},
    {"_id": "q3", "title": "Bread baking with wild yeast", "text": "Wild yeast sourdough bread needs a lively starter of flour and water."},
    {"_id": "d/7 odd:id", "title": "Glacier retreat measurements", "text": "Satellite altimetry shows mountain glaciers losing mass faster each decade."},
]
QUERIES = {
    "q1": "Photosynthesis in kelp forests",
    "q2": "tidal energy turbines",
    "q3": "wild yeast sourdough bread starter",
    "q4": "glacier retreat satellite measurements",
}
QRELS = {"q1": {"d1": 1}, "q2": {"d4": 2}, "q3": {"d3": 1}, "q4": {"d/7 odd:id": 1}}
TYPES = {"q1": "title", "q2": "title", "q3": "keywords", "q4": "keywords"}


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep saved runs and cache vaults out of the user's cache."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("VAULTSEEK_CACHE_DIR", str(folder))
    return folder


def write_beir(folder: Path) -> Path:
    folder.mkdir()
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for doc in DOCS:
            fh.write(json.dumps(doc) + "\n")
    write_dataset(Dataset("tiny", QUERIES, QRELS, TYPES), folder)  # type: ignore[arg-type]
    return folder


def run_cli(argv: list[str]) -> int:
    """`vaultseek ARGV` with the eval commands registered (whether or not cli.py does it yet)."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if "eval" not in sub.choices:
        register_cli(sub)
    args = parser.parse_args(argv)
    cli.setup_logging(0, quiet=True)
    try:
        return args.func(args)
    except VaultseekError as exc:
        return exc.exit_code


def test_load_dataset_keeps_only_judged_queries(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "tiny")
    with open(folder / "queries.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"_id": "unjudged", "text": "no qrels"}) + "\n")
    ds = load_dataset(folder)
    assert set(ds.queries) == set(QUERIES)
    assert ds.qrels["q2"] == {"d4": 2.0}
    assert ds.types["q3"] == "keywords"
    assert ds.corpus == folder / "corpus.jsonl"


def test_load_dataset_reports_the_bad_line(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "tiny")
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1 d1 1\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"qrels.tsv:2"):
        load_dataset(folder)
    with pytest.raises(UsageError, match="no queries.jsonl"):
        load_dataset(tmp_path)


def test_note_file_names_are_safe_and_distinct() -> None:
    assert note_file_name("4983") == "4983.md"
    names = {note_file_name(i) for i in ("a/b", "a:b", "a b", "../x", "CON")}
    assert len(names) == 5
    assert all("/" not in n and ":" not in n and not n.startswith(".") and n != "CON.md" for n in names)


# -- end to end, with the real model and a real SQLite file ----------------------------------------


@pytest.fixture(scope="module")
def beir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Dataset, Searcher, dict[str, str], Path]:
    root = tmp_path_factory.mktemp("beir")
    folder = write_beir(root / "tiny")
    ds = load_dataset(folder)
    notes = build_corpus_vault(ds.corpus, root / "cache")  # type: ignore[arg-type]
    store, _ = index_vault(root / "cache" / "vault", root / "cache" / "index.db", Config())
    return ds, Searcher(store), notes, root


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "vector"])
def test_beir_exact_titles_rank_first(beir, mode: str) -> None:
    ds, searcher, notes, _ = beir
    results = {r.id: r for r in run_dataset(searcher, ds, mode, notes.get)}
    assert results["q1"].ranking[0] == "d1"
    assert results["q2"].ranking[0] == "d4"
    assert results["q2"].metrics["ndcg@10"] == 1.0
    if mode != "vector":
        assert results["q4"].ranking[0] == "d/7 odd:id"  # an id that is not a safe file name
        assert summarize(list(results.values()))["by_type"]["title"]["mrr@10"] == 1.0


def test_a_result_with_the_query_id_is_never_counted(beir) -> None:
    ds, searcher, notes, _ = beir
    results = {r.id: r for r in run_dataset(searcher, ds, "bm25", notes.get)}
    assert "q3" not in results["q3"].ranking  # doc "q3" matches query "q3" best, but is its own id
    assert results["q3"].ranking[0] == "d3"


def test_fast_ranking_matches_the_search_pipeline(beir) -> None:
    _, searcher, _, _ = beir
    for mode in ("hybrid", "bm25", "vector"):
        for query in ("wild yeast bread", "energy from the sea"):
            assert ranked_chunks(searcher, query, mode, 50) == [h.chunk_id for h in searcher.search(query, k=50, mode=mode, per_note=0).hits]


def test_a_deep_ranking_starts_as_the_k10_search_does(beir) -> None:
    """`eval` asks for 300 results; its first ten must be what `search -k 10` shows (the convex
    fusion normalises each list at its 30th candidate, however deep the list is)."""
    _, searcher, _, _ = beir
    for query in ("wild yeast bread", "energy from the sea", "glacier"):
        assert ranked_chunks(searcher, query, "hybrid", 300)[:10] == ranked_chunks(searcher, query, "hybrid", 10)


def test_summary_reports_both_halves() -> None:
    from vaultseek.evaluate import QueryResult, half_of

    m = lambda v: {"ndcg@10": v, "recall@10": v, "mrr@10": v, "recall@100": v}  # noqa: E731
    ids = [str(i) for i in range(40)]
    assert {half_of(q) for q in ids} == {"A", "B"} and half_of("7") == half_of("7")
    rows = [QueryResult(q, "t", None, [], m(1.0 if half_of(q) == "A" else 0.0)) for q in ids]
    halves = summarize(rows)["halves"]
    assert halves["A"]["ndcg@10"] == 1.0 and halves["B"]["ndcg@10"] == 0.0
    assert halves["A"]["queries"] + halves["B"]["queries"] == 40


def test_corpus_vault_is_reused_when_unchanged(beir) -> None:
    ds, searcher, notes, root = beir
    vault = root / "cache" / "vault"
    before = {p.name: p.stat().st_mtime_ns for p in vault.iterdir()}
    assert build_corpus_vault(ds.corpus, root / "cache") == notes
    assert {p.name: p.stat().st_mtime_ns for p in vault.iterdir()} == before
    from vaultseek.indexer import Indexer

    summary = Indexer(vault, searcher.store, Config()).run()
    assert summary.unchanged == len(DOCS) and summary.embedded == 0
    assert (vault / "d1.md").read_text(encoding="utf-8").startswith('---\ntitle: "Photosynthesis in kelp forests"\n---\n')


def test_eval_cli_json_save_and_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_beir(tmp_path / "tiny")
    assert run_cli(["eval", str(folder), "--mode", "bm25", "--json", "--save", "base"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data)[:6] == ["ndcg@10", "recall@10", "mrr@10", "recall@100", "queries", "by_type"]
    assert data["queries"] == 4 and set(data["by_type"]) == {"title", "keywords"}
    assert data["recall@100"] == 1.0
    assert run_cli(["eval", str(folder), "--mode", "hybrid", "--compare", "base"]) == 0
    out = capsys.readouterr().out
    assert "ndcg@10" in out
    assert "against 'base' (4 queries in both runs)" in out
    assert not (folder / ".vaultseek-eval").exists()  # nothing written into the dataset folder


def test_compare_runs_counts_wins_and_losses() -> None:
    from vaultseek.evaluate import QueryResult

    m = lambda v: {"ndcg@10": v, "recall@10": v, "mrr@10": v, "recall@100": v}  # noqa: E731
    now = [QueryResult("a", "qa", None, [], m(1.0)), QueryResult("b", "qb", None, [], m(0.0)), QueryResult("c", "qc", None, [], m(0.5))]
    c = compare_runs(now, {"a": m(0.5), "b": m(0.25), "c": m(0.5), "gone": m(1.0)})
    assert [w[0] for w in c.wins] == ["a"] and [w[0] for w in c.losses] == ["b"]
    assert c.delta["ndcg@10"] == pytest.approx((0.5 - 0.25 + 0) / 3, abs=1e-4)
    assert (c.common, c.only_saved) == (3, 1)


# -- vault golden sets, the self-test, explain -------------------------------------------------------


@pytest.fixture()
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    (root / "Projects").mkdir(parents=True)
    (root / "Private").mkdir()
    (root / ".vaultseek").mkdir()
    (root / ".vaultseek" / "config.toml").write_text('[index]\nprivate_folders = ["Private"]\n', encoding="utf-8")
    (root / "Projects" / "Rotate OAuth tokens.md").write_text(
        "---\naliases: [token rotation runbook]\n---\n# Rotate OAuth tokens\n\nRevoke the old refresh token, issue a new one and update the vault secret store.\n\n"
        "## Rollback plan\n\nKeep the previous credentials valid for one hour so clients can fall back.\n",
        encoding="utf-8",
    )
    (root / "Projects" / "Garden planting calendar.md").write_text(
        "# Garden planting calendar\n\nSow tomatoes indoors in March and plant them out after the last frost.\n\n## Usage\n\nCheck the calendar weekly.\n",
        encoding="utf-8",
    )
    (root / "Espresso recipe.md").write_text(
        "# Espresso recipe\n\nEighteen grams of finely ground coffee, twenty-five seconds of extraction.\n\n## Usage\n\nDial in the grinder each morning.\n",
        encoding="utf-8",
    )
    (root / "Private" / "Diary.md").write_text("# Diary\n\nSecret thoughts about espresso and tomatoes.\n", encoding="utf-8")
    return root


def test_golden_set_for_a_vault(vault: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    golden = tmp_path / "golden"
    write_dataset(
        Dataset(
            "golden",
            {"g1": "how do I rotate an oauth token", "g2": "when to sow tomatoes"},
            {"g1": {"Projects/Rotate OAuth tokens.md": 1}, "g2": {"Projects/Garden planting calendar.md": 1}},
            {"g1": "question", "g2": "question"},
        ),
        golden,
    )
    db = tmp_path / "index.db"
    assert run_cli(["eval", str(golden), "--vault", str(vault), "--db", str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["queries"] == 2 and data["mrr@10"] == 1.0 and data["by_type"]["question"]["recall@10"] == 1.0
    assert db.is_file()  # the index was brought up to date first


def test_self_test_queries_skip_ambiguous_texts() -> None:
    notes = [
        parse_note("a.md", "---\naliases: [alpha note]\n---\n# Alpha\n\n## Usage\n\n## Install steps\n\nx"),
        parse_note("b.md", "# Beta project\n\n## Usage\n\ntext\n\n## Related\n\n[[a]]"),
    ]
    ds = self_test_dataset(notes, skip_sections=("related",))
    texts = {ds.queries[q]: (ds.types[q], next(iter(ds.qrels[q]))) for q in ds.queries}
    assert texts["Alpha"] == ("title", "a.md")
    assert texts["alpha note"] == ("alias", "a.md")
    assert texts["Install steps"] == ("heading", "a.md")
    assert texts["Beta project"] == ("title", "b.md")
    assert "Usage" not in texts and "Related" not in texts  # shared by two notes / not indexed


def test_self_test_variants_misspell_and_cut_titles() -> None:
    from vaultseek.evaluate import title_variants

    assert title_variants("Bookmarks") == {"typo": "Bookmraks", "partial": "Bookm"}
    v = title_variants("Properties view")
    assert v["partial"] == "Proper" and v["typo"] != "Properties view" and v["typo"].endswith(" view")
    assert sorted(v["typo"].lower()) == sorted("properties view")  # two letters swapped, nothing lost
    assert title_variants("Canvas") == {"typo": title_variants("Canvas")["typo"]}  # too short to cut
    assert title_variants("A to B") == {} and title_variants("数据库") == {}
    assert title_variants("Interpreter") == title_variants("Interpreter")  # deterministic
    notes = [parse_note("a.md", "# Bookmarks\n\ntext"), parse_note("b.md", "# Graph view\n\ntext")]
    ds = self_test_dataset(notes, variants=True)
    by_text = {ds.queries[q]: ds.types[q] for q in ds.queries}
    assert by_text["Bookmraks"] == "typo" and by_text["Bookm"] == "partial" and by_text["Bookmarks"] == "title"
    assert not any(t in ("typo", "partial") for t in self_test_dataset(notes).types.values())


def test_self_test_cli_writes_a_reusable_dataset(vault: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "selftest"
    assert run_cli(["eval", "--self-test", "--vault", str(vault), "--write", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["queries"] >= 5 and data["recall@10"] == 1.0
    written = load_dataset(out)
    assert "token rotation runbook" in written.queries.values()
    assert not any("Diary" in next(iter(q)) for q in written.qrels.values())  # private notes are never answers
    assert run_cli(["eval", str(out), "--vault", str(vault), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["queries"] == data["queries"]


def test_self_test_cli_variants(vault: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "i.db"
    assert run_cli(["eval", "--self-test", "--variants", "--vault", str(vault), "--db", str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"title", "typo", "partial"} <= set(data["by_type"])
    assert data["by_type"]["typo"]["recall@10"] >= 0.8  # misspelt titles are still found


def test_eval_without_typo_correction(vault: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    golden = tmp_path / "typos"
    write_dataset(Dataset("typos", {"t1": "espreso"}, {"t1": {"Espresso recipe.md": 1}}, {"t1": "typo"}), golden)
    db = tmp_path / "index.db"
    assert run_cli(["eval", str(golden), "--vault", str(vault), "--db", str(db), "--mode", "bm25", "--json"]) == 0
    fixed = json.loads(capsys.readouterr().out)
    assert run_cli(["eval", str(golden), "--vault", str(vault), "--db", str(db), "--mode", "bm25", "--json", "--no-correct"]) == 0
    typed = json.loads(capsys.readouterr().out)
    assert fixed["mrr@10"] == 1.0 and typed["mrr@10"] == 0.0  # as typed, no note holds the word
    assert set(fixed["halves"]) == {"A", "B"}


def test_eval_needs_a_dataset_or_self_test() -> None:
    assert run_cli(["eval"]) == 2


@pytest.fixture()
def indexed(vault: Path) -> tuple[Searcher, Path]:
    from vaultseek.config import load_config

    store, _ = index_vault(vault, vault / ".vaultseek" / "index.db", load_config(vault))
    return Searcher(store, load_config(vault).search), vault


def test_explain_an_indexed_note(indexed) -> None:
    from vaultseek.config import load_config

    searcher, vault = indexed
    ex = explain(searcher, vault, "rotate oauth token", "Projects/Rotate OAuth tokens.md", load_config(vault))
    assert ex.status == "indexed"
    assert ex.bm25_rank == 1 and ex.fused_rank == 1 and ex.fused_note_rank == 1
    assert ex.vector_rank is not None and ex.terms["oauth"] == {"in_note": True, "chunks": 2}  # both chunks carry the title
    other = explain(searcher, vault, "rotate oauth token", "Espresso recipe", load_config(vault))
    assert other.note == "Espresso recipe.md"  # the extension may be left off
    assert other.bm25_rank is None
    assert any("no chunk of the note contains any query word" in r for r in other.reasons)


def test_explain_an_excluded_and_a_missing_note(indexed, capsys: pytest.CaptureFixture[str]) -> None:
    from vaultseek.config import load_config

    searcher, vault = indexed
    ex = explain(searcher, vault, "secret thoughts", "Private/Diary.md", load_config(vault))
    assert ex.status == "excluded" and "private folder Private/" in ex.detail
    missing = explain(searcher, vault, "espresso", "Espreso recipe.md", load_config(vault))
    assert missing.status == "missing" and missing.suggestions == ["Espresso recipe.md"]
    assert run_cli(["explain", "espresso", "--note", "Espreso recipe.md", "--vault", str(vault)]) == 1
    assert "did you mean: Espresso recipe.md" in capsys.readouterr().out


def test_explain_a_stale_note(indexed) -> None:
    from vaultseek.config import load_config

    searcher, vault = indexed
    note = vault / "Espresso recipe.md"
    note.write_text(note.read_text(encoding="utf-8") + "\nMore notes.\n", encoding="utf-8")
    ex = explain(searcher, vault, "espresso", "Espresso recipe.md", load_config(vault))
    assert ex.status == "stale" and ex.fused_rank == 1
