"""Nested sampling, the algorithm: Skilling's nested sampling with Henderson's parallel schemes.

Each of M runs keeps N live points drawn from the prior (in the unit cube, mapped to the parameters by
``prior_transform``). An iteration of every run at once (:meth:`_NestedSteps._step` over a :class:`LiveState`):

1. the R live points of lowest likelihood die and are recorded with the threshold each was born at; the
   highest of them is the new threshold ``L*``;
2. R walkers start at random survivors of the same run and move under ``L > L*``: slice sampling along
   directions drawn from the live points' covariance (``slice``) or along its whitened coordinates in turn
   (``cslice``), or a Gaussian random walk (``rwalk``). Every walker of every run is evaluated in one batched
   ``loglike`` call per round, or every slice in one call of the likelihood's own ``nested_fused_slice``;
3. the new points replace the dead ones, born at ``L*``.

The prior volume shrinks by the R-th order statistic of N uniforms (:meth:`_NestedSteps._shrinkage`).
``kernels_cu/nested.cu`` is this module's partner, through ``ops.py``.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ... import backend as _backend
from .ops import _CLIP_HI, _CLIP_LO

_SAMPLERS = ("slice", "cslice", "rwalk")

_BAD_FIX = ("a log-likelihood must be finite or -inf: return -inf for zero likelihood, never NaN, and keep it "
            "finite where the likelihood diverges (a floor on a variance, or a prior that leaves out the "
            "singular point).")


class _BadValue(Exception):
    """Raised by the replay of :meth:`NestedSampler._located_error` at the first bad likelihood."""


class LiveState(NamedTuple):
    """Every run's live points on the array backend (M runs of N); :meth:`_NestedSteps._step` writes in place."""

    u: Any          # (M, N, ndim) the live points in the unit cube
    v: Any          # (M, N, ndim) the same in the parameters (prior_transform of u)
    logl: Any       # (M, N) their log-likelihoods
    birth: Any      # (M, N) the threshold each was born at; -inf for points drawn from the prior
    scale: Any      # (M,) each run's adapted step scale of the constrained moves


class StepInfo(NamedTuple):
    """What an iteration removed, and whether its likelihoods were all fine (R points a run)."""

    dead_u: Any     # (M, R, ndim) the removed points in the unit cube
    dead_v: Any     # (M, R, ndim) the same in the parameters
    dead_logl: Any  # (M, R) their log-likelihoods, ascending
    dead_birth: Any  # (M, R) the thresholds they were born at
    fine: Any       # () bool: no NaN or +inf among the likelihoods this iteration evaluated


class _NestedSteps:
    """The iteration of nested sampling over every run at once, on :class:`NestedSampler`'s settings."""

    # The generic slice step's rounds: "masked" (_slice_masked) or "compact" (_slice_generic), the same points;
    # None: masked on CuPy, compact on NumPy.
    _rounds = None

    # The masked rounds' likelihood for the current run (ops.round_eval), made at its first slice step and
    # dropped when the run ends; whether the last run's rounds were replayed from a CUDA graph.
    _round_eval = None
    _rounds_replayed = False

    # Batches of prior draws (M N points each) that may be drawn at the start to find N points of finite
    # likelihood a run: a likelihood that is -inf on more than about 99.5% of the prior is refused.
    _MAX_PRIOR_BATCHES = 200

    def _prior_batch(self, rng):
        """``(u, v, logl)`` of M N points drawn from the prior, checked on the host (synchronize!)."""
        xp, M, N, d = self.xp, self.n_runs, self.nlive, self.ndim
        u = rng.random((M, N, d))
        v, logl = self._eval(u)
        if not bool(xp.isfinite(v).all()):
            raise ValueError("prior_transform returned non-finite values for points in the unit cube; it must "
                             "map [0, 1]^ndim into the parameter space.")
        if not bool((logl < np.inf).all()):
            raise self._bad_value_error(v, logl, "a point drawn from the prior (an initial live point)")
        return u, v, logl

    def _init(self, rng):
        """Every run's live points drawn from the prior, checked once on the host: a :class:`LiveState`.

        Where ``loglike`` is -inf (zero likelihood) at some draws, the live points are each run's first N draws
        of finite likelihood, from as many batches as that takes, and the run starts from the prior volume
        they fill: the share of finite draws (``_prior_share``: the pooled fraction, the draws, and each run's
        fraction of its own draws, for its own evidence). Points at -inf never
        enter the run: a walker cannot move from one, so they would stay and shrink the volume for nothing."""
        xp, M, N, d = self.xp, self.n_runs, self.nlive, self.ndim
        u, v, logl = self._prior_batch(rng)
        self._prior_share = (1.0, M * N, np.ones(M))
        if not bool(xp.isfinite(logl).all()):
            u, v, logl = self._finite_start(rng, u, v, logl)
        birth = xp.full((M, N), -np.inf)
        self._eye, self._eye_eps = xp.eye(d), xp.eye(d)[None] * 1e-12
        self._run_idx = xp.arange(M)[:, None]
        self._ncall_dev = xp.zeros((), dtype=xp.int64)  # evaluations counted on the device
        self._round_eval = None  # a capture of the callables belongs to one run: made again at its first step
        if self.sampler == "cslice":  # the unit vectors in turn, as many as a step starting anywhere needs
            self._cycle = xp.eye(d)[xp.arange(d + self._n_steps) % d]
        return LiveState(u, v, logl, birth, xp.ones((M,)))

    def _finite_start(self, rng, u, v, logl):
        """Each run's first N prior draws of finite likelihood, drawing more batches as needed (see
        :meth:`_init`), and ``_prior_share`` from every draw made. After each batch only each run's first N
        finite points are kept (memory of two batches, however many are drawn)."""
        xp, M, N = self.xp, self.n_runs, self.nlive
        found, batches = xp.isfinite(logl).sum(axis=1), 1  # (M,) finite draws of each run so far
        while int(found.min()) < N:  # synchronize! (at the start only)
            if batches >= self._MAX_PRIOR_BATCHES:
                drawn = M * N * batches
                raise ValueError(f"loglike is -inf (zero likelihood) at {drawn - int(found.sum())} of the {drawn} "
                                 f"points drawn from the prior; nested sampling needs nlive={N} points of finite "
                                 f"likelihood a run to start. Narrow the prior (prior_transform) to where the "
                                 f"likelihood is positive, or check the likelihood.")
            nu, nv, nl = self._prior_batch(rng)
            u, v, logl = self._first_finite(*(xp.concatenate(a, axis=1) for a in ((u, nu), (v, nv), (logl, nl))))
            found, batches = found + xp.isfinite(nl).sum(axis=1), batches + 1
        drawn = N * batches
        self._prior_share = (float(found.sum()) / (M * drawn), M * drawn, _backend.to_host(found / drawn))
        return u, v, logl

    def _first_finite(self, U, V, L):
        """Each run's first N points (in draw order) of finite ``L`` (M, >= N), the -inf ones after them."""
        xp, N = self.xp, self.nlive
        pos = xp.arange(L.shape[1])[None, :]
        first = xp.argsort(xp.where(xp.isfinite(L), pos, pos + L.shape[1]), axis=1)[:, :N]
        return (xp.take_along_axis(U, first[..., None], axis=1), xp.take_along_axis(V, first[..., None], axis=1),
                xp.take_along_axis(L, first, axis=1))

    def _shrinkage(self):
        """``(logx_steps, step_offsets)`` (R,): the i-th removed point shrinks log X by ``1 / (N - i)`` on
        average; ``step_offsets[i]`` is the log volume of its shell from the iteration's start."""
        inv_n = 1.0 / (self.nlive - np.arange(self._n_replace))
        logx_steps = -np.cumsum(inv_n)
        log1m = np.log(-np.expm1(-inv_n))
        return logx_steps, self.xp.asarray(np.concatenate([[0.0], logx_steps[:-1]]) + log1m)

    def _eval(self, u, count=True):
        """Physical points and log-likelihoods of ``u`` (..., ndim); ``count=False``: not added to ``ncall``."""
        shape, flat = u.shape[:-1], u.reshape(-1, self.ndim)
        v, logl = self._eval_points(flat)
        if count:
            self._ncall += flat.shape[0]
        self._nbatch += 1
        return v.reshape(shape + (self.ndim,)), logl.reshape(shape)

    def _eval_points(self, flat):
        """``prior_transform`` and ``loglike`` of the (n, ndim) points ``flat``: (n, ndim) and (n,) float64."""
        v = self._prior(flat)
        logl = self._loglike(v)
        if getattr(logl, "shape", None) != (flat.shape[0],):
            raise ValueError(f"loglike returned shape {getattr(logl, 'shape', None)} for {flat.shape[0]} points; "
                             f"it must return one value per point, shape (n,).")
        if getattr(v, "shape", None) != flat.shape:
            raise ValueError(f"prior_transform returned shape {getattr(v, 'shape', None)} for input {flat.shape}.")
        return v, self.xp.asarray(logl, dtype=self.xp.float64)

    def _bad_value_error(self, v, logl, where):
        """The ValueError naming the first live point with a NaN or +inf log-likelihood, or saying none was kept."""
        lh = _backend.to_host(logl).reshape(self.n_runs, -1)
        bad = np.argwhere(~(lh < np.inf))
        if bad.size:
            m, n = (int(i) for i in bad[0])
            x = _backend.to_host(v).reshape(self.n_runs, -1, self.ndim)[m, n]
            return ValueError(f"loglike returned {lh[m, n]} for {where}, at x = {np.array2string(x, precision=6)} "
                              f"(run {m}); {_BAD_FIX}")
        return ValueError(f"loglike returned NaN or +inf for {where}; the point was not kept, so its coordinates "
                          f"are not known. {_BAD_FIX}")

    def _step(self, rng, state):
        """One iteration of every run: the R lowest live points die and R walkers started at random
        survivors replace them. Returns the :class:`LiveState` (written in place) and a :class:`StepInfo`."""
        xp, M, N, R = self.xp, self.n_runs, self.nlive, self._n_replace
        u, v, logl, birth, scale = state
        run_idx = self._run_idx
        order = self._ops.argsort_rows(logl)
        low = order[:, :R]                                  # (M, R), ascending
        lstar = xp.take_along_axis(logl, low[:, -1:], axis=1)  # (M, 1)
        dl, db = (xp.take_along_axis(a, low, axis=1) for a in (logl, birth))
        du, dv = (xp.take_along_axis(a, low[..., None], axis=1) for a in (u, v))
        # starts: random survivors of the same run
        pick = xp.minimum(xp.floor(rng.random((M, R)) * (N - R)).astype(xp.int64) + R, N - 1)
        start = xp.take_along_axis(order, pick, axis=1)
        u0, v0 = (xp.take_along_axis(a, start[..., None], axis=1) for a in (u, v))
        l0 = xp.take_along_axis(logl, start, axis=1)
        evolve = self._walk if self.sampler == "rwalk" else self._slice
        un, vn, ln, scale, fine = evolve(rng, u0, v0, l0, lstar, self._chol(u), scale)
        for a, new in ((u, un), (v, vn), (logl, ln), (birth, xp.broadcast_to(lstar, (M, R)))):
            a[run_idx, low] = new
        return LiveState(u, v, logl, birth, scale), StepInfo(du, dv, dl, db, fine)

    def _chol(self, u):
        """Cholesky factor of each run's live-point covariance in the unit cube (M, d, d)."""
        xp = self.xp
        c = u - u.mean(axis=1, keepdims=True)
        cov = xp.einsum("mni,mnj->mij", c, c) / (u.shape[1] - 1) + self._eye_eps  # + 1e-12 I
        diag = xp.sqrt(xp.diagonal(cov, axis1=1, axis2=2))[..., None] * self._eye[None]
        if xp is np:
            try:
                return np.linalg.cholesky(cov)
            except np.linalg.LinAlgError:  # a singular covariance: that run falls back to the diagonal
                out = diag.copy()
                for m in range(cov.shape[0]):
                    try:
                        out[m] = np.linalg.cholesky(cov[m])
                    except np.linalg.LinAlgError:
                        pass
                return out
        # CuPy returns NaN for a matrix that is not positive definite (no check, no synchronisation)
        chol = xp.linalg.cholesky(cov)
        bad = ~xp.isfinite(chol).all(axis=(1, 2))
        return xp.where(bad[:, None, None], diag, chol)

    def _propose_eval(self, u):
        inside = ((u > 0) & (u < 1)).all(axis=-1)
        uc = self.xp.clip(u, _CLIP_LO, _CLIP_HI)
        v, l = self._eval(uc)
        l = self.xp.where(inside, l, -np.inf)
        if self._locate:  # the replay after a failed check: stop at the first bad value (a wait per batch)
            lh = _backend.to_host(l).ravel()
            bad = np.flatnonzero(~(lh < np.inf))
            if bad.size:
                x = _backend.to_host(v).reshape(-1, self.ndim)[bad[0]]
                raise _BadValue(f"loglike returned {lh[bad[0]]} at x = {np.array2string(x, precision=6)}, a point "
                                f"proposed at iteration {self._niter + 1}")
        return v, l

    def _walk(self, rng, u, v, l, lstar, chol, scale):
        """The walkers' moves under ``L > lstar`` by a Gaussian random walk with the live points' covariance, its
        scale adapted towards half accepted: the new ``u, v, l``, the scales and the NaN/+inf flag."""
        xp, d = self.xp, self.ndim
        M, R = u.shape[:2]
        fine, acc, step = xp.ones((), dtype=bool), xp.zeros((M,)), 2.38 / math.sqrt(d)  # fine: no NaN or +inf
        Z = rng.standard_normal((self._n_steps, M, R, d))
        for i in range(self._n_steps):
            prop = u + step * scale[:, None, None] * xp.einsum("mij,mrj->mri", chol, Z[i])
            pv, pl = self._propose_eval(prop)
            fine = fine & (pl < np.inf).all()
            ok = pl > lstar
            u, v, l = xp.where(ok[..., None], prop, u), xp.where(ok[..., None], pv, v), xp.where(ok, pl, l)
            acc = acc + ok.mean(axis=1)
        return u, v, l, xp.clip(scale * xp.exp(acc / self._n_steps - 0.5), 1e-3, 1e3), fine

    def _slice(self, rng, u, v, l, lstar, chol, scale):
        """:meth:`_walk`'s moves by slice sampling along random directions or whitened coordinates. Every
        direction and uniform is drawn up front, so the fused step and both rounds take the same numbers."""
        xp, d, K = self.xp, self.ndim, self.max_shrink
        M, R = u.shape[:2]
        fine, W, base = xp.ones((), dtype=bool), M * R, 2.0 * math.sqrt(d + 2.0)  # fine: no NaN or +inf
        if self.sampler == "cslice":  # whitened coordinates in turn, starting one further each iteration
            first = self._evolve_calls % d
            self._evolve_calls += 1
            Z = xp.broadcast_to(self._cycle[first:first + self._n_steps][:, None, None, :], (self._n_steps, M, R, d))
        else:
            Z = rng.standard_normal((self._n_steps, M, R, d))
            Z = Z / xp.sqrt((Z * Z).sum(axis=-1, keepdims=True))
        dirs = (base * scale[None, :, None, None] * xp.einsum("mij,smrj->smri", chol, Z)).reshape(self._n_steps, W, d)
        U = rng.random((self._n_steps, K + 1, W))
        ls = xp.ascontiguousarray(xp.broadcast_to(lstar, (M, R)).reshape(W))
        walkers = (u.reshape(W, d), v.reshape(W, d), l.reshape(W), ls, dirs, U)
        if self._fused is not None:
            uf, vf, lf, nrej, neval = self._fused.nested_fused_slice(*walkers, K)
            self._ncall_dev += neval.sum()
            self._nbatch += 1
            fine = (lf < np.inf).all()
        elif self._locate or (self._rounds or ("compact" if xp is np else "masked")) == "compact":
            # (the replay after a bad value checks each batch on the host, as the compacting rounds allow)
            uf, vf, lf, nrej, fine = self._slice_generic(*walkers, fine)
        else:
            uf, vf, lf, nrej = self._slice_masked(*walkers, fine)
        u, v, l = uf.reshape(M, R, d), vf.reshape(M, R, d), lf.reshape(M, R)
        mean_rej = nrej.reshape(M, R).sum(axis=1) / (R * self._n_steps)
        scale = xp.clip(scale * xp.exp(0.2 * (1.0 - mean_rej)), 0.02, 50.0)
        return u, v, l, scale, fine

    def _slice_masked(self, u, v, l, ls, dirs, U, fine):
        """:meth:`_slice_generic`'s points, misses, flag (``fine``, set in place) and ``ncall`` with every walker
        in every round, each on its own slice (``ops.slice_start``, ``ops.slice_round``): ``loglike`` sees all W
        rows, done walkers' rows unread, and a step may make one call more, in which no walker moves."""
        ops, n_steps = self._ops, self._n_steps
        st = ops.slice_start(u, v, l, ls, dirs, U, fine, self._ncall_dev)
        if self._round_eval is None:  # the run's first step: on CuPy, captured as a graph after one direct call
            self._round_eval = ops.round_eval(self._eval_points)
        for r in range(n_steps * self.max_shrink):  # each walker ends within n_steps * max_shrink rounds
            pv, pl = self._round_eval(st.uc)
            self._nbatch += 1
            ops.slice_round(st, pv, pl)
            # a walker needs n_steps rounds at least: no walker is done before the n_steps-th
            if r + 1 >= n_steps and ops.slices_done(st):
                break
        return st.u, st.v, st.logl, st.nrej

    def _slice_generic(self, u, v, l, ls, dirs, U, fine):
        """The slices of :meth:`_slice`, one ``loglike`` call per round of the walkers still searching (the fused
        step's twin): the new points, the misses and the flag."""
        xp, K, W = self.xp, self.max_shrink, u.shape[0]
        uf, vf, lf, nrej = u.copy(), v.copy(), l.copy(), xp.zeros(W)
        for i in range(self._n_steps):
            dirn, lo = dirs[i], -U[i, 0]
            hi, idx = 1.0 + lo, xp.arange(W)
            for k in range(K):
                lo_i, hi_i = lo[idx], hi[idx]
                t = lo_i + (hi_i - lo_i) * U[i, k + 1][idx]
                prop = uf[idx] + t[:, None] * dirn[idx]
                pv, pl = self._propose_eval(prop)
                fine = fine & (pl < np.inf).all()
                ok = pl > ls[idx]
                uf[idx] = xp.where(ok[:, None], prop, uf[idx])
                vf[idx] = xp.where(ok[:, None], pv, vf[idx])
                lf[idx] = xp.where(ok, pl, lf[idx])
                miss = ~ok
                lo[idx] = xp.where(miss & (t < 0), t, lo_i)  # integer scatters: no synchronisation
                hi[idx] = xp.where(miss & (t >= 0), t, hi_i)
                idx = idx[miss]
                if idx.shape[0] == 0:
                    break
                nrej[idx] += 1.0
        return uf, vf, lf, nrej, fine
