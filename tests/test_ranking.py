"""Ranking: the pipeline's fusion and priors end to end, the priors as pure functions, and the
golden set of the bundled sample vault as a regression check with thresholds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vaultseek.config import SearchSettings, load_config
from vaultseek.errors import UsageError
from vaultseek.evaluate import load_dataset, run_dataset, summarize
from vaultseek.fusion import Fused
from vaultseek.rank import NoteFacts, apply_priors, backlink_counts, factors, note_support, prior_names
from vaultseek.search import Searcher
from vaultseek.store.sqlite import SqliteStore

GOLDEN = Path(__file__).resolve().parent / "golden" / "sample_vault"


@pytest.fixture
def sample(index) -> Searcher:
    _, store = index()
    return Searcher(store)


# -- the pipeline -----------------------------------------------------------------------------------


def test_default_is_convex_fusion_and_terms_add_up(sample: Searcher) -> None:
    result = sample.search("refresh token rotation")
    assert SearchSettings().fusion == "convex"
    for hit in result.hits:
        assert sum(hit.terms.values()) == pytest.approx(hit.score)
        assert set(hit.terms) <= {"bm25", "vector", "short", "links", "recency", "support"}
    top = result.hits[0]
    assert top.bm25_rank is not None and top.vec_rank is not None
    assert 0 < top.terms["bm25"] <= 0.7 and 0 < top.terms["vector"] <= 0.3  # weight x normalised score


def test_rrf_stays_selectable(index) -> None:
    _, store = index()
    settings = SearchSettings(fusion="rrf", bm25_weight=1.0, vector_weight=1.0, short_chunk_penalty=0.0, note_support=0.0)
    top = Searcher(store, settings).search("refresh token rotation").hits[0]
    assert top.score == pytest.approx(1 / (60 + top.bm25_rank) + 1 / (60 + top.vec_rank))  # type: ignore[operator]


def test_fusion_is_read_from_the_config(tmp_path: Path) -> None:
    (tmp_path / ".vaultseek").mkdir()
    (tmp_path / ".vaultseek" / "config.toml").write_text('[search]\nfusion = "rrf"\nbm25_weight = 1.0\n', encoding="utf-8")
    assert load_config(tmp_path).search.fusion == "rrf"
    (tmp_path / ".vaultseek" / "config.toml").write_text('[search]\nfusion = "borda"\n', encoding="utf-8")
    with pytest.raises(UsageError, match="search.fusion"):
        load_config(tmp_path)


def test_rank_is_what_search_returns(sample: Searcher) -> None:
    for query in ("token", "认证失败", "bake bread", "sourdogh"):
        for mode in ("hybrid", "bm25", "vector"):
            ranking = sample.rank(query, k=10, mode=mode)
            assert [x.id for x in ranking.fused] == [h.chunk_id for h in sample.search(query, k=10, mode=mode).hits]


def test_single_list_modes_are_not_weighted(sample: Searcher) -> None:
    hits = sample.search("sourdough", mode="bm25").hits
    best = next(h for h in hits if h.bm25_rank == 1)
    assert best.terms["bm25"] == pytest.approx(1.0)  # the best BM25 result, weight 1 when alone
    assert set(best.terms) == {"bm25", "short", "support"}


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def tag_vault(tmp_path: Path, index_folder) -> SqliteStore:
    """A map-of-content note that is little more than tags and links, and the note that explains
    the topic: BM25 alone ranks the short one first (short text, query words in its tags)."""
    root = tmp_path / "vault"
    write(root, "Kubernetes/Pod networking.md", (
        "# Pod networking\n\nEvery pod gets its own IP address, and pods talk to each other across nodes without NAT. The\n"
        "container network interface (CNI) plugin, such as Calico or Cilium, wires the pod network: it\n"
        "assigns addresses from the node's pod CIDR and programs routes or an overlay between nodes.\n\n"
        "## Services\n\nA Service gives a stable virtual IP in front of a changing set of pods. kube-proxy (or eBPF in\n"
        "Cilium) translates the virtual IP to a pod IP, so clients never track individual pods.\n\n"
        "## Network policies\n\nBy default every pod may reach every other pod. A NetworkPolicy selects pods by label and lists the\n"
        "ingress and egress traffic they accept; the CNI plugin enforces it. Start with a default-deny policy\n"
        "per namespace, then allow the flows each application needs, for kubernetes networking in production.\n"
    ))
    write(root, "Kubernetes/Cluster index.md", "---\ntags: [kubernetes, networking, cluster, devops]\n---\n- [[Pod networking]]\n- [[Upgrades]]\n")
    write(root, "Kubernetes/Upgrades.md", "# Upgrades\n\nUpgrade the control plane first, one minor version at a time, then drain and upgrade each node.\n")
    return index_folder(root)


def test_short_tag_heavy_note_does_not_outrank_the_deep_note(tag_vault: SqliteStore) -> None:
    """Regression: "short tag-heavy note outranks the deep note" (BM25 favours very short chunks,
    and tags share the title's column weight). The short-chunk penalty puts the deep note first."""
    hits = Searcher(tag_vault).search("kubernetes networking").hits
    assert hits[0].path == "Kubernetes/Pod networking.md"
    short = [h for h in hits if h.path == "Kubernetes/Cluster index.md"][0]
    assert short.terms["short"] < 0 and sum(short.terms.values()) == pytest.approx(short.score)
    off = Searcher(tag_vault, SearchSettings(short_chunk_penalty=0.0)).search("kubernetes networking").hits
    assert off[0].path == "Kubernetes/Cluster index.md"  # the failure the penalty fixes


# -- the priors, pure ----------------------------------------------------------------------------


def test_backlink_counts_resolve_like_obsidian() -> None:
    paths = ["en/Plugins/Canvas.md", "ja/Plugins/Canvas.md", "en/Home.md", "en/Guide.md", "ja/Home.md"]
    links = [
        "Home\x1fCanvas",  # en/Plugins/Canvas.md links to en/Home.md; itself is not counted
        "Home",  # the ja note links to the nearest Home: ja/Home.md
        "Canvas\x1fCanvas\x1fPlugins/Canvas",  # counted once; resolves to en/ (nearest folder)
        "plugins/canvas.md\x1fMissing note",
        "",
    ]
    counts = backlink_counts(paths, links)
    assert counts == {"en/Home.md": 1, "ja/Home.md": 1, "en/Plugins/Canvas.md": 2}


def facts(chars: list[int], backlinks: list[float], days_ago: list[float], now: float) -> NoteFacts:
    n = len(chars)
    return NoteFacts(
        chunk_ids=np.arange(1, n + 1, dtype=np.int64), chunk_file=np.arange(n, dtype=np.int64),
        chunk_chars=np.array(chars, dtype=np.int64), file_ids=np.arange(10, 10 + n, dtype=np.int64),
        backlinks=np.array(backlinks, dtype=np.float64), day=np.array([now - d * 86400 for d in days_ago]),
    )


def test_prior_factors() -> None:
    now = 1_700_000_000.0
    f = facts([50, 200, 2000], [0, 3, 15], [0, 180, 720], now)
    s = SearchSettings(short_chunk_chars=200, short_chunk_penalty=0.4, link_weight=0.2, recency_weight=0.5, recency_half_life_days=180)
    assert prior_names(s) == ("short", "links", "recency")
    got = factors(f, [1, 2, 3, 99], s, now=now)
    assert got["short"] == pytest.approx([1 - 0.4 * 0.75, 1.0, 1.0, 1.0])  # 99 is not in the index: 1
    assert got["links"][0] == pytest.approx(1.0) and got["links"][2] == pytest.approx(1.2)
    assert got["recency"][:3] == pytest.approx([1.0, 0.75, 0.5 + 0.5 / 16])
    assert f.note_of([3, 1, 99]) == [12, 10, None]
    assert prior_names(SearchSettings(short_chunk_penalty=0.0)) == ()  # links and recency are off by default


def test_apply_priors_reorders_and_keeps_terms_additive() -> None:
    fused = [Fused(1, 0.9, (1, None), (0.7, 0.2)), Fused(2, 0.8, (2, 1), (0.5, 0.3))]
    out = apply_priors(fused, {"short": np.array([0.5, 1.0]), "links": np.array([1.0, 1.1])})
    assert [x.id for x in out] == [2, 1]
    for x in out:
        assert len(x.terms) == 4 and sum(x.terms) == pytest.approx(x.score)
    assert out[1].score == pytest.approx(0.45) and out[0].score == pytest.approx(0.88)
    assert apply_priors(fused, {}) is fused


def test_note_support_lifts_a_note_with_a_second_matching_section() -> None:
    # note 10: one strong section; note 20: two good ones; chunk 5 is deeper than the cut in both lists.
    fused = [
        Fused(1, 0.80, (1, 3), (0.6, 0.2)),
        Fused(2, 0.75, (2, None), (0.6, 0.15)),
        Fused(3, 0.70, (None, 1), (0.4, 0.3)),
        Fused(4, 0.30, (5, 9), (0.2, 0.1)),
        Fused(5, 0.29, (40, 45), (0.2, 0.09)),
    ]
    notes = [10, 20, 20, None, 20]
    out = note_support(fused, notes, 0.2, max_rank=30)
    assert [x.id for x in out] == [2, 3, 1, 4, 5]  # 0.75 + 0.2 * 0.70 = 0.89 beats 0.80
    by_id = {x.id: x for x in out}
    assert by_id[2].score == pytest.approx(0.89) and by_id[3].score == pytest.approx(0.70 + 0.2 * 0.75)
    assert by_id[1].score == pytest.approx(0.80) and by_id[4].score == pytest.approx(0.30)  # alone in its note / no note
    assert by_id[5].score == pytest.approx(0.29)  # beyond the cut: neither gives nor gets support
    assert all(sum(x.terms) == pytest.approx(x.score) and len(x.terms) == 3 for x in out)
    assert note_support(fused, notes, 0.0, 30) is fused


def test_note_support_keeps_eval_depth_equal_to_search(sample: Searcher) -> None:
    """`eval` reads the lists 300 deep; the support prior must not let that change the top ten."""
    for query in ("token rotation", "bread", "how do I renew an access token"):
        shallow = [x.id for x in sample.rank(query, k=10, per_note=0).fused]
        deep = [x.id for x in sample.rank(query, k=300, per_note=0).fused][: len(shallow)]
        assert deep == shallow


# -- the sample vault's golden set: a regression check ---------------------------------------------------


@pytest.mark.parametrize("mode, floor", [("hybrid", 0.95), ("bm25", 0.9), ("vector", 0.7)])
def test_sample_vault_golden_set(index, mode: str, floor: float) -> None:
    """tests/golden/sample_vault: 20 queries (exact, concept, partial, typo, cjk) with the note that
    answers each. Hybrid must stay near perfect and never below either of its own lists."""
    _, store = index()
    searcher = Searcher(store)
    ds = load_dataset(GOLDEN)
    summary = summarize(run_dataset(searcher, ds, mode, lambda p: p))
    assert summary["queries"] == 20
    assert summary["ndcg@10"] >= floor, summary
    if mode == "hybrid":
        assert all(row["ndcg@10"] >= 0.9 for row in summary["by_type"].values()), summary["by_type"]
        others = [summarize(run_dataset(searcher, ds, m, lambda p: p))["ndcg@10"] for m in ("bm25", "vector")]
        assert summary["ndcg@10"] >= max(others)


def test_keyword_queries_and_their_weights() -> None:
    from vaultseek.rank import fusion_weights, is_keyword_query

    assert is_keyword_query("CreateFileW", 2) and is_keyword_query("canvas plugin", 2) and is_keyword_query("认证失败", 2)
    assert not is_keyword_query("how to sync", 3) and not is_keyword_query("sync?", 2) and not is_keyword_query("a b c", 2)
    assert fusion_weights(SearchSettings(), "CreateFileW") == (0.7, 0.3)  # off by default
    on = SearchSettings(keyword_bm25_weight=0.9)
    assert fusion_weights(on, "CreateFileW") == pytest.approx((0.9, 0.1))
    assert fusion_weights(on, "how do I create a file") == (0.7, 0.3)
    with pytest.raises(UsageError):
        SearchSettings(keyword_bm25_weight=1.5)


def test_eval_depth_equals_search_when_bm25_matches_exactly_the_candidates(tmp_path: Path, index_folder) -> None:
    """With exactly 30 BM25 matches, a list read 300 deep must be normalised as the 30-deep one
    (note support lifts notes by their second section, so a different floor reorders results)."""
    vault = tmp_path / "v"
    vault.mkdir()
    for i in range(15):  # 15 notes x 2 sections = 30 chunks that hold the word
        first = " ".join(["quagga"] * (1 + i % 5)) + f" herd number {i} crossing the plain at dawn."
        second = "quagga " * (1 + (i * 3) % 4) + f"foals {i} follow their mothers to the river."
        (vault / f"q{i:02d}.md").write_text(f"# Herd {i}\n\n## Morning\n\n{first}\n\n## Evening\n\n{second}\n", encoding="utf-8")
    for i in range(20):
        (vault / f"o{i:02d}.md").write_text(f"# Field {i}\n\nHorses and donkeys in field {i}, with long manes.\n", encoding="utf-8")
    searcher = Searcher(index_folder(vault))
    assert len(searcher.lexical("quagga", 300)) == 30
    for mode in ("bm25", "hybrid"):
        shallow = [x.id for x in searcher.rank("quagga", k=10, per_note=0, mode=mode).fused]
        deep = [x.id for x in searcher.rank("quagga", k=300, per_note=0, mode=mode).fused][:10]
        assert deep == shallow, mode
