"""Nested sampling on the GPU: batched likelihoods, multiple replacement, combined runs.

Skilling's nested sampling with the three parallel schemes of Henderson's
tutorial, shaped for a GPU:

* **parallel model evaluation** sets the design: every live point of every run
  lives in one array, and every step of the constrained sampler evaluates all
  walkers in *one* call of the batched ``loglike``;
* **multiple replacement** (``n_replace=R``): the R lowest live points are
  replaced at each iteration, giving R walkers per run;
* **combined runs** (``n_runs=M``): M independent runs advance together as one
  batch and are merged into a single run with M*N live points.

Choosing N, R and M
-------------------
Removing the R lowest of N live points shrinks the enclosed prior mass by the
R-th order statistic: ``E[log X]`` falls by ``sum_{i<R} 1/(N - i)``, and each
removed point is recorded with the number of live points ``N - i`` it was the
lowest of (M N across merged runs). ``logzerr`` is ``sqrt(sum 1/n_k**2)`` down
to the posterior bulk (``log X = -H``), Skilling's ``sqrt(H/N)`` for a constant
N, so it accounts for R and M exactly. Henderson et al. (2014) found that
``sqrt(R N)`` live points keep the precision of a run with N live points and
R = 1; with the exact order-statistic shrinkage used here the loss is smaller
(at R = N/2 the error grows by about 1.2x). What to choose: the total number
of live points M N sets the precision (``logzerr ~ sqrt(H / (M N))``); M R is
the number of walkers per batched ``loglike`` call, so make it as large as your
likelihood needs to fill the GPU (hundreds to thousands), with ``R <= N / 2``
and ``N >= 2 ndim``.

Few live points per run can lose modes, and neither ``logzerr`` nor
``logzerr_runs`` says so: losing a mode of weight w moves log Z by at most
``-log(1 - w)`` over the number of runs. On a 4-D mixture of two Gaussians
(weights 0.7 / 0.3, 10 sd apart, the lighter one half as wide) in runs of 50
live points, runs lost the lighter mode in most seeds and its merged weight
came out 0.04 to 0.22 over 6 seeds; at 200 live points per run, 0.19 to 0.29
over 4. With equal widths (0.7 / 0.3, 30 sd apart) a mode is lost less
often, but once the modes part each run's share of the lighter one drifts
either way: its merged weight came out 0.18 to 0.60 over 8 seeds at 50 live
points per run, 0.21 to 0.41 at 100 and 0.26 to 0.37 at 500. So after
merged runs the sampler checks each run's posterior mass in each mode
(:func:`mode_check`, ``results.mode_mass_runs``) and warns, naming the runs
that lost one, or, where none did, when the runs disagree on a mode's mass
by more than ``MODE_ERR_MAX`` (0.05; ``results.mode_mass_err``, each mode's
between-run error, as ``logzerr_runs`` is for log Z); and it warns at
construction when ``n_runs > 1`` and ``nlive`` is under ``NLIVE_MODES``
(100) per run. The default, 500, keeps such modes.

Example
-------
>>> import numpy as np
>>> from gpumcmc.nested import NestedSampler
>>> def loglike(x):                      # (n, 2) -> (n,)
...     return -0.5 * (x ** 2).sum(axis=1) / 0.1 ** 2
>>> def prior_transform(u):              # unit cube -> [-1, 1]^2
...     return 2.0 * u - 1.0
>>> s = NestedSampler(loglike, prior_transform, 2, nlive=50, random_state=0,
...                   progress=False, backend="numpy")
>>> res = s.run().results
>>> bool(abs(res.logz - np.log(2 * np.pi * 0.01 / 4)) < 4 * res.logzerr)
True
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings

import numpy as np

from ... import _validate
from ... import backend as _backend
from ...random import default_rng

__all__ = ["NestedSampler", "NestedResults", "SinusoidModel", "combine_runs", "plot_run", "merge_points", "mode_check",
           "FewLivePointsWarning", "gaussian_shells", "eggbox", "correlated_gaussian"]

_SAMPLERS = ("slice", "cslice", "rwalk")


# --------------------------------------------------------------------------- small checks and utilities
def _logsumexp(a, axis=None):
    a = np.asarray(a, dtype=np.float64)
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis) if axis is not None else float(out.reshape(()))


def _integer(name, value, minimum, alternative=""):
    """``value`` checked as an integer of at least ``minimum`` (:func:`gpumcmc._validate.check_int`)."""
    return _validate.check_int(value, name, minimum, alternative)


def _batchify(fn, ndim, xp, name, out_dim):
    """A batched version of ``fn``: (n, ndim) -> (n,) or (n, ndim).

    ``fn`` is first tried on a batch of two points; if that fails or gives the
    wrong shape it is tried on one point, and a scalar function is wrapped in
    a loop (with a warning: it will be slow).
    """
    probe = xp.full((2, ndim), 0.5)
    want = (2,) if out_dim is None else (2, out_dim)
    err = None
    try:
        out = fn(probe)
        if getattr(out, "shape", None) == want:
            return fn, False
        got = getattr(out, "shape", type(out).__name__)
    except Exception as e:  # a scalar function indexing a 2-D array may raise anything
        err, got = e, None
    try:
        one = fn(probe[0])
        one_shape = np.shape(one) if not _backend.is_cupy_array(one) else one.shape
    except Exception:
        one_shape = None
    single = () if out_dim is None else (out_dim,)
    if one_shape == single:
        warnings.warn(f"{name} works on one point at a time; it is wrapped in a Python loop and will be slow. "
                      f"Write it for an (n, ndim) array to evaluate whole batches at once.", stacklevel=3)

        def looped(x):
            rows = [xp.asarray(fn(x[i]), dtype=xp.float64) for i in range(x.shape[0])]
            return xp.stack(rows) if rows else xp.zeros((0,) + single)
        return looped, True
    if err is not None:
        raise TypeError(f"{name} failed on an (n, {ndim}) array and on a single point ({err!r}); it must map an "
                        f"(n, {ndim}) array to {'(n,)' if out_dim is None else f'(n, {out_dim})'}.") from err
    raise ValueError(f"{name} returned shape {got} for an input of shape (2, {ndim}); it must return "
                     f"{want if out_dim is None else '(n, %d)' % out_dim} for n points.")


def _fusable_model(loglike, prior_transform):
    """The object whose bound ``loglike`` and ``prior_transform`` these are, where it offers a fused step.

    The protocol: an object may define ``nested_fused_slice(u, v, logl, lstar, dirs, unif, max_shrink) ->
    (u, v, logl, nrej, neval)``, every slice of every walker in one call (see
    :meth:`SinusoidModel.nested_fused_slice`), and optionally ``nested_fused_available(xp) -> bool``. It
    is used where ``loglike`` and ``prior_transform`` are methods of that object defined by the class that
    defines ``nested_fused_slice`` (a subclass that overrides either falls back to the generic path).
    """
    model = getattr(loglike, "__self__", None)
    if model is None or getattr(prior_transform, "__self__", None) is not model:
        return None
    if not callable(getattr(model, "nested_fused_slice", None)):
        return None
    owner = next((c for c in type(model).__mro__ if "nested_fused_slice" in vars(c)), None)
    if owner is None:
        return None
    mine = list(vars(owner).values())
    if not any(getattr(loglike, "__func__", None) is f for f in mine) or \
            not any(getattr(prior_transform, "__func__", None) is f for f in mine):
        return None
    return model


def _argsort_rows(xp, x):
    """``xp.argsort(x, axis=1)`` of a 2-D float64 array.

    On CuPy one launch of ``nested_argsort_rows`` (``kernels_cu/nested.cu``), which gives ``cupy.argsort``'s
    permutation (stable, NaN last) without the wait for the stream that ``cupy.argsort`` makes; on NumPy
    ``numpy.argsort`` itself.
    """
    if xp is np:
        return np.argsort(x, axis=1)
    from ... import _kernel_args, _loader

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


class _Progress:
    """Each run's evidence and the stopping rule, one iteration at a time, read back ``lag`` iterations late.

    ``push`` adds the points just removed to each run's evidence and computes the worst run's stopping
    value ``log(Z + L_max X) - log Z`` and the NaN/+inf flag; ``pop`` returns the oldest pair not read yet.
    On CuPy ``push`` is one launch of ``nested_progress`` (``kernels_cu/nested.cu``), which writes the pair
    into a slot of mapped host memory, and ``pop`` waits for that iteration's event only, so the host never
    waits for the GPU to drain; on NumPy it is the kernel's twin, the array expression below.
    """

    def __init__(self, xp, n_runs, offsets, lag):
        self.xp, self.queue = xp, []
        self.logz = xp.full((n_runs,), -np.inf)
        self.offsets = offsets  # (R,) log X of each removed point's shell from the iteration's start
        self.gpu = xp is not np
        if self.gpu:
            from ... import _loader

            rt = xp.cuda.runtime
            self.n_slots = lag + 2
            self.ptr = rt.hostAlloc(16 * self.n_slots, 2 | 1)  # cudaHostAllocMapped | cudaHostAllocPortable
            import ctypes
            self.host = np.ctypeslib.as_array((ctypes.c_double * (2 * self.n_slots)).from_address(self.ptr))
            self.events = [xp.cuda.Event(disable_timing=True) for _ in range(self.n_slots)]
            self.fn = _loader.get_function("nested.cu", "nested_progress", _KERNELS)
            self.offsets = _loader.contiguous(offsets, np.float64)
            self.k = 0

    def __len__(self):
        return len(self.queue)

    def push(self, dead, live, fine, logx, logx_next):
        xp = self.xp
        if not self.gpu:
            lw = dead + (logx + self.offsets)[None, :]
            lwm = lw.max(axis=1, keepdims=True)
            lwm = xp.where(xp.isfinite(lwm), lwm, 0.0)  # all -inf (zero likelihood): adds nothing, not NaN
            self.logz = xp.logaddexp(self.logz, xp.log(xp.exp(lw - lwm).sum(axis=1)) + lwm[:, 0])
            remain = xp.logaddexp(self.logz, live.max(axis=1) + logx_next) - self.logz
            self.queue.append((float(remain.max()), bool(fine)))
            return
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
        if not self.gpu:
            return item
        self.events[item].synchronize()  # synchronize! (with this iteration's launch only: later work stays queued)
        return float(self.host[2 * item]), bool(self.host[2 * item + 1])

    def close(self):
        if self.gpu and self.ptr:
            for ev in self.events:  # launches still queued (a run stopped by an error) write here
                ev.synchronize()
            self.xp.cuda.runtime.freeHost(self.ptr)
            self.ptr = 0


def merge_points(logl, birth):
    """Order points by log-likelihood and give each the number of live points it was the lowest of.

    This is how runs are merged: a point born at threshold ``birth`` (``-inf``
    for the initial live points) and removed at ``logl`` was live for every
    threshold in ``[birth, logl)``; so the k-th lowest point overall was the
    lowest of ``n_k = #{j: birth_j < logl_k <= logl_j}`` live points. For M
    runs of N points, ``n_k = M N`` throughout the run (Henderson's proof that
    merged runs are one run with M N live points); for multiple replacement the
    i-th of R removed points gets ``N - i``.

    Returns ``(order, nlive)``: the sorting permutation and ``n_k`` in sorted order.
    """
    logl = np.asarray(logl, np.float64)
    birth = np.asarray(birth, np.float64)
    order = np.argsort(logl, kind="stable")
    ls = logl[order]
    born_before = np.searchsorted(np.sort(birth), ls, side="left")
    removed_before = np.arange(ls.size)
    nlive = born_before - removed_before
    return order, np.maximum(nlive, 1)


def _evidence(ls, nlive):
    """logz, logwt, logX, information and Skilling's error from sorted logl and live counts."""
    logx = -np.cumsum(1.0 / nlive)
    logx_prev = np.concatenate([[0.0], logx[:-1]])
    # X_{k-1} - X_k = X_{k-1} (1 - exp(-1/n_k))
    logdx = logx_prev + np.log(-np.expm1(-1.0 / nlive))
    logwt = ls + logdx
    logz = _logsumexp(logwt)
    p = np.exp(logwt - logz)
    fin = p > 0
    h = float(np.sum(p[fin] * (ls[fin] - logz)))
    h = max(h, 0.0)
    # Var(log X) at the bulk of the posterior (log X = -H): sum of 1/n_k^2 up to there.
    # For a constant n = N this is (N H) / N^2 = H / N, Skilling's estimate.
    upto = logx >= -h
    var = float(np.sum(1.0 / nlive[upto] ** 2)) if h > 0 else 0.0
    if upto.sum() < upto.size and h > 0:
        # the step that crosses -H, interpolated
        k = int(upto.sum())
        var += (1.0 / nlive[k] ** 2) * min(1.0, (logx_prev[k] + h) * nlive[k])
    return logz, logwt, logx, h, math.sqrt(var)


# --------------------------------------------------------------------------- results
@dataclasses.dataclass(frozen=True)
class NestedResults:
    """The outcome of a nested-sampling run (immutable; arrays are read-only NumPy).

    Attributes
    ----------
    logz, logzerr : float
        log evidence and its error. ``logzerr`` is Skilling's ``sqrt(H/N)``,
        generalised to live-point counts that vary (multiple replacement,
        merged runs): ``sqrt(sum 1/n_k**2)`` over the points down to the bulk
        of the posterior, ``log X = -H``.
    logzerr_runs : float or None
        For ``n_runs > 1``: the standard deviation of the per-run evidences
        divided by ``sqrt(n_runs)``, an independent check on ``logzerr``.
    logz_runs : ndarray (n_runs,)
        Each run's own log evidence.
    samples : ndarray (n, ndim)
        Every dead point and the final live points, in physical coordinates,
        sorted by log-likelihood; ``samples_u`` the same in the unit cube.
    logl, logwt, logvol, nlive : ndarray (n,)
        Their log-likelihoods, log importance weights (unnormalised:
        ``logsumexp(logwt) == logz``), expected log prior volumes and the
        number of live points each was the lowest of.
    information : float
        The KL divergence from prior to posterior, H (nats).
    ncall : int
        Likelihood evaluations (points evaluated, counting every walker).
    nbatch : int
        Calls of the batched ``loglike``.
    niter, n_runs, nlive_per_run, n_replace, seconds : run settings and wall time (for runs merged by
        :func:`combine_runs`: the longest run's iterations, the runs counted, the total time, and -1 for
        a setting the runs do not share).
    run : ndarray (n,) of int
        The run each point came from (0 to ``n_runs - 1``; runs merged by :func:`combine_runs` are numbered
        in the order given).
    logwt_run : ndarray (n,)
        Each point's log posterior weight within its own run, from that run's own live-point counts and
        normalised by its own evidence: ``exp(logwt_run[run == m])`` sums to 1 for each run m.
    mode_mass, mode_mass_runs, runs_lost_mode : ndarray (C,), (n_runs, C), (n_runs,) of bool
        The per-run mode check (see :func:`mode_check`): the posterior mass of each of the C modes found
        among the points (clusters holding at least 2% of the merged mass), in the merged run and in each
        run on its own, and which runs hold less than a fifth of the merged mass of a mode holding at
        least 5% of it: those runs lost the mode, and the merged run then gives it too little weight. A
        warning says so after the run, and also where the runs disagree on a mode's mass by more than
        ``MODE_ERR_MAX`` (:attr:`mode_mass_err`). Empty for a single run.
    """

    logz: float
    logzerr: float
    logzerr_runs: float | None
    logz_runs: np.ndarray
    samples: np.ndarray
    samples_u: np.ndarray
    logl: np.ndarray
    logwt: np.ndarray
    logvol: np.ndarray
    nlive: np.ndarray
    information: float
    ncall: int
    nbatch: int
    niter: int
    n_runs: int
    nlive_per_run: int
    n_replace: int
    seconds: float
    run: np.ndarray | None = None
    logwt_run: np.ndarray | None = None
    mode_mass: np.ndarray | None = None
    mode_mass_runs: np.ndarray | None = None
    runs_lost_mode: np.ndarray | None = None

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray):
                v.setflags(write=False)

    @property
    def weights(self) -> np.ndarray:
        """Normalised posterior weights of :attr:`samples`."""
        return np.exp(self.logwt - self.logz)

    @property
    def mode_mass_err(self) -> np.ndarray:
        """Each mode's between-run error of its merged mass (C,): the spread of :attr:`mode_mass_runs` over
        ``sqrt(n_runs)``, as ``logzerr_runs`` is for log Z (empty for a single run). Where it is over
        ``MODE_ERR_MAX`` (0.05) the runs disagree on the mode, and a warning says so after the run."""
        if self.mode_mass_runs is None:
            return np.zeros(0)
        return _mass_err(self.mode_mass_runs)

    @property
    def eff(self) -> float:
        """Sampling efficiency: points kept over likelihood calls (percent)."""
        return 100.0 * self.samples.shape[0] / max(self.ncall, 1)

    def posterior_samples(self, n=None, random_state=None) -> np.ndarray:
        """Equally weighted posterior draws by systematic resampling of :attr:`samples`.

        ``n`` defaults to the effective sample size ``1 / sum(w**2)``.
        """
        w = self.weights
        w = w / w.sum()
        if n is None:
            n = max(1, int(1.0 / np.sum(w ** 2)))
        rng = np.random.default_rng(random_state)
        pos = (rng.random() + np.arange(n)) / n
        idx = np.searchsorted(np.cumsum(w), pos, side="right")
        idx = np.minimum(idx, w.size - 1)
        return self.samples[rng.permutation(idx)]

    def to_arviz(self, n=None, random_state=None, var_names=None):
        """An ArviZ object with equally weighted posterior draws as one chain.

        The parameters are stored as one variable ``theta`` (draw, dim) unless
        ``var_names`` names each dimension.
        """
        from ...sampling import to_arviz
        draws = self.posterior_samples(n, random_state)
        if var_names is None:
            post = {"theta": draws[None]}
        else:
            if len(var_names) != draws.shape[1]:
                raise ValueError(f"var_names has {len(var_names)} names for {draws.shape[1]} dimensions.")
            post = {v: draws[None, :, i] for i, v in enumerate(var_names)}
        return to_arviz(post, attrs={"logz": self.logz, "logzerr": self.logzerr, "sampler": "nested"})

    def summary(self) -> str:
        s = (f"logz = {self.logz:.3f} +/- {self.logzerr:.3f}"
             + (f" (between runs: +/- {self.logzerr_runs:.3f})" if self.logzerr_runs is not None else "")
             + f", H = {self.information:.2f} nats, niter = {self.niter}, ncall = {self.ncall}, "
               f"{self.n_runs} run(s) x {self.nlive_per_run} live points, R = {self.n_replace}")
        if self.runs_lost_mode is not None and self.runs_lost_mode.any():
            s += f", runs that lost a mode: {np.flatnonzero(self.runs_lost_mode).tolist()}"
        err = self.mode_mass_err
        if err.size and err.max() > MODE_ERR_MAX:
            s += f", a mode's mass uncertain by {err.max():.2f} between runs"
        return s

    def __repr__(self) -> str:
        return f"NestedResults({self.summary()})"


# A run holding under LOST_FRACTION of the runs' mean mass of a mode to which some run gives at least
# MODE_MIN_MASS lost it. Runs that kept the 0.3 mode of the module docstring's mixture, made with equal
# widths, held 0.13 to 0.48 of their own mass there at 50 live points (6 seeds): a fifth of the mean stays
# clear of them.
MODE_MIN_MASS, LOST_FRACTION, CLUSTER_MIN_MASS = 0.05, 0.2, 0.02
# Where no run lost a mode, a warning says when the runs disagree on a mode's mass: its between-run error
# (NestedResults.mode_mass_err) over MODE_ERR_MAX. On the equal-width mixture of the module docstring (5
# runs, R = 10), the error was 0.07 to 0.13 at 50 live points per run (8 seeds; merged weight 0.18 to 0.60
# for 0.3), 0.04 to 0.06 at 100 and 0.02 to 0.05 at the default 500 (weight 0.26 to 0.37).
MODE_ERR_MAX = 0.05
# Live points per run under which NestedSampler warns, with n_runs > 1 (see the module docstring).
NLIVE_MODES = 100


class FewLivePointsWarning(UserWarning):
    """Few live points per run for merged runs: a run may lose a mode (filter it where modes are not a risk)."""


def _clusters(x, w, keep=0.98, max_points=500, cut=5.0, min_mass=CLUSTER_MIN_MASS):
    """Modes as single-linkage clusters of the points ``x`` (n, d) that carry ``keep`` of the weight ``w``.

    ``x`` are unit-cube coordinates, the scale the constrained sampler moves on. The tree is split from its
    top wherever a merge is longer than ``cut`` times the median merge (about the nearest-neighbour distance
    within a mode) and both sides carry at least ``min_mass`` of the weight; a mode's tails, which split off
    in small pieces, stay with it. At most ``max_points`` points, drawn in proportion to their weight
    (systematic resampling), make the tree; the others join the mode of their nearest point in it. Returns labels (n,), -1 for points left out (the lightest, holding
    ``1 - keep``).
    """
    from scipy.cluster.hierarchy import linkage

    n = w.size
    labels = np.full(n, -1, np.int64)
    by_weight = np.argsort(-w, kind="stable")
    k = int(np.searchsorted(np.cumsum(w[by_weight]), keep * w.sum())) + 1
    k = max(min(k, n), min(n, 10))
    kept = by_weight[:k]
    if k > max_points:
        # The tree's points in proportion to their weight (systematic resampling, no random draw), so that
        # every mode holds points in proportion to its mass: the heaviest points alone can all lie in the
        # mode of highest likelihood and leave a lighter mode out of the tree.
        # Each tree point carries the mass it was drawn for (its draws times 1 / max_points of the whole).
        cw = np.cumsum(w[kept])
        at, draws = np.unique(np.minimum(np.searchsorted(cw, (np.arange(max_points) + 0.5) * (cw[-1] / max_points)),
                                         k - 1), return_counts=True)
        inside = np.zeros(k, bool)
        inside[at] = True
        idx, rest = kept[inside], kept[~inside]
        leaf_mass = draws * (cw[-1] / max_points)  # at is sorted, as kept[inside] is
    else:
        idx, rest = kept, kept[:0]
        leaf_mass = w[idx]
    k = idx.size
    if k < 2:
        labels[idx] = 0
        return labels
    z = linkage(x[idx], method="single")
    t = cut * float(np.median(z[:, 2]))
    pair = z[:, :2].astype(np.int64)
    mass = np.concatenate([leaf_mass, np.zeros(k - 1)])
    for i in range(k - 1):
        mass[k + i] = mass[pair[i, 0]] + mass[pair[i, 1]]
    mmin = min_mass * w.sum()
    out, todo, found = np.full(k, -1, np.int64), [2 * k - 2], 0
    while todo:  # top down: split where both sides are heavy and far apart
        j = todo.pop()
        if j >= k and z[j - k, 2] > t and mass[pair[j - k, 0]] >= mmin and mass[pair[j - k, 1]] >= mmin:
            todo.extend(pair[j - k])
            continue
        leaves = [j]
        while leaves:
            q = leaves.pop()
            if q < k:
                out[q] = found
            else:
                leaves.extend(pair[q - k])
        found += 1
    labels[idx] = out
    if rest.size:  # beyond max_points: each point joins the mode of its nearest clustered point
        from scipy.spatial import cKDTree

        labels[rest] = out[cKDTree(x[idx]).query(x[rest])[1]]
    return labels


def mode_check(samples_u, weights, run, weights_run, n_runs):
    """The per-run mode check of merged runs: each mode's posterior mass, merged and in each run.

    ``samples_u`` (n, d) are the points (unit cube), ``weights`` their merged posterior weights, ``run``
    the run of each and ``weights_run`` each point's weight within its own run. Modes are single-linkage
    clusters of the points carrying 99% of the merged mass (:func:`_clusters`); those with at least 2% of
    it are kept. Returns ``(mass (C,), mass_runs (n_runs, C), lost (n_runs,))``: a run lost a mode when it
    holds under a fifth of the merged mass of a mode that holds at least 5%.

    The merged run gives each run's points the same share of every level, so a run that lost a mode pulls
    that mode's merged weight down; log Z moves little (at most the log of the lost mass fraction over the
    number of runs), so neither logzerr nor logzerr_runs shows it.
    """
    w = np.asarray(weights, np.float64)
    labels = _clusters(np.asarray(samples_u, np.float64), w)
    found = [c for c in range(labels.max() + 1) if w[labels == c].sum() >= CLUSTER_MIN_MASS * w.sum()]
    mass = np.array([w[labels == c].sum() for c in found]) / w.sum()
    mass_runs = np.zeros((n_runs, len(found)))
    for j, c in enumerate(found):
        inside = labels == c
        mass_runs[:, j] = np.bincount(run[inside], weights=weights_run[inside], minlength=n_runs)[:n_runs]
    return mass, mass_runs, _lost(mass_runs)


def _lost(mass_runs):
    """Runs holding under LOST_FRACTION of the runs' mean mass of a mode that some run gives MODE_MIN_MASS."""
    if mass_runs.shape[0] < 2 or not mass_runs.size:
        return np.zeros(mass_runs.shape[0], bool)
    big = mass_runs.max(axis=0) >= MODE_MIN_MASS
    return (mass_runs[:, big] < LOST_FRACTION * mass_runs[:, big].mean(axis=0)).any(axis=1)


def _mass_err(mass_runs):
    """Each mode's between-run error of its merged mass: the runs' spread over ``sqrt(n_runs)``."""
    M = mass_runs.shape[0]
    if M < 2 or not mass_runs.size:
        return np.zeros(mass_runs.shape[1])
    return np.std(mass_runs, axis=0, ddof=1) / math.sqrt(M)


def _warn_lost(lost, mass, mass_runs, nlive_per_run, stacklevel=3):
    per_run = f" (it has {nlive_per_run})" if nlive_per_run > 0 else ""
    if not lost.any():
        err = _mass_err(mass_runs)
        if err.size and err.max() > MODE_ERR_MAX:
            j = int(np.argmax(err))
            warnings.warn(f"the runs disagree on the mass of a mode: it holds "
                          f"{np.array2string(mass_runs[:, j], precision=2)} of each run's mass, so its merged "
                          f"mass {mass[j]:.2f} is uncertain by {err[j]:.2f} (results.mode_mass_err; over "
                          f"{MODE_ERR_MAX} is flagged). Use more live points per run (at least {NLIVE_MODES}"
                          f"{per_run}) or more runs.", RuntimeWarning, stacklevel=stacklevel)
        return
    big = mass_runs.max(axis=0) >= MODE_MIN_MASS
    j = int(np.argmax(np.where(big, (mass_runs < LOST_FRACTION * mass_runs.mean(axis=0)).sum(axis=0), -1)))
    warnings.warn(f"{int(lost.sum())} of {lost.size} runs lost a mode: a mode with {mass[j]:.2f} of the merged "
                  f"posterior mass holds {np.array2string(mass_runs[:, j], precision=2)} of each run's mass "
                  f"(runs {np.flatnonzero(lost).tolist()} flagged; see results.mode_mass_runs). The merged run "
                  f"gives that mode too little weight. Use more live points per run (at least {NLIVE_MODES}"
                  f"{per_run}), fewer runs of more points, or more n_steps.", RuntimeWarning, stacklevel=stacklevel)


def combine_runs(runs) -> NestedResults:
    """One :class:`NestedResults` from independent runs: the combined-runs estimator.

    For runs made apart, as Dask tasks (:func:`gpumcmc.distributed.map_runs`)
    or in separate sessions. At any level ``L`` the live points of the merged
    run are those of every run still going, so the merged point at ``L`` was
    the lowest of ``sum_r n_r(L)`` live points, where ``n_r(L)`` is run r's
    live count at its first point at or above ``L`` (0 once run r has ended).
    Each run's ``nlive`` already holds that count (for runs of one call with
    ``n_runs=M``, the merged count of its M runs), so the merged counts equal
    those that :func:`merge_points` gives from every point's birth, and the
    evidence, weights and error follow as for one run. ``logz_runs`` lists
    every run's own evidence; ``logzerr_runs`` is their spread over
    ``sqrt(number of runs)``. The runs must share the model: the same
    ``ndim`` (and, for the estimate to mean anything, the same likelihood and
    prior).

    Examples
    --------
    >>> from gpumcmc.nested import NestedSampler, combine_runs, correlated_gaussian
    >>> ll, pt, logz = correlated_gaussian(2)
    >>> runs = [NestedSampler(ll, pt, 2, nlive=50, random_state=s, progress=False, backend="numpy").run().results
    ...         for s in range(3)]
    >>> both = combine_runs(runs)
    >>> both.n_runs, int(both.nlive.max())
    (3, 150)
    """
    runs = list(runs)
    if not runs:
        raise ValueError("combine_runs needs at least one NestedResults.")
    for r in runs:
        if not isinstance(r, NestedResults):
            raise TypeError(f"combine_runs takes NestedResults (a sampler's .results), got {type(r).__name__}.")
    d = runs[0].samples.shape[1]
    if any(r.samples.shape[1] != d for r in runs):
        raise ValueError(f"the runs have different dimensions ({sorted({r.samples.shape[1] for r in runs})}); "
                         "combine runs of one model only.")
    if len(runs) == 1:
        return runs[0]
    logl = np.concatenate([r.logl for r in runs])
    order = np.argsort(logl, kind="stable")
    ls = logl[order]
    nlive = np.zeros(ls.size, np.int64)
    for r in runs:
        nxt = np.searchsorted(r.logl, ls, side="left")     # run r's next point at or above each level
        going = nxt < r.logl.size
        nlive[going] += r.nlive[nxt[going]]
    logz, logwt, logx, info, err = _evidence(ls, nlive)
    logz_runs = np.concatenate([np.atleast_1d(r.logz_runs) for r in runs]).astype(np.float64)
    m = logz_runs.size
    per_run = {r.nlive_per_run for r in runs}
    replace = {r.n_replace for r in runs}
    offsets = np.cumsum([0] + [r.n_runs for r in runs])
    run = np.concatenate([(r.run if r.run is not None else np.zeros(r.logl.size, np.int64)) + o
                          for r, o in zip(runs, offsets)])[order]
    logwt_run = np.concatenate([r.logwt_run if r.logwt_run is not None else r.logwt - r.logz
                                for r in runs])[order]
    samples_u = np.concatenate([r.samples_u for r in runs])[order]
    n_all = int(offsets[-1])
    mass, mass_runs, lost = mode_check(samples_u, np.exp(logwt - logz), run, np.exp(logwt_run), n_all)
    _warn_lost(lost, mass, mass_runs, per_run.copy().pop() if len(per_run) == 1 else -1)
    return NestedResults(
        logz=float(logz), logzerr=float(err),
        logzerr_runs=float(np.std(logz_runs, ddof=1) / math.sqrt(m)) if m > 1 else None, logz_runs=logz_runs,
        samples=np.concatenate([r.samples for r in runs])[order],
        samples_u=samples_u, logl=ls, logwt=logwt, logvol=logx,
        nlive=nlive, information=float(info), ncall=sum(r.ncall for r in runs),
        nbatch=sum(r.nbatch for r in runs), niter=max(r.niter for r in runs), n_runs=m,
        nlive_per_run=per_run.pop() if len(per_run) == 1 else -1,
        n_replace=replace.pop() if len(replace) == 1 else -1, seconds=sum(r.seconds for r in runs),
        run=run, logwt_run=logwt_run, mode_mass=mass, mode_mass_runs=mass_runs, runs_lost_mode=lost)


def plot_run(results: NestedResults, axes=None, color="C0"):
    """The run plot: log-likelihood and posterior weight against log prior volume.

    Returns the matplotlib figure.
    """
    import matplotlib.pyplot as plt
    if axes is None:
        fig, axes = plt.subplots(2, 1, figsize=(6, 5), sharex=True)
    else:
        fig = axes[0].figure
    x = results.logvol
    finite = np.isfinite(results.logl)
    axes[0].plot(x[finite], results.logl[finite], color=color)
    axes[0].set_ylabel("log L")
    axes[1].plot(x, results.weights, color=color)
    axes[1].set_ylabel("posterior weight")
    axes[1].set_xlabel("log X")
    axes[0].set_title(f"log Z = {results.logz:.2f} +/- {results.logzerr:.2f}")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- sampler
_BAD_FIX = ("a log-likelihood must be finite or -inf: return -inf for zero likelihood, never NaN, and keep it "
            "finite where the likelihood diverges (a floor on a variance, or a prior that leaves out the "
            "singular point).")


class _BadValue(Exception):
    """Raised by the replay of :meth:`NestedSampler._located_error` at the first bad likelihood."""


class NestedSampler:
    """Batched nested sampler (dynesty-like).

    Parameters
    ----------
    loglike : callable
        ``loglike(x) -> (n,)`` for an ``(n, ndim)`` array of physical points
        (CuPy on the GPU). A function of one point is accepted with a warning.
    prior_transform : callable
        ``prior_transform(u) -> (n, ndim)`` from the unit cube.
    ndim : int
    nlive : int
        Live points per run (at least ``ndim + 1``).
    n_replace : int
        R, the points replaced per iteration (``1 <= R <= nlive // 2``).
    n_runs : int
        M, independent runs advanced together and merged.
    sampler : {"slice", "cslice", "rwalk"}
        ``"slice"``: slice sampling along random directions drawn from the live
        points' covariance (an interval of adapted width placed at random
        around the start, then shrunk); ``"cslice"``: the same, coordinate-wise
        in the live points' whitened coordinates (the columns of the Cholesky
        factor of their covariance, in turn); ``"rwalk"``: a Gaussian random
        walk with the same covariance and an adapted scale.
    n_steps : int, optional
        Slices (or walk steps) per new point; default ``max(5, 4 * ndim)`` for
        slice, ``20 + 2 * ndim`` for rwalk. Too few leave new points correlated
        with their starts, which biases log Z upwards (on the 10-D Gaussian
        shells ``ndim + 3`` slices gave +0.5 nats); raise it for hard
        multimodal problems and check that log Z does not move.
    dlogz : float
        Stop when the evidence left in the live points, ``max L * X``, would
        change log Z by less than this, in every run.
    max_iter : int, optional
        A hard stop.
    random_state : int, optional
    progress : bool
        A tqdm progress bar.
    backend : {"numpy", "cupy", None}
    check_lag : int
        The stopping rule is computed on the device at every iteration and read
        back ``check_lag`` iterations later, so that the host never waits for
        the GPU to drain: a run goes on ``check_lag`` iterations past the first
        one that meets ``dlogz`` (more dead points, never fewer), the same on
        every backend.
    fused : bool, optional
        Run each iteration's whole constrained step (every slice and shrinkage
        round of every walker, likelihood included) as one call, where the
        model offers one: ``loglike`` and ``prior_transform`` are methods of
        one object that defines ``nested_fused_slice`` (the protocol of
        :func:`_fusable_model`; :class:`SinusoidModel` does, as one CUDA
        kernel, with ``kernel=True``), on CuPy, with ``sampler="slice"`` or
        ``"cslice"``. ``None`` (default) uses it where it
        applies; ``False`` never. Its twin is the generic path with the model's
        ``loglike``: the same directions and uniforms give the same new points
        (to rounding of the likelihood). On NumPy the generic path runs.
    max_shrink : int
        Shrinkage rounds per slice; a walker that has missed this many times
        stays where it is for that slice (a valid move: the chance of a jump
        from x to x' and back is the same either way).
    check_modes : bool
        With ``n_runs > 1``, check after the run for runs that lost a mode
        (:func:`mode_check`: ``results.runs_lost_mode``, and a warning); it
        clusters at most 500 points on the host, once. ``False`` skips it
        (the results' mode fields are then empty).
    """

    def __init__(self, loglike, prior_transform, ndim, nlive=500, n_replace=1, n_runs=1, sampler="slice",
                 dlogz=0.01, random_state=None, progress=True, backend=None, n_steps=None, max_iter=None,
                 check_lag=2, fused=None, max_shrink=30, dtype=np.float64, check_modes=True):
        # The settings are stored as given (so get_params and sklearn.base.clone give them back) and checked
        # here and again by run() where set_params changed them.
        self.loglike, self.prior_transform, self.ndim = loglike, prior_transform, ndim
        self.nlive, self.n_replace, self.n_runs, self.sampler = nlive, n_replace, n_runs, sampler
        self.dlogz, self.random_state, self.progress, self.backend = dlogz, random_state, progress, backend
        self.n_steps, self.max_iter, self.check_lag, self._fused_setting = n_steps, max_iter, check_lag, fused
        self.max_shrink, self.dtype, self.check_modes = max_shrink, dtype, check_modes
        self.rng = None  # seeded by run(), so that two runs with the same random_state agree
        self._results = None
        self._seed, self._locate, self._niter, self._configured = None, False, 0, None
        self._setup(stacklevel=3)

    @classmethod
    def _get_param_names(cls) -> list[str]:
        import inspect

        return sorted(p for p in inspect.signature(cls.__init__).parameters if p != "self")

    # ``fused`` the setting is kept apart from ``fused`` the property (whether the fused step runs)
    _STORED = {"fused": "_fused_setting"}

    def get_params(self, deep: bool = True) -> dict:
        """The settings given to ``__init__``, as scikit-learn's ``get_params`` (for ``sklearn.base.clone``)."""
        return {name: getattr(self, self._STORED.get(name, name)) for name in self._get_param_names()}

    def set_params(self, **params):
        """Change settings; they are checked at once, and the next :meth:`run` uses them."""
        valid = self._get_param_names()
        for name in params:
            if name not in valid:
                raise ValueError(f"NestedSampler has no setting {name!r}; valid settings: {valid}.")
        for name, value in params.items():
            setattr(self, self._STORED.get(name, name), value)
        self._setup(stacklevel=3)
        return self

    def _settings(self):
        return tuple(id(v) for v in self.get_params().values())

    def _setup(self, stacklevel=2):
        """Check the settings and derive what the run needs from them (the batched callables, the backend,
        the fused step)."""
        loglike, prior_transform, sampler, fused = self.loglike, self.prior_transform, self.sampler, self._fused_setting
        if not callable(loglike) or not callable(prior_transform):
            raise TypeError("loglike and prior_transform must be callables on (n, ndim) arrays.")
        ndim = _integer("ndim", self.ndim, 1)
        nlive = _integer("nlive", self.nlive, 1)
        n_replace, n_runs = _integer("n_replace", self.n_replace, 1), _integer("n_runs", self.n_runs, 1)
        if nlive < ndim + 1:
            raise ValueError(f"nlive={nlive} is too few for ndim={ndim}: use at least ndim + 1 = {ndim + 1} "
                             f"live points (hundreds are usual).")
        if not 1 <= n_replace <= max(1, nlive // 2):
            raise ValueError(f"n_replace must be between 1 and nlive // 2 = {nlive // 2}, got {n_replace}.")
        if sampler not in _SAMPLERS:
            raise ValueError(f"sampler must be one of {_SAMPLERS}, got {sampler!r}.")
        dlogz = self.dlogz
        if isinstance(dlogz, (bool, np.bool_)) or not isinstance(dlogz, (int, float, np.integer, np.floating)):
            raise TypeError(f"dlogz must be a positive number, got {type(dlogz).__name__}.")
        if not 0 < dlogz < np.inf:
            raise ValueError(f"dlogz must be positive and finite, got {dlogz}; 0.01 to 0.5 is usual.")
        if self.max_iter is not None:
            _integer("max_iter", self.max_iter, 1, "or None for no limit")
        _integer("check_lag", self.check_lag, 0)
        _integer("max_shrink", self.max_shrink, 1)
        n_steps = self.n_steps
        if n_steps is None:
            n_steps = max(5, 4 * ndim) if sampler == "slice" else 20 + 2 * ndim
        self._n_steps = _integer("n_steps", n_steps, 1, "or None for the default")
        random_state = self.random_state
        if not (random_state is None or isinstance(random_state, (int, np.integer, np.random.SeedSequence,
                                                                  np.random.Generator))
                or type(random_state).__name__ == "Generator"):
            raise TypeError(f"random_state must be None, an int, a SeedSequence or a Generator, got "
                            f"{type(random_state).__name__}.")
        self.xp = _backend.get_backend(self.backend)
        self._loglike, _ = _batchify(loglike, ndim, self.xp, "loglike", None)
        self._prior, _ = _batchify(prior_transform, ndim, self.xp, "prior_transform", ndim)
        model = _fusable_model(loglike, prior_transform)
        if fused and (model is None or sampler == "rwalk"):
            raise ValueError("fused=True needs loglike and prior_transform to be methods of one object that offers "
                             "nested_fused_slice (as SinusoidModel does) and sampler='slice' or 'cslice'; leave "
                             "fused=None to use a fused step only where it applies.")
        self._fused = None
        if (fused is None or fused) and model is not None and sampler != "rwalk" and self.xp is not np:
            available = getattr(model, "nested_fused_available", None)
            if available is None or available(self.xp):
                self._fused = model
        if n_runs > 1 and nlive < NLIVE_MODES:
            warnings.warn(f"nlive={nlive} live points per run: runs this small can lose a mode of a multimodal "
                          f"posterior (the merged run then gives it too little weight); use at least "
                          f"{NLIVE_MODES} per run where modes are possible. results.runs_lost_mode flags "
                          f"runs that did.", FewLivePointsWarning, stacklevel=stacklevel + 1)
        self._configured = self._settings()

    # -- evaluation -------------------------------------------------------------
    def _eval(self, u):
        """Physical points and log-likelihoods of unit-cube points ``u`` (..., ndim)."""
        xp = self.xp
        shape = u.shape[:-1]
        flat = u.reshape(-1, self.ndim)
        v = self._prior(flat)
        logl = self._loglike(v)
        if getattr(logl, "shape", None) != (flat.shape[0],):
            raise ValueError(f"loglike returned shape {getattr(logl, 'shape', None)} for {flat.shape[0]} points; "
                             f"it must return one value per point, shape (n,).")
        if getattr(v, "shape", None) != flat.shape:
            raise ValueError(f"prior_transform returned shape {getattr(v, 'shape', None)} for input {flat.shape}.")
        self._ncall += flat.shape[0]
        self._nbatch += 1
        return v.reshape(shape + (self.ndim,)), xp.asarray(logl, dtype=xp.float64).reshape(shape)

    def _check_init(self, v, logl):
        xp = self.xp
        if not bool(xp.isfinite(v).all()):  # synchronize! (once, at the start)
            raise ValueError("prior_transform returned non-finite values for points in the unit cube; it must "
                             "map [0, 1]^ndim into the parameter space.")
        if not bool((logl < np.inf).all()):
            raise self._bad_value_error(v, logl, "a point drawn from the prior (an initial live point)")
        if not bool(xp.isfinite(logl).any()):
            raise ValueError("loglike is -inf for every initial live point; check the likelihood and the prior.")

    def _located_error(self, v, logl, where):
        """The ValueError for a NaN or +inf log-likelihood met during the run, naming the point.

        The run is replayed from its seed (same draws) up to the iteration the flag was read at, checking
        every batch of likelihoods on the host, which finds the first bad point and its coordinates. Where a
        replay cannot give the same draws (a Generator passed as ``random_state``, or the fused kernel) the
        live points are searched instead.
        """
        note = ""
        if self._seed is not None and self._fused is None and not self._locate:
            import copy

            twin = copy.copy(self)
            twin.random_state, twin.max_iter, twin.progress, twin._locate = self._seed, self._niter, False, True
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the run's own warnings were given already
                    twin.run()
            except _BadValue as e:
                return ValueError(f"{e}; {_BAD_FIX}")
            except Exception as exc:  # a likelihood with state of its own need not repeat itself
                note = (f" (replaying the run to name the first bad point failed with {type(exc).__name__}: "
                        f"{exc}; the live points were searched instead)")
        err = self._bad_value_error(v, logl, where)
        return ValueError(f"{err}{note}") if note else err

    def _bad_value_error(self, v, logl, where):
        """The ValueError for a NaN or +inf log-likelihood: the first such live point, its run and coordinates.

        ``v`` (M, N, ndim) and ``logl`` (M, N) are the live points; when none of them holds the bad value (a NaN
        of a proposal that was not kept) the message says so.
        """
        lh = _backend.to_host(logl).reshape(self.n_runs, -1)
        bad = np.argwhere(~(lh < np.inf))
        fix = _BAD_FIX
        if bad.size:
            m, n = (int(i) for i in bad[0])
            x = _backend.to_host(v).reshape(self.n_runs, -1, self.ndim)[m, n]
            return ValueError(f"loglike returned {lh[m, n]} for {where}, at x = {np.array2string(x, precision=6)} "
                              f"(run {m}); {fix}")
        return ValueError(f"loglike returned NaN or +inf for {where}; the point was not kept, so its coordinates "
                          f"are not known. {fix}")

    # -- the run ---------------------------------------------------------------------
    def run(self):
        """Run until the stopping rule holds; the outcome is in :attr:`results`.

        The generator is seeded here from ``random_state``, so two calls with an int seed give the same run.

        Raises
        ------
        ValueError
            When ``loglike`` returns NaN or +inf for any point, at the start or during the run (read back
            with the stopping rule, ``check_lag`` iterations later: no wait of its own).
        """
        if self._configured != self._settings():  # settings assigned since the last check
            self._setup(stacklevel=3)
        xp, M, N, R, d = self.xp, self.n_runs, self.nlive, self.n_replace, self.ndim
        t0 = time.perf_counter()
        self._ncall = 0
        self._nbatch = 0
        self._evolve_calls = 0
        seed = self.random_state
        if seed is None:
            seed = np.random.SeedSequence()
        elif isinstance(seed, np.random.Generator):  # as default_rng does: 256 bits drawn from it
            seed = np.random.SeedSequence(seed.integers(0, 2**32, size=8, dtype=np.uint64))
        # what a replay needs to repeat this run's draws (not a gpumcmc Generator, which moves on)
        self._seed = seed if isinstance(seed, (int, np.integer, np.random.SeedSequence)) else None
        self._niter = 0
        rng = self.rng = default_rng(seed, backend="numpy" if xp is np else "cupy")
        u = rng.random((M, N, d))
        v, logl = self._eval(u)
        self._check_init(v, logl)
        birth = xp.full((M, N), -np.inf)
        dead_l = []
        self._dead_u, self._dead_v, self._dead_b = dead_u, dead_v, dead_b = [], [], []
        # shrink of log X per iteration (the same for every run): sum_{i<R} 1/(N - i)
        inv_n = 1.0 / (N - np.arange(R))
        logx_steps = -np.cumsum(inv_n)
        log1m = np.log(-np.expm1(-inv_n))
        # log X of each replaced point's shell relative to the iteration's start, on the array backend once
        step_offsets = xp.asarray(np.concatenate([[0.0], logx_steps[:-1]]) + log1m)
        self._eye = xp.eye(d)
        self._eye_eps = xp.eye(d)[None] * 1e-12
        logx = 0.0
        scale = xp.ones((M,))
        run_idx = xp.arange(M)[:, None]
        niter, bar = 0, None
        if self.progress:
            from tqdm.auto import tqdm
            bar = tqdm(desc="nested", unit="it", leave=False)
        max_iter = self.max_iter if self.max_iter is not None else 10 ** 9
        # False once a batch of likelihoods held NaN or +inf (checked as each batch comes, with no wait)
        fine = xp.ones((), dtype=bool)
        # the stopping rule and that flag of iteration n are read on the host at iteration n + check_lag
        progress = _Progress(xp, M, step_offsets, self.check_lag)
        self._ncall_dev = xp.zeros((), dtype=xp.int64)
        try:
            while niter < max_iter:
                u, v, logl, birth, scale, dl, fine_step = self._iterate(u, v, logl, birth, scale, run_idx)
                fine = fine & fine_step
                logx_prev, logx = logx, logx + logx_steps[-1]
                dead_l.append(dl)
                niter += 1
                self._niter = niter
                progress.push(dl, logl, fine, logx_prev, logx)
                if bar is not None:
                    bar.update(1)
                if len(progress) > self.check_lag:
                    worst, ok = progress.pop()
                    if not ok:
                        raise self._located_error(v, logl, f"a point found at iteration {niter - self.check_lag}"
                                                           f" or before")
                    if bar is not None and niter % 10 == 0:
                        bar.set_postfix(dlogz=f"{worst:.3g}")
                    if worst < self.dlogz:
                        break
        finally:
            if bar is not None:
                bar.close()
            progress.close()
        if not bool(fine):  # the flags of the last check_lag iterations, not read yet (synchronize!, once)
            raise self._located_error(v, logl, f"a point found by iteration {niter}")
        self._u, self._v, self._logl, self._birth = u, v, logl, birth
        self._ncall += int(self._ncall_dev)
        self._results = self._finish(dead_u, dead_v, dead_l, dead_b, niter, time.perf_counter() - t0)
        return self

    def _iterate(self, u, v, logl, birth, scale, run_idx):
        """One iteration of every run: the R lowest live points die (recorded) and R walkers started at random
        survivors replace them. Returns the new live set, the adapted scales, the dead log-likelihoods
        (M, R) and the NaN/+inf flag of the likelihoods evaluated."""
        xp, rng, M, N, R = self.xp, self.rng, self.n_runs, self.nlive, self.n_replace
        order = _argsort_rows(xp, logl)
        low = order[:, :R]                                  # (M, R), ascending
        lstar = xp.take_along_axis(logl, low[:, -1:], axis=1)  # (M, 1)
        dl = xp.take_along_axis(logl, low, axis=1)
        self._dead_b.append(xp.take_along_axis(birth, low, axis=1))
        self._dead_u.append(xp.take_along_axis(u, low[..., None], axis=1))
        self._dead_v.append(xp.take_along_axis(v, low[..., None], axis=1))
        # starts: random survivors of the same run
        pick = xp.floor(rng.random((M, R)) * (N - R)).astype(xp.int64) + R
        pick = xp.minimum(pick, N - 1)
        start = xp.take_along_axis(order, pick, axis=1)
        u0 = xp.take_along_axis(u, start[..., None], axis=1)
        l0 = xp.take_along_axis(logl, start, axis=1)
        v0 = xp.take_along_axis(v, start[..., None], axis=1)
        chol = self._chol(u)
        un, vn, ln, scale, fine = self._evolve(u0, v0, l0, lstar, chol, scale)
        # replace
        u[run_idx, low] = un
        v[run_idx, low] = vn
        logl[run_idx, low] = ln
        birth[run_idx, low] = xp.broadcast_to(lstar, (M, R))
        return u, v, logl, birth, scale, dl, fine

    @property
    def fused(self) -> bool:
        """Whether each iteration's slice step runs as one fused CUDA kernel (see the ``fused`` parameter)."""
        return self._fused is not None

    @property
    def results(self) -> NestedResults:
        if self._results is None:
            raise AttributeError("No results yet: call run() first.")
        return self._results

    # -- constrained sampling ------------------------------------------------------
    def _chol(self, u):
        """Cholesky factor of each run's live-point covariance in the unit cube (M, d, d)."""
        xp, d = self.xp, self.ndim
        c = u - u.mean(axis=1, keepdims=True)
        cov = xp.einsum("mni,mnj->mij", c, c) / (u.shape[1] - 1)
        cov = cov + self._eye_eps  # xp.eye(d)[None] * 1e-12, made once per run
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
        uc = self.xp.clip(u, 1e-12, 1 - 1e-12)
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

    def _evolve(self, u, v, l, lstar, chol, scale):
        xp, d, rng = self.xp, self.ndim, self.rng
        M, R = u.shape[:2]
        fine = xp.ones((), dtype=bool)  # no NaN or +inf among the likelihoods evaluated
        if self.sampler == "rwalk":
            acc = xp.zeros((M,))
            step = 2.38 / math.sqrt(d)
            Z = rng.standard_normal((self._n_steps, M, R, d))
            for i in range(self._n_steps):
                z = Z[i]
                prop = u + step * scale[:, None, None] * xp.einsum("mij,mrj->mri", chol, z)
                pv, pl = self._propose_eval(prop)
                fine = fine & (pl < np.inf).all()
                ok = pl > lstar
                u = xp.where(ok[..., None], prop, u)
                v = xp.where(ok[..., None], pv, v)
                l = xp.where(ok, pl, l)
                acc = acc + ok.mean(axis=1)
            rate = acc / self._n_steps
            scale = xp.clip(scale * xp.exp(rate - 0.5), 1e-3, 1e3)
            return u, v, l, scale, fine
        # Slice sampling along random directions: an interval of width scale * w placed at random
        # around the start, shrunk towards it after each miss. The directions and every uniform a walker
        # may need (max_shrink rounds per slice) are drawn up front, so the fused kernel and this path
        # consume the same numbers. Each shrinkage round here evaluates the walkers still searching, all
        # in one loglike call; their count is the one host synchronisation of a round.
        W = M * R
        base = 2.0 * math.sqrt(d + 2.0)
        K = self.max_shrink
        if self.sampler == "cslice":  # whitened coordinates in turn, starting one further each iteration
            first = self._evolve_calls % d
            self._evolve_calls += 1
            eye = xp.eye(d)
            Z = xp.broadcast_to(xp.stack([eye[(first + i) % d] for i in range(self._n_steps)])[:, None, None, :],
                                (self._n_steps, M, R, d))
        else:
            Z = rng.standard_normal((self._n_steps, M, R, d))
            Z = Z / xp.sqrt((Z * Z).sum(axis=-1, keepdims=True))
        dirs = (base * scale[None, :, None, None] * xp.einsum("mij,smrj->smri", chol, Z)).reshape(self._n_steps, W, d)
        U = rng.random((self._n_steps, K + 1, W))
        ls = xp.ascontiguousarray(xp.broadcast_to(lstar, (M, R)).reshape(W))
        if self._fused is not None:
            uf, vf, lf, nrej, neval = self._fused.nested_fused_slice(u.reshape(W, d), v.reshape(W, d), l.reshape(W), ls,
                                                               dirs, U, K)
            self._ncall_dev += neval.sum()
            self._nbatch += 1
            fine = (lf < np.inf).all()
        else:
            uf, vf, lf = u.reshape(W, d).copy(), v.reshape(W, d).copy(), l.reshape(W).copy()
            nrej = xp.zeros(W)
            for i in range(self._n_steps):
                dirn = dirs[i]
                lo = -U[i, 0]
                hi = 1.0 + lo
                idx = xp.arange(W)
                for k in range(K):
                    lo_i, hi_i = lo[idx], hi[idx]
                    t = lo_i + (hi_i - lo_i) * U[i, k + 1][idx]
                    prop = uf[idx] + t[:, None] * dirn[idx]
                    pv, pl = self._propose_eval(prop)
                    fine = fine & (pl < np.inf).all()
                    ok = pl > ls[idx]
                    uf[idx] = xp.where(ok[:, None], prop, uf[idx])  # integer scatters: no synchronisation
                    vf[idx] = xp.where(ok[:, None], pv, vf[idx])
                    lf[idx] = xp.where(ok, pl, lf[idx])
                    miss = ~ok
                    lo[idx] = xp.where(miss & (t < 0), t, lo_i)
                    hi[idx] = xp.where(miss & (t >= 0), t, hi_i)
                    idx = idx[miss]
                    if idx.shape[0] == 0:
                        break
                    nrej[idx] += 1.0
        u, v, l = uf.reshape(M, R, d), vf.reshape(M, R, d), lf.reshape(M, R)
        mean_rej = nrej.reshape(M, R).sum(axis=1) / (R * self._n_steps)
        scale = xp.clip(scale * xp.exp(0.2 * (1.0 - mean_rej)), 0.02, 50.0)
        return u, v, l, scale, fine

    # -- finishing ---------------------------------------------------------------------
    def _finish(self, dead_u, dead_v, dead_l, dead_b, niter, seconds):
        xp, M, N, d = self.xp, self.n_runs, self.nlive, self.ndim
        h = _backend.to_host
        if dead_l:
            du = h(xp.concatenate(dead_u, axis=1))
            dv = h(xp.concatenate(dead_v, axis=1))
            dl = h(xp.concatenate(dead_l, axis=1))
            db = h(xp.concatenate(dead_b, axis=1))
        else:
            du = np.zeros((M, 0, d)); dv = np.zeros((M, 0, d)); dl = np.zeros((M, 0)); db = np.zeros((M, 0))
        au = np.concatenate([du, h(self._u)], axis=1)
        av = np.concatenate([dv, h(self._v)], axis=1)
        al = np.concatenate([dl, h(self._logl)], axis=1)
        ab = np.concatenate([db, h(self._birth)], axis=1)
        order, nl = merge_points(al.ravel(), ab.ravel())
        ls = al.ravel()[order]
        logz, logwt, logx, info, err = _evidence(ls, nl)
        logz_runs = np.empty(M)
        logwt_run = np.empty(al.shape)  # each point's log weight within its own run, normalised
        for m in range(M):
            o, n = merge_points(al[m], ab[m])
            lz, lw = _evidence(al[m][o], n)[:2]
            logz_runs[m] = lz
            logwt_run[m, o] = lw - lz
        err_runs = float(np.std(logz_runs, ddof=1) / math.sqrt(M)) if M > 1 else None
        run = np.repeat(np.arange(M), al.shape[1])[order]
        logwt_run = logwt_run.ravel()[order]
        samples_u = au.reshape(-1, d)[order]
        mass, mass_runs, lost = self._mode_check(samples_u, logwt - logz, run, logwt_run, M)
        return NestedResults(
            logz=float(logz), logzerr=float(err), logzerr_runs=err_runs, logz_runs=logz_runs,
            samples=av.reshape(-1, d)[order], samples_u=samples_u, logl=ls, logwt=logwt,
            logvol=logx, nlive=nl.astype(np.int64), information=float(info), ncall=int(self._ncall),
            nbatch=int(self._nbatch),
            niter=int(niter), n_runs=M, nlive_per_run=N, n_replace=self.n_replace, seconds=float(seconds),
            run=run, logwt_run=logwt_run, mode_mass=mass, mode_mass_runs=mass_runs, runs_lost_mode=lost)

    def _mode_check(self, samples_u, logw, run, logwt_run, M):
        if M < 2 or not self.check_modes:
            return np.zeros(0), np.zeros((M, 0)), np.zeros(M, bool)
        mass, mass_runs, lost = mode_check(samples_u, np.exp(logw), run, np.exp(logwt_run), M)
        _warn_lost(lost, mass, mass_runs, self.nlive, stacklevel=4)
        return mass, mass_runs, lost


# --------------------------------------------------------------------------- test problems
def gaussian_shells(ndim=2, xp=np):
    """Two Gaussian shells (Feroz & Hobson) in a uniform box [-6, 6]^ndim.

    Returns ``(loglike, prior_transform)``. Known log evidences: 2-D -1.75,
    5-D -5.67, 10-D -14.59.
    """
    r, w = 2.0, 0.1
    c = np.zeros((2, ndim)); c[0, 0], c[1, 0] = -3.5, 3.5
    const = math.log(1.0 / math.sqrt(2 * math.pi * w * w))
    cc = xp.asarray(c)  # once, not at every call

    def loglike(x):
        d1 = xp.sqrt(((x - cc[0]) ** 2).sum(axis=-1))
        d2 = xp.sqrt(((x - cc[1]) ** 2).sum(axis=-1))
        a = -0.5 * (d1 - r) ** 2 / w ** 2
        b = -0.5 * (d2 - r) ** 2 / w ** 2
        return xp.logaddexp(a, b) + const

    def prior_transform(u):
        return 12.0 * u - 6.0
    return loglike, prior_transform


def eggbox(xp=np):
    """The eggbox, ``(2 + cos(x/2) cos(y/2))**5`` on [0, 10 pi]^2; log Z = 235.856."""
    def loglike(x):
        return (2.0 + xp.cos(x[:, 0] / 2.0) * xp.cos(x[:, 1] / 2.0)) ** 5

    def prior_transform(u):
        return 10.0 * math.pi * u
    return loglike, prior_transform


def correlated_gaussian(ndim=3, rho=0.9, half_width=10.0, xp=np):
    """A normalised correlated Gaussian (unit variances, correlation ``rho``) in the box [-w, w]^ndim.

    Its log evidence is ``-ndim * log(2 w)`` (the Gaussian lies well inside the box).
    Returns ``(loglike, prior_transform, logz)``.
    """
    cov = np.full((ndim, ndim), rho) + (1 - rho) * np.eye(ndim)
    prec = np.linalg.inv(cov)
    _, logdet = np.linalg.slogdet(cov)
    const = -0.5 * (ndim * math.log(2 * math.pi) + logdet)

    p = xp.asarray(prec)

    def loglike(x):
        return const - 0.5 * xp.einsum("ni,ij,nj->n", x, p, x)

    def prior_transform(u):
        return half_width * (2.0 * u - 1.0)
    return loglike, prior_transform, -ndim * math.log(2 * half_width)


# --------------------------------------------------------------------------- the sinusoid-atoms model
_KERNELS = ("sinusoid_ssq<float>", "sinusoid_ssq<double>", "sinusoid_slice<float>", "sinusoid_slice<double>",
            "nested_progress", "nested_argsort_rows")


class SinusoidModel:
    """A sum of J sinusoid atoms fitted to a signal (Henderson's tutorial model).

    ``y(t) = sum_j A_j cos(2 pi f_j t) + B_j sin(2 pi f_j t) + noise``, Gaussian
    noise of known ``sigma``, uniform priors ``A_j, B_j ~ U(amin, amax)`` and
    frequencies uniform on ``(fmin, fmax)``. With ``ordered=True`` (default) the
    frequencies are drawn sorted (``f_1 < ... < f_J``, the order statistics of J
    uniforms, which removes the J! label-switching modes and leaves the
    evidence unchanged).

    Parameters are laid out ``(A_1, B_1, f_1, A_2, B_2, f_2, ...)``. The
    likelihood of an ``(n, 3 J)`` batch is one CUDA kernel on the GPU
    (``kernel=True``); otherwise an array expression runs over the data in
    tiles of ``tile`` points, so memory stays ``n * tile`` whatever the data
    size. The data are stored in ``dtype`` (float32 halves the bytes read);
    sums of squares are always accumulated in float64.

    Given to :class:`NestedSampler` as ``(m.loglike, m.prior_transform)`` on
    CuPy, the model also runs each iteration's whole slice-sampling step in
    one fused kernel: one block of ``slice_block`` threads per walker (default
    1024 where the walkers are no more than the GPU's SMs, else 512).

    Examples
    --------
    >>> from gpumcmc.nested import SinusoidModel
    >>> t, y = SinusoidModel.synthetic(n_data=1000, amplitudes=[(1.0, 0.5, 3.0)], sigma=0.5, random_state=0)
    >>> m = SinusoidModel(t, y, n_atoms=1, sigma=0.5, backend="numpy")
    >>> m.ndim
    3
    """

    def __init__(self, t, y, n_atoms=1, sigma=0.5, amin=-2.0, amax=2.0, fmin=0.0, fmax=10.0, ordered=True,
                 backend=None, dtype=np.float64, tile=8192, kernel=True, slice_block=None):
        self.xp = xp = _backend.get_backend(backend)
        self.t = xp.asarray(t, dtype=dtype)
        self.y = xp.asarray(y, dtype=dtype)
        if self.t.shape != self.y.shape or self.t.ndim != 1:
            raise ValueError("t and y must be 1-D arrays of the same length.")
        self.n_atoms, self.sigma = int(n_atoms), float(sigma)
        self.amin, self.amax, self.fmin, self.fmax = float(amin), float(amax), float(fmin), float(fmax)
        self.ordered, self.dtype, self.tile, self.kernel = ordered, np.dtype(dtype), int(tile), bool(kernel)
        if slice_block is not None and (int(slice_block) % 32 or not 32 <= int(slice_block) <= 1024):
            raise ValueError(f"slice_block must be a multiple of 32 between 32 and 1024, got {slice_block}.")
        self.slice_block = None if slice_block is None else int(slice_block)
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {self.dtype}.")
        if not 1 <= self.n_atoms <= 32:
            raise ValueError(f"n_atoms must be between 1 and 32, got {n_atoms}.")
        self.ndim = 3 * self.n_atoms
        self._yy = float((self.y.astype(xp.float64) ** 2).sum())
        n = self.t.shape[0]
        self._const = -0.5 * n * math.log(2 * math.pi * self.sigma ** 2)

    @staticmethod
    def synthetic(n_data=100_000, amplitudes=((1.0, 0.5, 3.0),), sigma=0.5, duration=1.0, random_state=None):
        """``(t, y)`` on the host: atoms ``(A, B, f)`` sampled at ``n_data`` even times plus noise."""
        rng = np.random.default_rng(random_state)
        t = np.linspace(0.0, duration, n_data, endpoint=False)
        y = np.zeros(n_data)
        for a, b, f in amplitudes:
            y += a * np.cos(2 * np.pi * f * t) + b * np.sin(2 * np.pi * f * t)
        return t, y + sigma * rng.standard_normal(n_data)

    def prior_transform(self, u):
        xp = self.xp
        J = self.n_atoms
        u3 = u.reshape(u.shape[0], J, 3)
        a = self.amin + (self.amax - self.amin) * u3[..., 0]
        b = self.amin + (self.amax - self.amin) * u3[..., 1]
        uf = u3[..., 2]
        if self.ordered and J > 1:
            # order statistics of J uniforms: s_J = u_J^(1/J), s_k = s_{k+1} u_k^(1/k)
            cols = [None] * J
            s = uf[:, J - 1] ** (1.0 / J)
            cols[J - 1] = s
            for k in range(J - 1, 0, -1):
                s = s * uf[:, k - 1] ** (1.0 / k)
                cols[k - 1] = s
            uf = xp.stack(cols, axis=1)
        f = self.fmin + (self.fmax - self.fmin) * uf
        return xp.stack([a, b, f], axis=2).reshape(u.shape[0], 3 * J)

    def model(self, theta, t=None):
        """The noiseless signal for each row of ``theta``: (n, len(t))."""
        xp = self.xp
        t = self.t if t is None else xp.asarray(t, dtype=self.dtype)
        p = xp.asarray(theta, dtype=self.dtype).reshape(-1, self.n_atoms, 3)
        ph = 2 * np.pi * p[..., 2][..., None] * t
        return (p[..., 0][..., None] * xp.cos(ph) + p[..., 1][..., None] * xp.sin(ph)).sum(axis=1)

    def loglike(self, theta):
        """Gaussian log-likelihood of each row of ``theta`` (n, 3 J).

        On CuPy one kernel (``kernels_cu/nested.cu``) handles the whole batch;
        on NumPy, or with ``kernel=False``, an array expression over tiles of
        the data (the kernel's twin) does.
        """
        if self.xp is not np and self.kernel:
            return self._loglike_kernel(theta)
        return self._loglike_expr(theta)

    def _loglike_kernel(self, theta):
        from ... import _kernel_args, _loader
        cp = self.xp
        p = _loader.contiguous(theta, self.dtype)
        n = p.shape[0]
        ssq = cp.zeros(n, dtype=cp.float64)
        if n == 0:
            return ssq
        name = f"sinusoid_ssq<{'float' if self.dtype == np.float32 else 'double'}>"
        fn = _loader.get_function("nested.cu", name, _KERNELS)
        T = self.t.shape[0]
        chunk = 256 * 8
        n_chunks = -(-T // chunk)
        gx = max(1, min(n_chunks, 4096))
        gy = max(1, min(n, 65535))
        fn((gx, gy), (256,), _kernel_args.args("nested.cu", "sinusoid_ssq", params=p, t=self.t, y=self.y,
                                                n_points=_loader.i64(n), n_atoms=_loader.i32(self.n_atoms),
                                                n_data=_loader.i64(T), ssq=ssq))
        return self._const - 0.5 * ssq / self.sigma ** 2

    def nested_fused_available(self, xp) -> bool:
        """Whether :meth:`nested_fused_slice` runs for a sampler on ``xp``: this model's kernel on CuPy."""
        return self.kernel and self.xp is xp and xp is not np

    def nested_fused_slice(self, u, v, logl, lstar, dirs, unif, max_shrink):
        """All slices of all walkers in one launch (``sinusoid_slice`` in ``kernels_cu/nested.cu``).

        The fused-step protocol of :class:`NestedSampler` (any object whose ``loglike`` and
        ``prior_transform`` are given to it may offer this method).

        ``u``, ``v`` (W, ndim) and ``logl`` (W,) are the starts (not modified),
        ``lstar`` (W,) each walker's threshold, ``dirs`` (n_steps, W, ndim) the
        slice directions in the unit cube and ``unif`` (n_steps, max_shrink + 1,
        W) the interval placements and shrinkage uniforms. Returns the new
        ``u, v, logl`` and per walker the misses and likelihood evaluations.
        The twin is :class:`NestedSampler`'s generic slice path with this
        model's :meth:`loglike`.
        """
        from ... import _kernel_args, _loader
        cp = self.xp
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
        name = f"sinusoid_slice<{'float' if self.dtype == np.float32 else 'double'}>"
        fn = _loader.get_function("nested.cu", name, _KERNELS)
        block = self.slice_block
        if block is None:  # one walker per SM where walkers are few; smaller blocks share SMs where many
            block = 1024 if W <= _loader.sm_count() else 512
        grid = min(W, 65535)
        fn((grid,), (int(block),),
           _kernel_args.args("nested.cu", "sinusoid_slice", u=uo, v=vo, logl=lo, lstar=_loader.contiguous(lstar, f64),
                             dirs=_loader.contiguous(dirs, f64), unif=_loader.contiguous(unif, f64), t=self.t,
                             y=self.y, n_data=_loader.i64(self.t.shape[0]), n_walkers=_loader.i32(W),
                             n_atoms=_loader.i32(self.n_atoms), n_steps=_loader.i32(n_steps),
                             max_shrink=_loader.i32(max_shrink), amin=f64(self.amin), amax=f64(self.amax),
                             fmin=f64(self.fmin), fmax=f64(self.fmax),
                             ordered=_loader.i32(int(self.ordered and self.n_atoms > 1)), lconst=f64(self._const),
                             sigma2=f64(self.sigma ** 2), nrej=nrej, neval=neval))
        return uo, vo, lo, nrej, neval

    _fused_slice = nested_fused_slice  # the former name

    def _loglike_expr(self, theta):
        xp = self.xp
        p = xp.asarray(theta).astype(self.dtype, copy=False).reshape(-1, self.n_atoms, 3)
        n = p.shape[0]
        A, B, F = p[..., 0][..., None], p[..., 1][..., None], (2 * np.pi) * p[..., 2][..., None]
        ssq = xp.zeros(n, dtype=xp.float64)
        T = self.t.shape[0]
        for s in range(0, T, self.tile):
            tt = self.t[s:s + self.tile]
            yy = self.y[s:s + self.tile]
            ph = F * tt
            m = (A * xp.cos(ph) + B * xp.sin(ph)).sum(axis=1)   # (n, tile)
            r = m - yy
            ssq += (r * r).sum(axis=1, dtype=xp.float64)
        return self._const - 0.5 * ssq / self.sigma ** 2
