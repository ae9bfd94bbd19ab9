"""How much the optional reranker (search.rerank) helps, by weight and depth, on a dataset.

Runs the real pipeline (`Searcher.rank`, as `vaultseek eval --rerank` does) once per setting in
one process, so the reranker's vectors of chunks it has already seen are reused and a sweep costs
little more than one run. Figures are given on the two fixed halves of the queries
(`evaluate.half_of`) and per query type, so a weight chosen on one half can be checked on the other.

    vaultseek fetch-reranker                          # once: the model into ~/.cache/vaultseek/models
    python scripts/rerank_experiments.py ../shared/data/scifact
    python scripts/rerank_experiments.py eval/obsidian-help --vault ../shared/data/obsidian-help \\
        --db /tmp/oh.db --config eval/obsidian-help/config.toml
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ranking_experiments import open_dataset  # noqa: E402

from vaultseek.config import SearchSettings, load_config  # noqa: E402
from vaultseek.evaluate import run_dataset, summarize  # noqa: E402
from vaultseek.rerank import DEFAULT_RERANKER  # noqa: E402
from vaultseek.search import Searcher  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--vault")
    parser.add_argument("--db")
    parser.add_argument("--config", help="config file for the vault (e.g. eval/obsidian-help/config.toml)")
    parser.add_argument("--model", default=DEFAULT_RERANKER)
    parser.add_argument("--weights", default="0,0.2,0.3,0.4,0.5,0.6,0.8,1", help="comma-separated rerank_weight values")
    parser.add_argument("--depths", default="30", help="comma-separated rerank_depth values")
    parser.add_argument("--min-words", default="3", help="comma-separated rerank_min_words values")
    parser.add_argument("--json", help="write all figures to this file")
    args = parser.parse_args(argv)

    ds, store, to_id = open_dataset(args)
    base = load_config(Path(args.vault), Path(args.config) if args.config else None).search if args.vault else SearchSettings()
    searcher = Searcher(store, base)
    rows = []
    print(f"{ds.name}: {len(ds.queries)} queries; nDCG@10 overall, half A, half B, then per type", file=sys.stderr)
    grid = [(d, int(m), float(w)) for d in map(int, args.depths.split(",")) for m in args.min_words.split(",") for w in args.weights.split(",")]
    for depth, min_words, weight in grid:
        searcher.settings = replace(base, rerank=args.model if weight > 0 else "", rerank_weight=weight, rerank_depth=depth, rerank_min_words=min_words)
        started = time.perf_counter()
        summary = summarize(run_dataset(searcher, ds, "hybrid", to_id))
        seconds = time.perf_counter() - started
        halves = {h: v["ndcg@10"] for h, v in summary.get("halves", {}).items()}
        types = {t: v["ndcg@10"] for t, v in summary.get("by_type", {}).items()}
        rows.append({"depth": depth, "min_words": min_words, "weight": weight, "ndcg@10": summary["ndcg@10"], "halves": halves, "by_type": types, "seconds": round(seconds, 1)})
        half_text = " ".join(f"{h} {v:.4f}" for h, v in sorted(halves.items()))
        type_text = " ".join(f"{t} {v:.3f}" for t, v in sorted(types.items()))
        print(f"depth {depth:3d} min_words {min_words} weight {weight:.2f}: {summary['ndcg@10']:.4f}  {half_text}  {type_text}  ({seconds:.0f}s)")
    store.close()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
