"""The NumPy twins beside NumPy's own generator, on the CPU.

    python -m benchmarks.twins [--small] [--repeat 7] [--out benchmarks/results]

Every public variate also runs on NumPy (the "twin" of its CUDA kernel, the
same draws for one seed); this times each twin against the nearest call of
``numpy.random.Generator`` in the same process, alternating the two and
keeping the best of ``--repeat`` runs of each, so that a busy machine slows
both alike:

- ``Generator.gamma``: 2e6 shapes uniform in (0.1, 10), against
  ``numpy.random.Generator.gamma``;
- ``Generator.standard_normal``: 2e6 draws, against ``standard_normal``;
- ``Generator.dirichlet``: 8,192 rows of K = 256 and 200,000 rows of K = 10
  (one alpha in (0.1, 10) for every row), against ``dirichlet(alpha, size)``;
- ``gpumcmc.categorical``: weights uniform in (0, 1), against a cumulative
  sum and one ``searchsorted`` over the rows' normalised prefixes offset by
  the row number (the usual vectorised NumPy draw), for every method.

The twins are single-threaded NumPy, as NumPy's generator is; CI runs them
on two cores (``taskset -c 0,1``). Writes ``twins-cpu.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

import gpumcmc
from gpumcmc.random import default_rng


def best_of(fns, repeat):
    """Best wall-clock seconds of each function, the functions run in turn ``repeat`` times."""
    for f in fns:
        f()  # warm-up
    best = [np.inf] * len(fns)
    for _ in range(repeat):
        for i, f in enumerate(fns):
            t0 = time.perf_counter()
            f()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best


def cumsum_searchsorted(w, u):
    """One index per row of ``w`` by NumPy alone: prefix sums, normalised, offset by the row, one search."""
    n, K = w.shape
    c = np.cumsum(w, axis=1)
    c /= c[:, -1:]
    rows = np.arange(n, dtype=w.dtype)
    c += rows[:, None]
    return np.searchsorted(c.reshape(-1), u + rows, side="right") - np.arange(n) * K


def cases(small: bool):
    """(name, size, twin, numpy) for every case."""
    scale = 16 if small else 1
    ref = np.random.default_rng(0)
    ours = default_rng(1, backend="numpy")
    n = 2_000_000 // scale
    shape = ref.uniform(0.1, 10.0, n)
    for dt in (np.float64, np.float32):
        s = shape.astype(dt)
        peer = (lambda: ref.gamma(shape)) if dt == np.float64 else (lambda s=s: ref.standard_gamma(s, dtype=dt))
        yield f"gamma {np.dtype(dt).name}", n, lambda s=s, dt=dt: ours.gamma(s, dtype=dt), peer
        yield (f"standard_normal {np.dtype(dt).name}", n, lambda dt=dt: ours.standard_normal(n, dtype=dt),
               lambda dt=dt: ref.standard_normal(n, dtype=dt))
    for rows, K in ((8192 // scale, 256), (200_000 // scale, 10)):
        alpha = ref.uniform(0.1, 10.0, K)
        for dt in (np.float64, np.float32):
            al = alpha.astype(dt)
            yield (f"dirichlet {np.dtype(dt).name} {rows}x{K}", rows * K, lambda al=al: ours.dirichlet(al, size=rows),
                   lambda: ref.dirichlet(alpha, size=rows))
    for rows, K in ((1 << 18, 16), (1 << 16, 256), (1 << 14, 1024)):
        rows //= scale
        for dt in (np.float64, np.float32):
            w = ref.uniform(0.0, 1.0, (rows, K)).astype(dt)
            for method in ("prefix", "butterfly", "warp"):
                yield (f"categorical {method} {np.dtype(dt).name} {rows}x{K}", rows * K,
                       lambda w=w, m=method: gpumcmc.categorical(w, rng=ours, method=m),
                       lambda w=w, dt=dt: cumsum_searchsorted(w, ref.random(w.shape[0], dtype=dt)))


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.twins", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="sizes 16 times smaller, for a smoke run")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    rows = []
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(f"{'case':40s} {'size':>9s} {'twin ms':>9s} {'numpy ms':>9s} {'ratio':>6s}")
    for name, size, twin, ref in cases(args.small):
        t, r = best_of([twin, ref], args.repeat)
        rows.append({"case": name, "size": size, "twin_s": t, "numpy_s": r, "ratio": t / r})
        print(f"{name:40s} {size:9d} {t * 1e3:9.2f} {r * 1e3:9.2f} {t / r:6.2f}", flush=True)
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    doc = {
        "suite": "twins",
        "device": _cpu_name(),
        "cpus": affinity,
        # Other work on the machine slows the twins more than NumPy's generator
        # (they move more memory): the load around the run says how quiet it was.
        "load_average_before_after": [load, os.getloadavg() if hasattr(os, "getloadavg") else None],
        "numpy": np.__version__,
        "python": platform.python_version(),
        "gpumcmc": gpumcmc.__version__,
        "small": args.small,
        "repeat": args.repeat,
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / ("twins-cpu-small.json" if args.small else "twins-cpu.json")
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"# wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
