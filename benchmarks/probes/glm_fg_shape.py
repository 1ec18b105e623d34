"""glm_fg_rows' launch shape on one GPU: threads a block, 16-byte loads a thread (the tile's register
buffer), tile bytes and the blocks the compiler must fit on an SM, each timed (20 calls queued, median of 5)
against the read-once floor (X and y over the copy bandwidth measured here). The outputs' largest relative
difference from the default shape is recorded: another tile size sums the rows in another order.

    python -m benchmarks.probes.glm_fg_shape OUT.json [--default-only | --define NAME=V1,V2,...]

``--define``: the default shape with a macro of glm.cu set to each value in turn, e.g.
``GLM_ROWS_UNROLL=4,1,2,8`` (the phases' inner loops unrolled).
"""
import json
import sys
import time

import numpy as np

# (threads, GLM_VPT, tile bytes, GLM_ROWS_MIN_BLOCKS); the first is the default
SHAPES = [(256, 8, 32768, 3), (256, 8, 32768, 4), (256, 4, 16384, 4), (256, 4, 16384, 5), (256, 4, 16384, 6),
          (256, 2, 8192, 6), (256, 2, 8192, 8), (512, 4, 32768, 2), (512, 4, 32768, 3), (128, 8, 16384, 6),
          (128, 8, 16384, 8), (256, 6, 24576, 4)]


def main(out, default_only=False, define=None):
    import cupy as cp

    from benchmarks.harness import copy_bandwidth
    from gpumcmc import _loader
    from gpumcmc._config import config
    from gpumcmc.glm import _rows_plan, loglik_and_grad

    rs = np.random.default_rng(0)
    bw = copy_bandwidth()  # bytes a second, read and written
    rows = [{"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "copy_GBps": bw / 1e9,
             "sms": _loader.sm_count()}]
    print(json.dumps(rows[0]), flush=True)

    def save():
        with open(out, "w") as fh:
            json.dump(rows, fh, indent=1)

    for N, K, B in ((4_000_000, 50, 1), (4_000_000, 50, 2), (4_000_000, 50, 8)):
        X = cp.asarray((rs.standard_normal((N, K)) / np.sqrt(K)).astype(np.float32))
        y = cp.asarray((rs.random(N) < 0.5).astype(np.float32))
        beta = cp.asarray(rs.normal(size=(B, K)).astype(np.float32) * 0.1)
        beta = beta[0] if B == 1 else beta
        floor = (X.nbytes + y.nbytes) / bw * 1e3
        ref = None
        cases = [(shape, None) for shape in (SHAPES[:1] if default_only else SHAPES)]
        if define:
            name, values = define.split("=")
            cases = [(SHAPES[0], (name, int(v))) for v in values.split(",")]
        for (threads, vpt, tile, minb), u in cases:
            if B == 8 and minb > 4:
                continue
            defines = (("GLM_THREADS", threads), ("GLM_VPT", vpt), ("GLM_ROWS_MIN_BLOCKS", minb))
            defines += (u,) if u is not None else ()
            row = {"N": N, "K": K, "B": B, "threads": threads, "vpt": vpt, "tile_bytes": tile, "min_blocks": minb,
                   "define": None if u is None else f"{u[0]}={u[1]}"}
            try:
                with config.override(glm_defines=defines, glm_threads=threads, glm_tile_bytes=tile):
                    f, g = loglik_and_grad(X, y, beta, family="bernoulli", check=False)
                    f, g = cp.asnumpy(f).astype(np.float64), cp.asnumpy(g).astype(np.float64)
                    _, _, R, _, _, smem, grid = _rows_plan(N, K, B, np.float32)
                    for _ in range(3):
                        loglik_and_grad(X, y, beta, family="bernoulli", check=False)
                    best = []
                    for _ in range(5):
                        cp.cuda.Device().synchronize()
                        t = time.perf_counter()
                        for _ in range(20):
                            loglik_and_grad(X, y, beta, family="bernoulli", check=False)
                        cp.cuda.Device().synchronize()
                        best.append((time.perf_counter() - t) / 20 * 1e3)
                ms = float(np.median(best))
                if ref is None:
                    ref = (f, g)
                rel = max(float(np.max(np.abs(f - ref[0]) / np.maximum(np.abs(ref[0]), 1e-30))),
                          float(np.max(np.abs(g - ref[1]) / np.maximum(np.abs(ref[1]), 1e-30))))
                row.update(R=R, smem=smem, grid=grid, blocks_per_sm=grid / _loader.sm_count(), ms=ms,
                           floor_ms=floor, fraction=floor / ms, max_rel_diff_from_default=rel)
            except Exception as e:  # a shape that does not compile or launch: recorded, the rest go on
                row["error"] = f"{type(e).__name__}: {e}"[:300]
            rows.append(row)
            print(json.dumps(row), flush=True)
            save()
        del X, y
    save()


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0] if args else "glm_fg_shape.json", "--default-only" in args,
         args[args.index("--define") + 1] if "--define" in args else None)
