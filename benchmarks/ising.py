"""Ising checkerboard sweeps and RBM block Gibbs: gpumcmc against the peers, in one run.

(a) Heat-bath sweeps of an L x L periodic lattice at beta_c, L = 8,192 to
    65,536 (small: 1,024 and 2,048), one chain: gpumcmc's multispin path (the
    default `Ising.step`, observables off as a benchmark loop would run it, and
    on as `sample` runs it), its byte path, a JAX jit checkerboard
    (jnp.roll neighbour sums, jax.random uniforms, lax.fori_loop) and plain
    PyTorch (torch.roll, torch.rand) at the sizes that fit. Items are spin
    updates ("flips"): L^2 per sweep; flips/ns = items/s / 1e9.
    Floors: memory, the multispin lattice read and written once per sweep
    (each pass reads the other colour, a quarter of L^2 bytes, and writes its
    own, another quarter: L^2 bytes a sweep); and the Philox integer work, 10
    rounds of 2 IMAD.WIDE + 2 LOP3 = 40 integer instructions per call, a call
    for 8 spins (16 bits each; the other 16 bits only on a tie, 2^-16 of
    the spins), over the INT32 rate (64 lanes per SM per clock).
(b) RBM block Gibbs steps, chains x 784 visible x 512 hidden and 16,384 x
    1,024 x 1,024, float32: gpumcmc `RBM.step` (cuBLAS SGEMM + fused
    sigmoid-Bernoulli kernel) against PyTorch (matmul, sigmoid, bernoulli).
    Floor: the two GEMMs' FLOPs over the SGEMM rate measured in this run on an
    8,192^3 product.
(c) RBM.fit on binarised digits (persistent CD, scikit-learn's schedule,
    batches of 10) on the GPU, beside scikit-learn's BernoulliRBM on the CPU:
    time and pseudo-likelihood side by side. The default fit runs each epoch
    as one kernel (weights and chains in shared memory); the row
    `fused=False` times the launch-per-product path beside it.
(d) First, the public calls as users make them, per iteration (the difference
    of two whole calls of different lengths, as ../shared/bench/user_path.py
    times them): `Ising((L, L), beta=0.44).sample(n, random_state=0,
    progress=False)` at L = 16,384 (small: 2,048), and `RBM.fit` on the digits
    (progress off, and on: the defaults), each beside its bare loop, labelled
    "kernel only": the sweep with observables off, the sweep counting into a
    slot as sample does, and the fused PCD epoch.

    python -m benchmarks.ising OUT_DIR --user-path [--small]   # (d) alone, to OUT_DIR/ising-user-path.json
"""

from __future__ import annotations

import numpy as np

from benchmarks.harness import per_iteration_ms

SWEEPS = 10  # sweeps per timed call


def _philox_floor_ms(bench, flips: int) -> float:
    cp = bench.cupy
    clock_hz = cp.cuda.Device().attributes["ClockRate"] * 1e3
    int_rate = bench.sm_count * 64 * clock_hz  # INT32 lanes per second
    return flips / 8 * 40 / int_rate * 1e3


def _lattice(bench, L: int):
    """A cold (all-up) multispin state of one chain, built without the full byte lattice."""
    from gpumcmc.models.ising import IsingState

    cp = bench.cupy
    ones = np.uint64(0x1111111111111111)
    packed = cp.full((1, 2, L, L // 32), ones, dtype=cp.uint64)
    return IsingState(None, packed, cp.zeros((1, 2), dtype=cp.int64))


def _ising(bench):
    import gpumcmc
    from gpumcmc.models import Ising
    from gpumcmc.models.ising import BETA_C

    cp, torch, jax = bench.cupy, bench.torch, bench.jax
    sizes = (1024, 2048) if bench.small else (8192, 16384, 32768, 65536)
    beta = BETA_C
    for L in sizes:
        case = f"ising L={L} sweep"
        flips = L * L * SWEEPS
        free = cp.cuda.runtime.memGetInfo()[0]
        kw = dict(bytes_moved=L * L * SWEEPS, params={"L": L, "sweeps_per_call": SWEEPS, "beta": beta})
        floor_int = _philox_floor_ms(bench, flips)
        model = Ising((L, L), beta=beta, backend="cupy")
        rng = gpumcmc.random.default_rng(0, backend="cupy")
        state = _lattice(bench, L)
        for observe in (False, True):
            def ours(observe=observe):
                s = state
                for _ in range(SWEEPS):
                    s, _ = model.step(rng, s, observe=observe)
                return s
            ms = bench.time(ours)
            row = bench.record(case, f"gpumcmc multispin{' + observables' if observe else ''}", ms, flips, **kw)
            row["flips_per_ns"] = flips / (ms * 1e6)
            row["philox_floor_ms"] = floor_int
            row["fraction_of_philox_floor"] = floor_int / ms
        del state
        bench.free_memory()
        # the byte path: one byte per spin (what a per-site field needs)
        if L * L * 6 < free:
            bmodel = Ising((L, L), beta=beta, method="byte", backend="cupy")
            bstate = bmodel.init(1, 0, initial="up")

            def byte(bstate=bstate):
                s = bstate
                for _ in range(SWEEPS):
                    s, _ = bmodel.step(rng, s, observe=False)
                return s
            ms = bench.time(byte)
            row = bench.record(case, "gpumcmc byte", ms, flips, bytes_moved=L * L * 3 * SWEEPS,
                               params=kw["params"], note="floor: 4 neighbour reads + 1 write per site, "
                                                         "neighbours mostly cached: ~3 bytes/site")
            row["flips_per_ns"] = flips / (ms * 1e6)
            del bstate
            bench.free_memory()
        # peers: byte lattices with float uniforms; they need ~10 bytes per site of temporaries
        if L > (2048 if bench.small else 16384):
            for impl in ("jax jit checkerboard", "torch checkerboard"):
                bench.record(case, impl, None, flips, note=f"skipped at L={L}: its float temporaries "
                                                           "(~10 B/site) take most of the GPU's memory", **kw)
            continue
        if jax is not None:
            bench.peer(case, "jax jit checkerboard", flips, _jax_peer(jax, L, beta), sync="jax", **kw)
            bench.free_memory()
        if torch is not None:
            bench.peer(case, "torch checkerboard", flips, _torch_peer(torch, L, beta), **kw)
            bench.free_memory()
    for r in bench.rows:
        if r["case"].startswith("ising") and r.get("ms") and "flips_per_ns" not in r:
            r["flips_per_ns"] = r["items"] / (r["ms"] * 1e6)


def _jax_peer(jax, L, beta):
    import jax.numpy as jnp

    i = jnp.arange(L)
    colour = ((i[:, None] + i[None, :]) % 2).astype(jnp.int8)

    def half(s, key, c):
        nb = (jnp.roll(s, 1, 0) + jnp.roll(s, -1, 0) + jnp.roll(s, 1, 1) + jnp.roll(s, -1, 1)).astype(jnp.float32)
        p = jax.nn.sigmoid(2.0 * beta * nb)
        u = jax.random.uniform(key, s.shape, dtype=jnp.float32)
        new = jnp.where(u < p, jnp.int8(1), jnp.int8(-1))
        return jnp.where(colour == c, new, s)

    @jax.jit
    def sweeps(s, key):
        def body(_, carry):
            s, key = carry
            key, k0, k1 = jax.random.split(key, 3)
            return half(half(s, k0, 0), k1, 1), key
        return jax.lax.fori_loop(0, SWEEPS, body, (s, key))

    s0 = jnp.ones((L, L), dtype=jnp.int8)
    key = jax.random.PRNGKey(0)
    return lambda: sweeps(s0, key)[0]


def _torch_peer(torch, L, beta):
    i = torch.arange(L, device="cuda")
    masks = [((i[:, None] + i[None, :]) % 2) == c for c in (0, 1)]
    s = torch.ones((L, L), dtype=torch.int8, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)

    def sweeps():
        nonlocal s
        for _ in range(SWEEPS):
            for c in (0, 1):
                nb = (torch.roll(s, 1, 0) + torch.roll(s, -1, 0) + torch.roll(s, 1, 1)
                      + torch.roll(s, -1, 1)).float()
                p = torch.sigmoid(2.0 * beta * nb)
                u = torch.rand((L, L), device="cuda", generator=gen)
                new = torch.where(u < p, 1, -1).to(torch.int8)
                s = torch.where(masks[c], new, s)
        return s
    return sweeps


def _gemm_rate(bench) -> float:
    """Measured float32 GEMM FLOP/s (cuBLAS through CuPy) on an 8,192^3 product (small: 2,048^3)."""
    cp = bench.cupy
    n = 2048 if bench.small else 8192
    a = cp.ones((n, n), dtype=cp.float32)
    b = cp.ones((n, n), dtype=cp.float32)
    c = cp.empty((n, n), dtype=cp.float32)
    ms = bench.time(lambda: cp.matmul(a, b, out=c))
    bench.record(f"sgemm {n}^3", "cupy matmul (cuBLAS)", ms, 2 * n**3, flops=2.0 * n**3,
                 note="the peak FLOP rate the RBM rows are measured against")
    return 2.0 * n**3 / (ms * 1e-3)


def _rbm(bench):
    import gpumcmc
    from gpumcmc.models import RBM

    cp, torch = bench.cupy, bench.torch
    rate = _gemm_rate(bench)
    shapes = ((1024, 784, 512),) if bench.small else ((4096, 784, 512), (16384, 1024, 1024))
    for chains, nv, nh in shapes:
        case = f"rbm gibbs {chains}x{nv}x{nh} f32"
        flops = 2.0 * 2 * chains * nv * nh
        g = np.random.default_rng(0)
        W = g.normal(0, 0.05, (nv, nh)).astype(np.float32)
        b = g.normal(0, 0.1, nv).astype(np.float32)
        c = g.normal(0, 0.1, nh).astype(np.float32)
        rbm = RBM(W, b, c, backend="cupy")
        rng = gpumcmc.random.default_rng(0, backend="cupy")
        state = rbm.init(chains, rng)
        floor_ms = flops / rate * 1e3
        kw = dict(flops=flops, params={"chains": chains, "n_visible": nv, "n_hidden": nh,
                                       "gemm_floor_ms": floor_ms, "gemm_flops_per_s": rate})
        ms = bench.time(lambda: rbm.step(rng, state))
        row = bench.record(case, "gpumcmc RBM.step", ms, chains, **kw)
        row["fraction_of_gemm_floor"] = floor_ms / ms
        if torch is not None:
            tW, tb, tc = (torch.as_tensor(x, device="cuda") for x in (W, b, c))
            tv = (torch.rand((chains, nv), device="cuda") < 0.5).float()

            def torch_step():
                nonlocal tv
                h = torch.bernoulli(torch.sigmoid(tv @ tW + tc))
                tv = torch.bernoulli(torch.sigmoid(h @ tW.T + tb))
                return tv
            row = bench.peer(case, "torch matmul + sigmoid + bernoulli", chains, torch_step, **kw)
            if row.get("ms"):
                row["fraction_of_gemm_floor"] = floor_ms / row["ms"]
        del state, rbm
        bench.free_memory()


def _rbm_fit(bench):
    """PCD training on binarised digits: gpumcmc on the GPU against scikit-learn's BernoulliRBM on the CPU."""
    import time

    from gpumcmc.models import RBM
    from gpumcmc.models.rbm import load_binary_digits

    X = load_binary_digits()
    n_hidden, n_iter = (64, 2) if bench.small else (256, 20)
    case = f"rbm fit digits {X.shape[0]}x{X.shape[1]} hidden={n_hidden} epochs={n_iter}"
    params = {"n_hidden": n_hidden, "n_iter": n_iter, "batch_size": 10, "learning_rate": 0.05}
    for fused in (None, False):  # compile and warm up both paths
        RBM(n_hidden=n_hidden, n_iter=1, backend="cupy", progress=False, fused=fused).fit(X[:50])
    for fused, label in ((None, "gpumcmc RBM.fit (GPU)"), (False, "gpumcmc RBM.fit (GPU), fused=False")):
        ours = RBM(n_hidden=n_hidden, learning_rate=0.05, n_iter=n_iter, random_state=0, backend="cupy",
                   progress=False, fused=fused).fit(X)
        bench.record(case, label, ours.fit_seconds_ * 1e3, X.shape[0] * n_iter, params=params,
                     note=f"pseudo-likelihood {ours.pseudo_likelihood(X):.2f}; one run, host clock")
    try:
        from sklearn.neural_network import BernoulliRBM
    except ImportError:
        bench.record(case, "scikit-learn BernoulliRBM (CPU)", None, X.shape[0] * n_iter, note="not installed")
        return
    t0 = time.perf_counter()
    sk = BernoulliRBM(n_components=n_hidden, learning_rate=0.05, batch_size=10, n_iter=n_iter,
                      random_state=0).fit(X)
    ms = (time.perf_counter() - t0) * 1e3
    pl = RBM.from_sklearn(sk).pseudo_likelihood(X)
    bench.record(case, "scikit-learn BernoulliRBM (CPU)", ms, X.shape[0] * n_iter, params=params,
                 note=f"pseudo-likelihood {pl:.2f}; one run, host clock")


def _ising_public(bench):
    """Ising.sample through the public call (user_path.py's) beside its bare sweep loops, per sweep."""
    import gpumcmc
    from gpumcmc.models import Ising

    cp = bench.cupy
    L = 2048 if bench.small else 16384
    beta, a, b = 0.44, 5, 405
    case = f"ising L={L} per sweep, public call"
    params = {"L": L, "beta": beta, "calls": [a, b], "chains": 1}
    public = lambda n: Ising((L, L), beta=beta).sample(n, random_state=0, progress=False)  # noqa: E731
    ms_public = per_iteration_ms(public, a, b)
    model = Ising((L, L), beta=beta, backend="cupy")
    rng = gpumcmc.random.default_rng(0, backend="cupy")
    state = model.init(1, rng, initial="up")
    slot = cp.zeros((1, 2), dtype=cp.int64)

    def bare(n, observe):
        for _ in range(n):
            model._sweep(rng, state, slot if observe else None)

    ms_off = per_iteration_ms(lambda n: bare(n, False), a, b)
    ms_slot = per_iteration_ms(lambda n: bare(n, True), a, b)
    for impl, ms in (("gpumcmc Ising.sample, defaults (progress=False)", ms_public),
                     ("kernel only: sweep, observables off", ms_off),
                     ("kernel only: sweep counting into a slot (as sample)", ms_slot)):
        row = bench.record(case, impl, ms, L * L, params=params)
        row["flips_per_ns"] = L * L / (ms * 1e6)
        row["ratio_to_observables_off"] = ms / ms_off
    del state, slot
    bench.free_memory()


def _rbm_fit_public(bench):
    """RBM.fit through the public call (progress off; and on, the defaults) beside the bare fused epoch loop."""
    import gpumcmc
    from gpumcmc import _loader
    from gpumcmc.models import RBM
    from gpumcmc.models import rbm as R

    cp = bench.cupy
    X = R.load_binary_digits()
    nh, a, b = 256, 2, 12
    case = f"rbm fit digits {X.shape[0]}x{X.shape[1]} hidden={nh} per epoch, public call"
    params = {"n_hidden": nh, "batch_size": 10, "learning_rate": 0.05, "calls": [a, b]}
    rows = {}
    for progress in (False, True):
        fit = lambda n, progress=progress: RBM(n_hidden=nh, learning_rate=0.05, n_iter=n,  # noqa: E731
                                               random_state=0, backend="cupy", progress=progress).fit(X)
        rows[progress] = per_iteration_ms(fit, a, b)
    Xd = _loader.contiguous(cp.asarray(X, dtype=cp.float32))
    edges = np.linspace(0, len(X), -(-len(X) // 10) + 1).astype(int)
    edges_dev = cp.asarray(edges, dtype=cp.int64)
    rng = gpumcmc.random.default_rng(0, backend="cupy")
    W = rng.normal(0.0, 0.01, size=(X.shape[1], nh), dtype=np.float32)
    bv, c = cp.zeros(X.shape[1], cp.float32), cp.zeros(nh, cp.float32)
    h = cp.zeros((10, nh), cp.float32)

    def bare(n):
        for _ in range(n):
            off = rng.advance(2 * (len(edges) - 1))
            R._pcd_epoch(Xd, edges_dev, len(edges) - 1, W, bv, c, h, 0.05, rng.key, off)

    ms_bare = per_iteration_ms(bare, a, b)
    for impl, ms in (("gpumcmc RBM.fit, progress=False", rows[False]),
                     ("gpumcmc RBM.fit, defaults (progress bar on)", rows[True]),
                     ("kernel only: fused PCD epoch", ms_bare)):
        row = bench.record(case, impl, ms, X.shape[0], params=params)
        row["ratio_to_kernel_only"] = ms / ms_bare


def user_path(out_dir, small=False):
    """(d) alone: the public calls against their bare loops; writes OUT_DIR/ising-user-path.json."""
    from pathlib import Path

    from benchmarks.harness import Bench, format_table

    bench = Bench(small=small)
    _ising_public(bench)
    _rbm_fit_public(bench)
    print(format_table(bench.rows))
    print(bench.write("ising-user-path", Path(out_dir)))


def run(bench):
    _ising_public(bench)
    _rbm_fit_public(bench)
    _ising(bench)
    _rbm(bench)
    _rbm_fit(bench)


if __name__ == "__main__":  # python -m benchmarks.ising OUT_DIR --user-path [--small]
    import sys

    if "--user-path" not in sys.argv:
        raise SystemExit("python -m benchmarks.ising OUT_DIR --user-path [--small]; the whole suite runs through "
                         "python -m benchmarks.")
    user_path(sys.argv[1], small="--small" in sys.argv)
