"""Reciprocal Rank Fusion. Pure.

Cormack, Clarke and Buettcher (2009), "Reciprocal Rank Fusion outperforms Condorcet and
individual rank learning methods": score(d) = sum_i w_i / (k + rank_i(d)), ranks starting at 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Sequence


@dataclass(frozen=True)
class Fused:
    id: Hashable
    score: float
    ranks: tuple[int | None, ...]  # 1-based rank in each input list, None where absent
    terms: tuple[float, ...]  # each list's contribution w_i / (k + rank_i); they add up to `score`


def rrf(lists: Sequence[Sequence[Hashable]], weights: Sequence[float] | None = None, k: int = 60) -> list[Fused]:
    """Fuse ranked lists of ids (best first) into one list, best first.

    Ties are broken by the best rank in any list, then by the first list's order, so the output is
    deterministic.
    """
    weights = list(weights) if weights is not None else [1.0] * len(lists)
    if len(weights) != len(lists):
        raise ValueError("one weight per list")
    ranks: dict[Hashable, list[int | None]] = {}
    for li, ids in enumerate(lists):
        for rank, doc in enumerate(ids, start=1):
            slot = ranks.setdefault(doc, [None] * len(lists))
            if slot[li] is None:
                slot[li] = rank
    fused = []
    for doc, rs in ranks.items():
        terms = tuple(0.0 if r is None else weights[i] / (k + r) for i, r in enumerate(rs))
        fused.append(Fused(doc, sum(terms), tuple(rs), terms))
    big = 1 << 30
    fused.sort(key=lambda f: (-f.score, min(r or big for r in f.ranks), tuple(r or big for r in f.ranks)))
    return fused
