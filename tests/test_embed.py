"""Tests for vaultseek.embed: the bundled potion-base-8M model and the Model2Vec embedder."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import vaultseek
from vaultseek.embed import (
    DEFAULT_MODEL,
    MODELS_DIR,
    Embedder,
    Model2VecEmbedder,
    StaticModelEmbedder,
    load_embedder,
)
from vaultseek.errors import EmbedderUnavailable

VENDORED = MODELS_DIR / DEFAULT_MODEL
LONG_TEXT = (
    "Windows services run in the background and are controlled by the service control manager. "
    "A service can be configured to start automatically, on demand, or be disabled. "
) * 35  # about 5,700 characters, ~1,000 tokens: exercises both character and token truncation
PARITY_TEXTS = [
    "How do I rotate an OAuth token?",
    "如何轮换 OAuth 访问令牌？中文文本测试",
    "getUserById(userId) snake_case_name CamelCaseIdentifier __init__ HTTP_404",
    "",
    "   \n\t  ",
    "\u0000",
    "🦊 ☃",  # only unknown tokens: a zero row
    "Ünïcödé àccents and emoji 🦊 mixed with words",
    "token " * 700,  # many tokens, short pieces
    LONG_TEXT[:5000],
    LONG_TEXT,
    "a",
]


@pytest.fixture(scope="module")
def vendored() -> Model2VecEmbedder:
    """The bundled model, loaded once for the module."""
    embedder = load_embedder()
    assert isinstance(embedder, Model2VecEmbedder)
    return embedder


def make_tiny_model(
    folder: Path, max_length: int | None = 512, scale: float = 1.0, quantized: bool = False
) -> Path:
    """Write a Model2Vec folder with a 5-token word-level vocabulary and a 5x4 embedding table.

    With `quantized`, use the vocabulary-quantized format instead: 3 shared rows, a token -> row
    "mapping" and per-token "weights".
    """
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"[UNK]": 0, "hello": 1, "world": 2, "foo": 3, "bar": 4}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    embeddings = scale * np.array(
        [[0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 3, 4], [1, 1, 1, 1]], dtype=np.float32
    )
    tensors = {"embeddings": embeddings}
    if quantized:
        tensors = {
            "embeddings": embeddings[[1, 3, 4]],
            "mapping": np.array([0, 0, 2, 1, 1], dtype=np.int64),
            "weights": np.array([1.0, 0.5, 2.0, 1.0, 3.0], dtype=np.float32),
        }
    save_file(tensors, str(folder / "model.safetensors"))
    config = {"model_type": "model2vec", "hidden_dim": 4, "normalize": True, "max_length": max_length}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def test_vendored_files_match_sha256sums() -> None:
    sums = {}
    for line in (VENDORED / "SHA256SUMS").read_text(encoding="utf-8").splitlines():
        digest, _, name = line.partition("  ")
        sums[name] = digest
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(sums)
    for name, digest in sums.items():
        assert hashlib.sha256((VENDORED / name).read_bytes()).hexdigest() == digest, name
    assert (VENDORED / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    assert "bf8b056651a2c21b8d2565580b8569da283cab23" in (VENDORED / "NOTICE.md").read_text(encoding="utf-8")


def test_import_does_not_load_tokenizers_or_safetensors() -> None:
    code = "import sys, vaultseek.embed; print(sorted(m for m in ('tokenizers', 'safetensors', 'model2vec') if m in sys.modules))"
    src = str(Path(vaultseek.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert result.stdout.strip() == "[]"


def test_construction_is_lazy(tmp_path: Path) -> None:
    embedder = Model2VecEmbedder(make_tiny_model(tmp_path / "tiny"))
    assert embedder._loaded is None
    assert embedder.dim == 4 and embedder.vocab_size == 5
    embedder.embed_batch(["hello"])
    assert embedder._loaded is not None


@pytest.mark.parametrize("model", ["vendored", "tiny", "tiny-short", "tiny-quantized"])
def test_matches_model2vec_encode(model: str, tmp_path: Path) -> None:
    model2vec = pytest.importorskip("model2vec")
    if model == "vendored":
        folder, texts = VENDORED, PARITY_TEXTS
    else:
        # max_length=2 -> model2vec also cuts strings to 2 * median token length (5) = 10 characters first.
        folder = make_tiny_model(
            tmp_path / model, max_length=2 if model == "tiny-short" else 512, quantized=model == "tiny-quantized"
        )
        texts = ["hello world", "foo bar hello", "zzz", "", "hello zzz world foo", "bar " * 600, "world"]
    expected = model2vec.StaticModel.from_pretrained(str(folder)).encode(texts)
    actual = Model2VecEmbedder(folder).embed_batch(texts)
    assert actual.dtype == np.float32 and actual.shape == (len(texts), expected.shape[1])
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-6)


def test_quantized_format_is_supported(tmp_path: Path) -> None:
    embedder = Model2VecEmbedder(make_tiny_model(tmp_path / "q", quantized=True))
    assert embedder.vocab_size == 5 and embedder.dim == 4
    # "bar" -> row 1 (0, 0, 3, 4) x weight 3, "hello" -> row 0 (1, 0, 0, 0) x weight 0.5
    vectors = embedder.embed_batch(["bar", "hello bar"])
    np.testing.assert_allclose(vectors[0], [0, 0, 0.6, 0.8], atol=1e-7)
    expected = np.array([0.5, 0, 9, 12]) / np.linalg.norm([0.5, 0, 9, 12])
    np.testing.assert_allclose(vectors[1], expected, atol=1e-7)


def test_batching_does_not_change_vectors(vendored: Model2VecEmbedder) -> None:
    whole = vendored.embed_batch(PARITY_TEXTS)
    small = Model2VecEmbedder(VENDORED, batch_size=3).embed_batch(PARITY_TEXTS)
    np.testing.assert_array_equal(whole, small)


def test_rows_are_unit_length_or_zero(vendored: Model2VecEmbedder) -> None:
    vectors = vendored.embed_batch(PARITY_TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == (len(PARITY_TEXTS), 256)
    norms = np.linalg.norm(vectors, axis=1)
    empty = [i for i, text in enumerate(PARITY_TEXTS) if text.strip() in ("", "\u0000", "🦊 ☃")]
    assert empty == [3, 4, 5, 6]
    np.testing.assert_array_equal(norms[empty], 0.0)
    np.testing.assert_allclose(np.delete(norms, empty), 1.0, atol=1e-5)
    assert vendored.embed_batch([]).shape == (0, 256)


def test_tiny_model_mean_pooling(tmp_path: Path) -> None:
    embedder = Model2VecEmbedder(make_tiny_model(tmp_path / "tiny"))
    vectors = embedder.embed_batch(["hello world", "foo zzz", "zzz", "hello world foo"])
    s = 1 / np.sqrt(2)
    np.testing.assert_allclose(vectors[0], [s, s, 0, 0], atol=1e-7)
    np.testing.assert_allclose(vectors[1], [0, 0, 0.6, 0.8], atol=1e-7)  # unknown "zzz" is dropped
    np.testing.assert_array_equal(vectors[2], 0.0)
    np.testing.assert_allclose(vectors[3], np.array([1, 1, 3, 4]) / np.sqrt(27), atol=1e-7)


def test_long_text_is_truncated(vendored: Model2VecEmbedder) -> None:
    vectors = vendored.embed_batch([LONG_TEXT, LONG_TEXT + " bread flour oven yeast dough" * 20])
    np.testing.assert_array_equal(vectors[0], vectors[1])


def test_rejects_a_bare_string(vendored: Model2VecEmbedder) -> None:
    with pytest.raises(TypeError, match="wrap a single text"):
        vendored.embed_batch("hello")


def test_fingerprint_stable_and_model_specific(tmp_path: Path) -> None:
    first, second = load_embedder(), load_embedder("minishlab/potion-base-8M")
    assert first.fingerprint() == second.fingerprint() == load_embedder(DEFAULT_MODEL).fingerprint()
    int(first.fingerprint(), 16)  # a hex digest

    tiny = make_tiny_model(tmp_path / "tiny")
    tiny_print = Model2VecEmbedder(tiny).fingerprint()
    assert tiny_print == load_embedder(str(tiny)).fingerprint() != first.fingerprint()
    other = make_tiny_model(tmp_path / "other" / "tiny", scale=2.0)  # same name and shapes, other weights
    assert Model2VecEmbedder(other).fingerprint() != tiny_print


def test_vendored_fingerprint_uses_sha256sums(vendored: Model2VecEmbedder) -> None:
    assert vendored._file_sha256("model.safetensors") == hashlib.sha256(
        (VENDORED / "model.safetensors").read_bytes()
    ).hexdigest()


def test_protocol(vendored: Model2VecEmbedder) -> None:
    assert isinstance(vendored, Embedder)
    assert vendored.name == DEFAULT_MODEL and vendored.dim == 256


def test_missing_path_raises_with_hint(tmp_path: Path) -> None:
    with pytest.raises(EmbedderUnavailable, match="no model folder") as info:
        load_embedder(str(tmp_path / "nope" / "model"))
    assert DEFAULT_MODEL in str(info.value)


def test_folder_without_model_files_raises(tmp_path: Path) -> None:
    with pytest.raises(EmbedderUnavailable, match="not a Model2Vec model folder"):
        load_embedder(str(tmp_path))


def test_hub_name_without_model2vec_raises_with_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "model2vec", None)  # import model2vec -> ImportError
    with pytest.raises(EmbedderUnavailable) as info:
        load_embedder("someone/no-such-model")
    message = str(info.value)
    assert "pip install model2vec" in message and "local" in message


def test_hub_name_that_model2vec_cannot_load_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    class FailingStaticModel:
        @classmethod
        def from_pretrained(cls, path: str, force_download: bool = True) -> None:
            raise OSError(f"404 Client Error: repository {path} not found")

    monkeypatch.setitem(sys.modules, "model2vec", types.SimpleNamespace(StaticModel=FailingStaticModel))
    with pytest.raises(EmbedderUnavailable, match="could not load 'someone/no-such-model'") as info:
        load_embedder("someone/no-such-model")
    assert "huggingface.co" in str(info.value)


def test_hub_name_is_wrapped_via_model2vec(monkeypatch: pytest.MonkeyPatch, vendored: Model2VecEmbedder) -> None:
    model2vec = pytest.importorskip("model2vec")
    calls = []

    def from_local(path: str, **options: object) -> object:
        calls.append((path, options))
        return model2vec.StaticModel.from_pretrained(str(VENDORED))

    fake = types.SimpleNamespace(StaticModel=types.SimpleNamespace(from_pretrained=from_local))
    monkeypatch.setitem(sys.modules, "model2vec", fake)
    embedder = load_embedder("someone/potion-copy")
    assert isinstance(embedder, StaticModelEmbedder) and isinstance(embedder, Embedder)
    assert calls == [("someone/potion-copy", {})]  # the fake has no force_download parameter
    np.testing.assert_allclose(embedder.embed_batch(PARITY_TEXTS), vendored.embed_batch(PARITY_TEXTS), atol=1e-6)
    assert embedder.fingerprint() == embedder.fingerprint() != vendored.fingerprint()


def test_semantic_sanity(vendored: Model2VecEmbedder) -> None:
    query, oauth, bread = vendored.embed_batch(
        [
            "how do I rotate an OAuth token",
            "Refreshing OAuth access tokens: use the refresh token to obtain a new access token before it expires.",
            "Baking bread: mix flour, water, salt and yeast, knead the dough, let it rise, then bake in a hot oven.",
        ]
    )
    assert float(query @ oauth) > float(query @ bread) + 0.1


def test_light_path_for_queries_equals_the_full_model() -> None:
    """One-off searches embed with the pure-Python tokenizer; the vectors must be identical."""
    from vaultseek.embed import Model2VecEmbedder, MODELS_DIR
    from tokenizers import Tokenizer
    from vaultseek.wordpiece import WordPiece

    texts = ["how do I rotate an OAuth token?", "CreateFileW GetLastError", "认证失败 リンク 동기화", "héllo naïve café", "", "x" * 300]
    light = Model2VecEmbedder(MODELS_DIR / "potion-base-8M")
    a = np.vstack([light.embed_batch([t]) for t in texts])
    assert light._loaded is None  # the Rust tokenizer was never loaded
    full = Model2VecEmbedder(MODELS_DIR / "potion-base-8M")
    b = full.embed_batch(texts + ["padding text"] * 10)[: len(texts)]  # a batch too big for the light path
    assert full._loaded is not None
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    wp = WordPiece.from_tokenizer_json(MODELS_DIR / "potion-base-8M" / "tokenizer.json")
    rust = Tokenizer.from_file(str(MODELS_DIR / "potion-base-8M" / "tokenizer.json"))
    for text in texts + ["tab\there\x00null\u200bzw", "Ｆｕｌｌｗｉｄｔｈ 😀 ok", "a" * 150, "x\u0301y\u00a0z"]:
        assert wp.ids(text) == rust.encode(text, add_special_tokens=False).ids


def test_wordpiece_cache_round_trip_and_corruption(tmp_path: Path) -> None:
    from vaultseek.embed import MODELS_DIR
    from vaultseek.wordpiece import WordPiece

    spec = MODELS_DIR / "potion-base-8M" / "tokenizer.json"
    first = WordPiece.from_tokenizer_json(spec, cache_dir=tmp_path)
    files = list(tmp_path.glob("wordpiece-*.marshal"))
    assert first is not None and len(files) == 1
    again = WordPiece.from_tokenizer_json(spec, cache_dir=tmp_path)
    assert again is not None and again.ids("CreateFileW 认证 naïve") == first.ids("CreateFileW 认证 naïve")
    files[0].write_bytes(b"garbage")  # a damaged cache is re-parsed, never trusted
    third = WordPiece.from_tokenizer_json(spec, cache_dir=tmp_path)
    assert third is not None and third.vocab == first.vocab
