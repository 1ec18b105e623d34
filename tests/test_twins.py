"""The NumPy twins' fast paths: the same values as their plain forms, and their speed beside NumPy.

The twins of the fills, of gamma and of the butterfly draw each have a plain
form that reads like the kernel (``philox_rounds`` and ``box_muller`` in
``_philox.py``, ``_trial0`` in ``_gamma.py``, ``butterfly_reference.draw``) and a
fast form that the public calls use; these tests hold the two to the same
bits. No test here is statistical.

The timing test compares each twin with NumPy's own generator in the same
process, the two run in turn and the best of several runs kept, and fails
only beyond 6x (measured on two cores of a Xeon: 1.3x to 3x; see
``python -m benchmarks.twins``), so that a busy CI machine cannot fail it.
"""

from __future__ import annotations


import numpy as np
import pytest

import gpumcmc
from gpumcmc import discrete
from gpumcmc._config import config
import butterfly_reference as _butterfly
from gpumcmc.random import _gamma, _philox, default_rng
from benchmarks.twins import best_of

KEY = (0xDEADBEEF, 0x12345678)
OFF = (1 << 33) + 5


def test_philox32_equals_philox_rounds_for_every_mix_of_shared_words():
    n = 3001
    rng = np.random.default_rng(0)
    words = [rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32) for _ in range(4)]
    work = _philox.Words(4096)
    for mask in range(16):  # which counter words vary (arrays) and which are shared (ints)
        c = [words[i] if mask >> i & 1 else int(words[i][i]) for i in range(4)]
        want = _philox.philox_rounds(*(np.full(n, x, np.uint64) if isinstance(x, int) else x.astype(np.uint64)
                                       for x in c), *KEY)
        got = _philox.philox32(*c, *KEY, work, n)
        for g, w in zip(got, want):
            assert g.dtype == np.uint32 and np.array_equal(g, w), mask


def test_fast_uniforms_and_box_muller_give_the_same_bits():
    rng = np.random.default_rng(1)
    # Random words, and words at the ends and at the quadrant edges of sincospi(2 u2).
    edges = np.array([0, 1, 2**29 - 1, 2**29, 2**30 - 1, 2**30, 3 * 2**29 - 1, 3 * 2**29, 2**31,
                      7 * 2**29 - 1, 7 * 2**29, 2**32 - 1], dtype=np.uint32)
    a = np.concatenate([rng.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32), edges, edges])
    b = np.concatenate([rng.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32), edges, edges[::-1]])
    a64, b64 = a.astype(np.uint64), b.astype(np.uint64)
    n = a.size
    assert np.array_equal(_philox.u01_f32_into(a, np.empty(n, np.float32)), _philox.u01_f32(a64))
    assert np.array_equal(_philox.u01_f64_into(a, b, np.empty(n)), _philox.u01_f64(a64, b64))
    assert np.array_equal(_philox.u01_f64_from32_into(a, np.empty(n)), _philox.u01_f64_from32(a64))
    for u2 in (_philox.u01_f64(b64, a64), _philox.u01_f64_from32(b64), _philox.u01_f32(b64).astype(np.float64)):
        u1 = _philox.u01_f64(a64, b64)
        z0, z1 = _philox.box_muller(u1, u2)
        r, z = _philox.box_muller_into(u1.copy(), u2, np.empty(n, np.complex128), np.empty(n))
        assert np.array_equal(r * z.real, z0) and np.array_equal(r * z.imag, z1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_gamma_trial0_chunks_equal_the_per_element_form(dtype):
    # Elements on both sides of 2**32 (the counter's high word), from an odd start.
    lo, hi = (1 << 32) - 1001, (1 << 32) + 999
    x, u = _gamma._trial0(np.arange(lo, hi, dtype=np.uint64), KEY, OFF, np.dtype(dtype))
    gen = _gamma._Trial0(dtype, KEY, OFF, 2002)
    parts = [tuple(a.copy() for a in gen(lo - 1, 1 << 32)), tuple(a.copy() for a in gen(1 << 32, hi + 1))]
    fx = np.concatenate([parts[0][0][1:], parts[1][0][:-1]])
    fu = np.concatenate([parts[0][1][1:], parts[1][1][:-1]])
    assert np.array_equal(fx, x) and np.array_equal(fu, u)


@pytest.mark.parametrize("log", [False, True], ids=["G", "logG"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_gamma_twin_draws_depend_on_the_element_only(dtype, log, monkeypatch):
    # Small chunks: many chunk edges, boosts and later attempts inside one call.
    monkeypatch.setattr(config, "gamma_twin_chunk", 1 << 10)
    real, spans = _gamma._Trial0.__call__, []
    monkeypatch.setattr(_gamma._Trial0, "__call__", lambda self, lo, hi: (spans.append(hi - lo), real(self, lo, hi))[1])
    rng = np.random.default_rng(2)
    a = np.exp(rng.uniform(-5, 4, 20_001)).astype(dtype)
    start = (1 << 32) - 10_001  # odd, and across the counter's high word
    v0, t0 = _gamma.gamma_numpy(a, KEY, OFF, log=log, start=start)
    # Trial 0 went chunk by chunk (the knob reached the twin): at most 1024 elements, as whole pairs.
    assert len(spans) >= a.size // 1024 and max(spans) <= 1024 + 2, spans
    bad = rng.choice(a.size, 300, replace=False)
    b = a.copy()
    b[bad] = rng.choice(np.array([np.inf, -np.inf, np.nan, 0.0, -1.0], dtype), bad.size)
    v1, t1 = _gamma.gamma_numpy(b, KEY, OFF, log=log, start=start)
    ok = np.ones(a.size, bool)
    ok[bad] = False
    assert np.array_equal(v0[ok], v1[ok]) and np.array_equal(t0[ok], t1[ok])
    assert np.isnan(v1[bad]).all() and (t1[bad] == -1).all()
    assert t0.min() == 0 and t0.max() >= 2 and not np.isnan(v0).any()
    # The same elements drawn one part at a time.
    head, _ = _gamma.gamma_numpy(a[:7000], KEY, OFF, log=log, start=start)
    tail, _ = _gamma.gamma_numpy(a[7000:], KEY, OFF, log=log, start=start + 7000)
    assert np.array_equal(np.concatenate([head, tail]), v0)


@pytest.mark.parametrize("K", [1, 3, 16, 31, 32, 33, 100, 300])
def test_butterfly_twin_equals_the_warp_emulation(K, monkeypatch):
    monkeypatch.setattr(config, "butterfly_twin_chunk", 1 << 12)  # several chunks of rows
    real, chunks = discrete._butterfly_rows, []
    monkeypatch.setattr(discrete, "_butterfly_rows", lambda w, *a: (chunks.append(len(w)), real(w, *a))[1])
    # Whole warps of rows whose scratch (each row padded to whole warps of columns) fills the knob's 4096
    # elements, or one warp where a warp's scratch is larger: from 3 chunks (K = 1) to 11 (K = 300).
    step = max(32, 4096 // (32 * -(-K // 32)) // 32 * 32)
    rng = np.random.default_rng(K)
    n = 32 * 11
    for dtype in (np.float32, np.float64):
        chunks.clear()
        w = rng.uniform(0, 1, (n, K)).astype(dtype)
        w[rng.uniform(size=w.shape) < 0.5] = 0  # zero weights and zero children
        w[::7] = np.round(w[::7] * 3)  # ties between prefixes and targets
        w[3] = 0  # a row without a positive total
        w[5, 0] = np.nan
        w[9, -1] = -0.25  # negative weights: unspecified, but the same on both
        u = rng.uniform(0, 1, n).astype(dtype)
        np.testing.assert_array_equal(discrete.butterfly_draw(w, u), _butterfly.draw(w, u, 32))
        assert chunks == [step] * (n // step) + ([n % step] if n % step else []), chunks


@pytest.mark.slow
def test_twins_run_within_6x_of_numpy():
    ref = np.random.default_rng(0)
    ours = default_rng(1, backend="numpy")
    n = 1 << 19
    shape = ref.uniform(0.1, 10.0, n)
    alpha = ref.uniform(0.1, 10.0, 16)
    w = ref.uniform(0.0, 1.0, (n // 16, 16))

    def searchsorted_draw():
        c = np.cumsum(w, axis=1)
        c /= c[:, -1:]
        rows = np.arange(w.shape[0], dtype=np.float64)
        c += rows[:, None]
        return np.searchsorted(c.reshape(-1), ref.random(w.shape[0]) + rows, side="right")

    cases = {
        "gamma": (lambda: ours.gamma(shape), lambda: ref.gamma(shape)),
        "gamma float32": (lambda: ours.gamma(shape.astype(np.float32)),
                          lambda: ref.standard_gamma(shape.astype(np.float32), dtype=np.float32)),
        "normal": (lambda: ours.standard_normal(n), lambda: ref.standard_normal(n)),
        "dirichlet": (lambda: ours.dirichlet(alpha, size=n // 16), lambda: ref.dirichlet(alpha, size=n // 16)),
        "categorical butterfly": (lambda: gpumcmc.categorical(w, rng=ours, method="butterfly"), searchsorted_draw),
    }
    for name, (twin, numpy_twin) in cases.items():
        t, r = best_of([twin, numpy_twin], 5)
        assert t < 6 * r, f"{name}: {t / r:.2f}x NumPy"
