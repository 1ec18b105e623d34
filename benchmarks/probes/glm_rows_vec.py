"""glm_fg_rows with its wide shared-memory reads (GLM_ROWS_VEC=1, the default) against one element a read
(GLM_ROWS_VEC=0), on one GPU: the outputs bit for bit, and the time of 20 calls queued, per call, beside the
read-once floor (X and y over the copy bandwidth measured here).

    python -m benchmarks.probes.glm_rows_vec OUT.json
"""
import json
import sys
import time

import numpy as np


def main(out):
    import cupy as cp

    from benchmarks.harness import copy_bandwidth
    from gpumcmc._config import config
    from gpumcmc.glm import loglik_and_grad

    rs = np.random.default_rng(0)
    bw = copy_bandwidth()  # bytes a second, read and written
    rows = [{"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "copy_GBps": bw / 1e9}]
    print(json.dumps(rows[0]), flush=True)
    for N, K, B, dt, fam in ((4_000_000, 50, 1, np.float32, "bernoulli"), (4_000_000, 50, 2, np.float32, "bernoulli"),
                             (4_000_000, 50, 8, np.float32, "bernoulli"), (2_000_000, 50, 1, np.float64, "bernoulli"),
                             (4_000_000, 48, 1, np.float32, "poisson"), (1_000_000, 7, 1, np.float32, "gaussian"),
                             (999_937, 33, 2, np.float32, "bernoulli")):
        X = cp.asarray((rs.standard_normal((N, K)) / np.sqrt(K)).astype(dt))
        y = cp.asarray((rs.random(N) < 0.5).astype(dt)) if fam == "bernoulli" else (
            cp.asarray(rs.poisson(1.0, N).astype(dt)) if fam == "poisson" else cp.asarray(rs.normal(size=N).astype(dt)))
        beta = cp.asarray(rs.normal(size=(B, K)).astype(dt) * 0.1)
        if B == 1:
            beta = beta[0]
        res, ms = {}, {}
        for v in (0, 1):
            with config.override(glm_defines=(("GLM_ROWS_VEC", v),)):
                f, g = loglik_and_grad(X, y, beta, family=fam, check=False)
                res[v] = (cp.asnumpy(f), cp.asnumpy(g))
                for _ in range(3):
                    loglik_and_grad(X, y, beta, family=fam, check=False)
                best = []
                for _ in range(5):
                    cp.cuda.Device().synchronize()
                    t = time.perf_counter()
                    for _ in range(20):
                        loglik_and_grad(X, y, beta, family=fam, check=False)
                    cp.cuda.Device().synchronize()
                    best.append((time.perf_counter() - t) / 20 * 1e3)
                ms[v] = float(np.median(best))
        floor = (X.nbytes + y.nbytes) / bw * 1e3  # bw counts the bytes a copy moves, read and written
        row = {"N": N, "K": K, "B": B, "dtype": np.dtype(dt).name, "family": fam,
               "same_bits": bool(all(np.array_equal(p, q) for p, q in zip(res[0], res[1]))),
               "ms_vec0": ms[0], "ms_vec1": ms[1], "floor_ms": floor,
               "fraction_vec0": floor / ms[0], "fraction_vec1": floor / ms[1]}
        rows.append(row)
        print(json.dumps(row), flush=True)
        del X, y
    with open(out, "w") as fh:
        json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "glm_rows_vec.json")
