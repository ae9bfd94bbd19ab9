"""Settings from `<vault>/.vaultseek/config.toml`, and where the index lives.

The index lives in the vault's hidden `.vaultseek/index.db` by default, so it moves with the vault
and is skipped by Obsidian; `--db` always overrides.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .types import SKIP_SECTIONS, ChunkingParams
from .errors import UsageError


INDEX_DIR = ".vaultseek"
INDEX_FILE = "index.db"
CONFIG_FILE = "config.toml"
# Folders never indexed, wherever they appear in the vault.
ALWAYS_SKIPPED = (".obsidian", ".trash", ".git", "node_modules", INDEX_DIR)


@dataclass(frozen=True)
class IndexSettings:
    include: tuple[str, ...] = ()  # allowlist of folders (relative to the vault); empty = everything
    exclude: tuple[str, ...] = ()  # extra folders to skip
    private_folders: tuple[str, ...] = ()  # notes here are never indexed (recorded in the audit table)
    private_tags: tuple[str, ...] = ("private",)  # notes with one of these tags are never indexed
    extensions: tuple[str, ...] = (".md", ".markdown")
    max_file_mb: float = 20.0  # larger notes are skipped with a warning
    scrub_secrets: bool = True


@dataclass(frozen=True)
class SearchSettings:
    """Ranking settings; each default is backed by the figures in docs/evaluation.md."""

    k: int = 10
    candidates: int = 30  # taken from each list before fusion
    fusion: str = "convex"  # "convex" (min-max normalised scores, weighted) or "rrf" (ranks only)
    bm25_weight: float = 0.7  # weight of the BM25 list in the fusion
    vector_weight: float = 0.3  # weight of the vector list in the fusion
    rrf_k: int = 60  # RRF's k, with fusion = "rrf"
    keyword_bm25_weight: float = 0.0  # BM25's share for short non-question queries (0 = off: the weights above)
    keyword_max_words: int = 2  # queries of at most this many words count as keyword queries
    per_note: int = 2  # at most this many chunks of one note in a result list (0: no limit)
    fix_typos: bool = True  # search for the closest indexed word when a word matches nothing
    proximity: float = 0.0  # BM25 boost for chunks where the query's words occur close together (0 = off)
    short_chunk_chars: int = 200  # chunks shorter than this lose up to `short_chunk_penalty` of their score
    short_chunk_penalty: float = 0.5  # 0 turns the short-chunk penalty off
    note_support: float = 0.2  # a result gains this share of the score of its note's best other chunk (0 = off)
    link_weight: float = 0.0  # boost notes with many backlinks ([[links]] from other notes); 0 = off
    recency_weight: float = 0.0  # share of the score that decays with the note's age; 0 = off
    recency_half_life_days: float = 180.0  # age at which the decaying share is halved
    rerank: str = ""  # second-stage model ("all-MiniLM-L6-v2" or a folder); "" = off (see rerank.py)
    rerank_depth: int = 30  # how many of the fused results the reranker rescores
    rerank_weight: float = 0.5  # the reranker's share of a rescored result's score
    rerank_min_words: int = 3  # rerank only queries of at least this many words (and see rank.reranks)
    rerank_tokens: int = 256  # tokens of each chunk the reranker reads (128: ~2x faster, see docs/evaluation.md)

    def __post_init__(self) -> None:
        if self.fusion not in ("convex", "rrf"):
            raise UsageError(f"config: search.fusion must be \"convex\" or \"rrf\", not {self.fusion!r}")
        if self.bm25_weight < 0 or self.vector_weight < 0 or self.candidates < 1:
            raise UsageError("config: search.bm25_weight and search.vector_weight must be >= 0, search.candidates >= 1")
        for name in ("keyword_bm25_weight", "short_chunk_penalty", "recency_weight", "proximity", "rerank_weight", "note_support"):
            if not 0 <= getattr(self, name) <= 1:
                raise UsageError(f"config: search.{name} must be between 0 (off) and 1")
        if self.rerank_depth < 1 or self.rerank_min_words < 0 or self.rerank_tokens < 16:
            raise UsageError("config: search.rerank_depth must be at least 1, search.rerank_min_words at least 0, search.rerank_tokens at least 16")
        if self.link_weight < 0 or self.recency_half_life_days <= 0:
            raise UsageError("config: search.link_weight must be >= 0 and search.recency_half_life_days > 0")


@dataclass(frozen=True)
class Config:
    index: IndexSettings = field(default_factory=IndexSettings)
    chunking: ChunkingParams = field(default_factory=ChunkingParams)
    search: SearchSettings = field(default_factory=SearchSettings)
    model: str = "potion-base-8M"
    source: Path | None = None  # the file it was read from, if any


def _section(cls: type, raw: Any, name: str) -> Any:
    if raw is None:
        return cls()
    if not isinstance(raw, dict):
        raise UsageError(f"config: [{name}] must be a table")
    known = {f.name: f for f in fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in known:
            raise UsageError(f"config: unknown setting {name}.{key}", hint=f"known settings: {', '.join(known)}")
        default = getattr(cls(), key)
        if isinstance(default, tuple):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise UsageError(f"config: {name}.{key} must be a list of strings")
            value = tuple(value)
        elif isinstance(default, str):
            if not isinstance(value, str):
                raise UsageError(f"config: {name}.{key} must be a string")
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise UsageError(f"config: {name}.{key} must be true or false")
        elif isinstance(default, (int, float)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UsageError(f"config: {name}.{key} must be a number")
            value = type(default)(value)
        kwargs[key] = value
    return cls(**kwargs)


def load_config(vault: Path | None, path: Path | None = None) -> Config:
    """Read the config for `vault` (or an explicit `path`); defaults when there is none."""
    if path is None:
        env = os.environ.get("VAULTSEEK_CONFIG")
        if env:
            path = Path(env)
        elif vault is not None and (vault / INDEX_DIR / CONFIG_FILE).is_file():
            path = vault / INDEX_DIR / CONFIG_FILE
    if path is None:
        return Config()
    if sys.version_info >= (3, 11):  # imported here: most runs have no config file
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"config file not found: {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"config file {path} is not valid TOML: {exc}") from None
    unknown = set(raw) - {"index", "chunking", "search", "model"}
    if unknown:
        raise UsageError(f"config: unknown section(s) {', '.join(sorted(unknown))} in {path}")
    chunk_raw = raw.get("chunking")
    chunking = _section(ChunkingParams, chunk_raw, "chunking")
    if chunking.min_chars < 0 or chunking.max_chars < max(100, chunking.min_chars):
        raise UsageError("config: chunking.max_chars must be at least 100 and above min_chars")
    model = raw.get("model", {})
    if isinstance(model, str):
        model_name = model
    elif isinstance(model, dict):
        model_name = str(model.get("name", Config.model))
    else:
        raise UsageError("config: model must be a string or a table with `name`")
    return Config(
        index=_section(IndexSettings, raw.get("index"), "index"),
        chunking=replace(chunking, skip_sections=tuple(s for s in chunking.skip_sections)) if chunk_raw else ChunkingParams(skip_sections=SKIP_SECTIONS),
        search=_section(SearchSettings, raw.get("search"), "search"),
        model=model_name,
        source=path,
    )


def with_rerank(settings: SearchSettings, flag: bool) -> SearchSettings:
    """The settings with reranking on when `--rerank` was given: the configured model, else the default."""
    if not flag or settings.rerank:
        return settings
    from .rerank import DEFAULT_RERANKER

    return replace(settings, rerank=DEFAULT_RERANKER)


def default_db_path(vault: Path) -> Path:
    return vault / INDEX_DIR / INDEX_FILE


def find_vault_upwards(start: Path) -> Path | None:
    """The nearest folder at or above `start` that holds a vaultseek index."""
    for folder in (start, *start.parents):
        if (folder / INDEX_DIR / INDEX_FILE).is_file():
            return folder
    return None
