"""Every kernel of a model's public call, per iteration, read by Nsight Compute: what a sweep is made of.

    python -m benchmarks.probes.sweep_kernels [case ...] [--out DIR] [--iters N]

:mod:`benchmarks.probes.kernel_floor` reads a model's own kernels; this probe reads all of them, CuPy's
and cuRAND-free library kernels included (sorts, gathers, reductions, linear algebra), so that the time
a sweep spends outside its named kernels shows up by name. Each case runs its public call once (compiling
and warming up), then again with ``--iters`` iterations between ``cudaProfilerStart`` and
``cudaProfilerStop``, under ``ncu --profile-from-start off --clock-control none`` with one cheap metric a
kernel (its duration). Per kernel name it reports launches and microseconds per iteration; kernels
launched fewer times than there are iterations belong to the call's set-up. Summing the per-iteration
time of all kernels and comparing it with the per-iteration wall time of the same call (``user_path.py``)
gives the time the GPU waits on the host.

Cases: those of :mod:`benchmarks.probes.kernel_floor` (the same public calls and data); by default
``mixture``, ``bem``, ``lda`` and ``bayesnet``. Writes ``sweep_kernels_<case>.csv`` (ncu's rows) and ``sweep_kernels.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict

from benchmarks.probes.kernel_floor import _num, _rows, public_call

CASES = ("mixture", "bem", "lda", "bayesnet")


def _workload(case, iters):
    import cupy as cp

    from benchmarks.harness import sync_all_gpus

    run = public_call(case)
    run(2)
    sync_all_gpus()
    cp.cuda.profiler.start()
    run(iters)
    sync_all_gpus()
    cp.cuda.profiler.stop()


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--out", default=".")
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--run", help=argparse.SUPPRESS)  # the workload itself, under ncu
    args = ap.parse_args(argv)
    if args.run:
        _workload(args.run, args.iters)
        return
    ncu = shutil.which("ncu")
    if ncu is None:
        sys.exit("ncu (Nsight Compute) is not on the PATH")
    report = {"iters": args.iters, "cases": {}}
    for case in args.cases or CASES:
        cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
               "--csv", "--page", "raw", "--print-units", "base", "--metrics", "gpu__time_duration.sum",
               sys.executable, "-m", "benchmarks.probes.sweep_kernels", "--run", case, "--iters", str(args.iters)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        with open(os.path.join(args.out, f"sweep_kernels_{case}.csv"), "w") as f:
            f.write(proc.stdout)
        if proc.returncode:
            print(f"== {case}: ncu exited {proc.returncode}\n{proc.stderr[-3000:]}")
            report["cases"][case] = {"error": proc.stderr[-3000:]}
            continue
        per = defaultdict(lambda: [0, 0.0])
        for r in _rows(proc.stdout):
            k = per[r["Kernel Name"]]
            k[0] += 1
            k[1] += _num(r.get("gpu__time_duration.sum")) / 1e3
        kernels = {name: {"launches": n, "us_per_iter": us / args.iters, "setup": n < args.iters}
                   for name, (n, us) in sorted(per.items(), key=lambda kv: -kv[1][1])}
        total = sum(k["us_per_iter"] for k in kernels.values())
        report["cases"][case] = {"kernel_us_per_iter": total, "kernels": kernels}
        print(f"== {case}: {total:.1f} us of kernels an iteration ({args.iters} iterations)")
        for name, k in kernels.items():
            print(f"  {name[:70]:70s} {k['launches']:5d} x  {k['us_per_iter']:9.1f} us/iter"
                  + ("  (set-up)" if k["setup"] else ""))
    with open(os.path.join(args.out, "sweep_kernels.json"), "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
