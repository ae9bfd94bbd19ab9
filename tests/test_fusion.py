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


# -- convex combination -------------------------------------------------------------------------

from vaultseek.fusion import METHODS, convex, fuse  # noqa: E402


def test_convex_hand_worked_example():
    # BM25 scores 9, 6, 3 (a, b, c) normalise to 1, 0.5, 0; cosines .8, .6, .5 (c, a, d) to 1, 1/3, 0.
    fused = convex([[("a", 9.0), ("b", 6.0), ("c", 3.0)], [("c", 0.8), ("a", 0.6), ("d", 0.5)]], [0.7, 0.3])
    scores = {f.id: f.score for f in fused}
    assert scores["a"] == pytest.approx(0.7 * 1 + 0.3 * (1 / 3))
    assert scores["b"] == pytest.approx(0.7 * 0.5)
    assert scores["c"] == pytest.approx(0.7 * 0 + 0.3 * 1)
    assert scores["d"] == pytest.approx(0.0)
    assert [f.id for f in fused] == ["a", "b", "c", "d"]
    for f in fused:
        assert sum(f.terms) == pytest.approx(f.score)
    assert fused[0].ranks == (1, 2) and fused[3].ranks == (None, 3)


def test_convex_keeps_the_margin_rrf_throws_away():
    """The SciFact failure of RRF: BM25 is sure of its first result (a large score margin), the
    vector list ranks it nowhere, and RRF still puts a chunk both lists liked above it."""
    bm25 = [("rare-term", 30.0)] + [(f"b{i}", 10.0 - i * 0.1) for i in range(29)]
    vec = [(f"b{i}", 0.6 - i * 0.01) for i in range(30)]
    assert rrf([[d for d, _ in bm25], [d for d, _ in vec]])[0].id != "rare-term"
    assert convex([bm25, vec], [0.7, 0.3])[0].id == "rare-term"


def test_convex_floor_for_a_list_that_holds_every_match():
    # Only two chunks match: without a floor the second normalises to 0, as if it matched nothing.
    assert convex([[("a", 6.0), ("b", 3.0)]])[1].score == pytest.approx(0.0)
    assert convex([[("a", 6.0), ("b", 3.0)]], floors=[0.0])[1].score == pytest.approx(0.5)
    with pytest.raises(ValueError):
        convex([[("a", 1.0)]], floors=[0.0, 0.0])


def test_convex_equal_scores_and_empty_lists():
    fused = convex([[("a", 2.0), ("b", 2.0)], []], [0.7, 0.3])
    assert [f.score for f in fused] == [pytest.approx(0.7), pytest.approx(0.7)]
    assert [f.id for f in fused] == ["a", "b"]  # ties: the better rank first
    assert convex([[], []]) == []


def test_convex_duplicate_counts_once_at_its_best_score():
    fused = convex([[("a", 3.0), ("b", 2.0), ("a", 1.0)]])
    assert {f.id: f.score for f in fused} == {"a": pytest.approx(1.0), "b": pytest.approx(0.5)}


def test_fuse_selects_the_method():
    lists = [[("a", 9.0), ("b", 1.0)], [("b", 0.9), ("a", 0.1)]]
    assert fuse("rrf", lists, [1.0, 1.0], rrf_k=60)[0].score == pytest.approx(1 / 61 + 1 / 62)
    assert fuse("convex", lists, [0.7, 0.3])[0].id == "a"
    assert set(METHODS) == {"convex", "rrf"}
    with pytest.raises(ValueError, match="unknown fusion method"):
        fuse("borda", lists)
