"""Where a Bayesian-EM iteration of the DP mixture spends its time, stage by stage (CUDA events).

    python -m benchmarks.probes.mixture_profile [--out DIR] [--budget SECONDS]

At the paper's shape (n = 2**20, p = 14, k = 256, float32, one start) it times
the probability kernel, the statistics GEMM, and the log-likelihood mean plus
the update launch, each over the whole iteration's chunks, then the whole
iteration (``make_bem_step``) under the GEMM's row blocks, the chunk size and
the kernel's launch shape. Floors: the kernel's multiply-adds at the FP32 rate
or its bytes (float32 logits written and read back, float64 probabilities
written) at the copy bandwidth; the GEMM's at the FP64 tensor rate or its bytes
(probabilities and design read). Writes ``mixture_profile.json`` under --out.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


def _events(cp, fn, repeat=10, warm=2):
    for _ in range(warm):
        fn()
    a, b = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(repeat):
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b))
    return float(np.median(ts))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument("--budget", type=float, default=150.0)
    ap.add_argument("--n", type=int, default=1 << 20)
    args = ap.parse_args(argv)
    t_start = time.perf_counter()

    import cupy as cp

    import gpumcmc
    from gpumcmc import _validate
    from gpumcmc.models import mixture as mx

    from benchmarks.mixture import _planted

    dev = cp.cuda.runtime.getDeviceProperties(0)
    sms, clock = dev["multiProcessorCount"], dev["clockRate"] * 1e3
    fp32 = sms * 128 * 2 * clock
    fp64_tc = sms * 256 * clock  # H100: 128 FP64 tensor multiply-adds per SM per clock
    n, p, k = args.n, 14, 256
    q = 1 + p + p * (p + 1) // 2
    a = cp.empty(1 << 28, cp.uint8)
    b = cp.empty_like(a)
    bw_ms = _events(cp, lambda: cp.copyto(b, a))
    bw = 2 * a.nbytes / (bw_ms * 1e-3)
    del a, b
    out = {"device": dev["name"].decode() if isinstance(dev["name"], bytes) else str(dev["name"]),
           "n": n, "p": p, "k": k, "copy_GBps": bw / 1e9, "fp32_TFLOPs": fp32 / 1e12,
           "fp64_tensor_TFLOPs": fp64_tc / 1e12, "rows": []}
    kern_floor = max(2.0 * n * k * (p * (p + 1) / 2 + 2 * p) / fp32, n * k * 16 / bw) * 1e3
    gemm_floor = max(2.0 * n * k * q / fp64_tc, (n * k * 8 + n * q * 8) / bw) * 1e3
    out["kernel_floor_ms"], out["gemm_floor_ms"] = kern_floor, gemm_floor
    print(f"# {out['device']}: copy {bw / 1e9:.0f} GB/s, FP32 {fp32 / 1e12:.1f} TFLOP/s, FP64 tensor "
          f"{fp64_tc / 1e12:.1f}; kernel floor {kern_floor:.3f} ms, GEMM floor {gemm_floor:.3f} ms", flush=True)

    def row(name, ms, **kw):
        r = {"name": name, "ms": ms, **kw}
        out["rows"].append(r)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "mixture_profile.json").write_text(json.dumps(out, indent=1))
        print(f"{name:60s} {ms:8.3f} ms  {json.dumps(kw)}", flush=True)

    x = _planted(cp, n, p)
    rng = gpumcmc.random.default_rng(0, backend="cupy")

    def setup(chunk):
        model = mx.make_model(x, k, dtype=np.float32, chunk_size=chunk)
        if model.y_blocks is None or model.stats_rows != model.chunk:  # the design cached per chunk
            model = model._replace(stats_rows=model.chunk, y_blocks=[
                mx._y_block(model.x[s:s + model.chunk], cp) for s in range(0, n, model.chunk)])
        state = mx.init(gpumcmc.random.default_rng(0, backend="cupy"), model, 1, z=False)
        bem = mx.make_bem_step(model)
        for _ in range(3):  # leave the random start
            state = bem(state)
        return model, state

    def stages(model, state, rows, tag):
        """Per-stage times over all chunks, as make_bem_step runs them."""
        spans = [(s, min(n, s + model.chunk)) for s in range(0, n, model.chunk)]
        m0 = spans[0][1] - spans[0][0]
        resp = cp.empty(k * m0, cp.float64)
        logits = cp.empty(k * m0, cp.float32)
        lse = cp.empty((1, n), cp.float32)

        def kern():
            for s, e in spans:
                mx.assign(model.x, state.params, s, e - s, mx.MODE_RESP, lse=lse, resp=resp[:k * (e - s)]
                          if rows else resp[:k * (e - s)].reshape(1, k, e - s), scratch=logits[:k * (e - s)]
                          .reshape(1, k, e - s), block_rows=rows)

        def gemm():
            acc = None
            for ci, (s, e) in enumerate(spans):
                m = e - s
                y = model.y_blocks[ci]
                if rows and rows < m:
                    head, tail = mx._resp_blocks(resp, rows, m, k)
                    nb = head.shape[0]
                    part = cp.matmul(head, y[:nb * rows].reshape(nb, rows, q)).sum(axis=0)
                    if tail.shape[1]:
                        part += cp.matmul(tail, y[nb * rows:m])
                else:
                    part = cp.matmul(resp[:k * m].reshape(k, m), y)
                acc = part if acc is None else acc + part
            return acc

        acc = gemm()

        with _validate.validation(False):
            tk, tg = _events(cp, kern), _events(cp, gemm)
            tm = _events(cp, lambda: mx._mean_rows(lse))
        row(f"{tag} stage: probability kernel", tk, floor_ms=kern_floor, floor_over_time=kern_floor / tk)
        row(f"{tag} stage: statistics GEMM", tg, floor_ms=gemm_floor, floor_over_time=gemm_floor / tg)
        row(f"{tag} stage: loglik mean (_mean_rows)", tm)

    def whole(model, state, tag, **kw):
        bem = mx.make_bem_step(model)
        holder = [state]

        def one():
            holder[0] = bem(holder[0])

        with _validate.validation(False):
            ms = _events(cp, one)
        row(f"{tag} whole BEM iteration", ms, **kw)
        return ms

    default_rows = mx._GEMM_ROWS
    # (1) the defaults: stages, the kernel's arithmetic alone (mode ARGMAX, no probabilities), the two
    # row means, the update kernel alone, the whole iteration; then the GEMM's row blocks
    model, state = setup(None)
    stages(model, state, default_rows, f"chunk={model.chunk} gemm_rows={default_rows}")
    lse = cp.empty((1, n), cp.float32)
    with _validate.validation(False):
        row("kernel alone, mode ARGMAX (arithmetic, lse only)",
            _events(cp, lambda: mx.assign(model.x, state.params, 0, n, mx.MODE_ARGMAX, lse=lse)),
            floor_ms=2.0 * n * k * (p * (p + 1) / 2 + 2 * p) / fp32 * 1e3)
        row("row mean, cupy mean(axis=1) (before)", _events(cp, lambda: lse.mean(axis=1, dtype=np.float64)))
    whole(model, state, f"chunk={model.chunk} gemm_rows={default_rows}", gemm_rows=default_rows, chunk=model.chunk)
    for rows in (None, 2048, 8192):
        mx._GEMM_ROWS = rows
        whole(model, state, f"chunk={model.chunk} gemm_rows={rows}", gemm_rows=rows, chunk=model.chunk)
    mx._GEMM_ROWS = default_rows
    del model, state
    cp.get_default_memory_pool().free_all_blocks()
    # (2) one chunk of all rows, the default kernel and variants (each checked bit for bit against it)
    model, state = setup(n)
    stages(model, state, default_rows, f"chunk={n} gemm_rows={default_rows}")
    whole(model, state, f"chunk={n} gemm_rows={default_rows}", gemm_rows=default_rows, chunk=n)

    def probs():
        r = cp.empty(k * n, cp.float64)
        lse = cp.empty((1, n), cp.float32)
        mx.assign(model.x, state.params, 0, n, mx.MODE_RESP, lse=lse, resp=r, block_rows=default_rows)
        return r, lse

    ref = probs()
    for tune in ({"MIX_WU": 4}, {"MIX_WU": 16}, {"MIX_ROWS": 2, "MIX_MIN_BLOCKS": 2}):
        if time.perf_counter() - t_start > args.budget:
            row(f"skipped {tune}: time budget", 0.0)
            continue
        mx._TUNE = tuple(tune.items())  # config.mixture_defines
        try:
            got = probs()
            same = bool(cp.array_equal(got[0], ref[0]) and cp.array_equal(got[1], ref[1]))
            del got
            stages(model, state, default_rows, f"chunk={n} tune={tune}")
            whole(model, state, f"chunk={n} tune={tune}", tune=tune, chunk=n, bitwise_equal_probs=same)
        except Exception as e:  # noqa: BLE001 (a variant that does not compile or launch)
            row(f"tune={tune} failed: {type(e).__name__}: {e}"[:200], 0.0)
    mx._TUNE = ()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "mixture_profile.json").write_text(json.dumps(out, indent=1))
    print(f"# total {time.perf_counter() - t_start:.1f} s")


if __name__ == "__main__":
    main()
