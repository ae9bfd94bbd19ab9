"""One search pipeline for every front end: lexical and vector lists, fused by RRF."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

import numpy as np

from .config import SearchSettings
from .embed import Embedder, load_embedder
from .errors import EmbedderUnavailable, UsageError
from .fusion import rrf
from .query import all_of, any_of, lexical_phrases, query_terms
from .snippet import make_snippet
from .store.sqlite import SqliteStore
from .types import Hit
from .vectors import VectorIndex

log = logging.getLogger("vaultseek")

MODES = ("hybrid", "bm25", "vector")
CHARS_PER_TOKEN = 4
OR_BUDGET = 8_000  # postings an OR query may score before the lexical side narrows it


@dataclass
class SearchResult:
    query: str
    mode: str  # the mode actually used (hybrid falls back to bm25 when vectors are unavailable)
    hits: list[Hit]
    warnings: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        return {
            "query": self.query,
            "mode": self.mode,
            "warnings": self.warnings,
            "results": [
                {
                    "path": h.path,
                    "section": h.section,
                    "heading_context": h.heading_context,
                    "score": round(h.score, 6),
                    "bm25_rank": h.bm25_rank,
                    "vec_rank": h.vec_rank,
                    "start_line": h.start_line,
                    "snippet": h.snippet,
                    "text": h.text,
                }
                for h in self.hits
            ],
        }


def estimate_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


class Searcher:
    """Answers queries against one store; keeps the model and vectors warm between queries."""

    def __init__(self, store: SqliteStore, settings: SearchSettings = SearchSettings(), embedder: Embedder | None = None, model: str | None = None) -> None:
        self.store = store
        self.settings = settings
        self._embedder = embedder
        self._model = model or store.get_meta("model")
        self._vectors: VectorIndex | None = None
        self._vectors_version: int | None = None
        self.vector_error: str | None = None
        self._count = 0
        self._count_version: int | None = None
        self._pool = None

    # -- the two lists --------------------------------------------------------------------

    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = load_embedder(self._model)
        return self._embedder

    def vector_index(self) -> VectorIndex:
        version = self.store.data_version()
        if self._vectors is None or version != self._vectors_version:
            self.embedder()  # fail here, before loading vectors, if the model cannot load
            self._vectors = VectorIndex(*self.store.load_vectors())
            self._vectors_version = version
        return self._vectors

    def lexical(self, query: str, limit: int) -> list[tuple[int, float]]:
        """BM25 over FTS5, best first.

        FTS5 scores every chunk a query matches, so a query of common words over a big vault
        would score most of it. When the words' postings add up to more than `OR_BUDGET`, words
        in over half the chunks are dropped (their IDF is ~0), chunks holding every remaining
        word come first, and the rest are filled from the rarest words.
        """
        phrases = lexical_phrases(query)
        if not phrases:
            return []
        if len(phrases) == 1:
            return self.store.bm25(any_of(phrases), limit)
        df = {p: self.store.doc_freq(p) for p in phrases}
        total = self._chunk_count()
        kept = [p for p in phrases if df[p] <= total // 2] or phrases
        if sum(df[p] for p in kept) <= OR_BUDGET or len(kept) == 1:
            return self.store.bm25(any_of(kept), limit)
        hits = self.store.bm25(all_of(kept), limit)
        if len(hits) >= limit:
            return hits
        rare: list[str] = []
        budget = 0
        for p in sorted(kept, key=lambda p: df[p]):
            if rare and budget + df[p] > OR_BUDGET:
                break
            rare.append(p)
            budget += df[p]
        seen = {i for i, _ in hits}
        hits.extend(h for h in self.store.bm25(any_of(rare), limit) if h[0] not in seen)
        return hits[:limit]

    def _chunk_count(self) -> int:
        version = self.store.data_version()
        if self._count_version != version:
            self._count = self.store.chunk_count()
            self._count_version = version
        return self._count

    def semantic(self, query: str, limit: int) -> list[tuple[int, float]]:
        """Raises EmbedderUnavailable when the model cannot load."""
        return self._semantic_in(self.vector_index(), query, limit)

    def _semantic_in(self, index: VectorIndex, query: str, limit: int) -> list[tuple[int, float]]:
        if index.size == 0:
            return []
        vec = self.embedder().embed_batch([query])[0]
        return index.search(vec, limit)

    def _both(self, query: str, limit: int) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """Both lists at once: the vector side (numpy, GIL released) runs on a second thread while
        SQLite (apsw releases the GIL too) ranks the lexical side."""
        index = self.vector_index()  # reads the store here, never from the worker thread
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vaultseek-vector")
        future = self._pool.submit(self._semantic_in, index, query, limit)
        try:
            lex = self.lexical(query, limit)
        finally:
            vec = future.result()
        return lex, vec

    # -- the pipeline ---------------------------------------------------------------------

    def search(self, query: str, k: int | None = None, mode: str = "hybrid", max_tokens: int | None = None) -> SearchResult:
        if mode not in MODES:
            raise UsageError(f"unknown mode {mode!r}", hint=f"use one of: {', '.join(MODES)}")
        if not query or not query.strip():
            raise UsageError("the query is empty", hint='give some words to search for, e.g. vaultseek search "oauth token"')
        k = self.settings.k if k is None else k
        if k < 1:
            raise UsageError("-k must be at least 1")
        n = max(self.settings.candidates, k)
        warnings: list[str] = []

        lex: list[tuple[int, float]] = []
        vec: list[tuple[int, float]] = []
        if mode == "bm25":
            lex = self.lexical(query, n)
        else:
            try:
                if mode == "hybrid":
                    lex, vec = self._both(query, n)
                else:
                    vec = self.semantic(query, n)
            except EmbedderUnavailable as exc:
                if mode == "hybrid":
                    lex = self.lexical(query, n)
                self.vector_error = str(exc).splitlines()[0]
                msg = f"vector search unavailable ({self.vector_error}); showing keyword (BM25) results only"
                if mode == "vector":
                    raise EmbedderUnavailable(msg, hint="check `vaultseek status`; use --mode bm25") from None
                warnings.append(msg)
                mode = "bm25"

        if mode == "bm25":
            lists, weights = [[i for i, _ in lex]], [self.settings.bm25_weight]
        elif mode == "vector":
            lists, weights = [[i for i, _ in vec]], [self.settings.vector_weight]
        else:
            lists = [[i for i, _ in lex], [i for i, _ in vec]]
            weights = [self.settings.bm25_weight, self.settings.vector_weight]
        fused = rrf(lists, weights, k=self.settings.rrf_k)[:k]
        rows = self.store.fetch_chunks([f.id for f in fused])
        terms = query_terms(query)
        hits: list[Hit] = []
        for f in fused:
            row = rows.get(f.id)  # type: ignore[arg-type]
            if row is None:  # deleted between the two reads
                continue
            bm25_rank = f.ranks[0] if mode in ("hybrid", "bm25") else None
            vec_rank = f.ranks[-1] if mode in ("hybrid", "vector") else None
            names = {"hybrid": ("bm25", "vector"), "bm25": ("bm25",), "vector": ("vector",)}[mode]
            hits.append(
                Hit(
                    chunk_id=row.id, path=row.path, section=row.section, heading_context=row.heading_context,
                    text=row.text, score=f.score, bm25_rank=bm25_rank, vec_rank=vec_rank, start_line=row.start_line,
                    snippet=make_snippet(row.text, terms), terms=dict(zip(names, f.terms)),
                )
            )
        if max_tokens is not None:
            hits = fit_to_budget(hits, max_tokens)
        return SearchResult(query=query, mode=mode, hits=hits, warnings=warnings)


def fit_to_budget(hits: list[Hit], max_tokens: int) -> list[Hit]:
    """Keep results, best first, while their text fits in `max_tokens` (~4 characters a token).

    The first result is always kept, cut to the budget if it alone is too long.
    """
    if max_tokens < 1:
        raise UsageError("--max-tokens must be at least 1")
    kept: list[Hit] = []
    used = 0
    for hit in hits:
        cost = estimate_tokens(hit.text)
        if used + cost > max_tokens:
            if not kept:
                cut = hit.text[: max_tokens * CHARS_PER_TOKEN]
                kept.append(replace(hit, text=cut))
            break
        kept.append(hit)
        used += cost
    return kept
