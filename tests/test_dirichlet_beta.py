"""Beta and Dirichlet variates: laws, small concentrations, shapes, CPU/GPU identity.

False-failure budget (each check at ALPHA = 1e-4, fixed seeds): test_beta_law
1 KS check per case (4 cases x 2 dtypes = 8 per backend); test_dirichlet_marginals
4 per dtype (8 per backend). 16 checks per backend, and on NumPy 2 binomial checks
of test_beta_with_tiny_parameters_has_no_nan (18): a correct sampler fails with
probability below 1.8e-3 for seeds chosen blind. The seeds are fixed.
"""

import numpy as np
import pytest
from scipy import stats

import gpumcmc
from conftest import ALPHA, to_np
from gpumcmc.random import _gamma, default_rng

DTYPES = [np.float32, np.float64]
# Parameters whose mass within half a float32 ulp of 0 or 1 is below 1e-4, so
# that rounding cannot show up in a KS test of 100,000 draws.
BETA_CASES = [(0.5, 0.5), (2.0, 5.0), (0.5, 3.0), (100.0, 30.0)]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("a,b", BETA_CASES)
def test_beta_law(xp, a, b, dtype):
    rng = default_rng(40 + BETA_CASES.index((a, b)), backend=xp.__name__)
    x = to_np(rng.beta(xp.full(100_000, a, dtype=dtype), b))
    assert x.dtype == dtype and np.all((x >= 0) & (x <= 1))
    assert stats.kstest(x.astype(np.float64), stats.beta(a, b).cdf).pvalue > ALPHA


def test_beta_is_the_first_coordinate_of_a_two_part_dirichlet():
    a = np.exp(np.random.default_rng(0).uniform(-3, 3, 10_000))
    b = np.exp(np.random.default_rng(1).uniform(-3, 3, 10_000))
    x = default_rng(3, backend="numpy").beta(a, b)
    d = default_rng(3, backend="numpy").dirichlet(np.stack([a, b], axis=-1))
    np.testing.assert_allclose(x, d[:, 0], rtol=1e-12, atol=1e-300)


def test_beta_with_tiny_parameters_has_no_nan():
    for dtype in DTYPES:
        x = default_rng(1, backend="numpy").beta(np.full(10_000, 1e-3, dtype), 1e-3)
        assert not np.isnan(x).any()
        assert np.mean((x < 0.01) | (x > 0.99)) > 0.95
        # Beta(a, a) is symmetric about 1/2: half the draws lie above it (a binomial check at ALPHA)
        assert stats.binomtest(int((x > 0.5).sum()), x.size).pvalue > ALPHA


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_dirichlet_marginals(xp, dtype):
    # X_k ~ Beta(alpha_k, sum(alpha) - alpha_k).
    alpha = np.array([0.3, 1.0, 2.5, 10.0])
    rng = default_rng(60, backend=xp.__name__)
    x = to_np(rng.dirichlet(xp.asarray(np.broadcast_to(alpha, (100_000, 4)), dtype=dtype)))
    assert x.dtype == dtype and x.shape == (100_000, 4)
    np.testing.assert_allclose(x.sum(axis=1), 1.0, rtol=4 * np.finfo(dtype).eps * 4)
    for k in range(4):
        law = stats.beta(alpha[k], alpha.sum() - alpha[k])
        assert stats.kstest(x[:, k].astype(np.float64), law.cdf).pvalue > ALPHA


def test_dirichlet_small_alpha_float32_rows_are_sane(xp):
    # Normalising G directly gives 0/0 (CuPy) or 1/K rows (PyTorch clamps G to
    # FLT_MIN) here; the log-sum-exp of log-gammas gives nearly one-hot rows.
    rng = default_rng(7, backend=xp.__name__)
    k = 256
    x = to_np(rng.dirichlet(xp.full((4096, k), 1e-3, dtype=xp.float32)))
    assert not np.isnan(x).any()
    # |log G| ~ 1e3 here: normalising by a rounded float32 log-sum-exp would
    # leave row sums ~3e-5 off; normalising relative to the row maximum keeps
    # them within a few ulp.
    np.testing.assert_allclose(x.sum(axis=1, dtype=np.float64), 1.0, rtol=1e-6)
    assert not np.any(np.all(x == x[:, :1], axis=1))  # no all-equal row
    # Mostly one-hot: numpy.random.Generator.dirichlet (stick-breaking in float64)
    # puts the largest part above 0.5 in 96.0% of 20,000 such rows; the bounds
    # are 5 standard errors of a 4096-row estimate.
    assert 0.945 < np.mean(x.max(axis=1) > 0.5) < 0.975
    # Which component wins is uniform over the K columns.
    counts = np.bincount(x.argmax(axis=1), minlength=k)
    assert stats.chisquare(counts).pvalue > ALPHA


def test_dirichlet_log_is_the_log_of_the_draw():
    alpha = np.exp(np.random.default_rng(2).uniform(-4, 3, (2000, 9)))
    x = default_rng(5, backend="numpy").dirichlet(alpha)
    lx = default_rng(5, backend="numpy").dirichlet(alpha, log=True)
    np.testing.assert_allclose(np.exp(lx), x, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(np.logaddexp.reduce(lx, axis=1), 0.0, atol=1e-12)


def test_dirichlet_shapes_and_size():
    rng = default_rng(0, backend="numpy")
    alpha = np.ones((3, 5))
    assert rng.dirichlet(alpha).shape == (3, 5)
    assert rng.dirichlet(alpha, size=(4, 3)).shape == (4, 3, 5)
    assert rng.dirichlet([1.0, 2.0], size=6).shape == (6, 2)
    assert rng.dirichlet(np.ones(1)).tolist() == [1.0]
    assert rng.dirichlet(np.ones((0, 4))).shape == (0, 4)
    with pytest.raises(ValueError, match="broadcast"):
        rng.dirichlet(alpha, size=4)
    with pytest.raises(ValueError, match="axis"):
        rng.dirichlet(1.0)


def test_dirichlet_rows_are_gammas_normalised():
    # The documented mapping: row r uses gamma elements r K + k of the call.
    alpha = np.exp(np.random.default_rng(9).uniform(-2, 2, (50, 7)))
    lg = default_rng(8, backend="numpy").gamma(alpha, log=True)
    x = default_rng(8, backend="numpy").dirichlet(alpha)
    np.testing.assert_allclose(x, np.exp(lg - np.logaddexp.reduce(lg, axis=1, keepdims=True)), rtol=1e-12)


@pytest.mark.parametrize("bad", [0.0, -1.0, np.nan, np.inf])
def test_bad_parameters_raise(xp, bad):
    rng = default_rng(0, backend=xp.__name__)
    with pytest.raises(ValueError, match="alpha"):
        rng.dirichlet(xp.asarray([1.0, bad]))
    with pytest.raises(ValueError, match="^b "):
        rng.beta(1.0, xp.asarray([1.0, bad]))
    for dtype in DTYPES:  # on the GPU, float32 rows this short are normalised in registers
        with gpumcmc.validation(False):
            rows = to_np(rng.dirichlet(xp.asarray([[1.0, bad, 3.0], [1.0, 2.0, 3.0]], dtype=dtype)))
        assert np.isnan(rows[0]).all() and np.isfinite(rows[1]).all()


# ---------------------------------------------------------------- GPU only
# Rows from the same accepted trials differ by the rounding of the log-gammas
# (bounded in test_gamma.py by 5e-5 * max(1, |log G|) in float32, 1e-13 in float64) and of
# the row sums, whose order differs (per-lane partial sums and shuffles on the
# GPU, pairwise in NumPy): at most K eps. Both scale with the row's largest |log G|.
LOG_TOL = {np.float32: 1e-4, np.float64: 1e-12}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("k", [1, 2, 3, 7, 32, 33, 256, 1000, 20_000])
def test_gpu_dirichlet_equals_the_twin(cp, dtype, k):
    n_rows = max(2, 400_000 // k)
    alpha = np.exp(np.random.default_rng(k).uniform(np.log(1e-3), np.log(1e3), (n_rows, k))).astype(dtype)
    key, off = (0xDEADBEEF, 0x12345678), (1 << 33) + 5
    lg, _ = _gamma.gamma_numpy(alpha.reshape(-1), key, off, log=True)
    scale = np.maximum(1.0, np.abs(lg.reshape(alpha.shape).astype(np.float64)).max(axis=1, keepdims=True))
    tol = (LOG_TOL[dtype] + k * np.finfo(dtype).eps) * scale
    for log in (True, False):
        gpu = _gamma.dirichlet_cupy(cp.asarray(alpha), key, off, log=log).get().astype(np.float64)
        cpu = _gamma.dirichlet_numpy(alpha, key, off, log=log).astype(np.float64)
        assert gpu.shape == cpu.shape and not np.isnan(gpu).any()
        if log:
            bad = np.abs(gpu - cpu) > tol
        else:
            np.testing.assert_allclose(gpu.sum(axis=1), 1.0, rtol=k * np.finfo(dtype).eps + 1e-6)
            bad = np.abs(gpu - cpu) > 2 * tol * cpu + 1e3 * np.finfo(dtype).tiny
        # A row may differ more only where one of its gammas accepted another trial.
        bad_rows = np.any(bad, axis=1).sum()
        assert bad_rows <= max(2, 1e-5 * alpha.size), f"{bad_rows} rows differ"


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("n_rows,k", [(5000, 1), (40_000, 2), (20_001, 3), (9_000, 16), (999, 33), (700, 256),
                                       (301, 257), (40, 3001)])
def test_gpu_dirichlet_paths_give_the_same_bits(cp, dtype, n_rows, k):
    # dirichlet_draw (a warp per chunk of rows, any number of rows per chunk)
    # against gamma_draw + lse_rows (rows_per_chunk=0): the same pairs, the
    # same normalisation, so the same bits, also for a misaligned alpha (no
    # pair loads), invalid shapes (NaN rows) and both outputs. With one or two
    # rows per chunk the larger cases give every warp several chunks (at most
    # 4224 warps are resident on an H200), as large batches do; K = 2 and 16
    # normalise several rows per warp (2 and 16 lanes a row).
    g = np.random.default_rng(n_rows + k)
    flat = np.exp(g.uniform(np.log(1e-3), np.log(1e3), n_rows * k + 1)).astype(dtype)
    flat[g.integers(0, flat.size, 3)] = -1.0  # NaN rows where validation is off
    buf = cp.asarray(flat)
    key, off = (0x1234, 0xABCD), 77
    for alpha in (buf[:-1].reshape(n_rows, k), buf[1:].reshape(n_rows, k)):
        for log in (False, True):
            ref = _gamma.dirichlet_cupy(alpha, key, off, log=log, rows_per_chunk=0).get()
            assert np.isnan(ref).any(axis=1).sum() >= 1
            chunks = {1 + (k & 1), 2, 7 + (k & 1), 64, n_rows + (n_rows & k & 1)}
            for R in sorted(chunks) + [None]:
                got = _gamma.dirichlet_cupy(alpha, key, off, log=log, rows_per_chunk=R).get()
                np.testing.assert_array_equal(got, ref, err_msg=f"rows_per_chunk={R}, log={log}")


def test_dirichlet_plan():
    # Many rows: chunks of about config.dirichlet_chunk elements, an even count for odd K.
    assert _gamma._dirichlet_plan(65_536, 256, 4224) == 8
    assert _gamma._dirichlet_plan(65_536, 255, 4224) == 8
    assert _gamma._dirichlet_plan(10_000_000, 3, 4224) == 682
    assert _gamma._dirichlet_plan(1_000_000, 5001, 4224) == 2
    # Fewer rows: smaller chunks to reach every warp; a small batch stays in one launch.
    assert _gamma._dirichlet_plan(1_000_000, 3, 4224) == 238
    assert _gamma._dirichlet_plan(4224, 16, 4224) == 1
    assert _gamma._dirichlet_plan(10, 10, 4224) == 1
    # A few long rows would leave most warps idle: the two-kernel path.
    assert _gamma._dirichlet_plan(100, 100_000, 4224) == 0
    # float64 takes the two-kernel path (faster there).
    assert _gamma._dirichlet_plan(65_536, 256, 4224, np.float64) == 0
    with pytest.raises(ValueError, match="even for odd K"):
        _gamma.dirichlet_cupy(np.ones((4, 3)), (1, 2), 0, rows_per_chunk=3)


def test_gpu_beta_equals_the_twin(cp):
    g = np.random.default_rng(4)
    key, off = (1, 2), 3
    for dtype in DTYPES:
        a = np.exp(g.uniform(-5, 5, 1_000_000)).astype(dtype)
        b = np.exp(g.uniform(-5, 5, 1_000_000)).astype(dtype)
        lg, _ = _gamma.gamma_numpy(np.stack([a, b], axis=-1).reshape(-1), key, off, log=True)
        scale = np.maximum(1.0, np.abs(lg.astype(np.float64)).reshape(-1, 2).max(axis=1))
        gpu = _gamma.beta_cupy(cp.asarray(a), cp.asarray(b), a.size, key, off).get().astype(np.float64)
        cpu = _gamma.beta_numpy(a, b, key, off).astype(np.float64)
        bad = np.abs(gpu - cpu) > 2 * LOG_TOL[dtype] * scale * cpu + 1e3 * np.finfo(dtype).tiny
        assert bad.sum() <= max(2, 2e-5 * a.size), f"{bad.sum()} draws differ"


def test_gpu_small_alpha_float32_matches_numpy_in_which_component_wins(cp):
    alpha = np.full((4096, 256), 1e-3, np.float32)
    gpu = default_rng(7, backend="cupy").dirichlet(cp.asarray(alpha)).get()
    cpu = default_rng(7, backend="numpy").dirichlet(alpha)
    assert not np.isnan(gpu).any()
    assert np.mean(gpu.argmax(axis=1) == cpu.argmax(axis=1)) > 0.999
