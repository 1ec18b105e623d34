"""Figure 7 of Steele & Tristan (PPoPP 2017), measured on this GPU.

The fused LDA-shaped draw, ``categorical_products`` (theta (M, K) times
phi (V, K) gathered per token), with 2**20 tokens (small: 2**14), the LDA
sizes M = 43,556 and V = 37,286, tokens sorted by word, for K = 4, 8, ...,
64 and then every multiple of 32 up to 1024 (small: powers of two), in
float32 and float64. Methods: "prefix" (the paper's baseline, Algorithm 1),
"transpose" (register transpose, Algorithm 4), "butterfly" (butterfly
partial sums, Algorithm 7) and gpumcmc's one-warp-per-row "warp". Items are
tokens; validation is off, as in a sampler's sweep.

Besides the JSON the harness writes, :func:`run` draws the paper's plot,
milliseconds per method against K, one panel per dtype, to
``figure7-<device>.png`` beside the JSON (``benchmarks/results/``, or the
folder in ``GPUMCMC_FIGURE7_DIR``). ``python -m benchmarks.figure7 JSON``
redraws it from a saved run.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

METHODS = ("prefix", "transpose", "butterfly", "warp")
M, V = 43_556, 37_286


def ks(small: bool) -> list[int]:
    if small:
        return [1 << e for e in range(2, 11)]
    return list(range(4, 65, 4)) + list(range(96, 1025, 32))


def run(bench) -> None:
    import gpumcmc

    from .categorical import _check, _free, _lda

    cp = bench.cupy
    T = 1 << (14 if bench.small else 20)
    rng = gpumcmc.random.default_rng(7, backend="cupy")
    rows_out = []
    with gpumcmc.validation(False):
        for dtype in (np.float32, np.float64):
            dname = np.dtype(dtype).name
            for K in ks(bench.small):
                case = f"figure7 T={T} K={K} {dname}"
                theta, phi, rows, cols = _lda(bench, T, M, V, K, dtype, seed=K)
                isz = np.dtype(dtype).itemsize
                kw = dict(bytes_moved=(M + V) * K * isz + T * 16, params={"tokens": T, "K": K, "dtype": dname})
                out = cp.empty(T, dtype=np.int64)
                for method in METHODS:
                    def ours(method=method):
                        return gpumcmc.categorical_products(theta, phi, rows, cols, rng=rng, method=method,
                                                            out=out)
                    _check(case, ours(), T, K)
                    rows_out.append(bench.record(case, f"gpumcmc {method}", bench.time(ours), T, **kw))
                del theta, phi, rows, cols, out
                _free(bench)
    folder = Path(os.environ.get("GPUMCMC_FIGURE7_DIR", Path(__file__).resolve().parent / "results"))
    slug = "".join(c if c.isalnum() else "-" for c in bench.device.lower()).strip("-")
    plot(rows_out, folder / f"figure7-{slug}{'-small' if bench.small else ''}.png", bench.device)


def plot(rows: list[dict], path: Path, device: str = "") -> Path:
    """Milliseconds per method against K, one panel per dtype, from the suite's rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r.get("ms") and r["case"].startswith("figure7")]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=False)
    for ax, dname in zip(axes, ("float32", "float64")):
        for method in METHODS:
            pts = sorted((r["params"]["K"], r["ms"]) for r in rows
                         if r["params"]["dtype"] == dname and r["impl"] == f"gpumcmc {method}")
            if pts:
                k, ms = zip(*pts)
                ax.plot(k, ms, marker=".", label=method)
        ax.set_title(f"{dname} intermediate data")
        ax.set_xlabel("K (categories)")
        ax.set_ylabel("ms per draw of all tokens")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"Fused LDA z-draw, as Figure 7 of Steele & Tristan (2017){': ' + device if device else ''}")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


if __name__ == "__main__":
    src = Path(sys.argv[1])
    data = json.loads(src.read_text())
    print(plot(data["rows"], src.with_suffix(".png"), data.get("device", "")))
