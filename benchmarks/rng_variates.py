"""Gamma and Dirichlet variates with per-element parameters: gpumcmc against
cupy.random, PyTorch and JAX.

Floors: a gamma call reads each shape once and writes each draw once
(2 n itemsize bytes); a Dirichlet call reads alpha and writes the rows
(2 n_rows K itemsize bytes). Items are gamma draws (n_rows K for Dirichlet).
Shapes are log-uniform on [0.1, 100] (both Marsaglia-Tsang branches, a third
of them boosted); Dirichlet concentrations log-uniform on [0.1, 10].

gpumcmc is timed as users call it, with its value checks on (fused into the
kernels: one wait per call for the status word); one row per case gives
validation off beside it, labelled, as inside a sampler's sweep.
"""

from __future__ import annotations

import numpy as np


def _torch_view(torch, a):
    return torch.from_dlpack(a)


def _jax_array(jax, cp, a):
    try:
        return jax.dlpack.from_dlpack(a)
    except Exception:
        return jax.device_put(cp.asnumpy(a))


def _jax_peer(bench, case, impl, items, draw, arg, dname, seed, **kw):
    """Time ``draw(key, arg, dtype=...)`` (a jax.random function) under jit as a peer row."""
    jax = bench.jax
    jp = _jax_array(jax, bench.cupy, arg)
    jdt = getattr(jax.numpy, dname)
    f = jax.jit(lambda key, a: draw(key, a, dtype=jdt))
    key = jax.random.PRNGKey(seed)
    bench.peer(case, impl, items, lambda: f(key, jp), sync="jax", **kw)


def _check(name, x, shape, cp):
    if x.shape != shape or not bool(cp.isfinite(x).all()):
        raise RuntimeError(f"{name}: gpumcmc output has the wrong shape or is not finite")


def _gamma_cases(bench, gpumcmc, n):
    cp, torch, jax = bench.cupy, bench.torch, bench.jax
    rng = gpumcmc.random.default_rng(1, backend="cupy")
    cgen = cp.random.default_rng(1)
    base = cp.exp(cp.random.default_rng(0).uniform(np.log(0.1), np.log(100.0), n))
    for dtype in (np.float32, np.float64):
        dname = np.dtype(dtype).name
        shape = base.astype(dtype)
        case = f"gamma per-element shape {dname}"
        kw = dict(bytes_moved=2 * n * np.dtype(dtype).itemsize, params={"n": n, "dtype": dname})

        def ours():
            return rng.gamma(shape)

        def unchecked():
            with gpumcmc.validation(False):
                return rng.gamma(shape)

        x = ours()
        _check(case, x, (n,), cp)
        if x.dtype != dtype or not bool((x >= 0).all()):
            raise RuntimeError(f"{case}: wrong dtype or negative draws")
        bench.record(case, "gpumcmc (Marsaglia-Tsang, Philox)", bench.time(ours), n, **kw)
        bench.peer(case, "gpumcmc, validation off", n, unchecked, **kw)
        # Generator.gamma is standard_gamma times scale, in float64 only; standard_gamma takes a dtype.
        bench.peer(case, "cupy Generator.standard_gamma", n, lambda: cgen.standard_gamma(shape, dtype=dtype), **kw)
        bench.peer(case, "cupy legacy gamma (cuRAND)", n, lambda: cp.random.gamma(shape, dtype=dtype), **kw)
        if torch is not None:
            ts = _torch_view(torch, shape)
            bench.peer(case, "torch._standard_gamma", n, lambda: torch._standard_gamma(ts), **kw)
        if jax is not None:
            _jax_peer(bench, case, "jax.random.gamma (jit)", n, jax.random.gamma, shape, dname, 1, **kw)
        del shape


def _dirichlet_cases(bench, gpumcmc, rows, k):
    from gpumcmc.random import _gamma

    cp, torch, jax = bench.cupy, bench.torch, bench.jax
    rng = gpumcmc.random.default_rng(2, backend="cupy")
    base = cp.exp(cp.random.default_rng(3).uniform(np.log(0.1), np.log(10.0), (rows, k)))
    items = rows * k
    for dtype in (np.float32, np.float64):
        dname = np.dtype(dtype).name
        alpha = base.astype(dtype)
        case = f"dirichlet rows {rows}x{k} {dname}"
        kw = dict(bytes_moved=2 * items * np.dtype(dtype).itemsize,
                  params={"rows": rows, "K": k, "dtype": dname})

        def ours():
            return rng.dirichlet(alpha)

        def unchecked():
            with gpumcmc.validation(False):
                return rng.dirichlet(alpha)

        x = ours()
        _check(case, x, (rows, k), cp)
        if float(cp.abs(x.sum(axis=1) - 1).max()) > 1e-3:
            raise RuntimeError(f"{case}: rows do not sum to 1")
        bench.record(case, "gpumcmc (log-sum-exp rows)", bench.time(ours), items, **kw)
        bench.peer(case, "gpumcmc, validation off", items, unchecked, **kw)
        # The launcher's other path, for the record: the fused kernel where it
        # chose gamma_draw + lse_rows, and the reverse. (The plan for one warp
        # gives the chunk size the launcher takes for a batch this large.)
        other_is_fused = _gamma._dirichlet_plan(rows, k, 1, dtype) == 0
        R = _gamma._dirichlet_plan(rows, k, 1, np.float32) if other_is_fused else 0
        bench.peer(case, "gpumcmc, " + ("one fused launch" if other_is_fused else "gamma_draw + lse_rows"), items,
                   lambda: _gamma.dirichlet_cupy(alpha, (1, 2), 3, rows_per_chunk=R), **kw)

        def naive():  # the usual GPU recipe, which fails for small alpha
            g = cp.random.standard_gamma(alpha, dtype=dtype)
            return g / g.sum(axis=1, keepdims=True)

        bench.peer(case, "cupy legacy gamma / row sum", items, naive, **kw)
        if torch is not None:
            ta = _torch_view(torch, alpha)
            dist = torch.distributions.Dirichlet(ta, validate_args=False)
            bench.peer(case, "torch Dirichlet.sample", items, dist.sample, **kw)
        if jax is not None:
            _jax_peer(bench, case, "jax.random.dirichlet (jit)", items, jax.random.dirichlet, alpha, dname, 2, **kw)
        del alpha


def _default_path(bench, gpumcmc, n, rows):
    """Validation on (the default) beside off: gamma with per-element shapes, and Dirichlet rows x 256."""
    from ._validation_cost import compare

    cp = bench.cupy
    rng = gpumcmc.random.default_rng(7, backend="cupy")
    shape = cp.random.default_rng(7).uniform(0.1, 10.0, n).astype(np.float32)
    compare(bench, f"validation cost: gamma n={n} shapes in (0.1, 10) float32", lambda: rng.gamma(shape), n,
            bytes_moved=8 * n, params={"n": n, "dtype": "float32"})
    del shape
    cp.get_default_memory_pool().free_all_blocks()
    alpha = cp.random.default_rng(8).uniform(0.1, 10.0, (rows, 256)).astype(np.float32)
    compare(bench, f"validation cost: dirichlet {rows} x 256 float32", lambda: rng.dirichlet(alpha), rows * 256,
            bytes_moved=8 * rows * 256, params={"rows": rows, "k": 256, "dtype": "float32"})
    del alpha
    cp.get_default_memory_pool().free_all_blocks()


def run(bench) -> None:
    import gpumcmc

    _default_path(bench, gpumcmc, 1 << (20 if bench.small else 26), 4096 if bench.small else 65_536)

    _gamma_cases(bench, gpumcmc, 1 << (20 if bench.small else 26))
    bench.cupy.get_default_memory_pool().free_all_blocks()
    rows = 4096 if bench.small else 65_536
    _dirichlet_cases(bench, gpumcmc, rows, 256)
