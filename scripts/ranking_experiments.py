"""Ranking experiments on a dataset, without touching the search pipeline.

Fetches deep BM25 and vector lists once per query (the store's FTS5 bm25() and the in-memory vector
index, as `Searcher.lexical` / `.semantic` use them), then scores fusion, aggregation and weighting
variants offline. The queries are split into two halves by a hash of their id: every variant is
reported on both halves, and each family's parameter is chosen on one half and scored on the other
(2-fold cross-validation), so nothing is tuned on the figures it reports.

    python scripts/ranking_experiments.py ../shared/data/scifact
    python scripts/ranking_experiments.py GOLDEN_DIR --vault VAULT [--db DB]   # a vault golden set
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

from vaultseek.config import Config, load_config
from vaultseek.evaluate import _digest, build_corpus_vault, eval_cache, index_vault, load_dataset, score_query
from vaultseek.fusion import rrf
from vaultseek.query import STOPWORDS, query_terms, quote_term
from vaultseek.search import Searcher

Scored = list[tuple[int, float]]  # (chunk id, score), best first, higher is better
TITLE_WEIGHTS = (0.0, 0.3, 1.0, 2.0, 4.0)  # bm25() weight of the heading_context column (title | type | tags)
DEFAULT_TITLE_WEIGHT = 0.3


@dataclass
class QueryLists:
    qid: str
    half: str
    lex: dict[float, Scored]  # bm25 per heading_context weight (text 1.0, section 0.5)
    vec: Scored  # cosine
    qvec: np.ndarray


def notes_of(ids: list, doc_of: dict[int, str], exclude: str, depth: int = 100) -> list[str]:
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


def note_max(scored: Scored, doc_of: dict[int, str]) -> list[tuple[str, float]]:
    """Per-note max of a sorted chunk list: the note's first (best) chunk gives its score."""
    seen: dict[str, float] = {}
    for i, s in scored:
        d = doc_of.get(i)
        if d is not None and d not in seen:
            seen[d] = s
    return list(seen.items())


def rrf_fuse(lists: list[list], weights: list[float], k: int) -> list:
    return [f.id for f in rrf(lists, weights, k=k)]


def normalise(scores: dict, how: str) -> dict:
    """min-max: (s - min) / (max - min), 1 when all are equal; max: s / max (keeps how far below the top a result is);
    z: (s - mean) / sd, shifted so the list's minimum is 0."""
    if not scores:
        return {}
    v = np.array(list(scores.values()), dtype=np.float64)
    if how == "minmax":
        lo, span = v.min(), v.max() - v.min()
        if span == 0:  # one result (or all tied): full credit, not none
            return {d: 1.0 for d in scores}
        return {d: (s - lo) / span for d, s in scores.items()}
    if how == "max":
        top = v.max() or 1.0
        return {d: s / top for d, s in scores.items()}
    mu, sd = v.mean(), v.std() or 1.0
    lo = (v.min() - mu) / sd
    return {d: (s - mu) / sd - lo for d, s in scores.items()}


def convex(lex: list[tuple], vec: list[tuple], alpha: float, how: str) -> list:
    """alpha * norm(bm25) + (1 - alpha) * norm(cosine); an item missing from a list scores 0 there."""
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
        half = "A" if int(_digest(qid, 2), 16) % 2 == 0 else "B"
        out.append(QueryLists(qid, half, lex, index.search(qvec, depth), qvec))
    return out


def open_dataset(args: argparse.Namespace):
    ds = load_dataset(Path(args.dataset))
    if ds.corpus is not None:
        cache = eval_cache(ds.root)  # type: ignore[arg-type]
        cache.mkdir(parents=True, exist_ok=True)
        notes = build_corpus_vault(ds.corpus, cache)
        store, _ = index_vault(cache / "vault", cache / "index.db", Config())
        return ds, store, Config(), notes.get
    if not args.vault:
        raise SystemExit("a golden set needs --vault")
    vault = Path(args.vault)
    config = load_config(vault)
    store, _ = index_vault(vault, Path(args.db) if args.db else vault / ".vaultseek" / "index.db", config)
    return ds, store, config, lambda p: p


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--vault")
    parser.add_argument("--db")
    parser.add_argument("--depth", type=int, default=1000, help="chunks fetched from each list")
    parser.add_argument("--json", help="write all figures to this file")
    args = parser.parse_args(argv)

    ds, store, config, to_id = open_dataset(args)
    searcher = Searcher(store, config.search)
    index = searcher.vector_index()
    rows = store.fetch_chunks([int(i) for i in index.ids])
    doc_of = {cid: d for cid, d in ((cid, to_id(r.path)) for cid, r in rows.items()) if d is not None}
    started = time.perf_counter()
    lists = collect(searcher, ds.queries, args.depth)
    print(f"{ds.name}: {len(lists)} queries, lists of {args.depth} chunks fetched in {time.perf_counter() - started:.1f}s", file=sys.stderr)

    row_of = {int(c): r for r, c in enumerate(index.ids)}
    matrix = index.exact  # float32 unit vectors (an index this small is searched exactly)

    def prf(q: QueryLists, seeds: Scored, beta: float, n: int = 3) -> Scored:
        """Rocchio in embedding space: q' = q + beta * mean(vectors of the top-n seed chunks)."""
        picked = [row_of[i] for i, _ in seeds[:n] if i in row_of]
        if not picked or matrix is None:
            return q.vec
        v = q.qvec + beta * matrix[picked].mean(axis=0)
        return index.search(v / (np.linalg.norm(v) or 1.0), args.depth)

    ids = lambda s: [i for i, _ in s]  # noqa: E731
    lex0 = lambda q: q.lex[DEFAULT_TITLE_WEIGHT]  # noqa: E731
    # family name -> {parameter: ranker}; the first family member listed is the product's default
    families: dict[str, dict[object, Callable[[QueryLists], list[str]]]] = {
        "bm25 (title column weight)": {w: (lambda q, w=w: notes_of(ids(q.lex[w]), doc_of, q.qid)) for w in TITLE_WEIGHTS},
        "vector": {"-": lambda q: notes_of(ids(q.vec), doc_of, q.qid)},
        "hybrid rrf60 chunks (candidates cut)": {c: (lambda q, c=c: notes_of(rrf_fuse([ids(lex0(q))[:c], ids(q.vec)[:c]], [1, 1], 60), doc_of, q.qid)) for c in (30, 100, 300)},
        "hybrid rrf60 chunks, cut 30 (vector weight)": {w: (lambda q, w=w: notes_of(rrf_fuse([ids(lex0(q))[:30], ids(q.vec)[:30]], [1, w], 60), doc_of, q.qid)) for w in (1.0, 0.7, 0.5, 0.3)},
        "hybrid rrf notes (max per note first), cut 100 (rrf k)": {k: (lambda q, k=k: notes_of(rrf_fuse([[d for d, _ in note_max(lex0(q), doc_of)][:100], [d for d, _ in note_max(q.vec, doc_of)][:100]], [1, 1], k), {d: d for d in doc_of.values()}, q.qid)) for k in (60, 20, 10, 5)},
    }
    for how in ("minmax", "max", "z"):
        families[f"hybrid convex {how}, chunks, cut 30 (alpha = bm25 share)"] = {
            a: (lambda q, a=a, how=how: notes_of(convex(lex0(q)[:30], q.vec[:30], a, how), doc_of, q.qid)) for a in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
        }
    families["hybrid convex minmax, chunks, cut 100 (alpha)"] = {a: (lambda q, a=a: notes_of(convex(lex0(q)[:100], q.vec[:100], a, "minmax"), doc_of, q.qid)) for a in (0.4, 0.5, 0.6, 0.7, 0.8)}
    families["hybrid convex minmax, chunks, cut 30, title weight 2 (alpha)"] = {a: (lambda q, a=a: notes_of(convex(q.lex[2.0][:30], q.vec[:30], a, "minmax"), doc_of, q.qid)) for a in (0.4, 0.5, 0.6, 0.7, 0.8)}
    families["hybrid convex minmax 0.7, chunks, cut 30 (title column weight)"] = {w: (lambda q, w=w: notes_of(convex(q.lex[w][:30], q.vec[:30], 0.7, "minmax"), doc_of, q.qid)) for w in TITLE_WEIGHTS}
    families["hybrid rrf60 chunks, cut 30, title weight 2 (vector weight)"] = {w: (lambda q, w=w: notes_of(rrf_fuse([ids(q.lex[2.0])[:30], ids(q.vec)[:30]], [1, w], 60), doc_of, q.qid)) for w in (1.0, 0.5, 0.3)}
    families["vector PRF from top-3 bm25 chunks (beta)"] = {b: (lambda q, b=b: notes_of(ids(prf(q, lex0(q), b)), doc_of, q.qid)) for b in (0.5, 1.0)}
    families["hybrid convex minmax 0.6, cut 30: bm25 + vector PRF (beta)"] = {b: (lambda q, b=b: notes_of(convex(lex0(q)[:30], prf(q, lex0(q), b)[:30], 0.6, "minmax"), doc_of, q.qid)) for b in (0.5, 1.0)}

    halves = {h: [q for q in lists if q.half == h] for h in ("A", "B")}
    mean = lambda scores, qs, key="ndcg@10": sum(scores[q.qid][key] for q in qs) / len(qs) if qs else 0.0  # noqa: E731
    report: dict[str, dict] = {}
    per_query: dict[str, dict[str, float]] = {}
    print(f"{'variant (nDCG@10)':<66} {'param':>6} {'all':>7} {'A':>7} {'B':>7} {'R@100':>7}   halves: {len(halves['A'])}/{len(halves['B'])} queries")
    for family, members in families.items():
        table = {}
        for param, ranker in members.items():
            scores = {q.qid: score_query(ranker(q), ds.qrels[q.qid]) for q in lists}
            row = {"all": mean(scores, lists), "A": mean(scores, halves["A"]), "B": mean(scores, halves["B"]), "recall@100": mean(scores, lists, "recall@100")}
            table[param] = row
            per_query[f"{family} [{param}]"] = {qid: s["ndcg@10"] for qid, s in scores.items()}
            print(f"{family:<66} {param!s:>6} {row['all']:>7.4f} {row['A']:>7.4f} {row['B']:>7.4f} {row['recall@100']:>7.4f}")
        cv = None
        if len(members) > 1 and halves["A"] and halves["B"]:
            best_a = max(table, key=lambda p: table[p]["A"])
            best_b = max(table, key=lambda p: table[p]["B"])
            cv = (table[best_a]["B"] * len(halves["B"]) + table[best_b]["A"] * len(halves["A"])) / len(lists)
            print(f"{'':<66} {'2-fold':>6} {cv:>7.4f}   (picked {best_a} on A -> B {table[best_a]['B']:.4f}; {best_b} on B -> A {table[best_b]['A']:.4f})")
        report[family] = {"members": {str(p): {k: round(v, 4) for k, v in r.items()} for p, r in table.items()}, "cross_validated": round(cv, 4) if cv is not None else None}

    base, hyb = per_query[f"bm25 (title column weight) [{DEFAULT_TITLE_WEIGHT}]"], per_query["hybrid rrf60 chunks (candidates cut) [30]"]
    wins = sum(1 for q in hyb if hyb[q] > base[q] + 1e-9)
    losses = sum(1 for q in hyb if hyb[q] < base[q] - 1e-9)
    print(f"\nhybrid (the product: rrf60, cut 30) vs bm25, per query nDCG@10: {wins} better, {losses} worse, {len(lists) - wins - losses} equal")
    if args.json:
        Path(args.json).write_text(json.dumps({"dataset": ds.name, "report": report, "per_query": per_query}, indent=1), encoding="utf-8")
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
