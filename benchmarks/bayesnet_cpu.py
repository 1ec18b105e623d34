"""CPU comparison for ``bayesnet``: the NumPy backend against JAGS (command-line ``jags``) and pgmpy's
estimators on the Koller network, m = 1, 50% of cells missing, synthetic cases.

    python -m benchmarks.bayesnet_cpu [--sizes 5000 10000 20000] [--iters 200]

Writes benchmarks/results/bayesnet_cpu.json. JAGS is skipped if ``jags`` is not on PATH.
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time

import numpy as np

from gpumcmc.models.bayesnet import BayesianNetwork


def _jags_model(net):
    idx = {v: i + 1 for i, v in enumerate(net.nodes)}
    lines = ["model {"]
    for v in net.nodes:
        ps = net.parents[v]
        dims = "".join(f"[1:{net.card[p]}]" for p in ps)
        loops = [f"for (a{k} in 1:{net.card[p]}) {{" for k, p in enumerate(ps)]
        sub = ",".join(f"a{k}" for k in range(len(ps)))
        lines += loops
        lines.append(f"  p_{v}[{sub + ',' if ps else ''}1:{net.card[v]}] ~ ddirch(ones_{v})")
        lines += ["}"] * len(ps)
    lines.append("for (i in 1:N) {")
    for v in net.nodes:
        sub = ",".join(f"x[i,{idx[p]}]" for p in net.parents[v])
        lines.append(f"  x[i,{idx[v]}] ~ dcat(p_{v}[{sub + ',' if sub else ''}])")
    lines += ["}", "}"]
    return "\n".join(lines)


def _r_array(name, a):
    a = np.asarray(a)
    vals = ",".join("NA" if v < 0 else str(int(v)) for v in a.ravel(order="F"))
    if a.ndim == 1:
        return f"`{name}` <- c({vals})"
    return f"`{name}` <- structure(c({vals}), .Dim = c({','.join(map(str, a.shape))}))"


def run_jags(net, X, n_iter, seed=0):
    d = tempfile.mkdtemp()
    try:
        pathlib.Path(d, "model.bug").write_text(_jags_model(net))
        data = [_r_array("x", np.where(X < 0, -1, X + 1)), f"`N` <- {len(X)}"]
        data += [f"`ones_{v}` <- c({','.join(['1'] * net.card[v])})" for v in net.nodes]
        pathlib.Path(d, "data.R").write_text("\n".join(data) + "\n")
        pathlib.Path(d, "inits.R").write_text(f'`.RNG.name` <- "base::Mersenne-Twister"\n`.RNG.seed` <- {seed + 1}\n')
        mons = "\n".join(f"monitor p_{v}, thin({n_iter})" for v in net.nodes)
        pathlib.Path(d, "run.cmd").write_text(
            f"model in model.bug\ndata in data.R\ncompile, nchains(1)\ninits in inits.R\ninitialize\n"
            f"update {n_iter - 1}\n"
            f"{mons}\nupdate 1\ncoda *\nexit\n")
        t0 = time.perf_counter()
        subprocess.run(["jags", "run.cmd"], cwd=d, check=True, capture_output=True)
        secs = time.perf_counter() - t0
        names = [ln.split() for ln in pathlib.Path(d, "CODAindex.txt").read_text().splitlines()]
        vals = np.loadtxt(pathlib.Path(d, "CODAchain1.txt"))[:, 1]
        est = {}
        for (nm, first, last) in names:
            est[nm] = vals[int(first) - 1:int(last)]
        cpts = {}
        for v in net.nodes:
            shape = tuple(net.card[p] for p in net.parents[v]) + (net.card[v],)
            flat = np.array([est[k][-1] for k in est if k.startswith(f"p_{v}[")])
            keys = [k for k in est if k.startswith(f"p_{v}[")]
            arr = np.zeros(shape)
            for k, val in zip(keys, flat):
                ix = tuple(int(s) - 1 for s in k[len(f"p_{v}["):-1].split(","))
                arr[ix] = val
            cpts[v] = arr
        return secs, BayesianNetwork(net.parents, net.states, cpts)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[5000, 10000, 20000])
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--seeds", type=int, default=1,
                    help="fits per size and sampler (seeds 0, 1, ...): KL_avg of one final draw varies from seed "
                         "to seed, so its mean and spread over several are compared")
    a = ap.parse_args()
    truth = BayesianNetwork.koller()
    rows = []
    for n in a.sizes:
        X = truth.sample(n, 0)
        X[np.random.default_rng(1).random(X.shape) < 0.5] = -1
        secs, kls = [], []
        for seed in range(a.seeds):
            t0 = time.perf_counter()
            fit = BayesianNetwork(truth.parents, truth.states, n_iter=a.iters, same=1, random_state=seed,
                                  progress=False, backend="numpy").fit(X)
            secs.append(time.perf_counter() - t0)
            # the final draw, as JAGS's row below (cpts_, the mean of the trace, is the better estimate)
            kls.append(BayesianNetwork(truth.parents, truth.states, fit.cpts_last_).kl_avg(truth))
        rows.append({"cases": n, "impl": "gpumcmc-numpy", "seconds": float(np.median(secs)),
                     "kl_avg": float(np.mean(kls)), "kl_avg_each_seed": kls})
        if shutil.which("jags"):
            secs, kls = [], []
            for seed in range(a.seeds):
                s, jf = run_jags(truth, X, a.iters, seed)
                secs.append(s)
                kls.append(jf.kl_avg(truth))
            rows.append({"cases": n, "impl": "jags", "seconds": float(np.median(secs)), "kl_avg": float(np.mean(kls)),
                         "kl_avg_each_seed": kls})
        else:
            rows.append({"cases": n, "impl": "jags", "seconds": None, "note": "jags not on PATH"})
        try:
            import pandas as pd
            from pgmpy.models import DiscreteBayesianNetwork as PBN
            full = X[(X >= 0).all(1)]
            df = pd.DataFrame({v: [truth.states[v][k] for k in full[:, j]] for j, v in enumerate(truth.nodes)})
            m = PBN([(p, v) for v in truth.nodes for p in truth.parents[v]])
            t0 = time.perf_counter()
            m.fit(df)  # maximum likelihood by default
            rows.append({"cases": n, "impl": "pgmpy-MLE-complete-rows", "seconds": time.perf_counter() - t0,
                         "kl_avg": BayesianNetwork.from_pgmpy(m).kl_avg(truth), "rows_used": len(full)})
        except Exception as e:  # pgmpy API differences across versions
            rows.append({"cases": n, "impl": "pgmpy-MLE-complete-rows", "seconds": None, "note": repr(e)})
        print(rows[-3:])
    out = pathlib.Path(__file__).with_name("results") / "bayesnet_cpu.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"iters": a.iters, "seeds": a.seeds, "cpu_count": os.cpu_count(),
                               "note": "seconds: median over seeds; kl_avg: mean over seeds of KL_avg(truth || final draw)",
                               "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
