"""Deferred value checks: ``gpumcmc.deferred_validation()`` and ``gpumcmc.check()``.

Inside a deferred block a check on CuPy data records its verdict on the device
and the call returns without waiting for the GPU; ``check()`` raises the first
recorded failure. The GPU tests prove "no host sync" by queueing a kernel that
spins for about a second before the call: had the call synchronised, the
stream would be idle when it returns.
"""

import numpy as np
import pytest

import gpumcmc
from gpumcmc import _validate
from gpumcmc.random import default_rng


def test_names_are_public():
    assert gpumcmc.check is _validate.check
    assert gpumcmc.deferred_validation is _validate.deferred


def test_deferred_is_reentrant_and_check_is_cheap_on_numpy():
    assert not _validate.deferring()
    with _validate.deferred():
        with _validate.deferred():
            assert _validate.deferring()
        assert _validate.deferring()
        assert _validate.check() is None
    assert not _validate.deferring()
    assert gpumcmc.check() is None


@pytest.mark.parametrize("call, message", [
    (lambda: gpumcmc.categorical(np.array([[1.0, np.nan]]), 0), r"weights row 0 contains NaN"),
    (lambda: gpumcmc.categorical(np.array([[1.0, -1.0]]), 0), r"weights must be non-negative"),
    (lambda: gpumcmc.categorical(np.zeros((2, 3)), 0), r"weights row 0 has no positive weight"),
    (lambda: gpumcmc.categorical_products(np.ones((2, 3)), np.ones((4, 3)), np.array([0, 2]), np.array([1, 1]), 0),
     r"rows must lie in \[0, 2\)"),
    (lambda: default_rng(0).gamma(np.array([1.0, -1.0])), r"shape must be positive"),
    (lambda: default_rng(0).dirichlet(np.array([1.0, 0.0])), r"alpha must be positive"),
])
def test_numpy_raises_at_once_even_when_deferred(call, message):
    # The message says which check caught the input: with the NaN check dropped a NaN row still raised
    # (its total is not finite), naming the wrong cause.
    with gpumcmc.deferred_validation():
        with pytest.raises(ValueError, match=message):
            call()
    assert gpumcmc.check() is None


# --- GPU: no host sync in deferred mode, errors surface at check() ------------------------------------

_SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""


def _busy(cp, seconds=1.0):
    """Queue a one-thread kernel that keeps the current stream busy for about ``seconds``."""
    k = cp.RawKernel(_SPIN, "spin")
    rate = cp.cuda.runtime.deviceGetAttribute(cp.cuda.runtime.cudaDevAttrClockRate, 0) * 1000  # Hz
    k((1,), (1,), (np.int64(seconds * rate),))


def _calls(cp):
    w = cp.random.rand(4096, 64).astype(cp.float32)
    theta = cp.random.rand(64, 32).astype(cp.float32)
    phi = cp.random.rand(128, 32).astype(cp.float32)
    rows = cp.arange(5000, dtype=cp.int32) % 64
    cols = cp.arange(5000, dtype=cp.int32) % 128
    shape = cp.random.rand(1 << 16).astype(cp.float32) + 0.1
    alpha = cp.random.rand(256, 16).astype(cp.float32) + 0.1
    rng = default_rng(1)
    return {
        "categorical": lambda: gpumcmc.categorical(w, rng),
        "categorical_logits": lambda: gpumcmc.categorical_logits(w, rng),
        "categorical_products": lambda: gpumcmc.categorical_products(theta, phi, rows, cols, rng),
        "gamma": lambda: rng.gamma(shape),
        "dirichlet": lambda: rng.dirichlet(alpha),
    }


@pytest.mark.parametrize("name", ["categorical", "categorical_logits", "categorical_products", "gamma",
                                  "dirichlet"])
@pytest.mark.parametrize("mode", ["deferred", "off"])
def test_no_host_sync(cp, name, mode):
    call = _calls(cp)[name]
    call()  # compile and warm the pools outside the measured call
    cp.cuda.get_current_stream().synchronize()
    _busy(cp)
    if mode == "deferred":
        with gpumcmc.deferred_validation():
            call()
    else:
        with gpumcmc.validation(False):
            call()
    still_busy = not cp.cuda.get_current_stream().done
    cp.cuda.get_current_stream().synchronize()
    gpumcmc.check()
    assert still_busy, f"{name} waited for the GPU in {mode} mode"


def test_deferred_errors_surface_at_check(cp):
    w = cp.ones((8, 4), cp.float32)
    w[5, 2] = cp.nan
    rng = default_rng(2)
    with gpumcmc.deferred_validation():
        gpumcmc.categorical(cp.ones((8, 4), cp.float32), rng)   # good call
        out = gpumcmc.categorical(w, rng)                        # bad call: no error yet
        with pytest.raises(ValueError, match="flat index 5"):
            gpumcmc.check()
    assert int(out[5]) == -1  # the bad row's draw is the sentinel
    assert gpumcmc.check() is None  # check() forgets what it reported


@pytest.mark.parametrize("kind", ["nan", "negative", "zero_row", "index"])
def test_deferred_catches_each_kind(cp, kind):
    rng = default_rng(3)
    theta = cp.ones((4, 8), cp.float32)
    phi = cp.ones((6, 8), cp.float32)
    rows = cp.array([0, 1, 2, 3], cp.int32)
    cols = cp.array([0, 1, 2, 3], cp.int32)
    if kind == "nan":
        theta[2, 1] = cp.nan
    elif kind == "negative":
        phi[1, 0] = -1
    elif kind == "zero_row":
        theta[3] = 0
    else:
        cols[1] = 6
    with gpumcmc.deferred_validation():
        gpumcmc.categorical_products(theta, phi, rows, cols, rng)
        with pytest.raises(ValueError):
            gpumcmc.check()
    # And directly, the same input raises at the call.
    with pytest.raises(ValueError):
        gpumcmc.categorical_products(theta, phi, rows, cols, rng)


@pytest.mark.parametrize("kind", ["gamma", "dirichlet"])
def test_deferred_catches_bad_shapes(cp, kind):
    rng = default_rng(4)
    a = cp.ones(100, cp.float32)
    a[7] = -1 if kind == "gamma" else 0
    with gpumcmc.deferred_validation():
        if kind == "gamma":
            rng.gamma(a)
        else:
            rng.dirichlet(a.reshape(10, 10))
        with pytest.raises(ValueError):
            gpumcmc.check()


@pytest.mark.parametrize("name", ["categorical", "categorical_logits", "categorical_products", "gamma",
                                  "dirichlet"])
def test_direct_call_syncs_once_at_the_end(cp, name, monkeypatch):
    """A direct call reads its checks once: the GPU is still busy when that read starts."""
    call = _calls(cp)[name]
    call()
    cp.cuda.get_current_stream().synchronize()
    from gpumcmc import _status

    seen = []
    real = _status.read_all

    def counting_read():
        seen.append(not cp.cuda.get_current_stream().done)
        return real()

    monkeypatch.setattr(_status, "read_all", counting_read)
    _busy(cp)
    call()
    assert seen == [True], f"{name}: {len(seen)} reads of the checks, GPU busy at each: {seen}"


def test_direct_call_keeps_its_detailed_message(cp):
    w = cp.ones((8, 4), cp.float32)
    w[5] = 0
    with pytest.raises(ValueError, match="row 5 has no positive weight"):
        gpumcmc.categorical(w, default_rng(5))


def test_numpy_direct_call_never_reads_a_word(monkeypatch):
    from gpumcmc import _status

    seen = []
    monkeypatch.setattr(_validate, "check", lambda: seen.append("check"))
    monkeypatch.setattr(_status.Word, "read", lambda self: seen.append("read"))
    before = _status.syncs
    gpumcmc.categorical(np.ones((3, 4)), 0)
    default_rng(0).gamma(np.ones(5))
    default_rng(0).dirichlet(np.ones((2, 3)))
    # Nothing was recorded (NumPy checks raise at once), so there is nothing to read or wait for.
    assert seen == [] and _status.syncs == before


def test_products_out_of_range_index_gives_minus_one_with_validation_off(xp):
    theta = xp.ones((3, 4))
    phi = xp.ones((5, 4))
    rows = xp.asarray([0, 3, 1, -1, 2])
    cols = xp.asarray([0, 1, 5, 2, 4])
    with gpumcmc.validation(False):
        z = gpumcmc.to_host(gpumcmc.categorical_products(theta, phi, rows, cols, default_rng(6)))
    assert list(z[[1, 2, 3]]) == [-1, -1, -1]
    assert (z[[0, 4]] >= 0).all()
    with pytest.raises(ValueError, match="rows must lie"):
        gpumcmc.categorical_products(theta, phi, rows, cols, default_rng(6))


def test_generator_categorical_is_gpumcmc_categorical(xp):
    w = xp.asarray(np.random.default_rng(0).random((50, 7)))
    a = gpumcmc.to_host(default_rng(9).categorical(w))
    b = gpumcmc.to_host(gpumcmc.categorical(w, default_rng(9)))
    np.testing.assert_array_equal(a, b)
    la = gpumcmc.to_host(default_rng(9).categorical_logits(xp.log(w)))
    lb = gpumcmc.to_host(gpumcmc.categorical_logits(xp.log(w), default_rng(9)))
    np.testing.assert_array_equal(la, lb)


# --- the status word: checks fused into the kernels ----------------------------------------------------

def _more_calls(cp):
    calls = _calls(cp)
    rng = default_rng(11)
    a = cp.random.rand(1 << 14).astype(cp.float64) + 0.5
    calls["beta"] = lambda: rng.beta(a, a)
    calls["gamma_scale_array"] = lambda: rng.gamma(a, a)
    for method in ("prefix", "transpose", "butterfly", "warp"):
        w = cp.random.rand(3000, 40).astype(cp.float64)
        calls[f"categorical_{method}"] = lambda w=w, m=method: gpumcmc.categorical(w, rng, method=m)
    return calls


@pytest.mark.parametrize("name", ["categorical", "categorical_logits", "categorical_products", "gamma",
                                  "dirichlet", "beta", "gamma_scale_array", "categorical_prefix",
                                  "categorical_transpose", "categorical_butterfly", "categorical_warp"])
def test_direct_call_waits_once_and_only_to_read_its_word(cp, name, monkeypatch):
    """A direct call with validation on makes exactly one host wait: the read of its status word.

    The GPU is kept busy before the call; the checks are read while it is still
    busy (so nothing waited before), and exactly one wait happens in all.
    """
    from gpumcmc import _status

    call = _more_calls(cp)[name]
    call()
    cp.cuda.get_current_stream().synchronize()
    busy_at_read = []
    real = _status.Word.read

    def read(self):
        busy_at_read.append(not cp.cuda.get_current_stream().done)
        return real(self)

    monkeypatch.setattr(_status.Word, "read", read)
    before = _status.syncs
    _busy(cp)
    call()
    assert _status.syncs - before == 1, f"{name}: {_status.syncs - before} waits"
    assert busy_at_read == [True], f"{name}: the word was read {len(busy_at_read)} times, GPU busy: {busy_at_read}"


@pytest.mark.parametrize("mode", ["deferred", "off"])
def test_no_wait_at_all_when_deferred_or_off(cp, mode):
    from gpumcmc import _status

    calls = _more_calls(cp)
    for call in calls.values():
        call()
    cp.cuda.get_current_stream().synchronize()
    before = _status.syncs
    _busy(cp)
    ctx = gpumcmc.deferred_validation() if mode == "deferred" else gpumcmc.validation(False)
    with ctx:
        for call in calls.values():
            call()
    assert not cp.cuda.get_current_stream().done
    assert _status.syncs == before
    gpumcmc.check()  # nothing bad was drawn: no error, one wait in deferred mode, none with validation off
    assert _status.syncs - before == (1 if mode == "deferred" else 0)


@pytest.mark.parametrize("method", ["prefix", "transpose", "butterfly", "warp"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind,value,message", [
    ("nan", np.nan, "weights row 1000 contains NaN"),
    ("inf", np.inf, "weights row 1000 contains inf"),
    ("neg", -2.0, "weights must be non-negative; row 1000"),
    ("neg_inf", -np.inf, "weights must be non-negative; row 1000"),
    ("zero", 0.0, "weights row 1000 has no positive weight"),
])
def test_fused_checks_name_the_first_bad_row(cp, method, dtype, kind, value, message):
    w = cp.random.rand(4000, 300).astype(dtype) + 0.01
    if kind == "zero":
        w[1000] = 0
        w[3001] = 0
    else:
        w[1000, 77] = value
        w[3001, 5] = value  # a later bad row: the first one is named
    with pytest.raises(ValueError, match=message):
        gpumcmc.categorical(w, default_rng(0), method=method)
    with gpumcmc.deferred_validation():
        gpumcmc.categorical(cp.ones((5, 3), dtype), default_rng(0), method=method)
        gpumcmc.categorical(w, default_rng(0), method=method)
        with pytest.raises(ValueError, match=message + r".*flat index 1000.*call 2 of the 2"):
            gpumcmc.check()
    with gpumcmc.validation(False):
        z = gpumcmc.categorical(w, default_rng(0), method=method)
    if kind != "neg":
        assert int(z[1000]) == -1 and int(z[3001]) == -1


@pytest.mark.parametrize("method", ["prefix", "transpose", "butterfly", "warp"])
def test_fused_checks_of_products(cp, method):
    theta = cp.random.rand(50, 64).astype(cp.float32)
    phi = cp.random.rand(70, 64).astype(cp.float32)
    rows = cp.arange(2000, dtype=cp.int32) % 50
    cols = cp.arange(2000, dtype=cp.int32) % 70
    r = default_rng(1)
    bad_rows = rows.copy()
    bad_rows[1500] = 50
    with pytest.raises(ValueError, match=r"rows must lie in \[0, 50\); token 1500"):
        gpumcmc.categorical_products(theta, phi, bad_rows, cols, r, method=method)
    bad_cols = cols.copy()
    bad_cols[7] = -3
    with pytest.raises(ValueError, match=r"cols must lie in \[0, 70\); token 7"):
        gpumcmc.categorical_products(theta, phi, rows, bad_cols, r, method=method)
    ph = phi.copy()
    ph[int(cols[300]), 9] = -1  # that phi row (20) is first read by token 20
    with pytest.raises(ValueError, match=r"phi must be non-negative.*t = 20 "):
        gpumcmc.categorical_products(theta, ph, rows, cols, r, method=method)
    th = theta.copy()
    th[int(rows[40])] = 0  # token 40 is the first to read the zero row
    with pytest.raises(ValueError, match=r"token t = 40 has no positive weight"):
        gpumcmc.categorical_products(th, phi, rows, cols, r, method=method)
    with gpumcmc.validation(False):
        z = gpumcmc.categorical_products(theta, phi, bad_rows, bad_cols, r, method=method)
    assert int(z[1500]) == -1 and int(z[7]) == -1 and int((z >= 0).sum()) == 1998


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_checks_of_gamma_beta_dirichlet(cp, dtype):
    r = default_rng(2)
    n = 1 << 20  # large enough for the counter kernel
    for bad in (0.0, -1.0, np.nan, np.inf):
        a = cp.full(n, 1.5, dtype)
        a[123457] = bad
        a[900000] = bad
        with pytest.raises(ValueError, match=r"^shape must be positive and finite.*flat index 123457"):
            r.gamma(a)
        with pytest.raises(ValueError, match=r"^shape must be positive.*flat index 123457"):
            r.gamma(a, size=(4, n))
        with pytest.raises(ValueError, match=r"^scale must be positive.*flat index 123457"):
            r.gamma(cp.ones(n, dtype), a)
        with pytest.raises(ValueError, match=r"^scale must be positive.*flat index 123457"):
            r.gamma(cp.ones(n, dtype), a, log=True)
        with pytest.raises(ValueError, match=r"^a must be positive.*flat index 123457"):
            r.beta(a, 2.0)
        with pytest.raises(ValueError, match=r"^b must be positive.*flat index 123457"):
            r.beta(2.0, a)
        with pytest.raises(ValueError, match=r"^alpha must be positive.*index \(482, 65\)"):
            r.dirichlet(a[: 4096 * 256].reshape(4096, 256))
        with gpumcmc.validation(False):
            g = r.gamma(a)
        assert bool(cp.isnan(g[123457])) and bool(cp.isnan(g[900000]))
        assert int(cp.isnan(g).sum()) == 2


def test_generator_categorical_products_is_gpumcmc_categorical_products(xp):
    theta = xp.asarray(np.random.default_rng(1).random((6, 5)))
    phi = xp.asarray(np.random.default_rng(2).random((9, 5)))
    rows = xp.asarray(np.arange(40) % 6)
    cols = xp.asarray(np.arange(40) % 9)
    a = gpumcmc.to_host(default_rng(3).categorical_products(theta, phi, rows, cols))
    b = gpumcmc.to_host(gpumcmc.categorical_products(theta, phi, rows, cols, default_rng(3)))
    np.testing.assert_array_equal(a, b)
