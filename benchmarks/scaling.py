"""Data-parallel scaling: one GPU against every visible GPU, the data split over them.

The truncated DP mixture at n = 10**7 (small: 2**16), p = 14, k = 256,
float32: a whole Gibbs sweep on one device (``devices=None``, the
single-device path) and with the data and indicators split over every GPU
this process sees (``gpumcmc.shards.Shards("all")``, NCCL between them), and
for comparison over two shards on GPU 0 (``one_device_shards(2)``: the cost
of the split itself, without a second GPU). The time of a sweep is wall-clock
time until every device has finished (the median of the repeats), so that
no device's work is left out.

Each sweep all-reduces ``chains (k q + 1)`` float64 values (the counts, sums
and scatter of every component, ``q = 1 + p + p(p+1)/2``, and the
log-likelihood); a ring all-reduce moves ``2 (W - 1) / W`` times that through
each GPU's links. The note gives those bytes and their time at NVLink 4's
nominal 450 GB/s per direction (a stated floor, not a measurement). Scaling
efficiency is ``t_1 / (W t_W)``. On a one-GPU machine ``"all"`` is GPU 0
alone: the rows say so, and no multi-GPU figure is measured.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

_NVLINK_GBPS = 450.0  # NVLink 4 (H100/H200 SXM), nominal, per direction


def _time_all(bench, fn, devices):
    """Median wall-clock milliseconds of ``fn()`` until every device in ``devices`` is idle."""
    cp = bench.cupy

    def sync():
        for d in devices:
            with cp.cuda.Device(d):
                cp.cuda.get_current_stream().synchronize()

    for _ in range(bench.warmup):
        fn()
    sync()
    times = []
    for _ in range(bench.repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


class _Chain:
    def __init__(self, step, state, rng):
        self.step, self.state, self.rng = step, state, rng

    def __call__(self):
        self.state, _ = self.step(self.rng, self.state)


def _mixture(bench):
    import gpumcmc
    from gpumcmc.models import mixture as mx
    from gpumcmc.shards import Shards

    from .mixture import _fp32_rate, _planted

    cp = bench.cupy
    n, p, k = (1 << 16 if bench.small else 10**7), 14, 256
    count = cp.cuda.runtime.getDeviceCount()
    case = f"scaling mixture n={n} p={p} k={k}"
    params = {"n": n, "p": p, "k": k, "dtype": "float32", "visible_gpus": count}
    flops = 2.0 * n * k * (p * (p + 1) / 2 + 2 * p)
    floor1 = flops / _fp32_rate(bench) * 1e3
    ar = mx.allreduce_bytes(k, p)
    old_repeat = bench.repeat
    bench.repeat = min(bench.repeat, 7)
    x = _planted(cp, n, p)

    # one device: the single-device path
    model = mx.make_model(x, k, dtype=np.float32, cache_bytes=0)
    rng = gpumcmc.random.default_rng(0, backend="cupy")
    chain = _Chain(mx.make_step(model), mx.init(rng, model), rng)
    for _ in range(3):
        chain()
    t1 = _time_all(bench, chain, [cp.cuda.runtime.getDevice()])
    bench.record(case, "gpumcmc Gibbs sweep, 1 GPU (devices=None)", t1, n, flops=flops,
                 params=dict(params, devices=1),
                 note=f"FLOP floor {floor1:.2f} ms at the FP32 rate; floor / time = {floor1 / t1:.2f}")
    del chain, model
    cp.get_default_memory_pool().free_all_blocks()

    def sharded(shards, label, devices):
        models = mx.make_sharded_models(x, k, shards, dtype=np.float32, cache_bytes=0)
        rng = gpumcmc.random.default_rng(0, backend="cupy")
        with shards.on(0):
            state = mx.init_sharded(rng, models, shards, n)
            chain = _Chain(mx.make_sharded_step(models, shards, n), state, rng)
            for _ in range(3):
                chain()
            ms = _time_all(bench, chain, devices)
        w = len(set(devices))
        wr = max(w, 2)  # on one GPU: the figure for two
        ring = 2.0 * (wr - 1) / wr * ar
        link_us = ring / (_NVLINK_GBPS * 1e9) * 1e6
        eff = t1 / (w * ms)
        note = (f"wall-clock until every device is idle; {shards.world} shard(s) on {w} GPU(s); all-reduce {ar} bytes per sweep "
                f"(a ring over {wr} GPUs moves {ring:.0f} bytes through each GPU's links: {link_us:.2f} us at "
                f"NVLink's nominal {_NVLINK_GBPS:.0f} GB/s, a floor, not measured); time(1 GPU, devices=None) / "
                f"time = {t1 / ms:.2f}, scaling efficiency t1 / (W tW) = {eff:.2f}; FLOP floor "
                f"{floor1 / w:.2f} ms")
        if count == 1 and label == "all":
            note = "measured 1 GPU only (this machine has one GPU; no multi-GPU figure); " + note
        bench.record(case, f"gpumcmc Gibbs sweep, devices={label!r}", ms, n, flops=flops, bytes_moved=None,
                     params=dict(params, devices=w, shards=shards.world, allreduce_bytes=ar), note=note)
        del chain, state, models
        for d in set(devices):
            with cp.cuda.Device(d):
                cp.get_default_memory_pool().free_all_blocks()

    try:
        sharded(Shards("all"), "all", list(range(count)))
    except Exception as e:  # no NCCL in this CuPy, or out of memory
        bench.record(case, "gpumcmc Gibbs sweep, devices='all'", None, n, params=params,
                     note=f"{type(e).__name__}: {e}"[:300])
    sharded(mx.one_device_shards(2), "one_device_shards(2)", [cp.cuda.runtime.getDevice()])
    bench.repeat = old_repeat
    del x
    cp.get_default_memory_pool().free_all_blocks()


def run(bench):
    from gpumcmc import _validate

    with _validate.validation(False):
        _mixture(bench)
