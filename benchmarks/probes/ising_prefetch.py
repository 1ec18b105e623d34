"""The multispin Ising sweep with and without ISING_PREFETCH (kernels_cu/ising.cu), one GPU.

    python -m benchmarks.probes.ising_prefetch [--out FILE]

For each setting of ``config.ising_defines``: ``Ising((L, L), beta=0.44).sample`` per sweep as user_path.py
times it (the difference of whole calls of 5 and 405 sweeps), the bare sweep with observables off and on,
and a hash of the final states of a few shapes and chain counts, which must agree across the settings
(the prefetch changes where the words wait, not what is drawn).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

import numpy as np


def _wall(cp, fn):
    cp.cuda.Device().synchronize()
    t = time.perf_counter()
    fn()
    cp.cuda.Device().synchronize()
    return time.perf_counter() - t


def _per_sweep(cp, call, a, b, repeats=3):
    call(a)
    d = [(_wall(cp, lambda: call(b)) - _wall(cp, lambda: call(a))) / (b - a) for _ in range(repeats)]
    return float(np.median(d))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--L", type=int, default=16384)
    args = ap.parse_args(argv)
    import cupy as cp

    import gpumcmc
    from gpumcmc import _loader
    from gpumcmc._config import config
    from gpumcmc.models import Ising

    out = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "L": args.L, "settings": {}}
    L = args.L
    for name, defines in (("prefetch_0", (("ISING_PREFETCH", 0),)), ("prefetch_1", (("ISING_PREFETCH", 1),)),
                          ("prefetch_1_min3", (("ISING_PREFETCH", 1), ("ISING_MIN_BLOCKS", 3))),
                          ("prefetch_1_min5", (("ISING_PREFETCH", 1), ("ISING_MIN_BLOCKS", 5)))):
        config.ising_defines = defines
        row = {}
        try:
            hashes = {}
            for shape, chains in (((512, 1024), 3), ((64, 2048), 1), ((2048, 2048), 2)):
                res = Ising(shape, beta=0.44).sample(7, n_chains=chains, random_state=11, progress=False)
                h = hashlib.sha256(cp.asnumpy(res.states).tobytes()).hexdigest()[:16]
                hashes[f"{shape[0]}x{shape[1]}x{chains}"] = h + f" m={float(res.magnetization[:, -1].mean()):.6f}"
            row["hashes"] = hashes
            public = lambda n: Ising((L, L), beta=0.44).sample(n, random_state=0, progress=False)  # noqa: E731
            ms = _per_sweep(cp, public, 5, 405) * 1e3
            row["sample_ms"], row["sample_flips_per_ns"] = ms, L * L / (ms * 1e6)
            model = Ising((L, L), beta=0.44, backend="cupy")
            rng = gpumcmc.random.default_rng(0, backend="cupy")
            state = model.init(1, rng, initial="up")
            slot = cp.zeros((1, 2), dtype=cp.int64)

            def bare(n, observe):
                for _ in range(n):
                    model._sweep(rng, state, slot if observe else None)

            for obs in (False, True):
                ms = _per_sweep(cp, lambda n: bare(n, obs), 5, 205) * 1e3
                row[f"bare_obs_{obs}_flips_per_ns"] = L * L / (ms * 1e6)
            fn = _loader.get_function("ising.cu", "ising_multispin<false>",
                                      ("ising_multispin<true>", "ising_multispin<false>", "ising_bytes<true>",
                                       "ising_bytes<false>"), defines)
            row["registers"], row["local_bytes"] = fn.num_regs, fn.local_size_bytes
            row["shared_bytes"], row["resident_blocks"] = fn.shared_size_bytes, _loader.resident_blocks(fn, 256)
        except Exception as exc:  # one setting failing (e.g. to compile) must not hide the others
            row["error"] = f"{type(exc).__name__}: {exc}"[:400]
        out["settings"][name] = row
        print(name, json.dumps(row), flush=True)
        cp.get_default_memory_pool().free_all_blocks()
    base = out["settings"]["prefetch_0"].get("hashes")
    out["same_states"] = {k: v.get("hashes") == base for k, v in out["settings"].items()}
    print(json.dumps(out["same_states"]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
