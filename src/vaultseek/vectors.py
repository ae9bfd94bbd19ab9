"""Nearest-neighbour search over the stored int8 vectors, in memory.

Small indexes are searched exactly. Large ones first rank every vector by the Hamming distance of
sign bits (a few bytes per vector, popcount is cheap), then score the best candidates exactly.
"""

from __future__ import annotations

import numpy as np

EXACT_LIMIT = 40_000  # up to this many vectors, exact search is fast enough
PREFILTER = 2_000  # candidates kept by the sign-bit pass before exact scoring


class VectorIndex:
    """Cosine similarity search over unit vectors stored as int8 with a per-vector scale."""

    def __init__(self, ids: np.ndarray, q: np.ndarray, scales: np.ndarray) -> None:
        self.ids = ids
        self.dim = q.shape[1] if q.ndim == 2 else 0
        self.size = len(ids)
        if self.size <= EXACT_LIMIT:
            self.exact = q.astype(np.float32) * scales[:, None]
            self.q = self.scales = self.bits = None
        else:
            self.exact = None
            self.q, self.scales = q, scales
            self.bits = np.packbits(q > 0, axis=1).view(np.uint64) if self.dim % 64 == 0 else np.packbits(q > 0, axis=1)

    def search(self, query: np.ndarray, limit: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """Top `limit` (chunk id, cosine) pairs, best first. `allowed` is an optional boolean mask over rows."""
        if self.size == 0 or limit <= 0 or not np.any(query):
            return []
        query = np.asarray(query, dtype=np.float32)
        if self.exact is not None:
            scores = self.exact @ query
            if allowed is not None:
                scores = np.where(allowed, scores, -np.inf)
            rows = _top(scores, limit)
        else:
            rows = self._approx(query, limit, allowed)
            scores = None
        if scores is not None:
            return [(int(self.ids[r]), float(scores[r])) for r in rows if np.isfinite(scores[r])]
        return rows  # type: ignore[return-value]

    def _approx(self, query: np.ndarray, limit: int, allowed: np.ndarray | None) -> list[tuple[int, float]]:
        assert self.q is not None and self.scales is not None and self.bits is not None
        qbits = np.packbits(query > 0)
        qbits = qbits.view(np.uint64) if self.bits.dtype == np.uint64 else qbits
        counts = np.bitwise_count(self.bits ^ qbits)
        dist = counts[:, 0].astype(np.uint16)
        for j in range(1, counts.shape[1]):
            dist += counts[:, j]
        if allowed is not None:
            dist = np.where(allowed, dist, np.iinfo(np.uint16).max)
        n = min(max(PREFILTER, limit * 20), self.size)
        cand = np.argpartition(dist, n - 1)[:n] if n < self.size else np.arange(self.size)
        if allowed is not None:
            cand = cand[allowed[cand]]
        scores = (self.q[cand].astype(np.float32) @ query) * self.scales[cand]
        order = _top(scores, limit)
        return [(int(self.ids[cand[i]]), float(scores[i])) for i in order]


def _top(scores: np.ndarray, limit: int) -> np.ndarray:
    """Indices of the `limit` largest scores, best first (ties by index, so results are stable)."""
    n = len(scores)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if limit < n:
        part = np.argpartition(-scores, limit - 1)[:limit]
    else:
        part = np.arange(n)
    return part[np.lexsort((part, -scores[part]))]
