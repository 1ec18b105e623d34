"""Each model's hot kernels against the hardware's limits, read by Nsight Compute's counters.

    python -m benchmarks.probes.kernel_floor [case ...] [--out DIR] [--count N]

Cases: ``lda`` (LDA(1024).fit on the paper's corpus shape), ``mixture`` (DPGaussianMixture(256).fit,
n = 2^20, p = 14, Gibbs), ``bem`` (the same by Bayesian EM), ``bayesnet`` (BayesianNetwork.koller() on
10^6 cases, half missing, m = 10), ``ising`` (Ising((16384, 16384)).sample), ``fg``
(``glm.loglik_and_grad``, N = 4 M, K = 50, float32), ``glm`` (BayesianGLM.fit, N = 10^6, K = 50). Each
runs its public call with the defaults, the shapes of ``benchmarks/results/user_path/``.

For each case the probe runs itself under ``ncu --clock-control none`` (the clocks as a user's run has
them), skips the first launches of the case's kernels (compilation and warm-up), then profiles
``8 * --count`` launches of them (about ``--count`` of each kernel of a sweep). Per kernel it reports the time, the bytes moved to and from DRAM, the fraction of the DRAM and
SM peaks that Nsight Compute gives, achieved occupancy and registers a thread, and the DRAM bytes over
the device-to-device copy bandwidth measured in the same process: the kernel's memory floor, and its
time as a multiple of it. A kernel near its floor gains only from moving fewer bytes; one far from it,
with low DRAM and SM fractions, is latency-bound (occupancy, dependent steps, launch shape).

Writes ``kernel_floor_<case>.csv`` (ncu's raw rows) and ``kernel_floor.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
           "dram__throughput.avg.pct_of_peak_sustained_elapsed", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
           "sm__warps_active.avg.pct_of_peak_sustained_active", "launch__registers_per_thread",
           "launch__grid_size", "launch__block_size", "lts__t_sector_hit_rate.pct")

# case -> (kernel-name regular expression, launches to skip per kernel: past compilation and warm-up)
KERNELS = {"lda": ("regex:^lda_", 40), "mixture": ("regex:^mixture_", 40), "bem": ("regex:^mixture_", 40),
           "bayesnet": ("regex:^bn_", 40), "ising": ("regex:^ising_", 8), "fg": ("regex:^glm_fg_", 10),
           "glm": ("regex:^glm_", 200)}


# case -> iterations (calls, for fg) of its public call that ncu watches
RUNS = {"lda": 30, "mixture": 30, "bem": 30, "bayesnet": 40, "ising": 12, "fg": 20, "glm": 4}


def public_call(case):
    """``run(n)``: the case's public call with ``n`` iterations (``n`` calls for ``fg``), defaults otherwise,
    its data made once."""
    import cupy as cp

    if case == "lda":
        from benchmarks.lda import zipf_corpus
        from gpumcmc.models import LDA

        X = zipf_corpus()
        return lambda n: LDA(n_components=1024, n_iter=n, burn_in=0, random_state=0, progress=False).fit(X)
    if case in ("mixture", "bem"):
        from gpumcmc.models import DPGaussianMixture

        rs = np.random.default_rng(2)
        centres = rs.normal(0, 5, (12, 14))
        X = (centres[rs.integers(0, 12, 1 << 20)] + rs.normal(0, 1, (1 << 20, 14))).astype(np.float32)
        kw = {"method": "bem", "n_init": 1, "tol": 0.0} if case == "bem" else {}
        return lambda n: DPGaussianMixture(n_components=256, n_iter=n, burn_in=0, random_state=0, progress=False,
                                           **kw).fit(X)
    if case == "bayesnet":
        from gpumcmc.models.bayesnet import BayesianNetwork

        truth = BayesianNetwork.koller()
        X = truth.sample(1_000_000, 0)
        X[np.random.default_rng(3).random(X.shape) < 0.5] = -1
        return lambda n: BayesianNetwork(truth.parents, truth.states, n_iter=n, same=10, random_state=0,
                                         progress=False).fit(X)
    if case == "ising":
        from gpumcmc.models import Ising

        return lambda n: Ising((16384, 16384), beta=0.44).sample(n, random_state=0, progress=False)
    if case in ("fg", "glm"):
        from gpumcmc.glm import loglik_and_grad
        from gpumcmc.models import BayesianGLM

        rs = np.random.default_rng(0)
        N = 4_000_000 if case == "fg" else 1_000_000
        Xh = rs.standard_normal((N, 50), dtype=np.float32) / np.float32(np.sqrt(50))
        yh = (rs.random(N) < 1 / (1 + np.exp(-(Xh @ rs.standard_normal(50).astype(np.float32))))).astype(np.float32)
        if case == "glm":
            return lambda n: BayesianGLM("bernoulli", n_samples=n, n_warmup=0, random_state=0, progress=False,
                                         dtype="float32").fit(Xh, yh)
        X, y, beta = cp.asarray(Xh), cp.asarray(yh), cp.zeros(50, cp.float32)
        return lambda n: [loglik_and_grad(X, y, beta, "bernoulli") for _ in range(n)]
    raise ValueError(f"unknown case {case!r}: choose from {sorted(KERNELS)}")


def _workload(case):
    """The case's public call, run a few times: what ncu watches."""
    from benchmarks.harness import sync_all_gpus

    public_call(case)(RUNS[case])
    sync_all_gpus()


def _rows(text: str) -> list[dict]:
    """ncu's ``--csv --page raw`` output: a header row, a units row, then one row per profiled launch."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    return rows[1:] if rows and rows[0].get("ID", "") == "" else rows


def _num(x) -> float:
    try:
        return float(str(x).replace(",", ""))
    except ValueError:
        return float("nan")


def _summary(rows: list[dict], bandwidth: float) -> dict:
    """Per kernel: medians over its profiled launches, and its time over its DRAM floor."""
    out = {}
    for name in sorted({r["Kernel Name"] for r in rows}):
        mine = [r for r in rows if r["Kernel Name"] == name]
        med = {m: float(np.median([_num(r.get(m)) for r in mine])) for m in METRICS}
        ns = med["gpu__time_duration.sum"]
        dram = med["dram__bytes_read.sum"] + med["dram__bytes_write.sum"]
        floor_ns = dram / bandwidth * 1e9
        out[name] = {"launches": len(mine), "time_us": ns / 1e3, "dram_MB": dram / 1e6,
                     "dram_floor_us": floor_ns / 1e3, "time_over_floor": ns / floor_ns if floor_ns else None,
                     "dram_pct": med["dram__throughput.avg.pct_of_peak_sustained_elapsed"],
                     "sm_pct": med["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
                     "occupancy_pct": med["sm__warps_active.avg.pct_of_peak_sustained_active"],
                     "l2_hit_pct": med["lts__t_sector_hit_rate.pct"],
                     "registers": med["launch__registers_per_thread"],
                     "grid": med["launch__grid_size"], "block": med["launch__block_size"]}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--out", default=".")
    ap.add_argument("--count", type=int, default=5, help="launches profiled per kernel")
    ap.add_argument("--run", help=argparse.SUPPRESS)  # the workload itself, under ncu
    args = ap.parse_args(argv)
    if args.run:
        _workload(args.run)
        return
    ncu = shutil.which("ncu")
    if ncu is None:
        sys.exit("ncu (Nsight Compute) is not on the PATH")
    import cupy as cp

    from benchmarks.harness import copy_bandwidth

    report = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
              "copy_bandwidth_GBps": copy_bandwidth() / 1e9, "cases": {}}
    for case in args.cases or list(KERNELS):
        regex, skip = KERNELS[case]
        cmd = [ncu, "--clock-control", "none", "--target-processes", "all", "--kernel-name", regex,
               "--launch-skip", str(skip), "--launch-count", str(args.count * 8),
               "--csv", "--page", "raw", "--print-units", "base", "--metrics", ",".join(METRICS),
               sys.executable, "-m", "benchmarks.probes.kernel_floor", "--run", case]
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        with open(os.path.join(args.out, f"kernel_floor_{case}.csv"), "w") as f:
            f.write(proc.stdout)
        if proc.returncode:
            print(f"== {case}: ncu exited {proc.returncode}\n{proc.stderr[-3000:]}")
            report["cases"][case] = {"error": proc.stderr[-3000:]}
            continue
        kernels = _summary(_rows(proc.stdout), report["copy_bandwidth_GBps"] * 1e9)
        report["cases"][case] = {"profile_s": time.perf_counter() - t, "kernels": kernels}
        print(f"== {case}")
        for name, k in kernels.items():
            print(f"  {name[:60]:60s} {k['time_us']:9.1f} us  floor {k['dram_floor_us']:8.1f} us  "
                  f"dram {k['dram_pct']:5.1f}%  sm {k['sm_pct']:5.1f}%  occ {k['occupancy_pct']:5.1f}%  "
                  f"regs {k['registers']:.0f}")
    with open(os.path.join(args.out, "kernel_floor.json"), "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
