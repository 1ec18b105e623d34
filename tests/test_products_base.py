"""categorical_products(counter_base=..., counter_index=...): a part of a call draws what the whole call draws.

Token ``t`` of a call with ``counter_base=a`` (or ``counter_index=i``) takes the Philox counter ``a + t``
(``a + i[t]``) of a call over more tokens at the same generator offset, and, for the butterfly, the lane of
a warp that call gives it. The tests draw all tokens once, then parts of them (slices with a base, and
scattered tokens with an index) from copies of the same generator, and compare exactly, for every method,
both dtypes and several K (one block, several blocks with a remnant, rows the "warp" kernel reads in
segments).

The butterfly's rounding depends on the lane that holds a row, but only where a prefix lies within
rounding of the target, which random weights almost never give. So the lane tests also draw rows built
for their own uniform so that the two lanes that differ in bit 16 draw different indices (columns 15 and
16): a part drawn in the wrong lanes fails. ``test_built_rows_depend_on_the_lane`` checks that they do.
Every comparison is exact and deterministic: there is no false-failure budget.
"""

import copy

import numpy as np
import pytest

from conftest import to_np
from gpumcmc import categorical_products
from gpumcmc.discrete import METHODS, CounterIndex, butterfly_draw, counter_uniforms
from gpumcmc.random import default_rng

DTYPES = [np.float32, np.float64]
ALL = ("auto",) + METHODS


def _rng(xp, seed):
    return default_rng(seed, backend="numpy" if xp is np else "cupy")


def _random_problem(xp, n, K, dtype, seed):
    g = np.random.default_rng(seed)
    M, V = 37, 23
    theta = g.gamma(0.3, size=(M, K))
    theta[g.random((M, K)) < 0.3] = 0.0
    theta[:, g.integers(K)] += 0.1                      # every row has a positive weight
    phi = g.gamma(0.5, size=(V, K)) + 1e-3
    rows = np.sort(g.integers(0, M, n))
    cols = g.integers(0, V, n)
    return tuple(xp.asarray(a) for a in (theta.astype(dtype), phi.astype(dtype), rows, cols))


def _built_rows(n, dtype, key, offset):
    """(n, 32) weights: row t holds A_t at column 15 and 1 at column 16, A_t chosen for the uniform of
    counter t so that lanes with bit 16 clear draw one column and lanes with it set the other: the mid
    prefix is A_t (left child) for the first, fl(fl(A_t + 1) - 1) (right child) for the second, and the
    target fl(u (A_t + 1)) lies between them. Rows where no A_t is found keep random weights."""
    dt = np.dtype(dtype)
    u = counter_uniforms(np.arange(n), dt, key, offset).astype(dt)
    one = dt.type(1)
    k = np.arange(-400, 400)
    a = (u / (1 - u))[:, None] * (1 + k * np.finfo(dt).eps)[None, :]
    a = a.astype(dt)
    total = a + one
    target = u[:, None] * total
    ok = (target >= a) != (target >= total - one)
    ok &= (u[:, None] > 0.02) & (u[:, None] < 0.98) & (a > 0)
    w = np.random.default_rng(5).random((n, 32)).astype(dt)
    have = ok.any(axis=1)
    w[have] = 0
    w[have, 15] = a[have, np.argmax(ok[have], axis=1)]
    w[have, 16] = one
    return w, have


def _built_problem(xp, n, dtype, seed):
    key = _rng(np, seed).key
    offset = copy.copy(_rng(np, seed)).advance()
    w, _ = _built_rows(n, dtype, key, offset)
    phi = np.ones((1, 32), dtype)
    return xp.asarray(w), xp.asarray(phi), xp.asarray(np.arange(n)), xp.asarray(np.zeros(n, np.int64))


def _check_parts(xp, theta, phi, rows, cols, method, seed):
    rng = _rng(xp, seed)
    whole = to_np(categorical_products(theta, phi, rows, cols, copy.copy(rng), method=method))
    n = int(rows.size)
    for a, b in ((0, n), (1, n), (5, 77), (16, 48), (33, n - 3), (n - 1, n), (200, 263)):
        g = copy.copy(rng)
        part = categorical_products(theta, phi, rows[a:b], cols[a:b], g, method=method, counter_base=a)
        np.testing.assert_array_equal(to_np(part), whole[a:b], err_msg=f"{method} [{a}, {b})")
        assert g.offset == rng.offset + 1
    gen = np.random.default_rng(seed)
    picks = [np.sort(gen.choice(n, size=n // 3, replace=False)),          # scattered, in order
             gen.permutation(n)[: n // 4],                                # any order
             np.array([7, 7, 300, 2, 2, 2, 40]),                          # repeats
             np.arange(130, 190)]                                         # contiguous
    for idx in picks:
        i = xp.asarray(idx)
        part = categorical_products(theta, phi, rows[i], cols[i], copy.copy(rng), method=method, counter_index=i)
        np.testing.assert_array_equal(to_np(part), whole[idx], err_msg=f"{method} index {idx[:5]}")
        lo = int(idx.min())
        part = categorical_products(theta, phi, rows[i], cols[i], copy.copy(rng), method=method, counter_base=lo,
                                    counter_index=i - lo)
        np.testing.assert_array_equal(to_np(part), whole[idx], err_msg=f"{method} base + index")
        kept = CounterIndex(i - lo)                                   # made once, given again
        for _ in range(2):
            part = categorical_products(theta, phi, rows[i], cols[i], copy.copy(rng), method=method,
                                        counter_base=lo, counter_index=kept)
            np.testing.assert_array_equal(to_np(part), whole[idx], err_msg=f"{method} CounterIndex")
    return whole


@pytest.mark.parametrize("method", ALL)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("K", [5, 32, 70])
def test_parts_are_the_whole_call(method, dtype, K):
    _check_parts(np, *_random_problem(np, 400, K, dtype, K), method, seed=K)


@pytest.mark.parametrize("method", ALL)
@pytest.mark.parametrize("dtype", DTYPES)
def test_parts_of_built_rows_are_the_whole_call(method, dtype):
    _check_parts(np, *_built_problem(np, 400, dtype, 11), method, seed=11)


@pytest.mark.parametrize("dtype", DTYPES)
def test_built_rows_depend_on_the_lane(dtype):
    """The built rows make the lane matter: lanes 0 and 16 draw columns 15 and 16 of nearly every row."""
    n = 400
    g = _rng(np, 11)
    w, have = _built_rows(n, dtype, g.key, copy.copy(g).advance())
    assert have.mean() > 0.5
    u = counter_uniforms(np.arange(n), dtype, g.key, copy.copy(g).advance())
    z0 = butterfly_draw(w, u, np.zeros(n, np.int64))
    z16 = butterfly_draw(w, u, np.full(n, 16))
    assert (z0[have] != z16[have]).mean() > 0.9
    # So a part drawn with its own counters' lanes (no base) differs from the whole call.
    theta, phi, rows, cols = _built_problem(np, n, dtype, 11)
    whole = categorical_products(theta, phi, rows, cols, _rng(np, 11), method="butterfly")
    wrong = butterfly_draw(w[16:48], u[16:48])                     # lanes 0..31 where the call has 16..47
    assert (wrong != whole[16:48]).sum() > 10


def test_default_counters_are_the_call_own():
    theta, phi, rows, cols = _random_problem(np, 300, 40, np.float32, 2)
    for method in ALL:
        a = categorical_products(theta, phi, rows, cols, _rng(np, 3), method=method)
        b = categorical_products(theta, phi, rows, cols, _rng(np, 3), method=method, counter_base=0)
        c = categorical_products(theta, phi, rows, cols, _rng(np, 3), method=method,
                                 counter_index=np.arange(300))
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


def test_counter_arguments_checked():
    theta, phi, rows, cols = _random_problem(np, 10, 4, np.float32, 0)
    with pytest.raises(ValueError, match="counter_base must be >= 0"):
        categorical_products(theta, phi, rows, cols, 0, counter_base=-1)
    for bad in (1.5, True, "3"):
        with pytest.raises(TypeError, match="counter_base must be an integer"):
            categorical_products(theta, phi, rows, cols, 0, counter_base=bad)
    with pytest.raises(ValueError, match="shape of rows"):
        categorical_products(theta, phi, rows, cols, 0, counter_index=np.arange(9))
    with pytest.raises(TypeError, match="counter_index must hold integers"):
        categorical_products(theta, phi, rows, cols, 0, counter_index=np.arange(10.0))
    with pytest.raises(ValueError, match="counter_index must be non-negative"):
        categorical_products(theta, phi, rows, cols, 0, counter_index=np.arange(10) - 1)


# --------------------------------------------------------------------------- GPU


@pytest.mark.parametrize("method", ALL)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("K", [5, 32, 70, 1100, 3000])
def test_gpu_parts_are_the_whole_call(cp, method, dtype, K):
    """The kernels' parts equal the whole call (K = 1100 and 3000: "warp" reads rows in segments; at 3000
    "transpose" and "butterfly" keep their block prefixes in global scratch)."""
    _check_parts(cp, *_random_problem(cp, 3000, K, dtype, K), method, seed=K)


@pytest.mark.parametrize("method", ALL)
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_parts_of_built_rows_are_the_whole_call(cp, method, dtype):
    """On the built rows, and the GPU's sums equal their twins' (exactly: products with ones round alike)."""
    whole = _check_parts(cp, *_built_problem(cp, 3000, dtype, 11), method, seed=11)
    if method in ("prefix", "transpose", "butterfly"):           # exact twins of the GPU's sums
        theta, phi, rows, cols = _built_problem(np, 3000, dtype, 11)
        twin = categorical_products(theta, phi, rows, cols, _rng(np, 11), method=method)
        np.testing.assert_array_equal(whole, twin)
        part = categorical_products(theta[5:2000], phi, rows[:1995], cols[:1995], _rng(np, 11), method=method,
                                    counter_base=5)
        np.testing.assert_array_equal(part, twin[5:2000])


def test_gpu_counter_index_message_names_the_token(cp):
    """A bad token drawn through the butterfly's lane layout is named by its index in the call: the first
    bad one, though the layout orders the tokens by lane, and with what is wrong with it."""
    theta, phi, rows, cols = _random_problem(cp, 200, 40, np.float32, 4)
    theta[int(rows[150])] = 0.0
    first = int(cp.argmax(rows == rows[150]))
    with pytest.raises(ValueError, match=f"token t = {first} has no positive weight"):
        categorical_products(theta, phi, rows, cols, 0, method="butterfly",
                             counter_index=cp.arange(200) * 3)
    # two kinds of bad tokens: the first (a NaN row) is named with its own fault, whichever slot comes first
    theta, phi, rows, cols = _random_problem(cp, 200, 40, np.float32, 4)
    theta[int(rows[150])] = 0.0
    theta[int(rows[30])] = float("nan")
    first = int(cp.argmax(rows == rows[30]))
    with pytest.raises(ValueError, match=f"token t = {first} .*NaN"):
        categorical_products(theta, phi, rows, cols, 0, method="butterfly",
                             counter_index=cp.arange(200) * 3 + 1)


def test_counter_index_object_checked():
    with pytest.raises(ValueError, match="non-negative"):
        CounterIndex(np.array([1, -2]))
    with pytest.raises(TypeError, match="integers"):
        CounterIndex(np.array([1.0]))
    theta, phi = np.ones((2, 3)), np.ones((4, 3))
    with pytest.raises(ValueError, match="shape of rows"):
        categorical_products(theta, phi, [0, 1], [0, 1], 0, counter_index=CounterIndex(np.arange(3)))


def test_lane_layout_keeps_lanes_and_fills_warps():
    """Every token lands in a slot of its counter's lane, once; a warp of slots holds at most one token
    of each lane, and the slots are as few as the fullest lane allows."""
    from gpumcmc.discrete import W, _lane_layout

    rs = np.random.default_rng(3)
    for trial in range(60):
        n = int(rs.integers(1, 400))
        if trial % 2:
            c = np.sort(rs.choice(5000, size=n, replace=False)).astype(np.int64)
        else:
            c = rs.integers(0, 10**6, size=n).astype(np.int64)
        slot, tok = _lane_layout(c, np)
        assert np.array_equal(slot % W, c % W)
        assert np.array_equal(tok[slot], np.arange(n))
        assert np.unique(slot).size == n
        assert tok.size == W * np.bincount(c % W, minlength=W).max()
