"""Text embeddings: the Embedder protocol and a fast Model2Vec implementation.

`Model2VecEmbedder` reproduces `model2vec.StaticModel.encode` (tokenize without
special tokens, drop [UNK], truncate, mean-pool, L2-normalise) using only
`tokenizers`, `safetensors` and numpy, so vaultseek does not pay for importing
model2vec. The bundled model is minishlab/potion-base-8M (MIT), in
`vaultseek/models/potion-base-8M/`.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .errors import EmbedderUnavailable

DEFAULT_MODEL = "potion-base-8M"
MODELS_DIR = Path(__file__).resolve().parent / "models"
VENDORED_NAMES = frozenset({DEFAULT_MODEL, f"minishlab/{DEFAULT_MODEL}"})

# model2vec's StaticModel uses this when config.json has no "max_length".
DEFAULT_MAX_LENGTH = 512
# Bump when the embedding computation changes, so stored vectors get recomputed.
_ALGORITHM_VERSION = 1
# Gathered token rows per pooling step: small enough (x dim x 4 bytes) to stay in CPU cache.
_TOKENS_PER_STEP = 1 << 12
# Up to this many texts of this many characters in all, a model that is not loaded yet embeds
# with the pure-Python tokenizer (one-off searches, hooks) instead of loading the Rust one.
LIGHT_TEXTS = 8
LIGHT_CHARS = 4000


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors."""

    name: str
    dim: int

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Return a float32 array of shape (len(texts), dim) with L2-normalised rows.

        A text with no known tokens (e.g. the empty string) gives a zero row.
        """
        ...

    def fingerprint(self) -> str:
        """Return a stable hex digest identifying the model; it changes when the vectors would."""
        ...


@dataclass(frozen=True)
class _Layout:
    """Where the files of one accepted model folder layout live (mirrors model2vec's FOLDER_LAYOUTS)."""

    config: str
    weights: str
    tokenizer: str
    tensor: str


_LAYOUTS: tuple[_Layout, ...] = (
    _Layout("config.json", "model.safetensors", "tokenizer.json", "embeddings"),  # model2vec
    _Layout("config_sentence_transformers.json", "model.safetensors", "tokenizer.json", "embedding.weight"),
    _Layout(
        "config_sentence_transformers.json",
        "0_StaticEmbedding/model.safetensors",
        "0_StaticEmbedding/tokenizer.json",
        "embedding.weight",
    ),
)


@dataclass(frozen=True)
class _Loaded:
    """Everything embed_batch needs once the model files are read."""

    tokenizer: Any  # tokenizers.Tokenizer, imported lazily
    embeddings: np.ndarray  # (rows, dim) float32
    weights: np.ndarray | None  # (vocab,) float32 per-token weights, or None
    mapping: np.ndarray | None  # (vocab,) int64 token id -> embeddings row, or None
    unk_id: int | None
    max_chars: int | None  # model2vec cuts strings to max_length * median token length first


def _read_safetensors_header(path: Path) -> dict[str, Any]:
    """Return the JSON header of a safetensors file (tensor names, dtypes, shapes) without reading the data."""
    with path.open("rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        header: dict[str, Any] = json.loads(handle.read(size))
    return header


def _sha256_file(path: Path) -> str:
    """Return the hex sha256 of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Divide each row by its L2 norm in place (as model2vec does); zero rows stay zero."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True) + 1e-32
    vectors /= norms
    return vectors


class Model2VecEmbedder:
    """Embeds texts with a Model2Vec static model folder, without importing model2vec.

    Construction only reads the weights file header; the tokenizer and weights are
    loaded on the first `embed_batch` call.
    """

    def __init__(self, path: str | Path, name: str | None = None, *, batch_size: int = 1024) -> None:
        """Prepare to load the model folder at `path`; `name` defaults to the folder name.

        Raises EmbedderUnavailable if the folder does not hold a Model2Vec model.
        """
        self.path = Path(path).expanduser().resolve()
        self.name = name or self.path.name
        self.batch_size = batch_size
        self._layout = self._find_layout()
        header = self._header()
        tensor = header.get(self._layout.tensor)
        if tensor is None or len(tensor.get("shape", ())) != 2:
            raise EmbedderUnavailable(
                f"{self.path / self._layout.weights} has no 2-D tensor named {self._layout.tensor!r}",
                hint="save the model with model2vec's StaticModel.save_pretrained, or use the bundled 'potion-base-8M'",
            )
        self.dim: int = int(tensor["shape"][1])
        mapping = header.get("mapping")
        self.vocab_size: int = int(mapping["shape"][0] if mapping else tensor["shape"][0])
        self._loaded: _Loaded | None = None
        self._light: _Loaded | None | bool = None  # False: this model has no light path
        self._wordpiece: Any = None
        self._lock = threading.Lock()
        self._fingerprint: str | None = None

    def __repr__(self) -> str:
        return f"Model2VecEmbedder(name={self.name!r}, path={str(self.path)!r}, dim={self.dim})"

    def _find_layout(self) -> _Layout:
        """Return the first accepted layout whose files all exist in the folder."""
        for layout in _LAYOUTS:
            if all((self.path / f).is_file() for f in (layout.config, layout.weights, layout.tokenizer)):
                return layout
        if self.path.parent == MODELS_DIR:
            hint = "reinstall vaultseek (or run `python scripts/vendor_model.py` in a source checkout)"
        else:
            hint = "point to a folder saved with model2vec's StaticModel.save_pretrained"
        raise EmbedderUnavailable(
            f"{self.path} is not a Model2Vec model folder "
            "(expected config.json, model.safetensors and tokenizer.json)",
            hint=hint,
        )

    def _header(self) -> dict[str, Any]:
        """Read the weights file header, turning unreadable files into EmbedderUnavailable."""
        path = self.path / self._layout.weights
        try:
            return _read_safetensors_header(path)
        except (OSError, ValueError, struct.error) as exc:
            raise EmbedderUnavailable(
                f"cannot read {path}: {exc}", hint="the file is damaged or not safetensors; re-download the model"
            ) from exc

    def _config(self) -> dict[str, Any]:
        """Return the parsed config file of the model folder."""
        with (self.path / self._layout.config).open(encoding="utf-8") as handle:
            config: dict[str, Any] = json.load(handle)
        return config

    def _max_length(self, config: dict[str, Any]) -> int | None:
        """Token limit per text, as model2vec resolves it (None means no truncation)."""
        value = config.get("max_length", DEFAULT_MAX_LENGTH)
        return None if value is None else int(value)

    def _load(self) -> _Loaded:
        """Load tokenizer and weights once (thread-safe) and return them."""
        with self._lock:
            if self._loaded is None:
                try:
                    self._loaded = self._read_model()
                except EmbedderUnavailable:
                    raise
                except Exception as exc:  # tokenizers/safetensors raise assorted exception types
                    raise EmbedderUnavailable(
                        f"cannot load the embedding model in {self.path}: {exc}",
                        hint="re-download or re-save the model folder, or use the bundled 'potion-base-8M'",
                    ) from exc
            return self._loaded

    def _read_model(self) -> _Loaded:
        """Read tokenizer, config and tensors from disk."""
        from safetensors import safe_open
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(self.path / self._layout.tokenizer))
        tokenizer.no_padding()
        max_length = self._max_length(self._config())
        if max_length is None:
            tokenizer.no_truncation()
        else:
            tokenizer.enable_truncation(max_length)

        with safe_open(str(self.path / self._layout.weights), framework="np") as tensors:
            names = set(tensors.keys())
            embeddings = tensors.get_tensor(self._layout.tensor)
            weights = tensors.get_tensor("weights") if "weights" in names else None
            mapping = tensors.get_tensor("mapping") if "mapping" in names else None
        # Computing in float32 for every storage dtype (model2vec keeps float16 as float16).
        embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        if weights is not None:
            weights = np.ascontiguousarray(weights, dtype=np.float32).reshape(-1)
        if mapping is not None:
            mapping = np.ascontiguousarray(mapping, dtype=np.int64).reshape(-1)

        vocab = tokenizer.get_vocab()
        if mapping is None and len(embeddings) != len(vocab):
            raise EmbedderUnavailable(
                f"{self.path}: tokenizer has {len(vocab)} tokens but the weights have {len(embeddings)} rows",
                hint="the tokenizer.json and model.safetensors do not belong together; re-save the model",
            )
        median_len = int(np.median(np.fromiter(map(len, vocab), dtype=np.int64, count=len(vocab))))
        return _Loaded(
            tokenizer=tokenizer,
            embeddings=embeddings,
            weights=weights,
            mapping=mapping,
            unk_id=_unk_token_id(tokenizer),
            max_chars=None if max_length is None else max_length * median_len,
        )

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Return a float32 array of shape (len(texts), dim) with L2-normalised rows.

        Equals model2vec's `StaticModel.encode(texts)` for models whose config says normalize;
        texts without known tokens give zero rows.
        """
        if isinstance(texts, str):
            raise TypeError("embed_batch takes a sequence of strings; wrap a single text in a list")
        texts = list(texts)
        if self._loaded is None and len(texts) <= LIGHT_TEXTS and sum(map(len, texts)) <= LIGHT_CHARS:
            light = self._light_model()
            if light is not None:
                out = np.zeros((len(texts), self.dim), dtype=np.float32)
                ids = [self._wordpiece.ids(t if light.max_chars is None else t[: light.max_chars]) for t in texts]
                if self._light_max_length is not None:
                    ids = [i[: self._light_max_length] for i in ids]
                _mean_pool(light, ids, out)
                return _l2_normalise(out)
        model = self._load()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        size = self.batch_size
        batches = [texts[i : i + size] for i in range(0, len(texts), size)]
        if len(batches) == 1:
            _mean_pool(model, _tokenize(model, batches[0]), out)
        elif batches:
            from concurrent.futures import ThreadPoolExecutor

            # Tokenize the next batch (Rust, GIL released) while numpy pools the current one.
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vaultseek-tokenize") as pool:
                pending = pool.submit(_tokenize, model, batches[0])
                for k in range(len(batches)):
                    ids = pending.result()
                    if k + 1 < len(batches):
                        pending = pool.submit(_tokenize, model, batches[k + 1])
                    _mean_pool(model, ids, out[k * size : k * size + len(ids)])
        return _l2_normalise(out)

    def _light_model(self) -> _Loaded | None:
        """The model for a few short texts: a pure-Python tokenizer and a memory-mapped table,
        ~15 ms to load instead of ~60 ms; identical ids and vectors (tests compare them)."""
        with self._lock:
            if self._light is None:
                self._light = self._read_light() or False
            return self._light or None

    def _read_light(self) -> _Loaded | None:
        from .wordpiece import WordPiece

        header = self._header()
        tensor = header.get(self._layout.tensor, {})
        if "weights" in header or "mapping" in header or tensor.get("dtype") != "F32":
            return None
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vaultseek"
        wordpiece = WordPiece.from_tokenizer_json(self.path / self._layout.tokenizer, cache_dir=cache)
        if wordpiece is None:
            return None
        start, end = tensor["data_offsets"]
        path = self.path / self._layout.weights
        with path.open("rb") as handle:
            (header_len,) = struct.unpack("<Q", handle.read(8))
        rows, dim = tensor["shape"]
        if end - start != rows * dim * 4 or rows != len(wordpiece.vocab):
            return None
        table = np.memmap(path, dtype="<f4", mode="r", offset=8 + header_len + start, shape=(rows, dim))
        max_length = self._max_length(self._config())
        median_len = int(np.median(np.fromiter(map(len, wordpiece.vocab), dtype=np.int64, count=len(wordpiece.vocab))))
        self._wordpiece, self._light_max_length = wordpiece, max_length
        return _Loaded(
            tokenizer=None, embeddings=table, weights=None, mapping=None, unk_id=wordpiece.unk_id,
            max_chars=None if max_length is None else max_length * median_len,
        )

    def fingerprint(self) -> str:
        """Return a hex digest over model name, vocabulary size, dimension, token limit and file hashes."""
        if self._fingerprint is None:
            facts = {
                "algorithm": _ALGORITHM_VERSION,
                "name": self.name,
                "vocab_size": self.vocab_size,
                "dim": self.dim,
                "max_length": self._max_length(self._config()),
                "weights_sha256": self._file_sha256(self._layout.weights),
                "tokenizer_sha256": self._file_sha256(self._layout.tokenizer),
            }
            blob = json.dumps(facts, sort_keys=True).encode("utf-8")
            self._fingerprint = hashlib.sha256(blob).hexdigest()
        return self._fingerprint

    def _file_sha256(self, relpath: str) -> str:
        """Hash of a model file: from SHA256SUMS for a bundled model (free), else by reading the file."""
        sums = self.path / "SHA256SUMS"
        if self.path.parent == MODELS_DIR and sums.is_file():
            for line in sums.read_text(encoding="utf-8").splitlines():
                digest, _, name = line.strip().partition(" ")
                if name.lstrip(" *") == relpath:
                    return digest.lower()
        return _sha256_file(self.path / relpath)


def _unk_token_id(tokenizer: Any) -> int | None:
    """Return the id of the tokenizer's unknown token, or None (same rule as model2vec)."""
    model = tokenizer.model
    if hasattr(model, "unk_token"):  # WordPiece, BPE, WordLevel
        token = model.unk_token
        return None if token is None else tokenizer.token_to_id(token)
    unk_id = json.loads(tokenizer.to_str())["model"].get("unk_id")  # Unigram
    return None if unk_id is None else int(unk_id)


def _tokenize(model: _Loaded, texts: list[str]) -> list[list[int]]:
    """Token ids of each text, cut like model2vec does (characters first, then the tokenizer's max length)."""
    if model.max_chars is not None:
        texts = [text[: model.max_chars] for text in texts]
    encodings = model.tokenizer.encode_batch_fast(texts, add_special_tokens=False)
    return [encoding.ids for encoding in encodings]


def _mean_pool(model: _Loaded, ids: list[list[int]], out: np.ndarray) -> None:
    """Write the mean token vector of each id list into the rows of `out` (rows with no tokens are left alone).

    Texts are grouped by token count and each group is averaged as one (texts, tokens, dim)
    array, like model2vec does, so the float32 sums are added in the same order and match it bit for bit.
    """
    n = len(ids)
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=n)
    flat = np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
    if model.unk_id is not None:
        keep = flat != model.unk_id
        if not keep.all():
            owner = np.repeat(np.arange(n), lengths)[keep]
            flat = flat[keep]
            lengths = np.bincount(owner, minlength=n)
    starts = np.cumsum(lengths) - lengths
    order = np.argsort(lengths, kind="stable")
    for group in np.split(order, np.flatnonzero(np.diff(lengths[order])) + 1):
        length = int(lengths[group[0]])
        if length == 0:
            continue
        step = max(1, _TOKENS_PER_STEP // length)  # bounds the gathered array's memory
        for i in range(0, len(group), step):
            rows = group[i : i + step]
            token_ids = flat[starts[rows][:, None] + np.arange(length)]
            vectors = model.embeddings[token_ids if model.mapping is None else model.mapping[token_ids]]
            if model.weights is not None:
                vectors = vectors * model.weights[token_ids][..., None]
            out[rows] = vectors.mean(axis=1)


class StaticModelEmbedder:
    """Wraps a model loaded by the `model2vec` package (used for Hugging Face Hub names)."""

    def __init__(self, model: Any, name: str) -> None:
        """Wrap `model`, a `model2vec.StaticModel`, under `name`."""
        self.model = model
        self.name = name
        self.dim: int = int(model.dim)
        self._fingerprint: str | None = None

    def __repr__(self) -> str:
        return f"StaticModelEmbedder(name={self.name!r}, dim={self.dim})"

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Return a float32 array of shape (len(texts), dim) with L2-normalised rows (zero rows for empty texts)."""
        if isinstance(texts, str):
            raise TypeError("embed_batch takes a sequence of strings; wrap a single text in a list")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # use_multiprocessing=False: model2vec would otherwise turn tokenizers parallelism off process-wide.
        vectors = self.model.encode(texts, normalize=False, use_multiprocessing=False)
        return _l2_normalise(np.array(vectors, dtype=np.float32, copy=True).reshape(len(texts), self.dim))

    def fingerprint(self) -> str:
        """Return a hex digest over model name, vocabulary size, dimension, token limit and the model's arrays."""
        if self._fingerprint is None:
            content = hashlib.sha256()
            for array in (self.model.embedding, self.model.weights, self.model.token_mapping):
                if array is not None:
                    content.update(np.ascontiguousarray(array).tobytes())
            content.update(self.model.tokenizer.to_str().encode("utf-8"))
            facts = {
                "algorithm": _ALGORITHM_VERSION,
                "name": self.name,
                "vocab_size": len(self.model.tokens),
                "dim": self.dim,
                "max_length": self.model.max_length,
                "content_sha256": content.hexdigest(),
            }
            self._fingerprint = hashlib.sha256(json.dumps(facts, sort_keys=True).encode("utf-8")).hexdigest()
        return self._fingerprint


def _looks_like_path(name: str) -> bool:
    """True if `name` is meant as a filesystem path rather than a Hub id like 'owner/model'."""
    return name.startswith((".", "/", "~")) or "\\" in name or name.count("/") > 1 or Path(name).is_absolute()


def load_embedder(model: str | None = None) -> Embedder:
    """Return the embedder for `model`: None or 'potion-base-8M' for the bundled model, a model folder path,
    or (if the `model2vec` package is installed) a Hugging Face Hub id.

    Loading the bundled model or a folder is lazy; a Hub model is loaded (maybe downloaded) now.
    Raises EmbedderUnavailable with a hint when the model cannot be found or loaded.
    """
    if model is None or model in VENDORED_NAMES:
        return Model2VecEmbedder(MODELS_DIR / DEFAULT_MODEL, name=DEFAULT_MODEL)
    path = Path(model).expanduser()
    if path.is_dir():
        return Model2VecEmbedder(path)
    if _looks_like_path(model):
        raise EmbedderUnavailable(
            f"no model folder at {path}",
            hint=f"check the path, or use the bundled model {DEFAULT_MODEL!r}",
        )
    try:
        from model2vec import StaticModel
    except ImportError as exc:
        raise EmbedderUnavailable(
            f"model {model!r} is not bundled with vaultseek and is not a local folder",
            hint=(
                "install model2vec (`pip install model2vec`) to load models from the Hugging Face Hub, "
                "or pass the path of a local Model2Vec folder (config.json, model.safetensors, tokenizer.json); "
                f"the bundled model is {DEFAULT_MODEL!r}"
            ),
        ) from exc
    try:
        from inspect import signature

        # force_download=False (model2vec >= 0.7): reuse the local Hugging Face cache instead of going online.
        options = {"force_download": False} if "force_download" in signature(StaticModel.from_pretrained).parameters else {}
        static_model = StaticModel.from_pretrained(model, **options)
    except Exception as exc:  # model2vec / huggingface_hub raise many types (HTTP, offline, 404, bad files)
        raise EmbedderUnavailable(
            f"model2vec could not load {model!r}: {exc}",
            hint=(
                "check the model id on https://huggingface.co/models and your network connection, "
                f"pass a local Model2Vec folder, or use the bundled model {DEFAULT_MODEL!r}"
            ),
        ) from exc
    return StaticModelEmbedder(static_model, name=model)
