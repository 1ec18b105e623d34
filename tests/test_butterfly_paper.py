"""The butterfly table and search against Steele & Tristan's own description (PPoPP 2017).

Figure 4's text gives the entry in row ``i`` and column (lane) ``j`` of the
W = 16 table: ``X_v^w`` with ``m = i ^ (i + 1)``, ``k = m // 2``,
``l = (i & ~m) + (j & m)``, ``X`` = lane letter ``l``, ``v = j & ~k``,
``w = v + k``: lane ``X``'s sum of its elements ``v .. w``. Row 15 (``S``)
holds every lane's own total, row 7 (``1``) every lane's tree root. The
transcribed letter string reads "ABCDEFGHIJKLMNPO"; letters are taken in lane
order here, since with O and P swapped row S would not hold "the sum of its
own a array" in lanes 14 and 15, as the text says it does.
Algorithm 10 searches one W x W block with that table; it is emulated here
lane by lane, ``__shfl_xor`` included, and compared with
``butterfly_reference.butterfly_search`` (in tests/).
"""

import numpy as np

import butterfly_reference as _butterfly

W = 16


def paper_pattern(W):
    """``out[i, j] = (owner lane, lo, hi)``: paper entry row i, lane j, is lane owner's sum over lo..hi-1."""
    out = np.empty((W, W, 3), np.int64)
    for i in range(W):
        m = i ^ (i + 1)
        k = m // 2
        for j in range(W):
            ell = (i & ~m) + (j & m)
            v = j & ~k
            out[i, j] = (ell, v, v + k + 1)
    return out


def test_w16_table_is_figure_4():
    ours = _butterfly.table_pattern(W)
    in_paper_order = np.empty_like(ours)
    in_paper_order[_butterfly.paper_slots(W)] = ours
    np.testing.assert_array_equal(in_paper_order, paper_pattern(W))


def test_w16_figure_4_rows_s_and_1():
    p = paper_pattern(W)
    lanes = np.arange(W)
    # Row S: every lane has the sum of its own array.
    np.testing.assert_array_equal(p[W - 1], np.stack([lanes, 0 * lanes, W + 0 * lanes], axis=1))
    # Row 1: every lane has the root of its own tree (one half of its array).
    np.testing.assert_array_equal(p[W // 2 - 1, :, 0], lanes)
    assert set(map(tuple, p[W // 2 - 1, :, 1:])) == {(0, W // 2), (W // 2, W)}
    # Lane F (5) owns exactly W entries: its total and one child of every internal node of its tree.
    owned = p[p[..., 0] == 5]
    assert len(owned) == W


def test_w16_table_values_match_the_pattern():
    rng = np.random.default_rng(0)
    x = rng.integers(1, 9, size=(W, W)).astype(np.float64)
    table, _ = _butterfly.butterfly_table(x)
    paper = np.empty_like(table)
    paper[_butterfly.paper_slots(W)] = table
    pat = paper_pattern(W)
    for i in range(W):
        for j in range(W):
            owner, lo, hi = pat[i, j]
            assert paper[i, j] == x[owner, lo:hi].sum()


def algorithm_10(P, target):
    """Algorithm 10 for one block at blockBase 0: ``P[d, lane]`` is lane's p'[d]; returns each lane's j."""
    low = np.zeros(W)
    high = P[W - 1].copy()
    flip = np.zeros(W, np.int64)
    r = np.arange(W)
    logW = W.bit_length() - 1
    for b in range(logW):
        bit = 1 << (logW - 1 - b)
        mask = ((W - 1) * (2 * bit)) & (W - 1)
        y = np.zeros(W)
        for i in range(W // (2 * bit)):
            d = (bit - 1) + 2 * bit * i
            t = P[d][r ^ flip]  # __shfl_xor(p'[d], flip): each lane reads lane r ^ flip's p'[d]
            y = np.where(((r ^ d) & mask) == 0, t, y)
        compare = np.where((r & bit) != 0, high - y, low + y)
        left = target < compare
        high = np.where(left, compare, high)
        low = np.where(left, low, compare)
        flip = flip ^ np.where(left, bit & r, bit & ~r)
    return flip ^ r


def test_w16_search_is_algorithm_10():
    rng = np.random.default_rng(1)
    for _ in range(50):
        x = rng.integers(1, 9, size=(W, W)).astype(np.float64)  # small integers: every sum exact
        table, totals = _butterfly.butterfly_table(x)
        paper = np.empty_like(table)
        paper[_butterfly.paper_slots(W)] = table
        target = np.floor(rng.random(W) * totals)
        j_paper = algorithm_10(paper, target)
        j_ours = _butterfly.butterfly_search(table, 0.0, totals, target, np.ones((W, W), bool))
        j_prefix = np.array([np.searchsorted(np.cumsum(x[i]), target[i], side="right") for i in range(W)])
        np.testing.assert_array_equal(j_paper, j_prefix)
        np.testing.assert_array_equal(j_ours, j_paper)
