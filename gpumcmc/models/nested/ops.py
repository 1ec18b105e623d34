"""The launches of ``kernels_cu/nested.cu``, each beside its NumPy twin.

* the sampler's operations, as the pair ``_GpuOps`` / ``_NumpyOps`` with the same method names
  (``_ops_for(xp)`` picks one): ``argsort_rows`` launches ``nested_argsort_rows``, its twin
  ``numpy.argsort``; ``progress`` makes the bookkeeping ``_GpuProgress``, whose ``push`` launches
  ``nested_progress``, its twin ``_NumpyProgress``;
* ``sinusoid_loglike``: ``sinusoid_ssq``; its twin ``sinusoid_loglike_tiles``;
* ``sinusoid_fused_slice``: ``sinusoid_slice``; its twin the generic slice path of ``algorithm.py``
  (``_NestedSteps._slice_generic``) with the model's ``loglike``.

Each launcher names its kernel's arguments after the C parameters
(:func:`gpumcmc._kernel_args.args`). Nothing here compiles at import: the
module of ``nested.cu`` is built on the first launch.
"""

from __future__ import annotations

import numpy as np

_KERNELS = ("sinusoid_ssq<float>", "sinusoid_ssq<double>", "sinusoid_slice<float>", "sinusoid_slice<double>",
            "nested_progress", "nested_argsort_rows")


class _NumpyOps:
    """The sampler's per-iteration operations on NumPy: the twins of :class:`_GpuOps`, with its method names."""

    xp = np

    def argsort_rows(self, x):
        """``numpy.argsort(x, axis=1)`` of a 2-D float64 array."""
        return np.argsort(x, axis=1)

    def progress(self, n_runs, offsets, lag):
        """The evidence and stopping-rule bookkeeping of ``n_runs`` runs (:class:`_NumpyProgress`)."""
        return _NumpyProgress(n_runs, offsets)


class _GpuOps:
    """The sampler's per-iteration operations on CuPy, each one launch of ``kernels_cu/nested.cu``."""

    def __init__(self, cp):
        self.xp = cp

    def argsort_rows(self, x):
        """``cupy.argsort(x, axis=1)``'s permutation (stable, NaN last) of a 2-D float64 array, in one launch
        of ``nested_argsort_rows``, without the wait for the stream that ``cupy.argsort`` makes."""
        from ... import _kernel_args, _loader

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
        """The evidence and stopping-rule bookkeeping of ``n_runs`` runs (:class:`_GpuProgress`)."""
        return _GpuProgress(self.xp, n_runs, offsets, lag)


def _ops_for(xp):
    """The sampler's operations on the array module ``xp``: :class:`_NumpyOps` or :class:`_GpuOps`."""
    return _NumpyOps() if xp is np else _GpuOps(xp)


class _NumpyProgress:
    """Each run's evidence and the stopping rule, one iteration at a time, read back ``lag`` iterations late.

    ``push`` adds the points just removed to each run's evidence and computes the worst run's stopping
    value ``log(Z + L_max X) - log Z`` and the NaN/+inf flag; ``pop`` returns the oldest pair not read yet.
    This is the twin of :class:`_GpuProgress`, where ``push`` is one launch of ``nested_progress``.
    """

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
        self.logz = np.logaddexp(self.logz, np.log(np.exp(lw - lwm).sum(axis=1)) + lwm[:, 0])
        remain = np.logaddexp(self.logz, live.max(axis=1) + logx_next) - self.logz
        self.queue.append((float(remain.max()), bool(fine)))

    def pop(self):
        return self.queue.pop(0)

    def close(self):
        pass


class _GpuProgress:
    """:class:`_NumpyProgress` on CuPy: ``push`` is one launch of ``nested_progress``, which writes the pair
    into a slot of mapped host memory, and ``pop`` waits for that iteration's event only, so the host never
    waits for the GPU to drain."""

    def __init__(self, cp, n_runs, offsets, lag):
        from ... import _loader

        self.xp, self.queue = cp, []
        self.logz = cp.full((n_runs,), -np.inf)
        rt = cp.cuda.runtime
        self.n_slots = lag + 2
        self.ptr = rt.hostAlloc(16 * self.n_slots, 2 | 1)  # cudaHostAllocMapped | cudaHostAllocPortable
        import ctypes
        self.host = np.ctypeslib.as_array((ctypes.c_double * (2 * self.n_slots)).from_address(self.ptr))
        self.events = [cp.cuda.Event(disable_timing=True) for _ in range(self.n_slots)]
        self.fn = _loader.get_function("nested.cu", "nested_progress", _KERNELS)
        self.offsets = _loader.contiguous(offsets, np.float64)  # (R,), as in the twin
        self.k = 0

    def __len__(self):
        return len(self.queue)

    def push(self, dead, live, fine, logx, logx_next):
        from ... import _kernel_args, _loader

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
    """:meth:`SinusoidModel.loglike` of an (n, 3 J) batch on CuPy: one launch of ``sinusoid_ssq``; the twin is
    :func:`sinusoid_loglike_tiles`."""
    from ... import _kernel_args, _loader
    cp = model.xp
    p = _loader.contiguous(theta, model.dtype)
    n = p.shape[0]
    ssq = cp.zeros(n, dtype=cp.float64)
    if n == 0:
        return ssq
    name = f"sinusoid_ssq<{'float' if model.dtype == np.float32 else 'double'}>"
    fn = _loader.get_function("nested.cu", name, _KERNELS)
    T = model.t.shape[0]
    chunk = 256 * 8
    n_chunks = -(-T // chunk)
    gx = max(1, min(n_chunks, 4096))
    gy = max(1, min(n, 65535))
    fn((gx, gy), (256,), _kernel_args.args("nested.cu", "sinusoid_ssq", params=p, t=model.t, y=model.y,
                                            n_points=_loader.i64(n), n_atoms=_loader.i32(model.n_atoms),
                                            n_data=_loader.i64(T), ssq=ssq))
    return model._const - 0.5 * ssq / model.sigma ** 2


def sinusoid_loglike_tiles(model, theta):
    """The twin of :func:`sinusoid_loglike`: an array expression over tiles of ``model.tile`` data points, so
    memory stays ``n * tile`` whatever the data size (NumPy, or CuPy with ``kernel=False``)."""
    xp = model.xp
    p = xp.asarray(theta).astype(model.dtype, copy=False).reshape(-1, model.n_atoms, 3)
    n = p.shape[0]
    A, B, F = p[..., 0][..., None], p[..., 1][..., None], (2 * np.pi) * p[..., 2][..., None]
    ssq = xp.zeros(n, dtype=xp.float64)
    T = model.t.shape[0]
    for s in range(0, T, model.tile):
        tt = model.t[s:s + model.tile]
        yy = model.y[s:s + model.tile]
        ph = F * tt
        m = (A * xp.cos(ph) + B * xp.sin(ph)).sum(axis=1)   # (n, tile)
        r = m - yy
        ssq += (r * r).sum(axis=1, dtype=xp.float64)
    return model._const - 0.5 * ssq / model.sigma ** 2


def sinusoid_fused_slice(model, u, v, logl, lstar, dirs, unif, max_shrink):
    """:meth:`SinusoidModel.nested_fused_slice`: every slice of every walker in one launch of ``sinusoid_slice``.

    Its twin is the generic slice path (``_NestedSteps._slice_generic`` in ``algorithm.py``) with the model's
    ``loglike``, given the same directions and uniforms.
    """
    from ... import _kernel_args, _loader
    cp = model.xp
    f64 = np.float64
    W, d = u.shape
    n_steps = dirs.shape[0]
    uo = cp.array(u, dtype=f64, order="C")
    vo = cp.array(v, dtype=f64, order="C")
    lo = cp.array(logl, dtype=f64, order="C")
    nrej = cp.zeros(W, dtype=cp.int32)
    neval = cp.zeros(W, dtype=cp.int32)
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
