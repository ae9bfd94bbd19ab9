"""Nearest-neighbour search over the stored int8 vectors, in memory.

Small indexes are searched exactly. Large ones first rank every vector by the Hamming distance of
sign bits (a few bytes per vector, popcount is cheap), then score the best candidates exactly.
"""

from __future__ import annotations

import numpy as np

from .store.vecblocks import sign_bits

EXACT_LIMIT = 40_000  # up to this many vectors, exact search is fast enough
PREFILTER = 2_000  # candidates kept by the sign-bit pass before exact scoring
LAZY_SEARCHES = 4  # searches served by reading candidate rows before the whole matrix is loaded


class VectorIndex:
    """Cosine similarity search over unit vectors stored as int8 with a per-vector scale."""

    def __init__(self, ids: np.ndarray, q: np.ndarray | None, scales: np.ndarray, bits: np.ndarray | None = None, lazy=None) -> None:
        """`q` may be None with `lazy` (a store.vecblocks.LazyVectors): then the first searches
        read only their candidates' rows (~5 ms), and after `LAZY_SEARCHES` of them the whole
        matrix is loaded once (~120 ms for 107k vectors)."""
        self.ids = ids
        self.size = len(ids)
        self.lazy = lazy
        if q is None and (self.size <= EXACT_LIMIT or bits is None):
            q = lazy.all_rows()
        self.dim = q.shape[1] if q is not None and q.ndim == 2 else (bits.shape[1] * 64 if bits is not None and bits.ndim == 2 else 0)
        if self.size <= EXACT_LIMIT:
            self.exact = q.astype(np.float32) * scales[:, None]
            self.q = self.scales = self.bits = None
        else:
            self.exact = None
            self.q, self.scales = q, scales
            self._lazy_reads = 0
            # Sign bits, stored word-major so each XOR/popcount pass runs over contiguous memory.
            self.bits = np.ascontiguousarray((bits if bits is not None else sign_bits(q)).T)

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
        assert self.scales is not None and self.bits is not None
        qwords = sign_bits(query[None, :])[0]
        dist = np.bitwise_count(self.bits[0] ^ qwords[0]).astype(np.uint16)
        for j in range(1, len(qwords)):
            dist += np.bitwise_count(self.bits[j] ^ qwords[j])
        if allowed is not None:
            dist[~allowed] = self.dim + 1
        # The smallest distance whose cumulative count reaches the candidate budget: one bincount
        # instead of a partial sort over every row.
        want = max(PREFILTER, limit * 20)
        cumulative = np.cumsum(np.bincount(dist, minlength=self.dim + 2))
        cutoff = min(int(np.searchsorted(cumulative, want)), self.dim)
        cand = np.flatnonzero(dist <= cutoff)
        if self.q is None:  # one-off processes read only their candidates; a long-lived one loads all
            rows = self.lazy.rows(cand, len(query))
            self._lazy_reads += 1
            if self._lazy_reads >= LAZY_SEARCHES:
                self.q = self.lazy.all_rows()
        else:
            rows = self.q[cand]
        scores = (rows.astype(np.float32) @ query) * self.scales[cand]
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
