"""Ranking experiments on a dataset, without touching the search pipeline.

Fetches deep BM25 and vector lists once per query (the store's FTS5 bm25() and the in-memory vector
index, as `Searcher.lexical` / `.semantic` use them), then scores fusion, prior and weighting
variants offline with the pipeline's own pieces (`vaultseek.fusion.convex`, `vaultseek.rank`). The
queries are split into two halves by a hash of their id (`evaluate.half_of`, as `vaultseek eval`
reports them): every variant is reported on both halves, and each family's parameter is chosen on
one half and scored on the other (2-fold cross-validation), so nothing is tuned on the figures it
reports.

    python scripts/ranking_experiments.py ../shared/data/scifact
    python scripts/ranking_experiments.py eval/obsidian-help --vault ../shared/data/obsidian-help \\
        --db /tmp/oh.db --config eval/obsidian-help/config.toml
    vaultseek eval --self-test --db /tmp/h.db --write /tmp/selftest     # the self-test as a dataset
    python scripts/ranking_experiments.py /tmp/selftest --vault ../shared/data/obsidian-help/en --db /tmp/h.db

Two BM25 lists are fetched: the pipeline's (`Searcher.lexical`, which also pairs CJK characters,
expands partial words and corrects typos; the store's column weights) for the fusion families, and
the plain OR of the query's words with explicit column weights, so the title weight can vary.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from vaultseek.config import Config, SearchSettings, load_config
from vaultseek.evaluate import build_corpus_vault, eval_cache, half_of, index_vault, load_dataset, score_query
from vaultseek.fusion import convex, rrf
from vaultseek.query import STOPWORDS, query_terms, quote_term
from vaultseek.rank import apply_priors, factors
from vaultseek.search import Searcher

Scored = list[tuple[int, float]]  # (chunk id, score), best first, higher is better
TITLE_WEIGHTS = (0.3, 1.0, 2.0, 4.0)  # bm25() weight of the heading_context column (title | type | tags)
BEFORE_TITLE_WEIGHT, TITLE_WEIGHT = 0.3, 2.0  # the store's default before and after this change
CUT = 30  # candidates per list, as `search -k 10`


@dataclass
class QueryLists:
    qid: str
    text: str
    half: str
    lex: dict[float, Scored]  # plain OR of the words: bm25 (negated: higher is better) per heading_context weight
    pipe: Scored  # the pipeline's lexical list (`Searcher.lexical`: CJK pairs, partial words, typos), negated
    vec: Scored  # cosine


def notes_of(ids: list, doc_of: dict, exclude: str, depth: int = 100) -> list[str]:
    """Chunk ids -> distinct corpus ids, best first (a note counts at its best chunk)."""
    out: list[str] = []
    seen = {exclude}
    for i in ids:
        d = doc_of.get(i)
        if d is not None and d not in seen:
            seen.add(d)
            out.append(d)
            if len(out) == depth:
                break
    return out


def ids(scored: Scored) -> list[int]:
    return [i for i, _ in scored]


def floor(scored: Scored, exhaustive: bool) -> float | None:
    """As `search._floor`: the score at rank CUT, 0 for a BM25 list holding every match."""
    if len(scored) > CUT:
        return scored[CUT - 1][1]
    return 0.0 if exhaustive else None


def pipeline_convex(lex: Scored, vec: Scored, alpha: float, depth: int) -> list:
    """The pipeline's convex fusion (`Searcher.rank`) of two deep lists."""
    return convex([lex, vec], [alpha, 1 - alpha], [floor(lex, len(lex) < depth), floor(vec, False)])


def normalise(scores: dict, how: str) -> dict:
    """min-max: (s - min) / (max - min), 1 when all are equal; max: s / max; z: (s - mean) / sd,
    shifted so the list's minimum is 0."""
    if not scores:
        return {}
    v = np.array(list(scores.values()), dtype=np.float64)
    if how == "minmax":
        lo, span = v.min(), v.max() - v.min()
        if span == 0:
            return {d: 1.0 for d in scores}
        return {d: (s - lo) / span for d, s in scores.items()}
    if how == "max":
        top = v.max() or 1.0
        return {d: s / top for d, s in scores.items()}
    mu, sd = v.mean(), v.std() or 1.0
    lo = (v.min() - mu) / sd
    return {d: (s - mu) / sd - lo for d, s in scores.items()}


def convex_variant(lex: list[tuple], vec: list[tuple], alpha: float, how: str) -> list:
    """alpha * norm(bm25) + (1 - alpha) * norm(cosine), normalised over the given lists only."""
    a, b = normalise(dict(lex), how), normalise(dict(vec), how)
    return sorted(a.keys() | b.keys(), key=lambda d: (-(alpha * a.get(d, 0.0) + (1 - alpha) * b.get(d, 0.0)), str(d)))


def collect(searcher: Searcher, queries: dict[str, str], depth: int) -> list[QueryLists]:
    out = []
    index = searcher.vector_index()
    for qid, text in queries.items():
        words = [t for t in query_terms(text) if t not in STOPWORDS] or query_terms(text)
        match = " OR ".join(quote_term(t) for t in words)
        lex = {w: [(i, -s) for i, s in searcher.store.bm25(match, depth, weights=(1.0, 0.5, w))] if words else [] for w in TITLE_WEIGHTS}
        qvec = searcher.embedder().embed_batch([text])[0]
        pipe = [(i, -s) for i, s in searcher.lexical(text, depth)]
        out.append(QueryLists(qid, text, half_of(qid), lex, pipe, index.search(qvec, depth)))
    return out


def open_dataset(args: argparse.Namespace):
    ds = load_dataset(Path(args.dataset))
    if ds.corpus is not None:
        cache = eval_cache(ds.root)  # type: ignore[arg-type]
        cache.mkdir(parents=True, exist_ok=True)
        notes = build_corpus_vault(ds.corpus, cache)
        store, _ = index_vault(cache / "vault", cache / "index.db", Config())
        return ds, store, notes.get
    if not args.vault:
        raise SystemExit("a golden set needs --vault")
    vault = Path(args.vault)
    config = load_config(vault, Path(args.config) if args.config else None)
    store, _ = index_vault(vault, Path(args.db) if args.db else vault / ".vaultseek" / "index.db", config)
    return ds, store, lambda p: p


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--vault")
    parser.add_argument("--db")
    parser.add_argument("--config", help="config file for the vault (e.g. eval/obsidian-help/config.toml)")
    parser.add_argument("--depth", type=int, default=300, help="chunks fetched from each list")
    parser.add_argument("--json", help="write all figures to this file")
    args = parser.parse_args(argv)

    ds, store, to_id = open_dataset(args)
    searcher = Searcher(store, SearchSettings())
    index = searcher.vector_index()
    all_ids = [int(i) for i in index.ids]
    doc_of: dict[int, str] = {}
    for start in range(0, len(all_ids), 500):
        for cid, row in store.fetch_chunks(all_ids[start : start + 500]).items():
            doc = to_id(row.path)
            if doc is not None:
                doc_of[cid] = doc
    facts = searcher.note_facts()
    started = time.perf_counter()
    lists = collect(searcher, ds.queries, args.depth)
    print(f"{ds.name}: {len(lists)} queries, lists of {args.depth} chunks fetched in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    depth = args.depth

    def with_priors(fused: list, **settings: float) -> list:
        s = SearchSettings(**settings)  # type: ignore[arg-type]
        return [x.id for x in apply_priors(fused, factors(facts, [x.id for x in fused], s))]

    def note_level(q: QueryLists, alpha: float) -> list:
        """Convex fusion of notes (each at its best chunk's score) instead of chunks."""
        def per_note(scored: Scored) -> list[tuple[str, float]]:
            best: dict[str, float] = {}
            for i, s in scored:
                d = doc_of.get(i)
                if d is not None and d not in best:
                    best[d] = s
            return list(best.items())
        notes = pipeline_convex(per_note(q.pipe), per_note(q.vec), alpha, depth)
        return [x.id for x in notes]

    def short_query(q: QueryLists, short: float, words: int = 2) -> float:
        """Query-intent weighting: BM25's weight for queries of at most `words` words that are not questions."""
        tokens = q.text.split()
        question = "?" in q.text or (tokens and tokens[0].lower() in {"how", "what", "why", "when", "where", "which", "who", "can", "does", "is"})
        return short if len(tokens) <= words and not question else 0.7

    lex0 = lambda q: q.lex[BEFORE_TITLE_WEIGHT]  # noqa: E731
    lex2 = lambda q: q.pipe  # noqa: E731 - the store's default weights: title 2
    notes = lambda ranked, q: notes_of(ranked, doc_of, q.qid)  # noqa: E731
    # family name -> {parameter: ranker}
    families: dict[str, dict[object, Callable[[QueryLists], list[str]]]] = {
        "bm25, plain OR of the words (title column weight)": {w: (lambda q, w=w: notes(ids(q.lex[w]), q)) for w in TITLE_WEIGHTS},
        "bm25, the pipeline's lexical list (title 2)": {"-": lambda q: notes(ids(q.pipe), q)},
        "vector": {"-": lambda q: notes(ids(q.vec), q)},
        "before: rrf60, cut 30, title 0.3 (vector weight)": {w: (lambda q, w=w: notes([f.id for f in rrf([ids(lex0(q))[:CUT], ids(q.vec)[:CUT]], [1, w], 60)], q)) for w in (1.0, 0.5, 0.3)},
        "rrf60, cut 30, title 2 (vector weight)": {w: (lambda q, w=w: notes([f.id for f in rrf([ids(lex2(q))[:CUT], ids(q.vec)[:CUT]], [1, w], 60)], q)) for w in (1.0, 0.5, 0.3)},
    }
    for how in ("minmax", "max", "z"):
        families[f"convex {how} over the top 30, title 2 (alpha = bm25 weight)"] = {
            a: (lambda q, a=a, how=how: notes(convex_variant(lex2(q)[:CUT], q.vec[:CUT], a, how), q)) for a in (0.5, 0.6, 0.7, 0.8)
        }
    families["pipeline convex, title 2 (alpha)"] = {a: (lambda q, a=a: notes([x.id for x in pipeline_convex(lex2(q), q.vec, a, depth)], q)) for a in (0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9)}
    families["pipeline convex, plain-OR bm25 (title weight; alpha 0.7)"] = {w: (lambda q, w=w: notes([x.id for x in pipeline_convex(q.lex[w], q.vec, 0.7, depth)], q)) for w in TITLE_WEIGHTS}
    families["pipeline convex 0.7 + short-chunk penalty (penalty, 200 chars)"] = {
        p: (lambda q, p=p: notes(with_priors(pipeline_convex(lex2(q), q.vec, 0.7, depth), short_chunk_penalty=p), q)) for p in (0.0, 0.2, 0.3, 0.5, 0.7)
    }
    families["pipeline convex 0.7 + short 0.5 + backlinks (link weight)"] = {
        w: (lambda q, w=w: notes(with_priors(pipeline_convex(lex2(q), q.vec, 0.7, depth), short_chunk_penalty=0.5, link_weight=w), q)) for w in (0.0, 0.05, 0.1, 0.2)
    }
    families["query intent: alpha for <= 2-word non-questions (others 0.7, short 0.5)"] = {
        a: (lambda q, a=a: notes(with_priors(pipeline_convex(lex2(q), q.vec, short_query(q, a), depth), short_chunk_penalty=0.5), q)) for a in (0.7, 0.8, 0.9, 1.0)
    }
    families["note-level convex, title 2 (alpha)"] = {a: (lambda q, a=a: note_level(q, a)[:100]) for a in (0.6, 0.7, 0.8)}

    halves = {h: [q for q in lists if q.half == h] for h in ("A", "B")}
    mean = lambda scores, qs, key="ndcg@10": sum(scores[q.qid][key] for q in qs) / len(qs) if qs else 0.0  # noqa: E731
    types = sorted(set(ds.types.values()))
    report: dict[str, dict] = {}
    print(f"{'variant (nDCG@10)':<72} {'param':>6} {'all':>7} {'A':>7} {'B':>7} {'R@100':>7}   halves: {len(halves['A'])}/{len(halves['B'])} queries")
    for family, members in families.items():
        table = {}
        for param, ranker in members.items():
            scores = {}
            for q in lists:
                ranking = ranker(q)
                scores[q.qid] = score_query([d for d in ranking if d != q.qid], ds.qrels[q.qid])
            row = {"all": mean(scores, lists), "A": mean(scores, halves["A"]), "B": mean(scores, halves["B"]), "recall@100": mean(scores, lists, "recall@100")}
            for t in types:
                row[t] = mean(scores, [q for q in lists if ds.types.get(q.qid) == t])
            table[param] = row
            by_type = "  " + " ".join(f"{t}={row[t]:.3f}" for t in types) if types else ""
            print(f"{family:<72} {param!s:>6} {row['all']:>7.4f} {row['A']:>7.4f} {row['B']:>7.4f} {row['recall@100']:>7.4f}{by_type}")
        cv = None
        if len(members) > 1 and halves["A"] and halves["B"]:
            best_a = max(table, key=lambda p: table[p]["A"])
            best_b = max(table, key=lambda p: table[p]["B"])
            cv = (table[best_a]["B"] * len(halves["B"]) + table[best_b]["A"] * len(halves["A"])) / len(lists)
            print(f"{'':<72} {'2-fold':>6} {cv:>7.4f}   (picked {best_a} on A -> B {table[best_a]['B']:.4f}; {best_b} on B -> A {table[best_b]['A']:.4f})")
        report[family] = {"members": {str(p): {k: round(v, 4) for k, v in r.items()} for p, r in table.items()}, "cross_validated": round(cv, 4) if cv is not None else None}
    if args.json:
        Path(args.json).write_text(json.dumps({"dataset": ds.name, "report": report}, indent=1), encoding="utf-8")
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
