"""Wishart and inverse-Wishart matrices: moments, Bartlett diagonals, input checks,
batches, and CPU/GPU identity.

False-failure budget (each check at ALPHA = 1e-4, fixed seeds): test_wishart_moments
makes 6 z-checks on the means and 6 on the variances; test_bartlett_diagonals 4 KS
checks; test_invwishart_bartlett_and_mean 4 KS checks and 6 z-checks. 26 checks per
backend: a correct sampler fails with probability below 2.6e-3 for seeds chosen
blind. test_batches_of_df_and_scale adds 2 KS checks on NumPy (28 there, below
2.8e-3). The seeds are fixed.
"""

import numpy as np
import pytest
from scipy import stats

import gpumcmc
from conftest import ALPHA, to_np
from gpumcmc.random import default_rng

Z = stats.norm.isf(ALPHA / 2)  # two-sided z bound for one check at ALPHA
S3 = np.array([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 0.5]])


def _z_ok(sample, expected, axis=0):
    """The mean of ``sample`` along ``axis`` is within Z standard errors of ``expected``."""
    se = sample.std(axis=axis, ddof=1) / np.sqrt(sample.shape[axis])
    return np.abs(sample.mean(axis=axis) - expected) <= Z * se


def test_wishart_moments(xp):
    # E W = df S; Var W_ij = df (S_ij^2 + S_ii S_jj).
    n, df = 40_000, 7.5
    w = to_np(default_rng(70, backend=xp.__name__).wishart(df, xp.asarray(S3), size=n))
    assert w.shape == (n, 3, 3)
    np.testing.assert_array_equal(w, np.swapaxes(w, -1, -2))
    iu = np.triu_indices(3)
    entries = w[:, iu[0], iu[1]]
    assert np.all(_z_ok(entries, df * S3[iu]))
    # Variances: the sample variance is the mean of (W - EW)^2; test it with its own standard error.
    var = df * (S3**2 + np.outer(np.diag(S3), np.diag(S3)))
    assert np.all(_z_ok((entries - df * S3[iu]) ** 2, var[iu]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_bartlett_diagonals(xp, dtype):
    # With S = I, chol(W) is the Bartlett factor: its squared diagonal is chi2(df - i).
    df, p = 6.3, 4
    w = to_np(default_rng(71, backend=xp.__name__).wishart(df, xp.eye(p, dtype=dtype), size=30_000))
    assert w.dtype == dtype
    a = np.linalg.cholesky(w.astype(np.float64))
    for i in range(p):
        assert stats.kstest(a[:, i, i] ** 2, stats.chi2(df - i).cdf).pvalue > ALPHA


def test_invwishart_bartlett_and_mean(xp):
    # X ~ W^-1(df, Psi) iff X^-1 ~ W(df, Psi^-1); E X = Psi / (df - p - 1).
    df, p, n = 9.0, 3, 30_000
    rng = default_rng(72, backend=xp.__name__)
    x = to_np(rng.invwishart(df, xp.eye(p), size=n))
    a = np.linalg.cholesky(np.linalg.inv(x))
    for i in range(p):
        assert stats.kstest(a[:, i, i] ** 2, stats.chi2(df - i).cdf).pvalue > ALPHA
    x = to_np(rng.invwishart(df, xp.asarray(S3), size=n))
    iu = np.triu_indices(p)
    assert np.all(_z_ok(x[:, iu[0], iu[1]], S3[iu] / (df - p - 1)))
    np.testing.assert_array_equal(x, np.swapaxes(x, -1, -2))


def test_batches_of_df_and_scale():
    rng = default_rng(3, backend="numpy")
    k, p = 4096, 14
    g = np.random.default_rng(0)
    b = g.standard_normal((k, p, p))
    scale = b @ np.swapaxes(b, -1, -2) / p + np.eye(p)
    df = p + g.uniform(0, 20, k)
    for fn in (rng.wishart, rng.invwishart):
        w = fn(df, scale)
        assert w.shape == (k, p, p) and np.isfinite(w).all()
        np.linalg.cholesky(w)  # positive definite
        # Each matrix follows its own (df, scale): tr(S^-1 W) ~ chi2(p df) for W ~ W(df, S) (the squares
        # of the Bartlett factor's entries), and tr(S X^-1) for X ~ W^-1(df, S). Their chi2 CDFs are
        # uniform; one KS check each at ALPHA.
        t = np.trace(np.linalg.solve(scale, w) if fn == rng.wishart else scale @ np.linalg.inv(w), axis1=-2,
                     axis2=-1)
        assert stats.kstest(stats.chi2(p * df).cdf(t), "uniform").pvalue > ALPHA
    assert rng.wishart(5.0, np.eye(2), size=(3, 4)).shape == (3, 4, 2, 2)
    assert rng.wishart(np.array([3.0, 4.0]), np.eye(2)).shape == (2, 2, 2)
    assert rng.wishart(3.0, np.eye(2), size=(0,)).shape == (0, 2, 2)
    assert rng.wishart(3.0, np.eye(2, dtype=np.float32)).dtype == np.float32


def test_same_seed_same_draws_and_draws_are_keyed_by_the_generator():
    a = default_rng(5, backend="numpy").wishart(4.0, S3, size=10)
    b = default_rng(5, backend="numpy").wishart(4.0, S3, size=10)
    assert np.array_equal(a, b)
    rng = default_rng(5, backend="numpy")
    rng.wishart(4.0, S3)
    assert rng.offset == 2  # one gamma call and one normal call


def test_bad_arguments(xp):
    rng = default_rng(0, backend=xp.__name__)
    with pytest.raises(ValueError, match="df must be greater than p - 1 = 2"):
        rng.wishart(2.0, xp.asarray(S3))
    with pytest.raises(ValueError, match="df"):
        rng.wishart(xp.asarray([4.0, np.nan]), xp.asarray(S3))
    with pytest.raises(ValueError, match="positive definite"):
        rng.wishart(4.0, xp.asarray(-S3))
    with pytest.raises(ValueError, match="positive definite"):
        rng.invwishart(4.0, xp.asarray(np.diag([1.0, 0.0, 1.0])))
    asym = S3.copy()
    asym[0, 2] = 1.0
    with pytest.raises(ValueError, match="symmetric"):
        rng.wishart(4.0, xp.asarray(asym))
    with pytest.raises(ValueError, match="NaN"):
        rng.wishart(4.0, xp.asarray(S3 * np.nan))
    with pytest.raises(ValueError, match=r"\(\.\.\., p, p\)"):
        rng.wishart(4.0, xp.ones((2, 3)))


def test_validation_off_skips_the_df_and_symmetry_checks():
    rng = default_rng(0, backend="numpy")
    asym = S3.copy()
    asym[0, 2] = 1.0
    with gpumcmc.validation(False):
        w = rng.wishart(2.0, S3)  # df <= p - 1: a chi2 with zero degrees of freedom is NaN
        v = rng.wishart(4.0, asym)  # not symmetric: drawn without a word
    assert np.isnan(w).any()
    assert v.shape == (3, 3) and np.isfinite(v).all()


# ---------------------------------------------------------------- GPU only
@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-9), (np.float32, 2e-3)], ids=["f64", "f32"])
@pytest.mark.parametrize("inverse", [False, True], ids=["wishart", "invwishart"])
def test_gpu_wishart_equals_numpy(cp, dtype, rtol, inverse):
    # The mixture model's size: 4096 matrices of 14 x 14, each with its own df and scale.
    k, p = 4096, 14
    g = np.random.default_rng(1)
    b = g.standard_normal((k, p, p))
    scale = (b @ np.swapaxes(b, -1, -2) / p + np.eye(p)).astype(dtype)
    df = (p + g.uniform(0, 20, k)).astype(dtype)
    name = "invwishart" if inverse else "wishart"
    gpu = getattr(default_rng(9, backend="cupy"), name)(cp.asarray(df), cp.asarray(scale)).get()
    cpu = getattr(default_rng(9, backend="numpy"), name)(df, scale)
    assert gpu.dtype == dtype and gpu.shape == (k, p, p)
    # Same Bartlett factors; the matrices differ by the rounding of Cholesky, products
    # and solves, relative to each matrix's largest entry.
    err = np.abs(gpu.astype(np.float64) - cpu) / np.abs(cpu).max(axis=(1, 2), keepdims=True)
    assert np.quantile(err.max(axis=(1, 2)), 0.999) <= rtol
    assert np.isfinite(gpu).all()


def test_gpu_wishart_rejects_a_scale_that_is_not_positive_definite(cp):
    rng = default_rng(0, backend="cupy")
    bad = cp.asarray(np.stack([S3, -S3]))
    with pytest.raises(ValueError, match="positive definite"):
        rng.wishart(4.0, bad)


def test_invwishart_that_overflows_names_df():
    # df = p - 1 + 0.01: about 2.5% of the draws' last Bartlett chi-square underflow to 0, and NumPy's solve
    # raised a bare LinAlgError ("Singular matrix"); now a ValueError that says why and what df to use.
    with pytest.raises(ValueError, match=r"df >= p - 1 \+ 0\.1 "):
        default_rng(0, backend="numpy").invwishart(np.full(1000, 2.01), np.eye(3))
    # float32 underflows sooner (gamma(0.05) is 0 in about 0.6% of float32 draws): its own advice
    with pytest.raises(ValueError, match=r"df >= p - 1 \+ 0\.7, or draw in float64"):
        default_rng(0, backend="numpy").invwishart(np.full(1000, 2.1, np.float32), np.eye(3, dtype=np.float32),
                                                   dtype=np.float32)


def test_invwishart_never_returns_an_infinite_draw(xp):
    """A chi-square draw near, not at, zero made float32 inverse Wisharts of +-inf entries with only a warning
    (10 of 2,000 at df = p - 1 + 0.1); a draw that is not finite raises the ValueError that names df."""
    rng = default_rng(11, backend="numpy" if xp is np else "cupy")
    with pytest.raises(ValueError, match=r"df >= p - 1 \+ 0\.7, or draw in float64"):
        for _ in range(20):
            rng.invwishart(2.1, np.eye(3, dtype=np.float32), size=100)
