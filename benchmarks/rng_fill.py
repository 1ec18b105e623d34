"""Uniform and normal fills: gpumcmc against cupy.random, PyTorch and JAX.

The floor of a fill is writing its output once: n * itemsize bytes.
"""

from __future__ import annotations

import numpy as np


def run(bench) -> None:
    import gpumcmc

    cp, torch, jax = bench.cupy, bench.torch, bench.jax
    n = 1 << (20 if bench.small else 27)
    rng = gpumcmc.random.default_rng(1, backend="cupy")
    cgen = cp.random.default_rng(1)
    for dtype in (np.float32, np.float64):
        dname = np.dtype(dtype).name
        nbytes = n * np.dtype(dtype).itemsize
        kw = dict(bytes_moved=nbytes, params={"n": n, "dtype": dname})
        for kind in ("uniform", "normal"):
            case = f"{kind} fill {dname}"
            ours = (lambda: rng.random(n, dtype=dtype)) if kind == "uniform" else \
                   (lambda: rng.standard_normal(n, dtype=dtype))
            x = ours()
            if not bool(cp.isfinite(x).all()) or x.shape != (n,):
                raise RuntimeError(f"{case}: gpumcmc output is not finite")
            bench.record(case, "gpumcmc (Philox4x32-10)", bench.time(ours), n, **kw)
            if kind == "uniform":
                bench.peer(case, "cupy Generator (XORWOW)", n, lambda: cgen.random(n, dtype=dtype), **kw)
                bench.peer(case, "cupy legacy (cuRAND)", n, lambda: cp.random.random_sample(n, dtype=dtype), **kw)
            else:
                bench.peer(case, "cupy Generator (XORWOW)", n,
                           lambda: cgen.standard_normal(n, dtype=dtype), **kw)
                bench.peer(case, "cupy legacy (cuRAND)", n,
                           lambda: cp.random.standard_normal(n, dtype=dtype), **kw)
            if torch is not None:
                tdt = getattr(torch, dname)
                tfn = torch.rand if kind == "uniform" else torch.randn
                bench.peer(case, "torch (Philox)", n, lambda: tfn(n, device="cuda", dtype=tdt), **kw)
            if jax is not None:
                import jax.numpy as jnp

                jdt = getattr(jnp, dname)
                jfn = jax.random.uniform if kind == "uniform" else jax.random.normal
                f = jax.jit(lambda k: jfn(k, (n,), dtype=jdt))
                key = jax.random.PRNGKey(1)
                bench.peer(case, "jax (threefry)", n, lambda: f(key), sync="jax", **kw)
