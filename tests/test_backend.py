"""Backend choice, array helpers, and the promise that import never needs CuPy."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gpumcmc
from gpumcmc import backend


def _run(code: str, **env) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **env}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=full_env, timeout=120)


# Makes `import cupy` fail in the child, as on a machine without CuPy.
_BLOCK_CUPY = "import sys; sys.modules['cupy'] = None\n"


def test_import_never_imports_cupy():
    r = _run("""
        import sys
        import gpumcmc, gpumcmc.random, gpumcmc.backend
        assert 'cupy' not in sys.modules, 'import gpumcmc imported cupy'
        print('ok')
    """)
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout


def test_import_and_numpy_fallback_with_cupy_unimportable():
    r = _run(_BLOCK_CUPY + textwrap.dedent("""
        import gpumcmc
        assert gpumcmc.backend_name() == 'numpy'
        x = gpumcmc.random.default_rng(0).random(4)
        assert type(x).__module__ == 'numpy'
        print('ok')
    """), GPUMCMC_BACKEND="auto")
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout


def test_asking_for_cupy_without_it_says_how_to_install():
    r = _run(_BLOCK_CUPY + "import gpumcmc\ngpumcmc.backend_name()\n", GPUMCMC_BACKEND="cupy")
    assert r.returncode != 0
    assert "BackendError" in r.stderr
    assert 'pip install "gpumcmc[cuda12]"' in r.stderr


def test_env_override_numpy(monkeypatch):
    """GPUMCMC_BACKEND=numpy gives NumPy even where CuPy sees a device (played here by cupy_available), where
    auto, the default, gives CuPy."""
    monkeypatch.setattr(backend, "cupy_available", lambda: True)
    monkeypatch.delenv("GPUMCMC_BACKEND", raising=False)
    assert backend.backend_name() == "cupy"
    for value in ("auto", " Auto "):
        monkeypatch.setenv("GPUMCMC_BACKEND", value)
        assert backend.backend_name() == "cupy"
    for value in ("numpy", " NumPy "):
        monkeypatch.setenv("GPUMCMC_BACKEND", value)
        assert backend.backend_name() == "numpy"
        assert backend.get_backend() is np


def test_env_override_rejects_unknown_value(monkeypatch):
    monkeypatch.setenv("GPUMCMC_BACKEND", "tpu")
    with pytest.raises(backend.BackendError, match="numpy, cupy"):
        backend.backend_name()


def test_array_helpers_on_numpy():
    a = np.arange(3.0)
    assert backend.get_array_module(a, 1.0) is np
    assert backend.to_host(a) is a
    assert not backend.is_cupy_array(a)


def test_array_helpers_on_cupy(cp):
    a = cp.arange(3.0)
    assert backend.get_array_module(np.ones(2), a) is cp
    h = backend.to_host(a)
    assert isinstance(h, np.ndarray) and h.tolist() == [0.0, 1.0, 2.0]
    d = backend.to_device(h)
    assert backend.is_cupy_array(d)
    assert backend.backend_name() == "cupy"


def test_to_host_later_on_numpy():
    a, b = np.arange(6.0).reshape(2, 3), np.int32(4)
    got = backend.to_host_later({"a": a, "b": b})()
    assert list(got) == ["a", "b"]
    np.testing.assert_array_equal(got["a"], a)
    assert got["b"] == 4 and isinstance(got["b"], np.ndarray)


def test_to_host_later_on_cupy(cp):
    # the copies wait for the work queued before the call (a long chain of kernels writing the arrays), and
    # the caller's later writes to other arrays do not reach them
    x = cp.zeros((1 << 22,), cp.float64)
    for _ in range(50):
        x += 1.0
    y = cp.arange(1000, dtype=cp.int32).reshape(10, 100)
    v = cp.moveaxis(cp.arange(24.0).reshape(2, 3, 4), 0, 1)  # a view that is not contiguous
    for _ in range(20):
        v += 1.0
    wait = backend.to_host_later({"x": x, "y": y, "h": np.ones(3), "v": v})
    z = x.copy()
    z += 7.0
    got = wait()
    assert list(got) == ["x", "y", "h", "v"]
    assert all(isinstance(a, np.ndarray) for a in got.values())
    np.testing.assert_array_equal(got["x"], np.full(1 << 22, 50.0))
    np.testing.assert_array_equal(got["y"], np.arange(1000).reshape(10, 100))
    np.testing.assert_array_equal(got["v"], np.moveaxis(np.arange(24.0).reshape(2, 3, 4), 0, 1) + 20.0)
    assert float(z[0]) == 57.0


def test_to_host_later_on_another_device(cp):
    # an array on a device that is not the current one: its event is recorded on its own device
    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs")
    with cp.cuda.Device(1):
        a = cp.arange(1 << 20, dtype=cp.float32)
        a *= 3.0
    got = backend.to_host_later({"a": a, "b": cp.ones(4)})()
    np.testing.assert_array_equal(got["a"], np.arange(1 << 20, dtype=np.float32) * 3.0)
    np.testing.assert_array_equal(got["b"], np.ones(4))


def test_info_command_prints_backend():
    """``python -m gpumcmc info`` prints one "name  value" line per entry: the versions of gpumcmc and NumPy
    and the backend in use (NumPy where GPUMCMC_BACKEND says so)."""
    r = subprocess.run([sys.executable, "-m", "gpumcmc", "info"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "GPUMCMC_BACKEND": "numpy"})
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(None, 1) for line in r.stdout.splitlines())
    assert lines["gpumcmc"] == gpumcmc.__version__ and lines["numpy"] == np.__version__
    assert lines["backend"] == "numpy" and "device" in lines


def test_info_and_show_versions_are_callable_from_the_package(capsys, monkeypatch):
    monkeypatch.setenv("GPUMCMC_BACKEND", "numpy")
    got = gpumcmc.info()
    assert got["gpumcmc"] == gpumcmc.__version__ and got["numpy"] == np.__version__
    gpumcmc.show_versions()
    lines = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert lines["gpumcmc"] == gpumcmc.__version__ and "device" in lines


def test_info_reports_an_unavailable_backend(monkeypatch):
    """With GPUMCMC_BACKEND=cupy and no usable CuPy, ``info`` is what a user runs to find out why: it says
    so in the backend line instead of raising before printing anything."""
    from gpumcmc import _info as info_mod

    def refuse():
        raise backend.BackendError("GPUMCMC_BACKEND=cupy was asked for, but CuPy is not importable")
    monkeypatch.setattr(backend, "backend_name", refuse)
    got = info_mod.info()
    assert got["backend"].startswith("unavailable (GPUMCMC_BACKEND=cupy") and got["gpumcmc"] == gpumcmc.__version__
