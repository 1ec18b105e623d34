"""Uniform and standard-normal fills: the CUDA launcher and its NumPy twin.

Element ``i`` of a fill at call offset ``off`` comes from Philox block
``i // P`` (``P`` = 4 for float32, 2 for float64), whichever backend runs:

========  ==================================  ===========================================
dtype     uniform                             normal
========  ==================================  ===========================================
float32   ``u01_f32(w[i % 4])``               Box-Muller on ``(w0, w1)`` and ``(w2, w3)``
                                              as 32-bit uniforms, in float64, rounded once
float64   ``u01_f64(w0, w1)``, ``(w2, w3)``   Box-Muller on the two 52-bit uniforms
========  ==================================  ===========================================

Standard exponentials (``kind="exponential"``) are ``-log(u)`` of the same
uniforms: 32-bit ones in float64, rounded once, for float32; 52-bit ones for
float64.
"""

from __future__ import annotations

import numpy as np

from .. import _loader
from ._philox import block_words, box_muller, philox_rounds, u01_f32, u01_f64, u01_f64_from32

FILE = "random_fill.cu"
_NAMES = (
    "fill_uniform<float>",
    "fill_uniform<double>",
    "fill_normal<float>",
    "fill_normal<double>",
    "fill_exponential<float>",
    "fill_exponential<double>",
)
_CTYPE = _loader.CTYPE
# Blocks per chunk on the CPU: bounds the temporaries to a few tens of MB.
_CHUNK = 1 << 18


def per_block(dtype) -> int:
    return 4 if np.dtype(dtype) == np.float32 else 2


def _twin_block(kind: str, dtype, words):
    w0, w1, w2, w3 = words
    if kind == "exponential":
        if dtype == np.float32:
            return np.stack([-np.log(u01_f64_from32(w)) for w in words], axis=1).astype(np.float32)
        return np.stack([-np.log(u01_f64(w0, w1)), -np.log(u01_f64(w2, w3))], axis=1)
    if kind == "uniform":
        if dtype == np.float32:
            return np.stack([u01_f32(w) for w in words], axis=1)
        return np.stack([u01_f64(w0, w1), u01_f64(w2, w3)], axis=1)
    if dtype == np.float32:
        z0, z1 = box_muller(u01_f64_from32(w0), u01_f64_from32(w1))
        z2, z3 = box_muller(u01_f64_from32(w2), u01_f64_from32(w3))
        return np.stack([z0, z1, z2, z3], axis=1).astype(np.float32)
    z0, z1 = box_muller(u01_f64(w0, w1), u01_f64(w2, w3))
    return np.stack([z0, z1], axis=1)


def fill_numpy(kind: str, n: int, dtype, key, offset: int) -> np.ndarray:
    """NumPy twin of ``fill_<kind><T>``: a flat array of ``n`` draws."""
    dtype = np.dtype(dtype)
    p = per_block(dtype)
    nb = -(-n // p)
    out = np.empty(nb * p, dtype=dtype)
    for start in range(0, nb, _CHUNK):
        count = min(_CHUNK, nb - start)
        vals = _twin_block(kind, dtype, block_words(start, count, key, offset))
        out[start * p:(start + count) * p] = vals.reshape(-1)
    return out[:n]


def fill_cupy(kind: str, n: int, dtype, key, offset: int):
    """Launch ``fill_<kind><T>``: a flat CuPy array of ``n`` draws."""
    import cupy

    dtype = np.dtype(dtype)
    out = cupy.empty(n, dtype=dtype)
    if n == 0:
        return out
    fn = _loader.get_function(FILE, f"fill_{kind}<{_CTYPE[dtype]}>", _NAMES)
    nb = -(-n // per_block(dtype))
    _loader.launch(
        fn, nb,
        (out, _loader.i64(n), *_loader.philox_args(key, offset)),
    )
    return out


def fill(xp, kind: str, n: int, dtype, key, offset: int):
    if xp is np:
        return fill_numpy(kind, n, dtype, key, offset)
    return fill_cupy(kind, n, dtype, key, offset)


def philox_words_gpu(counter, key):
    """CUDA side of :func:`gpumcmc.random.philox4x32` (inputs already broadcast)."""
    import cupy

    shape = counter.shape
    ctr = cupy.ascontiguousarray(counter.reshape(-1, 4))
    k = cupy.ascontiguousarray(key.reshape(-1, 2))
    out = cupy.empty_like(ctr)
    n = ctr.shape[0]
    if n:
        fn = _loader.get_function(FILE, "philox_words", _NAMES)
        _loader.launch(fn, n, (ctr, k, out, _loader.i64(n)))
    return out.reshape(shape)


def philox4x32(counter, key):
    """Philox4x32-10 of ``counter`` (uint32, shape (..., 4)) under ``key`` (uint32, shape (..., 2)).

    Leading axes broadcast against each other. Returns uint32 words of shape
    (..., 4). CuPy inputs run the CUDA kernel of ``kernels_cu/philox.cuh``;
    NumPy inputs run this module's twin, and both give the same words.

    Examples
    --------
    >>> import numpy as np
    >>> from gpumcmc.random import philox4x32
    >>> [f"{w:08x}" for w in philox4x32(np.zeros(4, np.uint32), np.zeros(2, np.uint32))]
    ['6627e8d5', 'e169c58d', 'bc57ac4c', '9b00dbd8']
    """
    from ..backend import get_array_module

    xp = get_array_module(counter, key)
    counter = xp.asarray(counter)
    key = xp.asarray(key)
    for name, a, last in (("counter", counter, 4), ("key", key, 2)):
        if a.dtype != np.uint32:
            raise TypeError(
                f"philox4x32 needs a uint32 {name}, got {a.dtype}; convert it with "
                f".astype(numpy.uint32) after checking the values fit in 32 bits."
            )
        if a.ndim < 1 or a.shape[-1] != last:
            raise ValueError(f"philox4x32 needs a {name} of shape (..., {last}), got {a.shape}.")
    shape = np.broadcast_shapes(counter.shape[:-1], key.shape[:-1])
    counter = xp.broadcast_to(counter, shape + (4,))
    key = xp.broadcast_to(key, shape + (2,))
    if xp is not np:
        return philox_words_gpu(counter, key)
    c = [counter[..., i].astype(np.uint64) for i in range(4)]
    out = philox_rounds(*c, key[..., 0].astype(np.uint64), key[..., 1].astype(np.uint64))
    return np.stack(out, axis=-1).astype(np.uint32)
