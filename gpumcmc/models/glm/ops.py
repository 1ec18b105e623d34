"""The launchers of ``kernels_cu/glm.cu``, each naming its kernel's arguments, and their NumPy twins: the
coordinate sweep (twin :func:`.algorithm._sweep_coefs`), the draw of ``mu, Sigma`` (:func:`_niw_twin`) and
the sweep with the rows split over devices (twin :func:`.sharded.over_rows`'s array code).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ... import _kernel_args
from ... import backend as _backend
from ..._config import config
from ...glm import _CODE as _FAMILY  # the kernels' family codes
from ...shards import Replica

FILE = "glm.cu"
_SEG_NAMES = ("glm_slice_segment<float>", "glm_slice_segment<double>", "glm_slice_pass<float>",
              "glm_slice_pass<double>", "glm_slice_shard_eval<float>", "glm_slice_shard_eval<double>",
              "glm_slice_decide<float>", "glm_slice_decide<double>")
_PMAX = 16         # candidates one pass evaluates (GLM_PMAX in glm.cu: a constant of the kernels, not a knob)
_NIW_CH = 16       # GLM_NIW_CH in glm.cu


def _prior_terms(xp, beta, mu, prec, k):
    """``(pkk, muk, c)``: the prior's part of coordinate ``k``'s conditional is
    ``-pkk (x - muk)^2 / 2 - (x - muk) c``."""
    d = beta - mu[:, None, :]                                  # (C, G, K)
    pk = prec[:, k, :]                                         # (C, K)
    c = xp.einsum("cgj,cj->cg", d, pk) - d[:, :, k] * pk[:, k][:, None]
    return pk[:, k][:, None], mu[:, k][:, None], c


def _tuned_width(xp, where, w, delta):
    """The warm-up's step width where ``where`` holds: towards three times the move ``delta``."""
    return xp.where(where, 0.9 * w + 0.1 * (3.0 * xp.abs(delta) + 1e-3 * w), w)


def _around(kernel: str, varying: tuple, values: tuple) -> tuple:
    """``(head, tail)``: the packed arguments ``values`` of ``kernel`` before and after the consecutive
    parameters ``varying``, so a launch that changes only those takes ``*head, *varying, *tail``."""
    names = _kernel_args.signature(FILE, kernel).names
    i = names.index(varying[0])
    if names[i:i + len(varying)] != tuple(varying):
        raise ValueError(f"{kernel} in {FILE}: the parameters {', '.join(varying)} do not follow one another.")
    return values[:i], values[i + len(varying):]


class _ChunkPlan(NamedTuple):
    chunk_rows: int     # rows per chunk (the last chunk of a group may hold fewer)
    n_chunks: int       # chunks over all groups (each group has at least one)
    chunk_group: object  # (n_chunks,) int32 group of each chunk
    chunk_first: object  # (G + 1,) int32 first chunk of each group, then n_chunks
    block: int          # threads per block


def _chunk_plan(xp, starts, ends, n_chains, shape=None):
    """Each group's rows in chunks for glm_slice_pass, enough blocks to fill the GPU; ``shape``: (rows a
    chunk, threads a block) to use instead (a part of the groups split as all of them would be)."""
    from ... import _loader

    st = np.asarray(_backend.to_host(starts), dtype=np.int64)
    en = np.asarray(_backend.to_host(ends), dtype=np.int64)
    sizes = en - st
    N = int(en[-1]) if len(en) else 0
    biggest = int(sizes.max()) if len(sizes) else 0
    # Threads a block: about two rows each in the largest group, 32 to 256. Small groups (the
    # hierarchical model's) get small blocks, many resident per SM: a block's time is mostly the latency
    # of its few dependent steps, so more at once makes the pass short (benchmarks/NOTES.md).
    half = -(-biggest // 2)
    block = config.glm_block or min(256, max(32, 1 << max(0, half - 1).bit_length()))
    rows = config.glm_chunk_rows
    if shape is not None:
        rows, block = shape
    elif rows is None:  # about four blocks per SM over all chains, whole blocks of rows
        target = -(-N * n_chains // (4 * _loader.sm_count()))
        rows = max(block, -(-target // block) * block)
    rows = max(1, int(rows))
    nch = np.maximum(1, -(-sizes // rows))
    first = np.concatenate([[0], np.cumsum(nch)]).astype(np.int32)
    group = np.repeat(np.arange(len(sizes), dtype=np.int32), nch)
    return _ChunkPlan(rows, int(first[-1]), xp.asarray(group), xp.asarray(first), block)


def _slice_kernel_coordinate(xp, state, beta, eta, width, warm, data, family, sigma_noise, k,
                             max_steps_out, max_shrink, e, u, us):
    """Coordinate ``k`` by ``glm_slice_segment``, a block per (chain, group), for ``max_steps_out >= _PMAX``:
    ``beta``, ``eta``, ``width`` updated in place; returns the fallbacks per chain."""
    from ... import _loader

    C, G, K = beta.shape
    dt = beta.dtype
    N = eta.shape[1]
    x0 = xp.ascontiguousarray(beta[:, :, k])
    w = xp.ascontiguousarray(width[:, :, k])
    pkk, muk, c = _prior_terms(xp, beta, state.mu, state.prec, k)
    cpr = xp.ascontiguousarray(c, dtype=dt)
    pkk = xp.ascontiguousarray(pkk[:, 0], dtype=dt)
    muk = xp.ascontiguousarray(muk[:, 0], dtype=dt)
    e, u, us = (xp.ascontiguousarray(a) for a in (e, u, us))
    xnew = xp.empty((C, G), dtype=dt)
    ok = xp.empty((C, G), dtype=np.uint8)
    name = _SEG_NAMES[0] if dt == np.float32 else _SEG_NAMES[1]
    fn = _loader.get_function("glm.cu", name, _SEG_NAMES)
    rows = N / max(G, 1)
    block = 1024 if rows >= 16384 else 256 if rows >= 1024 else 128 if rows >= 256 else 64
    # The kernel's registers may not allow 1,024 threads a block: take the largest power of two it allows.
    while block > 64 and block > fn.max_threads_per_block:
        block //= 2
    fn((G, C), (block,),
       _kernel_args.args(FILE, "glm_slice_segment", xk=data.Xt[k], y=data.y, lgy=_loader.NULL, eta=eta,
                         starts=data.starts, ends=data.ends, x0a=x0, wa=w, cpr=cpr, pkk=pkk, muk=muk, ea=e, ua=u,
                         usa=us, N=_loader.i64(N), G=_loader.i32(G), C=_loader.i32(C),
                         max_out=_loader.i32(max_steps_out), max_shrink=_loader.i32(max_shrink),
                         family=_loader.i32(_FAMILY[family]), sigma=np.float64(sigma_noise), xnew_out=xnew,
                         ok_out=ok))
    beta[:, :, k] = xnew
    delta = xnew - x0
    width[:, :, k] = _tuned_width(xp, warm, w, delta)
    return (ok == 0).sum(axis=1)


def _slice_pass_sweep(xp, state, beta, eta, width, data, family, sigma_noise, n_warmup, max_steps_out,
                      max_shrink, e_all, u_all, us_all):
    """One sweep by ``glm_slice_pass``, two launches a coordinate: ``beta``, ``eta``, ``width`` updated in
    place; returns the fallbacks per chain."""
    import cupy

    from ... import _loader

    C, G, K = beta.shape
    dt = beta.dtype
    N = eta.shape[1]
    plan = data.plan
    ctype = _loader.CTYPE[np.dtype(dt)]
    fn = _loader.get_function("glm.cu", f"glm_slice_pass<{ctype}>", _SEG_NAMES)
    launcher = _loader.packed_launcher(fn, "glm.cu", "glm_slice_pass", ctype)
    CG = C * G
    part = xp.empty((C * plan.n_chunks * _PMAX,), dtype=np.float64)
    counter = xp.zeros((CG,), dtype=np.int32)
    stL, stR = xp.empty((CG,), dtype=dt), xp.empty((CG,), dtype=dt)
    stLogy = xp.empty((CG,), dtype=np.float64)
    stS, stDone = xp.empty((CG,), dtype=np.int32), xp.empty((CG,), dtype=np.int32)
    dpend = xp.zeros((CG,), dtype=dt)
    fb = xp.zeros((CG,), dtype=np.int32)
    mu = xp.ascontiguousarray(state.mu, dtype=dt)
    prec = xp.ascontiguousarray(state.prec, dtype=dt)
    it = xp.ascontiguousarray(state.it, dtype=np.int64)
    e_all, u_all, us_all = (xp.ascontiguousarray(a) for a in (e_all, u_all, us_all))
    d1 = max(1, min(config.glm_spec_shrink, _PMAX - max_steps_out, max_shrink))
    # Every argument but k, kprev and first stays the same over the sweep: bound by name once.
    head, tail = _around("glm_slice_pass", ("k", "kprev", "first"), _kernel_args.packed(
        FILE, "glm_slice_pass", Xt=data.Xt.data.ptr, y=data.y.data.ptr, eta=eta.data.ptr, beta=beta.data.ptr,
        width=width.data.ptr, mu=mu.data.ptr, prec=prec.data.ptr, ea=e_all.data.ptr, ua=u_all.data.ptr,
        usa=us_all.data.ptr, starts=data.starts.data.ptr, ends=data.ends.data.ptr,
        chunk_group=plan.chunk_group.data.ptr, chunk_first=plan.chunk_first.data.ptr, iters=it.data.ptr,
        part=part.data.ptr, counter=counter.data.ptr, stL=stL.data.ptr, stR=stR.data.ptr, stLogy=stLogy.data.ptr,
        stS=stS.data.ptr, stDone=stDone.data.ptr, dpend=dpend.data.ptr, fb=fb.data.ptr, N=N,
        chunk_rows=plan.chunk_rows, n_chunks=plan.n_chunks, G=G, C=C, K=K, k=0, kprev=0, first=0,
        max_out=max_steps_out, max_shrink=max_shrink, d1=d1, n_warmup=int(n_warmup), family=_FAMILY[family],
        sigma=float(sigma_noise)))
    grid = C * plan.n_chunks
    stream = cupy.cuda.get_current_stream().ptr
    for k in range(K):
        for first in (1, 0):
            launcher(grid, plan.block, stream, *head, k, k - 1 if first else -1, first, *tail)
    # The last coordinate's step, as the twin adds it.
    d = dpend.reshape(C, G)
    eta += (d[:, data.gid] if G > 1 else d) * data.Xt[K - 1][None, :]
    return fb.reshape(C, G).sum(axis=1).astype(np.int64)


def _niw_fits(K):
    """Whether ``glm_niw``'s shared memory takes K coefficients (else the GPU too takes :func:`_niw_twin`)."""
    return 8 * (4 * K * K + K + _NIW_CH * K) <= 48 * 1024


def _niw_kernel(xp, beta, kappa0, psi0, gam, zn, z):
    """:func:`.algorithm._draw_hyper`'s draw by ``glm_niw``, one block per chain."""
    from ... import _loader

    C, G, K = beta.shape
    dt = beta.dtype
    ct = _loader.CTYPE[np.dtype(dt)]
    names = ("glm_niw<float>", "glm_niw<double>")
    fn = _loader.get_function("glm.cu", f"glm_niw<{ct}>", names)
    mu = xp.empty((C, K), dtype=dt)
    prec = xp.empty((C, K, K), dtype=dt)
    sigma = xp.empty((C, K, K), dtype=dt)
    fn((C,), (256,),
       _kernel_args.args(FILE, "glm_niw", beta=xp.ascontiguousarray(beta),
                         psi0=xp.ascontiguousarray(psi0, dtype=np.float64), gam=gam, zn=zn, z=z, G=_loader.i32(G),
                         K=_loader.i32(K), kappa0=np.float64(kappa0), mu_out=mu, prec_out=prec, sigma_out=sigma),
       shared_mem=8 * (4 * K * K + K + _NIW_CH * K))
    return mu, prec, sigma


def _niw_twin(xp, beta, kappa0, psi0, gam, zn, z):
    """The twin of ``glm_niw`` (and its fallback on the GPU for large K). With ``psi = C C^T`` and the
    Bartlett factor ``A``, ``M = C A^-T`` gives ``Sigma = M M^T``, ``N = C^-T A`` gives ``Sigma^-1 = N N^T``
    and ``mu = G bbar / (kappa0 + G) + M z / sqrt(kappa0 + G)``."""
    C, G, K = beta.shape
    b = beta.astype(np.float64)
    bbar = b.mean(axis=1)                                         # (C, K)
    dev = b - bbar[:, None, :]
    S = xp.einsum("cgi,cgj->cij", dev, dev)
    kn = kappa0 + G
    psi = psi0[None] + S + (kappa0 * G / kn) * bbar[:, :, None] * bbar[:, None, :]
    psi = 0.5 * (psi + xp.swapaxes(psi, 1, 2))
    chol = xp.linalg.cholesky(psi)
    idx = xp.arange(K)
    A = xp.tril(zn, -1)
    A[:, idx, idx] = xp.sqrt(2.0 * gam)
    # M^T = A^-1 C^T and N = C^-T A, by general solves (the matrices are triangular)
    M = xp.swapaxes(xp.linalg.solve(A, xp.swapaxes(chol, 1, 2)), 1, 2)
    Nn = xp.linalg.solve(xp.swapaxes(chol, 1, 2), A)
    sigma = M @ xp.swapaxes(M, 1, 2)
    sigma = 0.5 * (sigma + xp.swapaxes(sigma, 1, 2))
    prec = Nn @ xp.swapaxes(Nn, 1, 2)
    prec = 0.5 * (prec + xp.swapaxes(prec, 1, 2))
    mu = (G / kn) * bbar + xp.einsum("cij,cj->ci", M, z) / math.sqrt(kn)
    dt = beta.dtype
    return mu.astype(dt), prec.astype(dt), sigma.astype(dt)


class _ShardedPasses:
    """The GPUs' sweep with the rows split over ``shards`` (twin: :func:`.sharded.over_rows`'s array code): per
    coordinate and pass, each shard's ``glm_slice_shard_eval``, the sum, each device's ``glm_slice_decide``.
    Kernels and buffers are made once, for ``dev_of`` (each local shard's copy of the sweep's state, one per
    distinct device) and ``first_shard`` (each copy's first local shard); a call runs one sweep."""

    def __init__(self, shards, data, prior, family, sigma_noise, n_warmup, m, max_shrink, d1):
        from ... import _loader

        xp = shards.xp
        self.mu_r, self.prec_r = Replica(shards, prior[0]), Replica(shards, prior[1])
        devs, self.dev_of = [], []
        for dev in shards.devices:
            if dev not in devs:
                devs.append(dev)
            self.dev_of.append(devs.index(dev))
        self.first_shard = [self.dev_of.index(j) for j in range(len(devs))]
        self.shards, self.data = shards, data
        self.sigma_noise, self.n_warmup, self.m, self.max_shrink, self.d1 = sigma_noise, n_warmup, m, max_shrink, d1
        ctype = _loader.CTYPE[np.dtype(prior[0].dtype)]
        self.fam = _FAMILY[family]
        C = prior[0].shape[0]
        self.launch_eval, self.launch_decide, self.bufs = [], [], []
        for i in self.first_shard:
            with shards.on(i):
                fe = _loader.get_function("glm.cu", f"glm_slice_shard_eval<{ctype}>", _SEG_NAMES)
                fd = _loader.get_function("glm.cu", f"glm_slice_decide<{ctype}>", _SEG_NAMES)
                self.launch_eval.append(_loader.packed_launcher(fe, "glm.cu", "glm_slice_shard_eval", ctype))
                self.launch_decide.append(_loader.packed_launcher(fd, "glm.cu", "glm_slice_decide", ctype))
        for i in range(len(data)):
            with shards.on(i):
                plan = data[i].plan
                self.bufs.append(dict(part=xp.empty((C * plan.n_chunks * _PMAX,), dtype=np.float64),
                                      counter=xp.zeros((C,), dtype=np.int32),
                                      sums=xp.zeros((C, 1, _PMAX), dtype=np.float64)))

    def states(self, state, draws):
        """The sweep's state on each distinct device: beta and width (copies, moved in place), the prior, the
        counter, the random numbers and the pass state."""
        shards, xp = self.shards, self.shards.xp
        C, G, K = state.beta.shape
        reps = [Replica(shards, a) for a in (state.beta, state.width, state.it) + draws]
        out = []
        for j, i in enumerate(self.first_shard):
            with shards.on(i):
                beta, width, it, e, u, us = (r(i) for r in reps)
                dt = beta.dtype
                # (a copy for shard 0's device; the others' replicas are fresh copies already)
                dv = dict(beta=beta.copy() if j == 0 else beta, width=width.copy() if j == 0 else width,
                          mu=self.mu_r(i), prec=self.prec_r(i), it=it, e=e, u=u, us=us,
                          L=xp.zeros((C, G), dtype=dt), R=xp.zeros((C, G), dtype=dt),
                          S=xp.zeros((C, G), dtype=np.int32), logy=xp.zeros((C, G), dtype=np.float64),
                          settled=xp.zeros((C, G), dtype=np.int32), dpend=xp.zeros((C, G), dtype=dt),
                          fb=xp.zeros((C, G), dtype=np.int32))
                for name in ("e", "u", "us", "mu", "prec"):
                    dv[name] = xp.ascontiguousarray(dv[name])
                out.append(dv)
        return out

    def _launches(self, dvs, etas):
        """Each local shard's and each device's launch of one sweep, its fixed arguments packed once."""
        import cupy

        shards, data, bufs = self.shards, self.data, self.bufs
        m, max_shrink, d1 = self.m, self.max_shrink, self.d1
        evals, decides = [], []
        for i in range(len(data)):
            dv, d, b, plan = dvs[self.dev_of[i]], data[i], bufs[i], data[i].plan
            C, G, K = dv["beta"].shape
            with shards.on(i):
                stream = cupy.cuda.get_current_stream().ptr
            head, tail = _around("glm_slice_shard_eval", ("k", "kprev", "first"), _kernel_args.packed(
                FILE, "glm_slice_shard_eval", Xt=d.Xt.data.ptr, y=d.y.data.ptr, eta=etas[i].data.ptr,
                beta=dv["beta"].data.ptr, width=dv["width"].data.ptr, ua=dv["u"].data.ptr, usa=dv["us"].data.ptr,
                starts=d.starts.data.ptr, ends=d.ends.data.ptr, chunk_group=plan.chunk_group.data.ptr,
                chunk_first=plan.chunk_first.data.ptr, part=b["part"].data.ptr, counter=b["counter"].data.ptr,
                stL=dv["L"].data.ptr, stR=dv["R"].data.ptr, stS=dv["S"].data.ptr, stDone=dv["settled"].data.ptr,
                dpend=dv["dpend"].data.ptr, sums=b["sums"].data.ptr, N=d.Xt.shape[1], chunk_rows=plan.chunk_rows,
                n_chunks=plan.n_chunks, G=G, C=C, K=K, k=0, kprev=0, first=0, max_out=m, max_shrink=max_shrink,
                d1=d1, family=self.fam, sigma=float(self.sigma_noise)))
            evals.append((self.launch_eval[self.dev_of[i]], (C * plan.n_chunks, plan.block, stream) + head, tail))
        for j, i in enumerate(self.first_shard):
            dv = dvs[j]
            C, G, K = dv["beta"].shape
            with shards.on(i):
                stream = cupy.cuda.get_current_stream().ptr
            head, tail = _around("glm_slice_decide", ("k", "first"), _kernel_args.packed(
                FILE, "glm_slice_decide", beta=dv["beta"].data.ptr, width=dv["width"].data.ptr,
                mu=dv["mu"].data.ptr, prec=dv["prec"].data.ptr, ea=dv["e"].data.ptr, ua=dv["u"].data.ptr,
                usa=dv["us"].data.ptr, iters=dv["it"].data.ptr, sums=bufs[i]["sums"].data.ptr,
                stL=dv["L"].data.ptr, stR=dv["R"].data.ptr, stLogy=dv["logy"].data.ptr, stS=dv["S"].data.ptr,
                stDone=dv["settled"].data.ptr, dpend=dv["dpend"].data.ptr, fb=dv["fb"].data.ptr, G=G, C=C, K=K,
                k=0, first=0, max_out=m, max_shrink=max_shrink, d1=d1, n_warmup=int(self.n_warmup)))
            decides.append((self.launch_decide[j], (C * G, 32, stream) + head, tail))
        return evals, decides

    def __call__(self, dvs, etas, K, n_pass, reduce):
        """One sweep of ``n_pass`` passes a coordinate: every shard's sums, all-reduced by ``reduce``, then every
        device's decisions. Each launch sets its device directly; the caller's is current again at the end."""
        import cupy

        eval_launches, decide_launches = self._launches(dvs, etas)
        sums = [b["sums"] for b in self.bufs]
        ev_dev = [self.shards.devices[i] for i in range(len(self.data))]
        de_dev = [self.shards.devices[i] for i in self.first_shard]
        rt = cupy.cuda.runtime
        prev = rt.getDevice()
        try:
            for k in range(K):
                for p in range(n_pass):
                    first = int(p == 0)
                    for (launch, head, tail), dev in zip(eval_launches, ev_dev):
                        rt.setDevice(dev)
                        launch(*head, k, k - 1 if first else -1, first, *tail)
                    rt.setDevice(prev)
                    reduce(sums)
                    for (launch, head, tail), dev in zip(decide_launches, de_dev):
                        rt.setDevice(dev)
                        launch(*head, k, first, *tail)
        finally:
            rt.setDevice(prev)
