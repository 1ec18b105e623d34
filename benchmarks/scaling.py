"""Data-parallel scaling: one GPU against 2, 4, ... and every visible GPU, the data split over them.

Three models, each timed as a whole Gibbs sweep on one device (``devices=None``,
the single-device path) and with the data split over the first 2, 4 and 8 GPUs
as far as the machine has them and over every GPU it has
(``gpumcmc.shards.Shards([0, 1])``, ``Shards("all")``, NCCL between them), and
for comparison over two shards on GPU 0 (``gpumcmc.shards.one_device(2)``: the
cost of the split itself, without a second GPU). Beside each multi-GPU row the
same all-reduce is timed alone, on the same GPUs, and given as bus bandwidth
(``2 (W - 1) / W`` bytes over its time, NCCL's measure). The time of a sweep is
wall-clock time until every device has finished (the median of the repeats),
so that no device's work is left out. The sweeps run as ``fit`` runs them:
value checks on and deferred (each sweep turns off the checks of the
primitives whose inputs are valid by construction, as in ``fit``), read once
after each model. Scaling efficiency is
``t_1 / (W t_W)``. On a one-GPU machine ``"all"`` is GPU 0 alone: the rows
say so, and no multi-GPU figure is measured.

* The truncated DP mixture at n = 10**7 (small: 2**16), p = 14, k = 256,
  float32. Each sweep all-reduces ``chains (k q + 1)`` float64 values (the
  counts, sums and scatter of every component, ``q = 1 + p + p(p+1)/2``, and
  the log-likelihood).
* LDA at K = 1024 (alpha = beta = 1/K, float32) on a synthetic corpus drawn
  from the LDA model itself (``gpumcmc.datasets.synthetic_lda_corpus``: 100
  planted topics, Zipf word frequencies) of UCI NYTimes' size: 300,000
  documents, 101,000 words, 100 M tokens (small: 64x fewer documents and
  tokens, 16x fewer words). The documents are split over the shards
  (``LDA(devices=...)``, :func:`gpumcmc.models.lda.sharded_gibbs`); each
  sweep all-reduces the word-topic counts n_wk, ``V K`` int32 values, and
  every GPU then draws phi (V x K) itself, a part of the sweep that does not
  shrink with more GPUs. The byte floor of a row is that of one device's
  sweep (``benchmarks/lda.py``) over the copy bandwidth.

* The Bayesian logistic GLM at N = 4 10**7 rows (small: 2**18), K = 50
  coefficients (no intercept), 4 chains, float32, on synthetic data drawn
  from the model (X standard normal, beta ~ N(0, 1/K), y ~ Bernoulli), by
  slice-within-Gibbs with the differential update. The rows are split over
  the shards (:func:`gpumcmc.models.glm.over_rows`): per coordinate
  and pass each shard evaluates the candidates over its rows, the candidates'
  sums (``chains x 16`` float64) are all-reduced, and every device decides
  from them; ``allreduce_bytes`` in :mod:`gpumcmc.models.glm` gives the bytes
  per sweep (``3 K`` small all-reduces and the log-likelihood). The one-device
  row is the single-device kernel sweep (eager, no CUDA graph: at this size a
  sweep's host time is a small part of it). The byte floor of a sweep: per
  coordinate one pass over X[:, k] and y and every chain's eta read and
  written, over the copy bandwidth.

A ring all-reduce moves ``2 (W - 1) / W`` times the reduced bytes through
each GPU's links. The notes give those bytes and their time at NVLink 4's
nominal 900 GB/s (450 GB/s each way; H100/H200 SXM): a stated floor, not a
measurement. On one GPU (``one_device(2)``) the all-reduce is a sum in the
GPU's memory and nothing crosses a link.

``GPUMCMC_SCALING_MODELS`` (default ``"mixture,lda,glm"``) picks the models.
``GPUMCMC_SCALING_LDA_TEXT``, the path of ``../shared/bench/user_path.py``, times
LDA on that script's real text (about 29 M tokens: the corpus on which it times
``LDA.fit(devices=...)``) in place of the 100 M synthetic tokens.
"""

from __future__ import annotations

import functools
import os
import statistics
import time

import numpy as np

_NVLINK_GBPS = 450.0  # NVLink 4 (H100/H200 SXM), nominal: 900 GB/s in all, 450 GB/s each way


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


def _ring(ar: int, devices) -> tuple[int, int, float, float]:
    """(GPUs, GPUs of the ring, bytes through each GPU's links, their seconds at NVLink's nominal rate)
    for an all-reduce of ``ar`` bytes over the distinct ``devices`` (on one GPU: the figure for two)."""
    w = len(set(devices))
    wr = max(w, 2)
    ring = 2.0 * (wr - 1) / wr * ar
    return w, wr, ring, ring / (_NVLINK_GBPS * 1e9)


# LDA's sweeps from its start: theta and phi are dense at first, and the first sweeps cost several times a
# later one (a z-draw over mostly non-zero theta rows), which also splits better over GPUs. The sweeps are
# timed after this many, in the sparse state where user_path.py's fits spend most of theirs.
_LDA_SETTLE = 40


class _Chain:
    def __init__(self, step, state, rng):
        self.step, self.state, self.rng = step, state, rng

    def __call__(self):
        self.state, _ = self.step(self.rng, self.state)


def _layout_note(note: str, shards, w: int, count: int, label: str) -> str:
    """``note`` prefixed with what the layout measured: two shards on one GPU, or one GPU only."""
    if w == 1 and shards.world > 1:
        note = ("one GPU holds both shards and sums them in its memory (no link traffic): the cost of the "
                "split, not a multi-GPU figure; ") + note
    if count == 1 and label == "'all'":
        note = "measured 1 GPU only (this machine has one GPU; no multi-GPU figure); " + note
    return note


def _free(cp, devices) -> None:
    for d in set(devices):
        with cp.cuda.Device(d):
            cp.get_default_memory_pool().free_all_blocks()


def _widths(count: int) -> list[int]:
    """The GPU counts measured besides one: 2, 4, 8 as far as the machine goes, and all of them."""
    ws = [w for w in (2, 4, 8) if w <= count]
    return ws + ([count] if count not in ws else [])


def _allreduce_ms(bench, shards, nbytes: int, dtype) -> float | None:
    """Median milliseconds of one all-reduce of ``nbytes`` over ``shards`` alone (None on one GPU)."""
    if len(set(shards.devices)) < 2:
        return None
    cp = bench.cupy
    n = max(1, nbytes // np.dtype(dtype).itemsize)
    bufs = []
    for i in range(len(shards)):
        with shards.on(i):
            bufs.append(cp.ones(n, dtype=dtype))
    ms = _time_all(bench, lambda: shards.allreduce(bufs), shards.devices)
    del bufs
    return ms


def _allreduce_note(bench, shards, ar: int, dtype) -> str:
    ms = _allreduce_ms(bench, shards, ar, dtype)
    if ms is None:
        return ""
    w = len(shards)
    bus = 2.0 * (w - 1) / w * ar / (ms * 1e-3) / 1e9
    return (f"; the same all-reduce alone, measured: {ms:.3f} ms ({bus:.0f} GB/s bus bandwidth, "
            f"{bus / _NVLINK_GBPS:.0%} of NVLink's nominal {_NVLINK_GBPS:.0f} GB/s each way)")


def _layouts(bench, sharded, count: int, case: str, what: str, items: int, params: dict) -> None:
    """``sharded(shards, label, devices)`` on 2, 4, ... and every visible GPU (a failure, such as a CuPy
    without NCCL or too little memory, becomes a row saying so) and as two shards on the current GPU."""
    from gpumcmc.shards import Shards, one_device

    for w in _widths(count):
        label = "'all'" if w == count else str(list(range(w)))
        try:
            sharded(Shards("all" if w == count else list(range(w))), label, list(range(w)))
        except Exception as e:  # no NCCL in this CuPy, or out of memory
            bench.record(case, f"{what}, devices={label}", None, items, params=dict(params, devices=w),
                         note=f"{type(e).__name__}: {e}"[:300])
    sharded(one_device(2), "one_device(2)", [bench.cupy.cuda.runtime.getDevice()])


def _mixture(bench):
    import gpumcmc
    from gpumcmc.models import mixture as mx

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
            alg = mx.sharded_gibbs(shards)
            state = alg.init(rng, mx.gibbs_parts(models, shards, n))
            chain = _Chain(alg.step, state, rng)
            for _ in range(3):
                chain()
            ms = _time_all(bench, chain, devices)
        w, wr, ring, link_s = _ring(ar, devices)
        link_us = link_s * 1e6
        eff = t1 / (w * ms)
        note = (f"wall-clock until every device is idle; {shards.world} shard(s) on {w} GPU(s); all-reduce {ar} "
                f"bytes per sweep (a ring over {wr} GPUs moves {ring:.0f} bytes through each GPU's links: "
                f"{link_us:.2f} us at NVLink 4's nominal 900 GB/s, {_NVLINK_GBPS:.0f} GB/s each way, a floor, not "
                f"measured); time(1 GPU, devices=None) / time = {t1 / ms:.2f}, scaling efficiency t1 / (W tW) = "
                f"{eff:.2f}; FLOP floor "
                f"{floor1 / w:.2f} ms")
        note += _allreduce_note(bench, shards, ar, np.float64)
        note = _layout_note(note, shards, w, count, label)
        bench.record(case, f"gpumcmc Gibbs sweep, devices={label}", ms, n, flops=flops, bytes_moved=None,
                     params=dict(params, devices=w, shards=shards.world, allreduce_bytes=ar,
                                 scaling_efficiency=round(eff, 4)), note=note)
        del chain, state, models
        _free(cp, devices)

    _layouts(bench, sharded, count, case, "gpumcmc Gibbs sweep", n, params)
    bench.repeat = old_repeat
    del x
    cp.get_default_memory_pool().free_all_blocks()


def _lda(bench):
    from gpumcmc.datasets import synthetic_lda_corpus
    from gpumcmc.models import lda as L
    from gpumcmc.random import default_rng

    from .lda import _floor_bytes, user_path_text

    cp = bench.cupy
    pool = cp.get_default_memory_pool()
    K = 1024
    a = b = 1.0 / K
    count = cp.cuda.runtime.getDeviceCount()
    t0 = time.perf_counter()
    text = os.environ.get("GPUMCMC_SCALING_LDA_TEXT")
    if text:  # user_path.py's real text, so that fit(devices=...)'s efficiency there has its sweep's beside it
        X = user_path_text(text)
        M, V = X.shape
        rows = cp.asarray(np.repeat(np.arange(M, dtype=np.int64), np.diff(X.indptr)).repeat(X.data))
        cols = cp.asarray(np.repeat(X.indices.astype(np.int64), X.data))
        corpus = f"the words of site-packages' .py files (user_path.py's text, {text})"
    else:
        M, V, T = (300_000 // 64, 101_000 // 16, 100_000_000 // 64) if bench.small else (300_000, 101_000, 100_000_000)
        rows, cols, _, _ = synthetic_lda_corpus(M, V, n_tokens=T, n_components=100, zipf=1.0, random_state=1,
                                                backend="cupy")
        corpus = "synthetic, drawn from the LDA model (100 planted topics, Zipf words)"
    cp.cuda.Stream.null.synchronize()
    gen_s = time.perf_counter() - t0
    T = int(rows.size)
    case = f"scaling lda T={T} K={K}" + (" text" if text else "")
    params = {"M": M, "V": V, "T": T, "K": K, "dtype": "float32", "alpha": a, "beta": b, "visible_gpus": count,
              "corpus": corpus}
    floor = _floor_bytes(M, V, T, K)
    ar = L.allreduce_bytes(V, K)
    old_repeat = bench.repeat
    bench.repeat = min(bench.repeat, 7)

    # one device: the single-device path (eager sweeps: no CUDA graph at this size)
    rng = default_rng(0, backend="cupy")
    t0 = time.perf_counter()
    data, state = L.init(rng, rows, cols, M, V, K, a, b, "float32")
    cp.cuda.Stream.null.synchronize()
    init_s = time.perf_counter() - t0
    chain = _Chain(functools.partial(L.step, data=data), state, rng)
    for _ in range(_LDA_SETTLE):
        chain()
    t1 = _time_all(bench, chain, [cp.cuda.runtime.getDevice()])
    bench.record(case, "gpumcmc LDA sweep, 1 GPU (devices=None)", t1, T, bytes_moved=floor,
                 params=dict(params, devices=1, fused=bool(data.fused), sparse=bool(data.sparse)),
                 note=f"init {init_s:.2f} s; corpus generated in {gen_s:.2f} s")
    del chain, data, state
    pool.free_all_blocks()

    def sharded(shards, label, devices):
        rng = default_rng(0, backend="cupy")
        with shards.on(0):
            t0 = time.perf_counter()
            _, parts = L.shard_corpus(rows, cols, M, shards)
            alg = L.sharded_gibbs(shards)
            datas = L.shard_data(parts, shards, V, K, a, b, "float32")
            state = alg.init(rng, datas, K, "float32")
            del parts
            for d in set(devices):
                with cp.cuda.Device(d):
                    cp.cuda.get_current_stream().synchronize()
            init_s = time.perf_counter() - t0
            chain = _Chain(alg.step, state, rng)
            for _ in range(_LDA_SETTLE):
                chain()
            ms = _time_all(bench, chain, devices)
        w, wr, ring, link_s = _ring(ar, devices)
        link_ms = link_s * 1e3
        eff = t1 / (w * ms)
        tokens = [int(d.rows.size) for d in datas]
        note = (f"wall-clock until every device is idle; {shards.world} shard(s) on {w} GPU(s), tokens per shard "
                f"{tokens}; all-reduce of n_wk: {ar / 1e6:.1f} MB per sweep (a ring over {wr} GPUs moves "
                f"{ring / 1e6:.1f} MB through each GPU's links: {link_ms:.2f} ms at NVLink 4's nominal 900 GB/s, "
                f"450 GB/s each way, a floor, not measured; {link_ms / ms:.1%} of this sweep); time(1 GPU, "
                f"devices=None) / time = {t1 / ms:.2f}, scaling efficiency t1 / (W tW) = {eff:.2f}; "
                f"init {init_s:.2f} s")
        note += _allreduce_note(bench, shards, ar, np.int32)
        note = _layout_note(note, shards, w, count, label)
        bench.record(case, f"gpumcmc LDA sweep, devices={label}", ms, T, bytes_moved=floor,
                     params=dict(params, devices=w, shards=shards.world, allreduce_bytes=ar,
                                 scaling_efficiency=round(eff, 4)), note=note)
        del chain, state, datas
        _free(cp, devices)

    _layouts(bench, sharded, count, case, "gpumcmc LDA sweep", T, params)
    bench.repeat = old_repeat
    del rows, cols
    pool.free_all_blocks()


def _glm(bench):
    from gpumcmc import sampling
    from gpumcmc.models import glm as mg
    from gpumcmc.random import default_rng

    cp = bench.cupy
    pool = cp.get_default_memory_pool()
    N, K, C = (1 << 18 if bench.small else 40_000_000), 50, 4
    count = cp.cuda.runtime.getDeviceCount()
    case = f"scaling glm logistic N={N} K={K}"
    params = {"N": N, "K": K, "chains": C, "dtype": "float32", "visible_gpus": count, "family": "bernoulli",
              "data": "synthetic, drawn from the model: X ~ N(0, 1), beta ~ N(0, 1/K), y ~ Bernoulli(sigmoid(X beta))",
              "start": "the planted beta, step widths 3 / sqrt(0.2 N), not tuned"}
    t0 = time.perf_counter()
    g = cp.random.default_rng(1)
    X = g.standard_normal((N, K), dtype=np.float32)
    beta = g.standard_normal(K, dtype=np.float32) / np.float32(np.sqrt(K))
    y = (g.random(N, dtype=np.float32) < 1 / (1 + cp.exp(-(X @ beta)))).astype(np.float32)
    # Every chain starts at the planted beta with step widths of about three posterior sd (Fisher
    # information about 0.2 N a coefficient), the regime of a tuned sampler, and keeps them (no tuning).
    w0 = np.float32(3.0 / np.sqrt(0.2 * N))

    def start(state, etas):
        b = cp.broadcast_to(beta, state.beta.shape).copy()
        return state._replace(beta=b, width=cp.full(state.beta.shape, w0, dtype=np.float32), eta=etas)

    cp.cuda.Stream.null.synchronize()
    gen_s = time.perf_counter() - t0
    floor = K * (2 * N * 4 + 2 * C * N * 4)
    passes = mg.shard_passes(24)
    ar = mg.allreduce_bytes(C, K)
    n_ar = K * passes + 1
    old_repeat = bench.repeat
    bench.repeat = min(bench.repeat, 3)

    # one device: the single-device kernel sweep
    rng = default_rng(0, backend="cupy")
    t0 = time.perf_counter()
    state, data = mg.init(X, y, "bernoulli", C, 2.5)
    state = start(state, cp.ascontiguousarray(cp.broadcast_to(X @ beta, (C, N))))
    cp.cuda.Stream.null.synchronize()
    init_s = time.perf_counter() - t0
    chain = _Chain(functools.partial(mg.step, data=data, family="bernoulli", sigma_noise=1.0, n_warmup=0),
                   state, rng)
    chain()
    t1 = _time_all(bench, chain, [cp.cuda.runtime.getDevice()])
    bench.record(case, "gpumcmc slice-within-Gibbs sweep, 1 GPU (devices=None)", t1, N, bytes_moved=floor,
                 params=dict(params, devices=1),
                 note=f"eager sweeps (no CUDA graph); init {init_s:.2f} s; data generated on the GPU in {gen_s:.2f} s")
    del chain, state, data
    pool.free_all_blocks()

    def sharded(shards, label, devices):
        rng = default_rng(0, backend="cupy")
        with shards.on(0):
            t0 = time.perf_counter()
            datas = mg.row_parts(X, y, shards, "bernoulli", C)
            alg = sampling.sharded(mg.over_rows("bernoulli", 1.0, 0), shards)
            state = alg.init(rng, datas, C, 2.5)
            etas = []
            for i, d in enumerate(datas):
                with shards.on(i):
                    b = cp.array(beta, copy=True)  # a copy on shard i's GPU
                    etas.append(cp.ascontiguousarray(cp.broadcast_to(b @ d.Xt, (C, d.Xt.shape[1]))))
            state = start(state, tuple(etas))
            for d in set(devices):
                with cp.cuda.Device(d):
                    cp.cuda.get_current_stream().synchronize()
            init_s = time.perf_counter() - t0
            chain = _Chain(alg.step, state, rng)
            chain()
            ms = _time_all(bench, chain, devices)
        w, wr, ring, link_s = _ring(ar, devices)
        eff = t1 / (w * ms)
        rows = [int(d.Xt.shape[1]) for d in datas]
        note = (f"wall-clock until every device is idle; {shards.world} shard(s) on {w} GPU(s), rows per shard "
                f"{rows}; {n_ar} all-reduces a sweep ({passes} passes a coordinate, then the log-likelihood), "
                f"{ar} bytes in all (a ring over {wr} GPUs moves {ring:.0f} bytes through each GPU's links: "
                f"{link_s * 1e6:.2f} us at NVLink 4's nominal 900 GB/s, 450 GB/s each way, a floor, not measured; "
                f"at this size each all-reduce's latency, not its bytes, would set its cost); time(1 GPU, "
                f"devices=None) / time = {t1 / ms:.2f}, scaling efficiency t1 / (W tW) = {eff:.2f}; "
                f"init {init_s:.2f} s")
        per = ar // n_ar
        one_ms = _allreduce_ms(bench, shards, per, np.float64)
        if one_ms is not None:
            note += (f"; one all-reduce of {per} bytes alone, measured: {one_ms * 1e3:.1f} us, "
                     f"{n_ar} of them {n_ar * one_ms:.2f} ms ({n_ar * one_ms / ms:.1%} of this sweep)")
        note = _layout_note(note, shards, w, count, label)
        impl = ("gpumcmc slice-within-Gibbs sweep, 2 shards on one GPU (one_device(2))" if label == "one_device(2)"
                else f"gpumcmc slice-within-Gibbs sweep, devices={label}")
        bench.record(case, impl, ms, N, bytes_moved=floor,
                     params=dict(params, devices=w, shards=shards.world, allreduce_bytes=ar, allreduces=n_ar,
                                 scaling_efficiency=round(eff, 4)),
                     note=note)
        del chain, state, datas, alg
        _free(cp, devices)

    _layouts(bench, sharded, count, case, "gpumcmc slice-within-Gibbs sweep", N, params)
    bench.repeat = old_repeat
    del X, y, beta
    pool.free_all_blocks()


def run(bench):
    from gpumcmc import _validate

    models = [m.strip() for m in os.environ.get("GPUMCMC_SCALING_MODELS", "mixture,lda,glm").split(",")
              if m.strip()]
    # As fit runs its sweeps: value checks on and deferred (no wait per call), read once a model.
    for m in models:
        with _validate.deferred():
            {"mixture": _mixture, "lda": _lda, "glm": _glm}[m](bench)
        _validate.check()
