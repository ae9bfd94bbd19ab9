"""One search pipeline for every front end: a lexical and a vector list, fused (convex combination
of normalised scores by default, or RRF), then note-level priors (`rank.py`).

`Searcher.rank` does the ranking; `Searcher.search` adds the text, snippets and token budget. The
evaluation harness calls `rank` too, so what it measures is what `search` returns.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from .config import SearchSettings
from .embed import Embedder, load_embedder
from .errors import EmbedderUnavailable, UsageError
from .fusion import Fused, fuse
from .lexical import Lexical, Plan
from .query import Filters, Query, parse_query, query_terms
from .rank import NoteFacts, apply_priors, factors, fusion_weights, in_candidates, load_facts, note_support, prior_names, reranks
from .rerank import Reranker, load_reranker, rerank_text
from .snippet import highlight_spans, make_snippet
from .store.sqlite import SqliteStore
from .types import Hit
from .vectors import VectorIndex

log = logging.getLogger("vaultseek")

MODES = ("hybrid", "bm25", "vector")
CHARS_PER_TOKEN = 4
MAX_DEPTH = 2_000  # the deepest each list is read when grouping per note leaves fewer than k results


@dataclass
class SearchResult:
    query: str
    mode: str  # the mode actually used (hybrid falls back to bm25 when vectors are unavailable)
    hits: list[Hit]
    warnings: list[str] = field(default_factory=list)
    corrections: dict[str, str] = field(default_factory=dict)  # typed word -> word searched instead
    terms: list[str] = field(default_factory=list)  # words to highlight

    def as_json(self) -> dict[str, object]:
        return {
            "query": self.query,
            "mode": self.mode,
            "warnings": self.warnings,
            "corrections": self.corrections,
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
                    "highlights": highlight_spans(h.snippet, self.terms),
                    "text": h.text,
                }
                for h in self.hits
            ],
        }


@dataclass
class Ranking:
    """What `Searcher.rank` found: fused results (best first) and how the query was read."""

    query: Query
    plan: Plan
    mode: str  # the mode actually used
    names: tuple[str, ...]  # what each of a result's terms is: the lists fused, then the priors
    fused: list[Fused]
    warnings: list[str] = field(default_factory=list)


def estimate_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


class Searcher:
    """Answers queries against one store; keeps the model and vectors warm between queries."""

    def __init__(self, store: SqliteStore, settings: SearchSettings = SearchSettings(), embedder: Embedder | None = None, model: str | None = None) -> None:
        self.store = store
        self.settings = settings
        self.lex = Lexical(store)
        self._embedder = embedder
        self._model = model or store.get_meta("model")
        self._vectors: VectorIndex | None = None
        self._vectors_version: int | None = None
        self.vector_error: str | None = None
        self._facts: NoteFacts | None = None
        self._facts_version: int | None = None

    # -- the two lists --------------------------------------------------------------------

    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = load_embedder(self._model)
        return self._embedder

    def vector_index(self) -> VectorIndex:
        version = self.store.data_version()
        if self._vectors is None or version != self._vectors_version:
            self.embedder()  # fail here, before loading vectors, if the model cannot load
            lazy = self.store.load_vectors_lazy()
            self._vectors = VectorIndex(lazy.ids, None, lazy.scales, lazy.bits, lazy=lazy)
            self._vectors_version = version
        return self._vectors

    def note_facts(self, ids: Sequence[int] | None = None) -> NoteFacts:
        """Each chunk's note and length, each note's backlinks and date. Backlinks are counted
        over the whole vault (read once per index version); otherwise only `ids` are read."""
        if ids is not None and self.settings.link_weight <= 0:
            return load_facts(self.store, ids)
        version = self.store.data_version()
        if self._facts is None or version != self._facts_version:
            self._facts = load_facts(self.store)
            self._facts_version = version
        return self._facts

    def lexical(self, query: str, limit: int) -> list[tuple[int, float]]:
        """BM25 list for plain query text (no filters), best first."""
        return self.lex.search(self.lex.plan(parse_query(query)), limit)

    def semantic(self, query: str, limit: int) -> list[tuple[int, float]]:
        """Vector list for plain query text, best first. Raises EmbedderUnavailable."""
        return self._semantic_in(self.vector_index(), query, limit, None)

    def _semantic_in(self, index: VectorIndex, text: str, limit: int, admissible: np.ndarray | None) -> list[tuple[int, float]]:
        if index.size == 0 or not text.strip():
            return []
        mask = None
        if admissible is not None:
            if len(admissible) and admissible[0] < 0:  # "anything but these"
                mask = ~np.isin(index.ids, -admissible - 1)
            else:
                mask = np.isin(index.ids, admissible)
        vec = self.embedder().embed_batch([text])[0]
        return index.search(vec, limit, mask)

    def _both(self, plan: Plan, text: str, limit: int, where, admissible) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """Both lists, one after the other. (Running the vector side on a second thread measured
        slower on 2 cores: 5.5 vs 5.2 ms p50 at 107k chunks; the thread hand-off costs more than
        the overlap saves.)"""
        index = self.vector_index()
        return self.lex.search(plan, limit, where, self.settings.proximity), self._semantic_in(index, text, limit, admissible)

    # -- the pipeline ---------------------------------------------------------------------

    def rank(
        self,
        query: str,
        k: int | None = None,
        mode: str = "hybrid",
        filters: Filters | None = None,
        fix_typos: bool | None = None,
        per_note: int | None = None,
    ) -> Ranking:
        """The ranked chunk ids for a query (the query language of `query.parse_query`), without
        reading their text. `filters` add to those in the text; None settings come from `self.settings`."""
        if mode not in MODES:
            raise UsageError(f"unknown mode {mode!r}", hint=f"use one of: {', '.join(MODES)}")
        if not query or not query.strip():
            raise UsageError("the query is empty", hint='give some words to search for, e.g. vaultseek search "oauth token"')
        settings = self.settings
        k = settings.k if k is None else k
        if k < 1:
            raise UsageError("-k must be at least 1")
        parsed = parse_query(query)
        if filters:
            parsed = replace(parsed, filters=parsed.filters.merged(filters))
        if not parsed.text and not parsed.phrases:
            raise UsageError(f"nothing to search for in {query!r}", hint="add some words besides filters and -exclusions")
        fix_typos = settings.fix_typos if fix_typos is None else fix_typos
        per_note = settings.per_note if per_note is None else per_note
        n = max(settings.candidates, k)
        f = parsed.filters
        where = self.store.filter_sql(f.tags, f.paths, f.types, f.after, f.before) if f else None
        plan = self.lex.plan(parsed, fix_typos=fix_typos)
        admissible = self.lex.admissible(plan, where) if (where or plan.required or plan.excluded) else None
        warnings: list[str] = []
        requested_mode = mode
        while True:
            mode = requested_mode
            warnings = []
            lex: list[tuple[int, float]] = []
            vec: list[tuple[int, float]] = []
            if mode == "bm25":
                lex = self.lex.search(plan, n, where, settings.proximity)
            else:
                try:
                    if mode == "hybrid":
                        lex, vec = self._both(plan, parsed.text, n, where, admissible)
                    else:
                        vec = self._semantic_in(self.vector_index(), parsed.text, n, admissible)
                except EmbedderUnavailable as exc:
                    if mode == "hybrid":
                        lex = self.lex.search(plan, n, where, settings.proximity)
                    self.vector_error = exc.one_line()
                    msg = f"vector search unavailable ({self.vector_error}); showing keyword (BM25) results only"
                    if mode == "vector":
                        raise EmbedderUnavailable(msg, hint="check `vaultseek status`; use --mode bm25") from None
                    warnings.append(msg)
                    mode = "bm25"

            names: tuple[str, ...] = {"hybrid": ("bm25", "vector"), "bm25": ("bm25",), "vector": ("vector",)}[mode]
            # FTS5's bm25() is lower-is-better: negated, every list is higher-is-better.
            scored = {"bm25": [(i, -s) for i, s in lex], "vector": vec}
            if len(names) > 1:
                weights = dict(zip(("bm25", "vector"), fusion_weights(settings, parsed.text)))
            else:
                weights = {names[0]: 1.0}
            floors = {"bm25": _floor(scored["bm25"], settings.candidates, exhaustive=len(lex) < n), "vector": _floor(vec, settings.candidates)}
            fused = fuse(
                settings.fusion, [scored[name] for name in names], [weights[name] for name in names],
                rrf_k=settings.rrf_k, floors=[floors[name] for name in names],
            )
            wants_facts = per_note or prior_names(settings) or settings.note_support > 0
            facts = self.note_facts([x.id for x in fused]) if fused and wants_facts else None  # type: ignore[misc]
            multipliers = factors(facts, [x.id for x in fused], settings) if facts is not None else {}  # type: ignore[misc]
            if multipliers:
                fused = apply_priors(fused, multipliers)
                names = names + tuple(multipliers)
            note_of = dict(zip((x.id for x in fused), facts.note_of([x.id for x in fused]))) if facts is not None else {}  # type: ignore[misc]
            if settings.note_support > 0 and facts is not None:
                fused = note_support(fused, [note_of[x.id] for x in fused], settings.note_support, settings.candidates)
                names = names + ("support",)
            if settings.rerank and fused and reranks(parsed.text, settings.rerank_min_words):
                reranked = self._rerank(parsed.text, fused, warnings)
                if reranked is not None:
                    fused, names = reranked, names + ("rerank",)
            if per_note and facts is not None:
                per_file: dict[int, int] = {}
                kept = []
                for x in fused:
                    fid = note_of.get(x.id)
                    if fid is None or per_file.get(fid, 0) >= per_note:
                        continue
                    per_file[fid] = per_file.get(fid, 0) + 1
                    kept.append(x)
                fused = kept
            # One note with many matching chunks can use up the candidates: look deeper until k notes'
            # worth survive the per-note cap or the lists run dry (the scores of the top do not change).
            if len(fused) >= k or n >= MAX_DEPTH or (len(lex) < n and len(vec) < n):
                break
            n = min(n * 4, MAX_DEPTH)
        return Ranking(parsed, plan, mode, names, fused[:k], warnings)

    def reranker(self) -> Reranker:
        """The second-stage model of `settings.rerank` (loaded once per process by `load_reranker`).
        Raises EmbedderUnavailable."""
        return load_reranker(self.settings.rerank, self.settings.rerank_tokens)

    def _rerank(self, text: str, fused: list[Fused], warnings: list[str]) -> list[Fused] | None:
        """The fused list with its top `rerank_depth` rescored by the reranker, or None (and a
        warning) when the model is unavailable. A rescored result scores
        (1 - w) * fused / best fused + w * (its similarity, min-max scaled over the rescored ones);
        the rest keep (1 - w) * fused / best fused, below every rescored one (a result outside the
        first `candidates` of every list is never rescored)."""
        try:
            reranker = self.reranker()
        except EmbedderUnavailable as exc:
            hint = f"; {exc.hint}" if exc.hint else ""
            warnings.append(f"reranking unavailable ({exc.one_line()}); results are in fused order{hint}")
            return None
        w = self.settings.rerank_weight
        # Only results within the first `candidates` of a list, so lists read deeper (`eval`, the
        # per-note deepening) rescore exactly what a `-k 10` search rescores.
        top = [x for x in fused if in_candidates(x, self.settings.candidates)][: self.settings.rerank_depth]
        rows = self.store.fetch_chunks([x.id for x in top])  # type: ignore[misc]
        scored = [x for x in top if x.id in rows]
        sims = reranker.similarities(text, [(x.id, rerank_text(rows[x.id])) for x in scored])  # type: ignore[index]
        lo, hi = (float(sims.min()), float(sims.max())) if len(sims) else (0.0, 0.0)
        bonus = {x.id: (w * (float(s) - lo) / (hi - lo) if hi > lo else w) for x, s in zip(scored, sims)}
        best = max(fused[0].score, 1e-12)
        scale = (1 - w) / best
        out = []
        for x in fused:
            terms = tuple(t * scale for t in x.terms) + (bonus.get(x.id, 0.0),)
            out.append(Fused(x.id, sum(terms), x.ranks, terms))
        out.sort(key=lambda x: -x.score)  # stable: ties keep the fused order
        return out

    def search(
        self,
        query: str,
        k: int | None = None,
        mode: str = "hybrid",
        max_tokens: int | None = None,
        filters: Filters | None = None,
        fix_typos: bool | None = None,
        per_note: int | None = None,
    ) -> SearchResult:
        """Search with the query language of `query.parse_query`; `filters` add to those in the text;
        None settings come from `self.settings`."""
        ranking = self.rank(query, k=k, mode=mode, filters=filters, fix_typos=fix_typos, per_note=per_note)
        rows = self.store.fetch_chunks([x.id for x in ranking.fused])  # type: ignore[misc]
        terms = self._highlight_terms(ranking.query, ranking.plan)
        hits: list[Hit] = []
        for x in ranking.fused:
            row = rows.get(x.id)  # type: ignore[arg-type]
            if row is None:  # deleted between the two reads
                continue
            ranks = dict(zip(ranking.names, x.ranks))
            hits.append(
                Hit(
                    chunk_id=row.id, path=row.path, section=row.section, heading_context=row.heading_context,
                    text=row.text, score=x.score, bm25_rank=ranks.get("bm25"), vec_rank=ranks.get("vector"),
                    start_line=row.start_line, snippet=make_snippet(row.text, terms), terms=dict(zip(ranking.names, x.terms)),
                )
            )
        if max_tokens is not None:
            hits = fit_to_budget(hits, max_tokens)
        corrections = {w: self._surface(stem, hits) for w, stem in ranking.plan.corrections.items()}
        return SearchResult(
            query=query, mode=ranking.mode, hits=hits, warnings=ranking.warnings, corrections=corrections,
            terms=terms,
        )

    def _highlight_terms(self, parsed: Query, plan: Plan) -> list[str]:
        terms = query_terms(parsed.text)
        terms += [t for alts in plan.alternatives.values() for t in alts] + list(plan.corrections.values())
        return list(dict.fromkeys(t for t in terms if t))

    def _surface(self, stem: str, hits: list[Hit]) -> str:
        """How a corrected word is written in the results (the index keeps stems: `registri`)."""
        for hit in hits[:3]:
            data = hit.text.encode("utf-8")
            for start, end, token in self.store.stem(hit.text):
                if token == stem:
                    return data[start:end].decode("utf-8", errors="replace").lower()
        return stem


def _floor(scored: list[tuple[int, float]], candidates: int, exhaustive: bool = False) -> float | None:
    """The score that normalises to 0 in the convex fusion: the score at rank `candidates`, so a
    deeper list (`-k 300`, as `eval` asks) ranks its top as a `-k 10` search does; 0 for a BM25
    list that holds every match (anything else scores 0 there); else the list's own minimum."""
    if len(scored) >= candidates:
        return scored[candidates - 1][1]
    return 0.0 if exhaustive else None


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
