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

from .. import _kernel_args, _loader
from .._config import config, forward
from ._philox import Words, box_muller_into, philox32, philox_rounds, u01_f32_into, u01_f64_from32_into

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
# Blocks per chunk of the NumPy twin, config.fill_twin_chunk: its scratch arrays (about 60 bytes a
# block) stay in cache.
forward(__name__, {"_CHUNK": "fill_twin_chunk"})


def per_block(dtype) -> int:
    return 4 if np.dtype(dtype) == np.float32 else 2


def _twin_chunk(kind: str, dtype, words, out, scratch) -> None:
    """The draws of one chunk of Philox blocks into ``out``, ``per_block(dtype)`` a block:
    ``words`` holds the blocks' uint32 words, or for float64 their two uniforms."""
    n = words[0].size
    u1, u2, tmp, z = (a[:n] for a in scratch)
    if dtype == np.float32:
        if kind == "uniform":
            for k, w in enumerate(words):
                u01_f32_into(w, out[k::4])
        elif kind == "exponential":
            for k, w in enumerate(words):
                np.log(u01_f64_from32_into(w, u1), out=u1)
                np.negative(u1, out=out[k::4], casting="same_kind")
        else:  # two Box-Muller pairs, in float64, rounded once
            for k, (a, b) in enumerate((words[:2], words[2:])):
                r, z = box_muller_into(u01_f64_from32_into(a, u1), u01_f64_from32_into(b, u2), z, tmp)
                np.multiply(r, z.real, out=out[2 * k::4], casting="same_kind")
                np.multiply(r, z.imag, out=out[2 * k + 1::4], casting="same_kind")
        return
    ua, ub = words  # u01_f64(w0, w1), u01_f64(w2, w3)
    if kind == "uniform":
        out[0::2], out[1::2] = ua, ub
    elif kind == "exponential":
        np.log(ua, out=ua)
        np.log(ub, out=ub)
        np.negative(ua, out=out[0::2])
        np.negative(ub, out=out[1::2])
    else:
        r, z = box_muller_into(ua, ub, z, tmp)
        np.multiply(r, z.real, out=out[0::2])
        np.multiply(r, z.imag, out=out[1::2])


def fill_numpy(kind: str, n: int, dtype, key, offset: int) -> np.ndarray:
    """NumPy twin of ``fill_<kind><T>``: a flat array of ``n`` draws.

    Goes through the blocks in chunks of ``config.fill_twin_chunk`` (a power of two, so that
    no chunk straddles a change of the counter's high word) with one set of
    scratch arrays, which stay in cache.
    """
    dtype = np.dtype(dtype)
    p = per_block(dtype)
    nb = -(-n // p)
    out = np.empty(nb * p, dtype=dtype)
    size = min(config.fill_twin_chunk, nb)
    work = Words(size)
    scratch = (np.empty(size), np.empty(size), np.empty(size), np.empty(size, dtype=np.complex128))
    idx = np.arange(size, dtype=np.uint32)
    off_lo, off_hi = offset & 0xFFFFFFFF, (offset >> 32) & 0xFFFFFFFF
    with np.errstate(all="ignore"):
        for start in range(0, nb, config.fill_twin_chunk):
            count = min(config.fill_twin_chunk, nb - start)
            c0 = np.add(idx[:count], np.uint32(start & 0xFFFFFFFF))
            words = philox32(c0, start >> 32, off_lo, off_hi, key[0], key[1], work, count,
                             u01=(scratch[0][:count], scratch[1][:count]) if dtype == np.float64 else None)
            _twin_chunk(kind, dtype, words, out[start * p:(start + count) * p], scratch)
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
    name = "fill_uniform" if kind == "uniform" else "fill_normal" if kind == "normal" else "fill_exponential"
    _loader.launch(fn, nb, _kernel_args.args(FILE, name, out=out, n=_loader.i64(n),
                                             **_kernel_args.philox_dev(key, offset)))
    return out


def fill(xp, kind: str, n: int, dtype, key, offset: int):
    if xp is np:
        return fill_numpy(kind, n, dtype, key, offset)
    return fill_cupy(kind, n, dtype, key, offset)


# Elements per pass of uniform_at, config.fill_at_chunk: its counters and words take about 40 bytes
# an element.
forward(__name__, {"_AT_CHUNK": "fill_at_chunk"})


def uniform_at(xp, elements, dtype, key, offset: int):
    """Elements ``elements`` (non-negative integers, any shape) of ``fill(xp, "uniform", n, dtype, key,
    offset)`` for any ``n`` beyond them, without drawing the rest: a part of a larger call's uniforms
    (a shard's cells or tokens), on ``xp``. Element ``e`` is word ``e % p`` of Philox block ``e // p``,
    ``p = per_block(dtype)`` (float64: the pair of words 2 (e % 2), 2 (e % 2) + 1)."""
    from . import _philox

    dtype = np.dtype(dtype)
    e_all = xp.asarray(elements).astype(np.uint64)
    out = xp.empty(e_all.shape, dtype=dtype)
    flat, res = e_all.reshape(-1), out.reshape(-1)
    p = np.uint64(per_block(dtype))
    k = xp.asarray(np.array(key, dtype=np.uint32))
    for a in range(0, flat.size, config.fill_at_chunk):
        e = flat[a:a + config.fill_at_chunk]
        blk = e // p
        ctr = xp.stack([blk & np.uint64(0xFFFFFFFF), blk >> np.uint64(32), xp.full_like(blk, offset & 0xFFFFFFFF),
                        xp.full_like(blk, (offset >> 32) & 0xFFFFFFFF)], axis=-1).astype(np.uint32)
        w = philox4x32(ctr, k).astype(np.uint64)
        j = (e % p).astype(np.int64)[:, None]
        if dtype == np.float32:
            res[a:a + e.size] = _philox.u01_f32(xp.take_along_axis(w, j, axis=1)[:, 0])
        else:
            res[a:a + e.size] = _philox.u01_f64(xp.take_along_axis(w, 2 * j, axis=1)[:, 0],
                                                xp.take_along_axis(w, 2 * j + 1, axis=1)[:, 0])
    return out


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
        _loader.launch(fn, n, _kernel_args.args(FILE, "philox_words", ctr=ctr, key=k, out=out, n=_loader.i64(n)))
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
