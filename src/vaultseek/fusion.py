"""Fusing ranked lists into one: Reciprocal Rank Fusion and a convex combination of scores. Pure.

Both return the same `Fused` records, so `--explain` shows, for every result, its rank in each list
and each list's contribution; the contributions add up to the score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Sequence

METHODS = ("convex", "rrf")
_BIG = 1 << 30


@dataclass(frozen=True)
class Fused:
    id: Hashable
    score: float
    ranks: tuple[int | None, ...]  # 1-based rank in each input list, None where absent
    terms: tuple[float, ...]  # each list's contribution to `score`; they add up to it


def rrf(lists: Sequence[Sequence[Hashable]], weights: Sequence[float] | None = None, k: int = 60) -> list[Fused]:
    """Reciprocal Rank Fusion of ranked lists of ids (best first), best first.

    Cormack, Clarke and Buettcher (2009), "Reciprocal Rank Fusion outperforms Condorcet and
    individual rank learning methods": score(d) = sum_i w_i / (k + rank_i(d)), ranks from 1.
    An id repeated in one list counts once, at its best rank.
    """
    weights = _weights(weights, len(lists))
    ranks = _ranks(lists)
    terms = {doc: tuple(0.0 if r is None else weights[i] / (k + r) for i, r in enumerate(rs)) for doc, rs in ranks.items()}
    return _sorted(ranks, terms)


def convex(
    lists: Sequence[Sequence[tuple[Hashable, float]]], weights: Sequence[float] | None = None, floors: Sequence[float | None] | None = None
) -> list[Fused]:
    """Convex combination of min-max normalised scores, best first.

    Each list is (id, score) pairs, best first, higher scores better. Within each list the scores
    are scaled to [0, 1]: the best is 1 and the list's floor 0, where the floor is the worst
    score in the list unless `floors` gives one; scores below a given floor count 0. (A floor of 0
    suits a BM25 list that holds every match, as anything else scores 0 there; the score at rank
    30 makes a deeper list rank its top exactly as a list cut at 30 would.) A list whose scores
    are all equal scores 1 throughout. score(d) = sum_i w_i * norm_i(d), an id missing from a list
    scoring 0 there.
    Bruch, Gai and Ingber (2023), "An Analysis of Fusion Functions for Hybrid Retrieval" (ACM TOIS):
    unlike RRF this keeps how far ahead of the rest a list's best results are.
    """
    weights = _weights(weights, len(lists))
    floors = list(floors) if floors is not None else [None] * len(lists)
    if len(floors) != len(lists):
        raise ValueError("one floor (or None) per list")
    ranks = _ranks([[doc for doc, _ in scored] for scored in lists])
    n = len(lists)
    terms = {doc: [0.0] * n for doc in ranks}
    for li, scored in enumerate(lists):
        if not scored:
            continue
        values = [s for _, s in scored]
        floor = floors[li]
        lo = min(values) if floor is None else floor
        span = max(values) - lo
        w = weights[li]
        scale = w / span if span > 0 else 0.0
        seen = set()
        for doc, s in scored:
            if doc in seen:  # the first (best) occurrence counts
                continue
            seen.add(doc)
            if span > 0:
                terms[doc][li] = (s - lo) * scale if s > lo else 0.0
            else:
                terms[doc][li] = w if s >= lo else 0.0
    return _sorted(ranks, {doc: tuple(t) for doc, t in terms.items()})


def fuse(
    method: str,
    lists: Sequence[Sequence[tuple[Hashable, float]]],
    weights: Sequence[float] | None = None,
    rrf_k: int = 60,
    floors: Sequence[float | None] | None = None,
) -> list[Fused]:
    """Fuse (id, score) lists, best first, with `method`: "convex" (see `convex`) or "rrf" (which
    uses only the order of each list)."""
    if method == "convex":
        return convex(lists, weights, floors)
    if method == "rrf":
        return rrf([[doc for doc, _ in scored] for scored in lists], weights, k=rrf_k)
    raise ValueError(f"unknown fusion method {method!r} (use one of: {', '.join(METHODS)})")


def _weights(weights: Sequence[float] | None, n: int) -> list[float]:
    out = list(weights) if weights is not None else [1.0] * n
    if len(out) != n:
        raise ValueError("one weight per list")
    return out


def _ranks(lists: Sequence[Sequence[Hashable]]) -> dict[Hashable, list[int | None]]:
    ranks: dict[Hashable, list[int | None]] = {}
    for li, ids in enumerate(lists):
        for rank, doc in enumerate(ids, start=1):
            slot = ranks.setdefault(doc, [None] * len(lists))
            if slot[li] is None:
                slot[li] = rank
    return ranks


def _sorted(ranks: dict[Hashable, list[int | None]], terms: dict[Hashable, tuple[float, ...]]) -> list[Fused]:
    """Best score first; ties go to the best rank in any list, then to the earlier list's order,
    so the output is deterministic."""
    keyed = []
    for doc, rs in ranks.items():
        t = terms[doc]
        score = sum(t)
        order = tuple(_BIG if r is None else r for r in rs)
        keyed.append((-score, min(order), order, doc, t, rs))
    keyed.sort(key=lambda x: x[:3])
    return [Fused(doc, -neg, tuple(rs), t) for neg, _, _, doc, t, rs in keyed]
