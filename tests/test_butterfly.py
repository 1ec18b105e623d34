"""The warp's butterfly-patterned table and its search, emulated in NumPy (gpumcmc/_butterfly.py).

The emulation is what the GPU tests compare the ``butterfly`` kernel with, so
these tests pin it down on its own: the table holds exactly the sums its
pattern names, one child of every node per row; the search returns the
prefix-sum answer whenever sums are exact, never lands on a zero weight, and
otherwise differs from the prefix-sum answer only within rounding. No
statistical checks here.
"""

import numpy as np
import pytest

import butterfly_reference as bf
from gpumcmc.discrete import prefix_draw

WIDTHS = [2, 4, 8, 16, 32]

# Entry (slot s, lane j) of the W = 8 table: row, first column, end column.
W8_TABLE = """
r0[0:1] r1[1:2] r0[2:3] r1[3:4] r0[4:5] r1[5:6] r0[6:7] r1[7:8]
r2[0:1] r3[1:2] r2[2:3] r3[3:4] r2[4:5] r3[5:6] r2[6:7] r3[7:8]
r4[0:1] r5[1:2] r4[2:3] r5[3:4] r4[4:5] r5[5:6] r4[6:7] r5[7:8]
r6[0:1] r7[1:2] r6[2:3] r7[3:4] r6[4:5] r7[5:6] r6[6:7] r7[7:8]
r0[0:2] r1[0:2] r2[2:4] r3[2:4] r0[4:6] r1[4:6] r2[6:8] r3[6:8]
r4[0:2] r5[0:2] r6[2:4] r7[2:4] r4[4:6] r5[4:6] r6[6:8] r7[6:8]
r0[0:4] r1[0:4] r2[0:4] r3[0:4] r4[4:8] r5[4:8] r6[4:8] r7[4:8]
r0[0:8] r1[0:8] r2[0:8] r3[0:8] r4[0:8] r5[0:8] r6[0:8] r7[0:8]
"""


def _name(entry):
    r, lo, hi = entry
    return f"r{r}[{lo}:{hi}]"


def test_w8_pattern_is_the_documented_table():
    got = [" ".join(_name(e) for e in row) for row in bf.table_pattern(8)]
    assert got == W8_TABLE.split("\n")[1:-1]
    assert W8_TABLE.strip().split("\n")[0].split()[1] in bf.__doc__  # the module shows the same table


def _in_place_table(x):
    """The table as the paper's loop builds it, in its own order: lane ``j``'s
    register ``i`` starts as x[i, j]; stage ``m`` (1, 2, ..., W/2) takes the
    register pairs (d, d + m), d = 2 m t + m - 1; the lane whose bit ``m`` is
    set keeps the upper one and sends the lower, its partner the other way
    round; the kept value goes to entry d and kept + received to register
    d + m, which ends holding the block total."""
    W = x.shape[-1]
    lanes = np.arange(W)
    a = x.T.copy()  # a[lane, register]
    entries = np.empty_like(a)
    m = 1
    while m < W:
        up = (lanes & m) != 0
        for t in range(W // (2 * m)):
            d = 2 * m * t + m - 1
            keep = np.where(up, a[:, d + m], a[:, d])
            send = np.where(up, a[:, d], a[:, d + m])
            entries[:, d] = keep
            a[:, d + m] = keep + send[lanes ^ m]
        m *= 2
    entries[:, W - 1] = a[:, W - 1]
    return entries.T  # [entry, lane]


@pytest.mark.parametrize("W", WIDTHS)
def test_paper_order_is_a_permutation_with_the_total_last(W):
    slots = bf.paper_slots(W)
    assert sorted(slots) == list(range(W)) and slots[W - 1] == W - 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("W", WIDTHS)
def test_table_is_the_papers_in_place_table_reordered(W, dtype):
    # The same sums, added in the same order (bit for bit), and the same
    # pattern, entry for entry, once our slots are put in the paper's order.
    x = np.random.default_rng(W).random((W, W)).astype(dtype)
    table, _ = bf.butterfly_table(x)
    reordered = np.empty_like(table)
    reordered[bf.paper_slots(W)] = table
    assert np.array_equal(reordered, _in_place_table(x))
    # The pattern: the in-place loop run on the exact sums of
    # test_table_holds_the_sums_its_pattern_names.
    i = np.arange(W, dtype=np.float64)[:, None]
    exact = np.ldexp(1.0, np.arange(W))[None, :] + i * 2.0**W
    pattern = np.empty((W, W, 3), dtype=np.int64)
    pattern[bf.paper_slots(W)] = bf.table_pattern(W)
    expect = np.array([[exact[r, lo:hi].sum() for r, lo, hi in row] for row in pattern])
    assert np.array_equal(_in_place_table(exact), expect)


def test_w8_paper_order_is_the_documented_table():
    pattern = np.empty((8, 8, 3), dtype=np.int64)
    pattern[bf.paper_slots(8)] = bf.table_pattern(8)
    for k, row in enumerate(pattern):
        line = f"    {k}     " + "   ".join(_name(e) for e in row)
        assert line in bf.__doc__


@pytest.mark.parametrize("W", WIDTHS)
def test_table_holds_the_sums_its_pattern_names(W):
    # x[i, c] = 2**c + i * 2**W: a sum over columns lo..hi-1 of row i has the
    # column set in its low W bits and (hi - lo) * i above, all exact in float64.
    i = np.arange(W, dtype=np.float64)[:, None]
    c = np.arange(W)[None, :]
    x = np.ldexp(1.0, c) + i * 2.0**W
    table, totals = bf.butterfly_table(x)
    pattern = bf.table_pattern(W)
    expect = np.array([[x[r, lo:hi].sum() for r, lo, hi in row] for row in pattern])
    assert np.array_equal(table, expect)
    assert np.array_equal(totals, x.sum(axis=1))


@pytest.mark.parametrize("W", WIDTHS)
def test_each_row_holds_one_child_of_every_node(W):
    pattern = bf.table_pattern(W).reshape(-1, 3)
    for row in range(W):
        held = sorted((lo, hi) for r, lo, hi in pattern if r == row)
        want = [(0, W)]
        m = 1
        while m < W:
            for q in range(W // (2 * m)):
                lo = q * 2 * m + (m if row & m else 0)  # right child iff bit m of the row is set
                want.append((lo, lo + m))
            m *= 2
        assert held == sorted(want)


@pytest.mark.parametrize("W", WIDTHS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lane_totals_are_the_pairwise_sums(W, dtype):
    x = np.random.default_rng(W).lognormal(0, 3, (50, W, W)).astype(dtype)
    table, totals = bf.butterfly_table(x)
    assert table.dtype == dtype
    assert np.array_equal(totals, bf.pairwise_totals(x))  # bit for bit


def _exact_rows(rng, shape, zero_frac=0.3):
    x = rng.integers(1, 6, shape).astype(np.float64)
    x[rng.random(shape) < zero_frac] = 0
    return x


@pytest.mark.parametrize("W", WIDTHS)
def test_search_returns_the_prefix_answer_when_sums_are_exact(W):
    rng = np.random.default_rng(100 + W)
    x = _exact_rows(rng, (40, W, W))
    x[0, 0] = 0
    x[0, 0, W - 1] = 3  # a row with one non-zero weight, at the end
    table, totals = bf.butterfly_table(x)
    low = rng.integers(0, 50, (40, W)).astype(np.float64)
    high = low + totals
    p = low[..., None] + np.cumsum(x, axis=-1)
    # Every integer and half-integer target in [low, high): ties included.
    for step in range(2 * int(totals.max())):
        target = low + 0.5 * step
        ok = target < high
        got = bf.butterfly_search(table, low, high, target, x > 0)
        want = np.argmax(p > target[..., None], axis=-1)
        assert np.array_equal(got[ok], want[ok])


@pytest.mark.parametrize("W", WIDTHS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_search_never_lands_on_a_zero_weight(W, dtype):
    rng = np.random.default_rng(200 + W)
    x = (rng.lognormal(0, 8, (60, W, W)) * (rng.random((60, W, W)) < 0.4)).astype(dtype)
    x[:, :, W // 2] = 0  # a zero in every row, mid-block
    x[:10, :, :] = 0
    x[:10, :, rng.integers(0, W)] = dtype(1e-3)  # single non-zero weight
    x[x.sum(axis=-1) == 0, 0] = dtype(1)
    table, totals = bf.butterfly_table(x)
    low = rng.lognormal(0, 8, (60, W)).astype(dtype)
    high = (low + totals).astype(dtype)
    p = np.cumsum(x, axis=-1, dtype=dtype) + low[..., None]
    # Targets on, just below and just above every prefix value: where rounding bites.
    for k in range(W):
        for target in (np.nextafter(p[..., k], -np.inf), p[..., k], np.nextafter(p[..., k], np.inf)):
            target = np.clip(target, low, np.nextafter(high, -np.inf)).astype(dtype)
            col = bf.butterfly_search(table, low, high, target, x > 0)
            assert np.all(np.take_along_axis(x, col[..., None], axis=-1) > 0)
    single = bf.butterfly_search(table[:10], low[:10], high[:10], low[:10], x[:10] > 0)
    assert np.array_equal(single, np.argmax(x[:10] > 0, axis=-1))


@pytest.mark.parametrize("W", WIDTHS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_search_differs_from_the_prefix_answer_only_near_ties(W, dtype):
    rng = np.random.default_rng(300 + W)
    x = (rng.random((200, W, W)) * (rng.random((200, W, W)) < 0.8)).astype(dtype)
    x[..., 0] += dtype(0.5)
    table, totals = bf.butterfly_table(x)
    low = rng.random((200, W)).astype(dtype)
    high = (low + totals).astype(dtype)
    p = (np.cumsum(x, axis=-1, dtype=dtype) + low[..., None]).astype(dtype)
    p64 = low[..., None].astype(np.float64) + np.cumsum(x.astype(np.float64), axis=-1)
    eps = np.finfo(dtype).eps
    mismatches = 0
    for trial in range(5):
        # Half the targets sit on prefix values, where the two orders may disagree.
        target = (low + rng.random((200, W)).astype(dtype) * totals).astype(dtype)
        on = rng.random((200, W)) < 0.5
        kk = rng.integers(0, W, (200, W))
        target = np.where(on, np.take_along_axis(p, kk[..., None], axis=-1)[..., 0], target)
        target = np.minimum(target, np.nextafter(high, -np.inf))
        got = bf.butterfly_search(table, low, high, target, x > 0)
        want = np.argmax(p > target[..., None], axis=-1)
        # Where p[-1] <= target < high (rounding) the left-to-right order has no answer here.
        diff = (got != want) & (p[..., -1] > target)
        mismatches += int((diff & ~on).sum())  # away from ties they (almost) never disagree
        # A disagreement is a near tie: the exact prefix between the two answers is within
        # rounding of the target (a few ulp of the total, W additions).
        lo_k = np.minimum(got, want)[diff]
        gap = np.abs(np.take_along_axis(p64[diff], lo_k[:, None], axis=-1)[:, 0] - target[diff])
        assert np.all(gap <= 4 * W * eps * np.abs(high[diff]))
    assert mismatches <= 5


@pytest.mark.parametrize("W", [8, 16, 32])
@pytest.mark.parametrize("K", [1, 2, 7, 8, 9, 31, 32, 33, 100])
def test_draw_is_the_prefix_answer_when_sums_are_exact(W, K):
    rng = np.random.default_rng(K * 100 + W)
    n = 3 * W + 5  # a partial last group
    w = _exact_rows(rng, (n, K)).astype(np.float32)
    w[w.sum(axis=1) == 0, K - 1] = 2
    u = rng.random(n).astype(np.float32)
    got = bf.draw(w, u, W)
    assert np.array_equal(got, prefix_draw(w, u))
    assert np.all(w[np.arange(n), got] > 0)


def test_draw_with_w8_and_w32_agree_up_to_rounding():
    rng = np.random.default_rng(5)
    w = rng.random((2000, 77)).astype(np.float32)
    u = rng.random(2000).astype(np.float32)
    ref = prefix_draw(w, u)
    for W in (8, 16, 32):
        assert (bf.draw(w, u, W) != ref).sum() <= 2


def test_rows_without_a_positive_total_give_minus_one():
    w = np.array([[0, 0, 0], [1, np.nan, 1], [1, np.inf, 0], [0, 2, 0]], dtype=np.float64)
    with np.errstate(invalid="ignore"):
        got = bf.draw(w, np.full(4, 0.5), 8)
    assert got.tolist() == [-1, -1, -1, 1]


@pytest.mark.parametrize("W", [0, 1, 3, 12])
def test_width_must_be_a_power_of_two(W):
    with pytest.raises(ValueError, match="power of two"):
        bf.table_pattern(W)
