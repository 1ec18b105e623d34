"""Shared fixtures: the ``xp`` backend fixture and GPU markers.

Every backend-agnostic test takes ``xp`` and runs once on NumPy and, where
CuPy sees a CUDA device, once more on CuPy (marked ``gpu``). On machines
without a GPU the CuPy case is skipped with a reason, never failed.

Statistical tests state their false-failure budget: each such test asserts
at significance ``ALPHA`` per check and says how many checks it makes.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpumcmc import backend

# Per-check significance for statistical tests. With fixed seeds a test
# either always passes or always fails; ALPHA bounds the chance that a seed
# chosen before looking at the outcome lands in the rejection region.
ALPHA = 1e-4

_NO_GPU = "needs CuPy and a CUDA device"


def gpu_available() -> bool:
    return backend.cupy_available()


requires_gpu = pytest.mark.skipif(not gpu_available(), reason=_NO_GPU)


@pytest.fixture(
    params=[
        pytest.param("numpy", id="numpy"),
        pytest.param("cupy", id="cupy", marks=[pytest.mark.gpu, requires_gpu]),
    ]
)
def xp(request):
    """The array module under test: ``numpy``, and ``cupy`` where a GPU is present."""
    return backend.get_backend(request.param)


@pytest.fixture
def cp():
    """CuPy, for tests that compare the GPU with the NumPy twin (skips without a GPU)."""
    if not gpu_available():
        pytest.skip(_NO_GPU)
    return backend.get_backend("cupy")


def to_np(a):
    return backend.to_host(a)


def max_ulp_diff(a, b) -> int:
    """Largest distance in units in the last place between two float arrays of one dtype."""
    a = np.ascontiguousarray(to_np(a))
    b = np.ascontiguousarray(to_np(b))
    it = np.int32 if a.dtype == np.float32 else np.int64
    ia = a.view(it).astype(np.int64)
    ib = b.view(it).astype(np.int64)
    # Map the sign-magnitude float order onto a monotone integer line.
    sign = np.int64(np.iinfo(it).min)
    ia = np.where(ia < 0, sign - ia, ia)
    ib = np.where(ib < 0, sign - ib, ib)
    return int(np.max(np.abs(ia - ib))) if a.size else 0


def pytest_collection_modifyitems(config, items):
    # Tests that take the `cp` fixture are GPU tests: `pytest -m gpu` selects them.
    for item in items:
        if "cp" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.gpu)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    # One line for the skips (`-rfE` lists failures and errors only): most are
    # the CuPy cases of a machine without a GPU; `-rs` lists each.
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    reasons: dict[str, int] = {}
    for rep in skipped:
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    top = sorted(reasons.items(), key=lambda kv: -kv[1])
    gpu = reasons.get(_NO_GPU, 0)
    detail = f"{gpu} need a GPU, {len(skipped) - gpu} for other reasons" if gpu else \
        f"most often: {top[0][0]} ({top[0][1]})"
    terminalreporter.write_line(f"{len(skipped)} tests skipped ({detail}); pass -rs to list them.")


def thread_rank(rank, world, slots, barrier):
    """Rank ``rank`` of ``world`` processes of a Dask cluster, played by a thread: a one-shard
    :class:`gpumcmc.shards.Shards` on NumPy whose all-reduce meets the other ranks' threads at
    ``barrier`` (``slots``: a list of ``world`` entries shared by the threads)."""
    from gpumcmc.shards import Shards

    class Rank(Shards):
        def __init__(self):
            self.devices, self.world, self._rank0, self.xp, self._comms = [None], world, rank, np, None

        def allreduce(self, arrays):
            slots[self._rank0] = arrays[0].copy()
            barrier.wait()
            total = np.sum(np.stack(slots), axis=0, dtype=arrays[0].dtype)
            barrier.wait()
            arrays[0][...] = total
            return arrays

    return Rank()


def fit_as_ranks(fit, world: int = 2) -> list:
    """``fit(shards)`` in ``world`` threads, each holding :func:`thread_rank` ``r`` of ``world``; their results.

    The ranks' all-reduces meet at one barrier; an exception in any thread aborts
    the barrier (so no rank waits forever) and fails the caller."""
    import threading

    slots, barrier = [None] * world, threading.Barrier(world, timeout=60)
    fits, errors = [None] * world, []

    def work(r):
        try:
            fits[r] = fit(thread_rank(r, world, slots, barrier))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return fits


def glm_data(family, N=60, K=3, seed=0):
    """(X, y): N rows of K standard-normal covariates and a response of ``family`` drawn from a GLM with
    coefficients N(0, 0.25) (sigma 0.7 for "gaussian")."""
    rs = np.random.default_rng(seed)
    X = rs.normal(size=(N, K))
    eta = X @ (rs.normal(size=K) * 0.5)
    if family == "bernoulli":
        y = (rs.random(N) < 1 / (1 + np.exp(-eta))).astype(float)
    elif family == "poisson":
        y = rs.poisson(np.exp(eta)).astype(float)
    else:
        y = eta + rs.normal(size=N) * 0.7
    return X, y
