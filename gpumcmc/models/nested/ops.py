"""The launches of ``kernels_cu/nested.cu`` beside their NumPy twins: :class:`_GpuOps` / :class:`_NumpyOps` (row
sorts, the evidence bookkeeping, the slice rounds), and the sinusoid's likelihood and fused slice step (whose
twin is ``_NestedSteps._slice_generic``)."""

from __future__ import annotations

import ctypes
import threading
import warnings

import numpy as np

from ... import _kernel_args, _loader

_KERNELS = ("sinusoid_ssq<float>", "sinusoid_ssq<double>", "sinusoid_slice<float>", "sinusoid_slice<double>",
            "nested_progress", "nested_argsort_rows", "nested_slice_start", "nested_slice_round")

# a proposal's clip into the open unit cube before the prior transform, as nested_clip of nested.cu
_CLIP_LO, _CLIP_HI = 1e-12, 1 - 1e-12


class SliceRounds:
    """One slice step's shrinkage rounds of W walkers, made by ``slice_start`` and advanced in place by
    ``slice_round``, the caller evaluating the likelihood at ``uc`` between them. A walker is active (and
    changes) while ``slice < n_steps``. Fields (float64 unless said): ``u, v`` (W, ndim), ``logl`` (W,) the
    points; read only ``lstar`` (W,), ``dirs`` (n_steps, W, ndim), ``unif`` (n_steps, max_shrink + 1, W);
    ``prop`` (W, ndim) the proposals, ``uc`` them clipped into the open cube (an inactive walker's: its
    point), ``tt`` (W,) their places on the slice, ``inside`` (W,) int32; ``lo, hi`` (W,) the intervals,
    ``slice, shrink`` (W,) int32, ``nrej`` the misses; the caller's ``fine`` () bool and ``ncall`` () int64;
    on CuPy ``word`` (:class:`_RoundWord`) and ``prev, last``, the tickets of the two latest rounds.
    """

    __slots__ = ("u", "v", "logl", "lstar", "dirs", "unif", "prop", "uc", "tt", "inside", "lo", "hi", "slice",
                 "shrink", "nrej", "fine", "ncall", "n_steps", "max_shrink", "word", "prev", "last")

    def __init__(self, xp, lstar, dirs, unif, fine, ncall):
        n_steps, W, d = dirs.shape
        f64 = np.float64
        self.lstar, self.dirs, self.unif = lstar, dirs, unif
        self.n_steps, self.max_shrink = n_steps, unif.shape[1] - 1
        self.u, self.v, self.prop, self.uc = (xp.empty((W, d), dtype=f64) for _ in range(4))
        self.logl, self.tt, self.lo, self.hi, self.nrej = (xp.empty((W,), dtype=f64) for _ in range(5))
        self.inside, self.slice, self.shrink = (xp.empty((W,), dtype=np.int32) for _ in range(3))
        self.fine, self.ncall, self.word, self.prev, self.last = fine, ncall, None, None, None


class _NumpyOps:
    """The sampler's per-iteration operations on NumPy: the twins of :class:`_GpuOps`."""

    xp = np

    def argsort_rows(self, x):
        return np.argsort(x, axis=1)

    def progress(self, n_runs, offsets, lag):
        """The evidence and stopping-rule bookkeeping of ``n_runs`` runs."""
        return _NumpyProgress(n_runs, offsets)

    def slice_start(self, u, v, logl, lstar, dirs, unif, fine, ncall):
        """A :class:`SliceRounds` started at ``u, v, logl`` (not modified): every walker on slice 0, its first
        proposal made."""
        st = SliceRounds(np, lstar, dirs, unif, fine, ncall)
        st.u[...], st.v[...], st.logl[...] = u, v, logl
        st.nrej[...], st.slice[...], st.shrink[...] = 0.0, 0, 0
        st.lo[...] = -unif[0, 0]
        st.hi[...] = 1.0 + st.lo
        self._propose(st)
        return st

    def slice_round(self, st, pv, pl):
        """Each active walker's proposal, with its transform ``pv`` and log-likelihood ``pl``, accepted above its
        threshold or shrinking its interval; then the next proposals. Inactive walkers' rows are not read."""
        a = np.flatnonzero(st.slice < st.n_steps)
        st.ncall[...] += a.size
        lv = np.where(st.inside[a] != 0, pl[a], -np.inf)
        if not (lv < np.inf).all():
            st.fine[...] = False
        ok = lv > st.lstar[a]
        acc, miss = a[ok], a[~ok]
        st.u[acc] = st.prop[acc]
        st.v[acc] = pv[acc]
        st.logl[acc] = lv[ok]
        t = st.tt[miss]
        st.lo[miss[t < 0]] = t[t < 0]
        st.hi[miss[t >= 0]] = t[t >= 0]
        st.nrej[miss] += 1.0
        st.shrink[miss] += 1
        nxt = np.concatenate([acc, miss[st.shrink[miss] >= st.max_shrink]])
        st.slice[nxt] += 1
        st.shrink[nxt] = 0
        fresh = nxt[st.slice[nxt] < st.n_steps]
        start = -st.unif[st.slice[fresh], 0, fresh]
        st.lo[fresh] = start
        st.hi[fresh] = 1.0 + start
        self._propose(st)

    def slices_done(self, st):
        return not bool((st.slice < st.n_steps).any())

    @staticmethod
    def round_eval(evaluate):
        """The rounds' likelihood ``evaluate(uc) -> (v, logl)``: on NumPy, ``evaluate`` itself."""
        return evaluate

    @staticmethod
    def _propose(st):
        """The active walkers' proposals ``u + t dirs``, ``t = lo + (hi - lo) * unif[slice, shrink + 1]``."""
        a = np.flatnonzero(st.slice < st.n_steps)
        i = st.slice[a]
        lo = st.lo[a]
        t = lo + (st.hi[a] - lo) * st.unif[i, st.shrink[a] + 1, a]
        q = st.u[a] + t[:, None] * st.dirs[i, a]
        st.prop[...] = st.u
        st.prop[a] = q
        st.tt[...] = 0.0
        st.tt[a] = t
        st.inside[...] = 0
        st.inside[a] = ((q > 0) & (q < 1)).all(axis=1)
        np.clip(st.prop, _CLIP_LO, _CLIP_HI, out=st.uc)


class _GpuOps:
    """The sampler's per-iteration operations on CuPy, each one launch of ``kernels_cu/nested.cu``."""

    def __init__(self, cp):
        self.xp = cp

    def argsort_rows(self, x):
        """``cupy.argsort(x, axis=1)``'s permutation (stable, NaN last) of a 2-D float64 array, in one launch
        of ``nested_argsort_rows``, without the wait for the stream that ``cupy.argsort`` makes."""
        xp = self.xp
        M, N = x.shape
        out = xp.empty((M, N), dtype=xp.int64)
        if out.size == 0:
            return out
        fn = _loader.get_function("nested.cu", "nested_argsort_rows", _KERNELS)
        block = min(1024, 32 * -(-N // 32))
        fn((min(M, 65535),), (block,), _kernel_args.args("nested.cu", "nested_argsort_rows",
                                                         x=_loader.contiguous(x, np.float64), n_rows=_loader.i32(M),
                                                         n=_loader.i32(N), order=out))
        return out

    def progress(self, n_runs, offsets, lag):
        return _GpuProgress(self.xp, n_runs, offsets, lag)

    def slice_start(self, u, v, logl, lstar, dirs, unif, fine, ncall):
        """:meth:`_NumpyOps.slice_start` in one launch of ``nested_slice_start``."""
        f64 = np.float64
        st = SliceRounds(self.xp, _loader.contiguous(lstar, f64), _loader.contiguous(dirs, f64),
                         _loader.contiguous(unif, f64), fine, ncall)
        st.word = _round_word(self.xp)
        W, d = st.u.shape
        fn = _loader.get_function("nested.cu", "nested_slice_start", _KERNELS)
        fn((_slice_grid(W),), (256,),
           _kernel_args.args("nested.cu", "nested_slice_start", u0=_loader.contiguous(u, f64),
                             v0=_loader.contiguous(v, f64), l0=_loader.contiguous(logl, f64), u=st.u, v=st.v,
                             logl=st.logl, dirs=st.dirs, unif=st.unif, prop=st.prop, uc=st.uc, tt=st.tt,
                             inside=st.inside, lo=st.lo, hi=st.hi, slice=st.slice, shrink=st.shrink, nrej=st.nrej,
                             n_walkers=_loader.i32(W), ndim=_loader.i32(d), n_steps=_loader.i32(st.n_steps),
                             max_shrink=_loader.i32(st.max_shrink)))
        return st

    def slice_round(self, st, pv, pl):
        """:meth:`_NumpyOps.slice_round` in one launch of ``nested_slice_round``, which also reports to the
        round word whether any walker is still active (read by :meth:`slices_done`)."""
        f64 = np.float64
        W, d = st.u.shape
        word = st.word
        word.ticket += 1
        st.prev, st.last = st.last, word.ticket
        fn = _loader.get_function("nested.cu", "nested_slice_round", _KERNELS)
        fn((_slice_grid(W),), (256,),
           _kernel_args.args("nested.cu", "nested_slice_round", u=st.u, v=st.v, logl=st.logl, lstar=st.lstar,
                             dirs=st.dirs, unif=st.unif, pv=_loader.contiguous(pv, f64),
                             pl=_loader.contiguous(pl, f64), prop=st.prop, uc=st.uc, tt=st.tt, inside=st.inside,
                             lo=st.lo, hi=st.hi, slice=st.slice, shrink=st.shrink, nrej=st.nrej, fine=st.fine,
                             ncall=st.ncall, sync=word.sync, word=np.uint64(word.ptr),
                             ticket=np.uint64(word.ticket), n_walkers=_loader.i32(W), ndim=_loader.i32(d),
                             n_steps=_loader.i32(st.n_steps), max_shrink=_loader.i32(st.max_shrink)))
        word.events[word.ticket & 1].record()

    def round_eval(self, evaluate):
        """The rounds' likelihood, replayed from a CUDA graph where it can be (:class:`_CapturedRounds`)."""
        return _CapturedRounds(self.xp, evaluate)

    def slices_done(self, st):
        """Whether no walker was active after the latest round, or the round before while the GPU is still on
        the latest (no wait then: a step may end one round late, a round that changes nothing)."""
        word = st.word
        # The round before the latest only where the two were launched one after the other: rounds of another
        # step (a nested sampler run inside the likelihood) may have come between them on this word.
        need = st.prev if st.prev is not None and st.prev == st.last - 1 else st.last
        x = word.host.value
        if (x >> 1) < need:  # the GPU is further behind: wait for that round
            word.events[need & 1].synchronize()  # synchronize! (with that round's launch only)
            x = word.host.value
            if (x >> 1) < need:
                raise RuntimeError(f"nested sampling's round word reads round {x >> 1} after round {need} ended; "
                                   "the word was written out of order (report this as a bug).")
        return not (x & 1)


def _ops_for(xp):
    """The sampler's operations on the array module ``xp``: :class:`_NumpyOps` or :class:`_GpuOps`."""
    return _NumpyOps() if xp is np else _GpuOps(xp)


def _slice_grid(n_walkers):
    """Blocks of 256 threads, a thread a walker, capped (the slice kernels loop over the rest)."""
    return max(1, min(-(-n_walkers // 256), 4096))


class _RoundWord:
    """The mapped host word ``nested_slice_round`` writes after each round, ``(ticket << 1) | any walker
    active``; one per thread, device and stream (so it only moves forward), never freed. ``sync``: the
    kernel's two block counters; ``events``: the last two rounds, for :meth:`_GpuOps.slices_done`'s wait."""

    __slots__ = ("ptr", "host", "ticket", "sync", "events")

    def __init__(self, cp):
        self.ptr = cp.cuda.runtime.hostAlloc(8, 2 | 1)  # cudaHostAllocMapped | cudaHostAllocPortable
        self.host = ctypes.c_uint64.from_address(self.ptr)  # .value reads the memory each time
        self.host.value = 0
        self.ticket = 0
        self.sync = cp.zeros(2, dtype=cp.uint32)
        self.events = [cp.cuda.Event(disable_timing=True) for _ in range(2)]


_round_words = threading.local()


def _round_word(cp):
    """This thread's :class:`_RoundWord` for the current device and stream."""
    words = _round_words.__dict__.setdefault("by_stream", {})
    key = (cp.cuda.runtime.getDevice(), cp.cuda.get_current_stream().ptr)
    if key not in words:
        words[key] = _RoundWord(cp)
    return words[key]


class _CapturedRounds:
    """The likelihood of the slice rounds' proposals, ``evaluate(uc) -> (v, logl)`` (float64, contiguous), on
    CuPy replayed from a CUDA graph after the first rounds of a run.

    A round's ``prior_transform`` and ``loglike`` are a dozen or more small CuPy launches; made from Python
    they cost about as much as the round's own work at hundreds of walkers, so a run of cheap likelihoods
    waited on the host. The first round calls ``evaluate`` directly, then captures one call on a buffer of the
    same shape (its temporaries from a memory pool of its own, kept with the graph, so that no later
    allocation reuses memory a replay writes). The second round checks the graph: a replay on that round's
    points, its outputs first set to NaN and copied out after it, must give a direct call's values on the same
    points bit for bit (the round then takes the direct call's). A replay that left work undone (run on another
    stream while the capture went on, so not recorded) or repeats a captured random draw differs, and so does a
    capture that failed (a host read or copy inside the callables, an operation CUDA graphs refuse): every round
    then calls ``evaluate``, and so does one built on cuBLAS products, which take another algorithm inside a
    capture. The check is of one batch of points: a replay that agrees there and differs elsewhere would go
    unseen (none is known among CuPy's elementwise and reduction kernels, which do not choose by capture).
    ``gpumcmc.config.nested_capture = False`` asks for direct calls throughout. The sampler drops its
    capture when the run ends."""

    def __init__(self, cp, evaluate):
        self.cp, self.evaluate = cp, evaluate
        self.graph = self.inp = self.v = self.logl = self.pool = None
        self.rounds = 0
        self.replayed = False  # the graph passed its check and serves the rounds

    def __call__(self, uc):
        self.rounds += 1
        if self.replayed:
            self.inp[...] = uc
            self.graph.launch()  # on the current stream, after the copy and before the round that reads it
            return self.v, self.logl
        if self.rounds == 2 and self.graph is not None:
            return self._check(uc)
        v, logl = self._direct(uc)
        if self.rounds == 1:
            self._capture(uc)
        return v, logl

    def _direct(self, uc):
        v, logl = self.evaluate(uc)
        return _contiguous64(self.cp, v), _contiguous64(self.cp, logl)

    def _capture(self, uc):
        from ... import _config

        cp = self.cp
        if not _config.config.nested_capture:
            return
        from ...sampling._graph import captured

        pool = cp.cuda.MemoryPool()
        with cp.cuda.using_allocator(pool.malloc):
            inp = uc.copy()
        cp.cuda.get_current_stream().synchronize()  # the copy done before the capture stream reads it (once a run)
        quiet = warnings.catch_warnings()  # the direct call gave the callables' warnings already
        try:
            with quiet:
                warnings.simplefilter("ignore")
                graph, (v, logl) = captured(lambda: self._direct(inp), pool)
        except Exception:  # not capturable (end_capture raises where the capture was invalidated): direct calls
            return
        self.graph, self.inp, self.v, self.logl, self.pool = graph, inp, v, logl, pool

    def _check(self, uc):
        """The graph's values at ``uc`` against a direct call's, which the round takes; replayed from the next
        round on where they agree bit for bit."""
        cp = self.cp
        try:
            self.inp[...] = uc
            for out in (self.v, self.logl):
                if not _overlaps(out, self.inp):  # (an output that is its input, or a view of it, stays)
                    out.fill(np.nan)
            self.graph.launch()
            v, logl = self.v.copy(), self.logl.copy()  # before the direct call, which may write the same buffers
        except Exception:
            v = None
        v_ref, l_ref = self._direct(uc)
        same = v is not None and bool(cp.array_equal(v, v_ref, equal_nan=True)
                                      & cp.array_equal(logl, l_ref, equal_nan=True))  # a wait, once a run
        if same:
            self.replayed = True
        else:
            self.graph = self.inp = self.v = self.logl = self.pool = None
        return v_ref, l_ref


def _overlaps(a, b) -> bool:
    """Whether the device arrays ``a`` and ``b`` share any byte."""
    pa, pb = a.data.ptr, b.data.ptr
    return pa < pb + max(b.nbytes, 1) and pb < pa + max(a.nbytes, 1)


def _contiguous64(cp, a):
    a = cp.asarray(a)
    return a if a.dtype == np.float64 and a.flags.c_contiguous else cp.ascontiguousarray(a, dtype=np.float64)


class _NumpyProgress:
    """Each run's evidence, one iteration a ``push``, which queues the worst run's stopping value
    ``log(Z + L_max X) - log Z`` and the NaN/+inf flag; ``pop`` returns the oldest pair."""

    def __init__(self, n_runs, offsets):
        self.queue = []
        self.logz = np.full((n_runs,), -np.inf)
        self.offsets = offsets  # (R,) log X of each removed point's shell from the iteration's start

    def __len__(self):
        return len(self.queue)

    def push(self, dead, live, fine, logx, logx_next):
        lw = dead + (logx + self.offsets)[None, :]
        lwm = lw.max(axis=1, keepdims=True)
        lwm = np.where(np.isfinite(lwm), lwm, 0.0)  # all -inf (zero likelihood): adds nothing, not NaN
        with np.errstate(divide="ignore", invalid="ignore"):  # log(0) = -inf where every point has zero likelihood
            self.logz = np.logaddexp(self.logz, np.log(np.exp(lw - lwm).sum(axis=1)) + lwm[:, 0])
            remain = np.logaddexp(self.logz, live.max(axis=1) + logx_next) - self.logz
        self.queue.append((float(remain.max()), bool(fine)))

    def pop(self):
        return self.queue.pop(0)

    def close(self):
        pass


class _GpuProgress:
    """:class:`_NumpyProgress` by one ``nested_progress`` a ``push``, into a slot of mapped host memory;
    ``pop`` waits for that iteration's event only."""

    def __init__(self, cp, n_runs, offsets, lag):
        self.xp, self.queue = cp, []
        self.logz = cp.full((n_runs,), -np.inf)
        self.n_slots = lag + 2
        self.ptr = cp.cuda.runtime.hostAlloc(16 * self.n_slots, 2 | 1)  # cudaHostAllocMapped | cudaHostAllocPortable
        self.host = np.ctypeslib.as_array((ctypes.c_double * (2 * self.n_slots)).from_address(self.ptr))
        self.events = [cp.cuda.Event(disable_timing=True) for _ in range(self.n_slots)]
        self.fn = _loader.get_function("nested.cu", "nested_progress", _KERNELS)
        self.offsets = _loader.contiguous(offsets, np.float64)  # (R,), as in the twin
        self.k = 0

    def __len__(self):
        return len(self.queue)

    def push(self, dead, live, fine, logx, logx_next):
        slot = self.k % self.n_slots
        self.k += 1
        M, R = dead.shape
        self.fn((1,), (256,),
                _kernel_args.args("nested.cu", "nested_progress", dead=_loader.contiguous(dead, np.float64),
                                  offs=self.offsets, live=_loader.contiguous(live, np.float64), logz=self.logz,
                                  fine=fine, logx=np.float64(logx), logx_next=np.float64(logx_next),
                                  n_runs=_loader.i32(M), n_dead=_loader.i32(R), n_live=_loader.i32(live.shape[1]),
                                  out=np.uint64(self.ptr + 16 * slot)))
        self.events[slot].record()
        self.queue.append(slot)

    def pop(self):
        item = self.queue.pop(0)
        self.events[item].synchronize()  # synchronize! (with this iteration's launch only: later work stays queued)
        return float(self.host[2 * item]), bool(self.host[2 * item + 1])

    def close(self):
        if self.ptr:
            for ev in self.events:  # launches still queued (a run stopped by an error) write here
                ev.synchronize()
            self.xp.cuda.runtime.freeHost(self.ptr)
            self.ptr = 0


def sinusoid_loglike(model, theta):
    """:meth:`SinusoidModel.loglike` on CuPy, one launch of ``sinusoid_ssq``."""
    cp = model.xp
    # one point a row of 3 J parameters, as the NumPy path reads theta (a 1-d theta is one point)
    p = _loader.contiguous(theta, model.dtype).reshape(-1, 3 * model.n_atoms)
    n = p.shape[0]
    ssq = cp.zeros(n, dtype=cp.float64)
    if n == 0:
        return ssq
    name = f"sinusoid_ssq<{'float' if model.dtype == np.float32 else 'double'}>"
    fn = _loader.get_function("nested.cu", name, _KERNELS)
    T = model.t.shape[0]
    gx, gy = max(1, min(-(-T // (256 * 8)), 4096)), max(1, min(n, 65535))  # 8 data points a thread
    fn((gx, gy), (256,), _kernel_args.args("nested.cu", "sinusoid_ssq", params=p, t=model.t, y=model.y,
                                            n_points=_loader.i64(n), n_atoms=_loader.i32(model.n_atoms),
                                            n_data=_loader.i64(T), ssq=ssq))
    return model._const - 0.5 * ssq / model.sigma ** 2


def sinusoid_loglike_tiles(model, theta):
    """The twin of :func:`sinusoid_loglike`: :meth:`SinusoidModel.model` over tiles of ``model.tile`` points."""
    xp = model.xp
    p = xp.asarray(theta).astype(model.dtype, copy=False).reshape(-1, model.n_atoms, 3)
    ssq = xp.zeros(p.shape[0], dtype=xp.float64)
    for s in range(0, model.t.shape[0], model.tile):
        r = model.model(p, model.t[s:s + model.tile]) - model.y[s:s + model.tile]  # (n, tile)
        ssq += (r * r).sum(axis=1, dtype=xp.float64)
    return model._const - 0.5 * ssq / model.sigma ** 2


def sinusoid_fused_slice(model, u, v, logl, lstar, dirs, unif, max_shrink):
    """:meth:`SinusoidModel.nested_fused_slice` in one launch of ``sinusoid_slice``; its twin is
    ``_NestedSteps._slice_generic`` with the model's ``loglike``."""
    cp = model.xp
    f64 = np.float64
    W, d = u.shape
    n_steps = dirs.shape[0]
    uo, vo, lo = (cp.array(a, dtype=f64, order="C") for a in (u, v, logl))
    nrej, neval = cp.zeros(W, dtype=cp.int32), cp.zeros(W, dtype=cp.int32)
    if W == 0:
        return uo, vo, lo, nrej, neval
    name = f"sinusoid_slice<{'float' if model.dtype == np.float32 else 'double'}>"
    fn = _loader.get_function("nested.cu", name, _KERNELS)
    block = model.slice_block
    if block is None:  # one walker per SM where walkers are few; smaller blocks share SMs where many
        block = 1024 if W <= _loader.sm_count() else 512
    grid = min(W, 65535)
    fn((grid,), (int(block),),
       _kernel_args.args("nested.cu", "sinusoid_slice", u=uo, v=vo, logl=lo, lstar=_loader.contiguous(lstar, f64),
                         dirs=_loader.contiguous(dirs, f64), unif=_loader.contiguous(unif, f64), t=model.t,
                         y=model.y, n_data=_loader.i64(model.t.shape[0]), n_walkers=_loader.i32(W),
                         n_atoms=_loader.i32(model.n_atoms), n_steps=_loader.i32(n_steps),
                         max_shrink=_loader.i32(max_shrink), amin=f64(model.amin), amax=f64(model.amax),
                         fmin=f64(model.fmin), fmax=f64(model.fmax),
                         ordered=_loader.i32(int(model.ordered and model.n_atoms > 1)), lconst=f64(model._const),
                         sigma2=f64(model.sigma ** 2), nrej=nrej, neval=neval))
    return uo, vo, lo, nrej, neval
