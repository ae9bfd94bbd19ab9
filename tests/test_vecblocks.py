"""Block storage of vectors: appends across blocks, tombstones, compaction, re-use by hash."""

import apsw
import numpy as np
import pytest

from vaultseek.store import vecblocks
from vaultseek.store.vecblocks import VectorBlocks, quantize
from vaultseek.vectors import VectorIndex


@pytest.fixture
def blocks(monkeypatch):
    monkeypatch.setattr(vecblocks, "BLOCK_ROWS", 4)
    conn = apsw.Connection(":memory:")
    vb = VectorBlocks(conn)
    vb.create()
    return vb


def unit(n, dim=64, seed=0):
    v = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_quantize_keeps_cosines():
    v = unit(50, 256)
    scales, q = quantize(v)
    back = q.astype(np.float32) * scales[:, None]
    cos = (back * v).sum(1) / np.linalg.norm(back, axis=1)
    assert cos.min() > 0.999


def test_add_spans_blocks_and_loads_in_order(blocks):
    v = unit(10)
    scales, q = quantize(v)
    blocks.add(list(range(1, 7)), [100 + i for i in range(6)], scales[:6], q[:6])
    blocks.add(list(range(7, 11)), [100 + i for i in range(6, 10)], scales[6:], q[6:])
    assert blocks.conn.execute("SELECT count(*) FROM vec_blocks").fetchone()[0] == 3
    ids, lq, lscales, bits = blocks.load()
    assert ids.tolist() == list(range(1, 11))
    assert np.array_equal(lq, q) and np.array_equal(lscales, scales)
    assert blocks.count() == 10


def test_remove_hides_rows_and_compaction_drops_them(blocks):
    v = unit(8)
    scales, q = quantize(v)
    blocks.add(list(range(1, 9)), list(range(8)), scales, q)
    blocks.remove([2, 3, 7])
    ids, *_ = blocks.load()
    assert ids.tolist() == [1, 4, 5, 6, 8]
    assert blocks.compact() == 2  # both blocks are at least 25% dead
    assert blocks.conn.execute("SELECT count(*) FROM vec_dead").fetchone()[0] == 0
    ids2, q2, *_ = blocks.load()
    assert ids2.tolist() == [1, 4, 5, 6, 8]
    assert np.array_equal(q2, q[[0, 3, 4, 5, 7]])


def test_by_hash_returns_the_stored_vector(blocks):
    scales, q = quantize(unit(6))
    blocks.add(list(range(1, 7)), [11, 12, 13, 14, 15, 16], scales, q)
    found = blocks.by_hash([15, 99])
    assert set(found) == {15}
    scale, raw = found[15]
    assert scale == pytest.approx(float(scales[4])) and raw == q[4].tobytes()


def test_approximate_search_finds_the_exact_top_results(monkeypatch):
    from vaultseek import vectors

    v = unit(5000, 256, seed=1)
    scales, q = quantize(v)
    query = v[42] + 0.3 * unit(1, 256, seed=2)[0]
    monkeypatch.setattr(vectors, "EXACT_LIMIT", 10**9)
    exact = [i for i, _ in VectorIndex(np.arange(5000), q, scales).search(query, 10)]
    monkeypatch.setattr(vectors, "EXACT_LIMIT", 0)
    monkeypatch.setattr(vectors, "PREFILTER", 500)
    approx = [i for i, _ in VectorIndex(np.arange(5000), q, scales).search(query, 10)]
    assert approx[0] == exact[0] == 42
    assert len(set(approx) & set(exact)) >= 8
