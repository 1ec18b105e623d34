"""NVTX ranges are no-ops without the nvtx package and on the NumPy backend."""

import sys

import numpy as np

from gpumcmc import _nvtx


def test_annotate_is_a_no_op_without_nvtx(monkeypatch):
    _nvtx._nvtx.cache_clear()
    monkeypatch.setitem(sys.modules, "nvtx", None)
    try:
        with _nvtx.annotate("gpumcmc.test", xp=object()):
            pass
        assert _nvtx._nvtx() is None
    finally:
        _nvtx._nvtx.cache_clear()


def test_numpy_work_is_not_annotated():
    ctx = _nvtx.annotate("gpumcmc.test", xp=np)
    with ctx:
        pass
    assert type(ctx).__name__ == "nullcontext"
