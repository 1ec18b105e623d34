"""Pickles of fitted models: host arrays only, no final sampler state, and loadable without a GPU.

CPU only. A GPU fit's arrays are stood in for by a NumPy subclass that the backend is told to treat as a
CuPy array (``_Dev``), so that the conversions run here; the GPU tests pickle real CuPy fits.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

from gpumcmc import backend as _backend
from gpumcmc.models import LDA, BayesianGLM, DPGaussianMixture
from gpumcmc.nested import NestedSampler


class _Dev(np.ndarray):
    """A NumPy array playing a CuPy one: ``to_host`` gives a plain ndarray of the same values."""

    def get(self):
        return np.asarray(self).view(np.ndarray).copy()


@pytest.fixture
def no_gpu_here(monkeypatch):
    """Arrays of class _Dev count as device arrays, and no GPU is available (a CPU machine loading them)."""
    monkeypatch.setattr(_backend, "is_cupy_array", lambda a: isinstance(a, _Dev))
    monkeypatch.setattr(_backend, "cupy_available", lambda: False)


def _glm():
    rs = np.random.default_rng(0)
    X = rs.normal(size=(4000, 3))
    y = (rs.random(4000) < 1 / (1 + np.exp(-X @ np.array([1.0, -1.0, 0.5])))).astype(float)
    return X, y, BayesianGLM(n_samples=30, n_warmup=10, random_state=0, progress=False, backend="numpy").fit(X, y)


def test_a_pickled_fit_leaves_out_the_final_sampler_state_and_predicts_the_same():
    X, y, m = _glm()
    state_bytes = len(pickle.dumps(m.trace_.state))
    blob = pickle.dumps(m)
    assert m.trace_.state is not None                       # the fitted object itself keeps it
    assert len(blob) < state_bytes / 4                       # eta (chains x rows) dominated the pickle
    back = pickle.loads(blob)
    assert back.trace_.state is None
    assert any(g.startswith("gpumcmc") for g in _globals(blob))   # the helper below reads class names
    np.testing.assert_array_equal(back.predict_proba(X), m.predict_proba(X))
    np.testing.assert_array_equal(back.coef_draws_, m.coef_draws_)
    assert back.trace_.draws.keys() == m.trace_.draws.keys()


def test_device_arrays_come_back_as_host_arrays_where_no_gpu_is(no_gpu_here):
    X = np.random.default_rng(1).poisson(0.3, size=(30, 40))
    m = LDA(n_components=3, n_iter=20, burn_in=10, random_state=0, progress=False, backend="numpy").fit(X)
    ref = m.transform(X)
    m.phi_ = m.phi_.view(_Dev)                               # as a GPU fit leaves it
    m.backend = "cupy"
    with pytest.warns(UserWarning, match="backend='numpy'"):
        back = pickle.loads(pickle.dumps(m))
    assert type(back.phi_) is np.ndarray and "_device_attrs" not in vars(back)
    assert back.backend == "numpy"
    np.testing.assert_array_equal(back.transform(X), ref)


def test_device_arrays_go_back_to_the_gpu_where_one_is(monkeypatch):
    moved = []
    X = np.random.default_rng(2).normal(size=(300, 2))
    m = DPGaussianMixture(n_components=4, n_iter=20, burn_in=5, random_state=0, progress=False,
                          backend="numpy").fit(X)
    monkeypatch.setattr(_backend, "is_cupy_array", lambda a: isinstance(a, _Dev))
    monkeypatch.setattr(_backend, "cupy_available", lambda: True)
    monkeypatch.setattr(_backend, "get_backend", lambda name=None: type("cp", (), {
        "asarray": staticmethod(lambda a: moved.append(a.shape) or np.asarray(a).view(_Dev))}))
    m.means_ = m.means_.view(_Dev)
    m._point_params = {("cupy", "float64", 0): (m.means_,)}  # a predict's cache: not pickled
    back = pickle.loads(pickle.dumps(m))
    assert type(back.means_) is _Dev and moved == [m.means_.shape]
    assert back._point_params == {}


def _gauss_loglike(x):
    return -0.5 * (x ** 2).sum(axis=1)


def _box(u):
    return 10.0 * u - 5.0


def test_a_nested_sampler_made_for_the_gpu_loads_and_gives_its_results_on_a_cpu(no_gpu_here):
    s = NestedSampler(_gauss_loglike, _box, 2, nlive=100, n_runs=2, n_replace=20, random_state=0, progress=False,
                      backend="numpy", max_iter=200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s.run()
    logz = s.results.logz
    s.backend = "cupy"
    with pytest.warns(UserWarning, match="runs on NumPy"):
        back = pickle.loads(pickle.dumps(s))
    np.testing.assert_array_equal(back.results.logz, logz)
    assert getattr(back, "_live", None) is None


def test_a_gpu_fit_pickles_to_host_arrays_and_comes_back_to_the_gpu(cp, monkeypatch):
    X = np.random.default_rng(3).poisson(0.3, size=(40, 50))
    m = LDA(n_components=3, n_iter=20, burn_in=10, random_state=0, progress=False, backend="cupy").fit(X)
    assert _backend.is_cupy_array(m.phi_) and _backend.is_cupy_array(m.trace_.state.phi)
    ref = m.transform(X)
    blob = pickle.dumps(m)
    back = pickle.loads(blob)                                # a GPU here: phi_ goes back to it
    assert _backend.is_cupy_array(back.phi_) and back.trace_.state is None
    np.testing.assert_array_equal(back.transform(X), ref)
    monkeypatch.setattr(_backend, "cupy_available", lambda: False)
    with pytest.warns(UserWarning, match="runs on NumPy"):   # as on a machine without a GPU
        host = pickle.loads(blob)
    assert type(host.phi_) is np.ndarray and host.backend == "numpy"
    np.testing.assert_array_equal(host.phi_, _backend.to_host(m.phi_))
    # the pickle is read without CuPy: no CuPy class is named inside it
    assert not [g for g in _globals(blob) if g.startswith("cupy")]


def _globals(blob: bytes) -> list:
    """The modules of the classes and functions a pickle names (``STACK_GLOBAL`` takes the two strings
    pushed before it)."""
    import pickletools

    out, strings = [], []
    for op, arg, _ in pickletools.genops(blob):
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
            strings.append(arg)
        elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
            out.append(strings[-2])
        elif op.name == "GLOBAL":
            out.append(arg.split(" ")[0])
    return out


def test_pickles_keep_no_second_copy_of_an_array_they_can_make_again():
    """LDA's components_ is phi_.T and BayesianGLM's coef_draws_ a view of trace_'s draws: a pickle kept each
    twice (0.8 GB for 0.4 at 100,000 words and 1,024 topics); they are made again on load, equal, and the
    loaded models predict as the fitted ones."""
    from gpumcmc.models import LDA, BayesianGLM

    rs = np.random.default_rng(0)
    X = rs.poisson(0.3, size=(40, 300))
    lda = LDA(n_components=8, n_iter=4, burn_in=2, random_state=0, progress=False, backend="numpy").fit(X)
    Xg = rs.normal(size=(50, 40))
    glm = BayesianGLM(n_samples=400, n_warmup=10, random_state=0, progress=False, backend="numpy").fit(
        Xg, (rs.random(50) < 0.5).astype(float))
    back_of = {}
    for m, name in ((lda, "components_"), (glm, "coef_draws_")):
        assert name not in m.__getstate__()
        back = back_of[name] = pickle.loads(pickle.dumps(m))
        np.testing.assert_array_equal(getattr(back, name), getattr(m, name))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(glm)).predict_mean(Xg), glm.predict_mean(Xg))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(lda)).perplexity(X), lda.perplexity(X))
    # set by hand to something else (thinned draws, other topics, another dtype, a list), each is pickled as it is
    for value_of in (lambda a: a[:, -5:] if a.ndim == 3 else a * 2, lambda a: a.astype(np.float16), np.ndarray.tolist):
        for m, name in ((lda, "components_"), (glm, "coef_draws_")):
            setattr(m, name, value_of(np.asarray(getattr(back_of[name], name))))
            assert name in m.__getstate__()
            got = getattr(pickle.loads(pickle.dumps(m)), name)
            assert type(got) is type(getattr(m, name))
            np.testing.assert_array_equal(np.asarray(got), np.asarray(getattr(m, name)))
            assert np.asarray(got).dtype == np.asarray(getattr(m, name)).dtype
