import pytest

from vaultseek.fusion import rrf


def test_hand_worked_example():
    # BM25 ranks a, b, c; vectors rank c, a, d. k = 60.
    fused = rrf([["a", "b", "c"], ["c", "a", "d"]], k=60)
    scores = {f.id: f.score for f in fused}
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert scores["b"] == pytest.approx(1 / 62)
    assert scores["d"] == pytest.approx(1 / 63)
    assert [f.id for f in fused] == ["a", "c", "b", "d"]
    a = fused[0]
    assert a.ranks == (1, 2) and sum(a.terms) == pytest.approx(a.score)


def test_weights_scale_each_list():
    fused = rrf([["x"], ["y"]], weights=[2.0, 1.0], k=60)
    assert [f.id for f in fused] == ["x", "y"]
    assert fused[0].score == pytest.approx(2 / 61)


def test_ties_are_deterministic():
    # x and y both appear once at rank 1: the earlier list wins the tie, every time.
    assert [f.id for f in rrf([["x"], ["y"]])] == ["x", "y"]
    assert [f.id for f in rrf([["y"], ["x"]])] == ["y", "x"]


def test_duplicate_in_one_list_counts_once_at_best_rank():
    fused = rrf([["a", "a", "b"]], k=60)
    assert fused[0].score == pytest.approx(1 / 61)


def test_weights_must_match_lists():
    with pytest.raises(ValueError):
        rrf([["a"]], weights=[1.0, 2.0])
