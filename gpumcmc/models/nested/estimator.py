"""The sampler's settings and its run: :class:`NestedSampler`, the face users call."""

from __future__ import annotations

import copy
import inspect
import time
import warnings

import numpy as np

from ... import backend as _backend
from ..._validate import check_int
from ...random import default_rng
from ...random._stream import PhiloxStream, seed_sequence
from ...sampling import Stop, run as run_driver
from ...sampling._estimator import Estimator, all_or_nothing, portable_state, restore_devices
from .algorithm import _BAD_FIX, _SAMPLERS, _BadValue, _NestedSteps
from .likelihoods import _batchify, _fusable_model
from .ops import _ops_for
from .results import (NLIVE_MODES, FewLivePointsWarning, NestedResults, _evidence, _outcome, _start_volume,
                      merge_points)

__all__ = ["NestedSampler"]


class _Iterations:
    """The run driver's ``step`` (the sampler's, with the evidence pushed) and ``stop`` (the stopping rule and
    NaN/+inf flag read back ``check_lag`` iterations late; the value shown every 10th iteration)."""

    def __init__(self, sampler, progress, logx_step):
        self.sampler, self.progress, self.logx_step = sampler, progress, logx_step
        self.lag, self.dlogz = sampler.check_lag, sampler.dlogz
        self.fine = sampler.xp.ones((), dtype=bool)  # False once a batch of likelihoods held NaN or +inf
        self.logx = 0.0
        self.remain = None  # the stopping value read last

    def step(self, rng, state):
        s = self.sampler
        state, info = s._step(rng, state)
        self.fine = self.fine & info.fine
        logx_prev, self.logx = self.logx, self.logx + self.logx_step
        s._niter += 1
        self.progress.push(info.dead_logl, state.logl, self.fine, logx_prev, self.logx)
        return state, info

    def stop(self, state, info):
        if len(self.progress) <= self.lag:
            return False, None
        worst, ok = self.progress.pop()
        self.remain = worst
        niter = self.sampler._niter
        if not ok:
            raise self.sampler._located_error(state.v, state.logl, f"a point found at iteration "
                                                                   f"{niter - self.lag} or before")
        done = worst < self.dlogz
        return done, (worst if done or niter % 10 == 0 else None)  # the bar ends on the value that stopped it

    def converged(self, stopped):
        """Whether the stopping rule held: ``stopped`` by it, or (a run ended by ``max_iter``) met in the last
        ``check_lag`` iterations, whose values the loop never read (read here, once, after the run)."""
        while not stopped and len(self.progress):
            self.remain = self.progress.pop()[0]
            stopped = self.remain < self.dlogz
        return stopped


def _warn_plateaus(logl, logwt) -> None:
    """A warning where points of a run that share one finite log-likelihood (a plateau: a likelihood that is
    piecewise constant, of discrete or rounded parameters) carry at least a quarter of its posterior weight
    (``logwt``: each point's normalised log weight in its run). Nested sampling's prior volumes assume distinct
    values, so there log Z can be biased beyond logzerr (Fowlie, Handley and Su 2021): a two-level likelihood
    whose top level held 53% of the weight came out 10 logzerr off. A likelihood summed in float32 ties near
    its peak by rounding, on a few percent of the weight at 10^3 to 10^5 terms; ties at -inf (outside a
    constraint) weigh nothing."""
    share, size = 0.0, 0
    for row, lw in zip(np.asarray(logl, np.float64).reshape(logl.shape[0], -1), logwt.reshape(logl.shape[0], -1)):
        ok = np.isfinite(row)
        values, inverse, counts = np.unique(row[ok], return_inverse=True, return_counts=True)
        if values.size < ok.sum():  # some tie
            w = np.bincount(inverse, weights=np.exp(lw[ok]), minlength=values.size)
            w[counts < 2] = 0.0
            if w.max() > share:
                share, size = float(w.max()), int(counts[np.argmax(w)])
    if share >= 0.25:
        warnings.warn(f"{size} points of a run share one log-likelihood and carry {share:.0%} of its posterior "
                      "weight: the likelihood has plateaus, where nested sampling's volume estimates do not hold, "
                      "so log Z may be biased beyond logzerr. Make it strictly continuous in the parameters (e.g. "
                      "interpolate between discrete levels), or, if it is summed in float32, sum it in float64; "
                      "then run again.", UserWarning, stacklevel=4)


class NestedSampler(_NestedSteps, Estimator):
    """Batched nested sampler (dynesty-like).

    Parameters
    ----------
    loglike : callable
        ``loglike(x) -> (n,)`` for an ``(n, ndim)`` array of physical points (CuPy on the GPU); a function of
        one point is accepted with a warning. On CuPy the slice samplers pass every walker in every shrinkage
        round, those already done too (their values are ignored and not counted in ``ncall``). ``-inf`` means
        zero likelihood (a hard constraint); NaN and ``+inf`` are errors. On CuPy the slice rounds replay
        ``prior_transform`` and ``loglike`` from a CUDA graph captured once a run, where that works and repeats
        a direct call bit for bit on one round's points (so both must depend on their input alone, as they
        should; a likelihood on cuBLAS products is called directly);
        ``gpumcmc.config.nested_capture = False`` calls them from Python every round. Where some prior draws have ``-inf``,
        each run starts from its first ``nlive`` draws of finite likelihood and the prior volume they fill
        (``results.prior_fraction``, its error part of ``logzerr``).
    prior_transform : callable
        ``prior_transform(u) -> (n, ndim)`` from the unit cube.
    ndim : int
    nlive : int
        Live points per run (at least ``ndim + 1``).
    n_replace : int or None
        R, the points replaced per iteration (``1 <= R <= nlive // 2``). ``None`` (the default) takes
        ``nlive // 20`` (at least 1): 25 of 500. 1 is dynesty's static sampler. A larger R takes about R times
        fewer iterations, each drawing R points at once, which is what fills a GPU and saves a CPU the
        per-iteration work too, for about the same log Z and logzerr (each removed point's shell is accounted
        for by the order statistics of the R lowest). On a 2-core CPU the README's sinusoid model with
        ``nlive=500`` took 31 s with R = 1 and 5 s with R = 25 (log Z -382.30 and -382.28, logzerr 0.15 and
        0.16); the 2-D Gaussian shells 6.4 s and 0.6 s, the 10-D shells 49 s and 5.5 s (dynesty's static
        sampler there, 500 live points: 1.3 s and 7.8 s).
    n_runs : int
        M, independent runs advanced together and merged.
    sampler : {"slice", "cslice", "rwalk"}
        ``"slice"``: slice sampling along random directions drawn from the live points' covariance (an
        interval of adapted width placed at random around the start, then shrunk); ``"cslice"``: the same
        along the whitened coordinates in turn; ``"rwalk"``: a Gaussian random walk with that covariance and
        an adapted scale.
    n_steps : int, optional
        Slices (or walk steps) per new point; default ``max(5, 4 * ndim)`` for ``"slice"``, else
        ``20 + 2 * ndim``. Too few leave new points correlated with their starts, which biases log Z upwards
        (on the 10-D Gaussian shells ``ndim + 3`` slices gave +0.5 nats): on hard multimodal problems raise
        it and check that log Z does not move.
    dlogz : float
        Stop when the evidence left in the live points, ``max L * X``, would change log Z by less than this,
        in every run.
    max_iter : int, optional
        A hard stop, in iterations of R replaced points each (``results.niter``; with the default R, ``nlive //
        20`` points an iteration); a run it ends before the ``dlogz`` rule holds warns (``results.converged``
        is False).
    random_state : int, SeedSequence, numpy Generator or RandomState, gpumcmc Generator, or None
    progress : bool
        The run driver's progress bar, with the stopping value every 10 iterations.
    backend : {"numpy", "cupy", None}
    check_lag : int
        The stopping rule is read back ``check_lag`` iterations after it was computed, so that the host never
        waits for the GPU: a run goes on ``check_lag`` iterations past the first that meets ``dlogz``, on
        every backend.
    fused : bool, optional
        Run each iteration's whole slice step (likelihood included) as one call where the model offers one:
        ``loglike`` and ``prior_transform`` are methods of one object defining ``nested_fused_slice`` (as
        :class:`SinusoidModel` with ``kernel=True``), on CuPy, with ``sampler="slice"`` or ``"cslice"``.
        ``None`` uses it where it applies; ``False`` never. It gives the generic path's points (to rounding
        of the likelihood).
    max_shrink : int
        Shrinkage rounds per slice; a walker that missed this many times stays where it is for that slice
        (a valid move: a jump from x to x' and back is as likely either way).
    dtype : numpy dtype
        A setting only (``get_params``): log-likelihoods and the evidence are float64, the points what
        ``prior_transform`` returns; a likelihood may compute in float32.
    check_modes : bool
        With ``n_runs > 1``, check after the run for runs that lost a mode (:func:`mode_check`:
        ``results.runs_lost_mode``, and a warning), clustering at most 500 points on the host, once.
        ``False`` skips it (the results' mode fields are then empty).
    """

    def __init__(self, loglike, prior_transform, ndim, nlive=500, n_replace=None, n_runs=1, sampler="slice",
                 dlogz=0.01, random_state=None, progress=True, backend=None, n_steps=None, max_iter=None,
                 check_lag=2, fused=None, max_shrink=30, dtype=np.float64, check_modes=True):
        # Stored as given, for get_params and sklearn.base.clone; run() checks them again if they change.
        self.loglike, self.prior_transform, self.ndim = loglike, prior_transform, ndim
        self.nlive, self.n_replace, self.n_runs, self.sampler = nlive, n_replace, n_runs, sampler
        self.dlogz, self.random_state, self.progress, self.backend = dlogz, random_state, progress, backend
        self.n_steps, self.max_iter, self.check_lag, self._fused_setting = n_steps, max_iter, check_lag, fused
        self.max_shrink, self.dtype, self.check_modes = max_shrink, dtype, check_modes
        self.rng = self._results = None  # the generator is seeded by run(): two runs of one random_state agree
        self._seed, self._locate, self._niter, self._configured = None, False, 0, None
        self._setup(stacklevel=3)

    @classmethod
    def _get_param_names(cls) -> list[str]:
        return sorted(p for p in inspect.signature(cls.__init__).parameters if p != "self")

    # derived from the settings by _setup (a module, wrappers of the callables): not pickled, made again
    _DERIVED = ("xp", "_ops", "_loglike", "_prior", "_fused", "_configured")

    # a run's working arrays on the backend (the live points, constants), made again by each run
    _RUN_ARRAYS = ("_live", "_eye", "_eye_eps", "_run_idx", "_ncall_dev", "_cycle", "_round_eval")

    def __getstate__(self):
        """Pickling (and ``copy.deepcopy``) keeps the settings, the seed and the results (on the host); the
        array module, the wrapped callables and a run's working arrays are made again from the settings."""
        return portable_state(self.__dict__, self._DERIVED + self._RUN_ARRAYS)

    def __setstate__(self, state):
        state = dict(state)
        moved = state.pop("_device_attrs", ())
        self.__dict__.update(state)
        restore_devices(self, moved, "NestedSampler")  # backend='cupy' without a GPU here: NumPy, with a warning
        with warnings.catch_warnings():  # the settings warned when they were made
            warnings.simplefilter("ignore")
            self._setup()

    _STORED = {"fused": "_fused_setting"}  # the setting, apart from the property ``fused``

    def get_params(self, deep: bool = True) -> dict:
        """The settings given to ``__init__``, as scikit-learn's ``get_params`` (for ``sklearn.base.clone``)."""
        return {name: getattr(self, self._STORED.get(name, name)) for name in self._get_param_names()}

    def set_params(self, **params):
        """Change settings; they are checked at once (a refused change leaves the sampler as it was), and the
        next :meth:`run` uses them."""
        valid = self._get_param_names()
        for name in params:
            if name not in valid:
                raise ValueError(f"NestedSampler has no setting {name!r}; valid settings: {valid}.")
        with all_or_nothing(self):  # refused: the settings and what _setup derived from them stay as they were
            for name, value in params.items():
                setattr(self, self._STORED.get(name, name), value)
            self._setup(stacklevel=3)
        return self

    def __sklearn_is_fitted__(self) -> bool:
        return self._results is not None  # a run has given results

    def _settings(self):
        return tuple(id(v) for v in self.get_params().values())

    def _setup(self, stacklevel=2):
        """Check the settings and derive the batched callables, the backend and the fused step from them."""
        loglike, prior_transform, sampler, fused = self.loglike, self.prior_transform, self.sampler, self._fused_setting
        if not callable(loglike) or not callable(prior_transform):
            raise TypeError("loglike and prior_transform must be callables on (n, ndim) arrays.")
        ndim, nlive = check_int(self.ndim, "ndim"), check_int(self.nlive, "nlive")
        n_replace = (max(1, nlive // 20) if self.n_replace is None
                     else check_int(self.n_replace, "n_replace", 1, "or None for nlive // 20"))
        n_runs = check_int(self.n_runs, "n_runs")
        if nlive < ndim + 1:
            raise ValueError(f"nlive={nlive} is too few for ndim={ndim}: use at least ndim + 1 = {ndim + 1} "
                             f"live points (hundreds are usual).")
        if not 1 <= n_replace <= max(1, nlive // 2):
            raise ValueError(f"n_replace must be between 1 and nlive // 2 = {nlive // 2}, got {n_replace}.")
        self._n_replace = n_replace  # R as the run uses it
        if sampler not in _SAMPLERS:
            raise ValueError(f"sampler must be one of {_SAMPLERS}, got {sampler!r}.")
        dlogz = self.dlogz
        if isinstance(dlogz, (bool, np.bool_)) or not isinstance(dlogz, (int, float, np.integer, np.floating)):
            raise TypeError(f"dlogz must be a positive number, got {type(dlogz).__name__}.")
        if not 0 < dlogz < np.inf:
            raise ValueError(f"dlogz must be positive and finite, got {dlogz}; 0.01 to 0.5 is usual.")
        if self.max_iter is not None:
            check_int(self.max_iter, "max_iter", 1, "or None for no limit")
        check_int(self.check_lag, "check_lag", 0)
        check_int(self.max_shrink, "max_shrink")
        n_steps = (max(5, 4 * ndim) if sampler == "slice" else 20 + 2 * ndim) if self.n_steps is None else self.n_steps
        self._n_steps = check_int(n_steps, "n_steps", 1, "or None for the default")
        if not isinstance(self.random_state, (PhiloxStream, np.random.Generator, np.random.RandomState)):
            seed_sequence(self.random_state)  # else a TypeError (ValueError) naming what random_state may be
        self.xp = _backend.get_backend(self.backend)
        self._ops = _ops_for(self.xp)
        self._loglike = _batchify(loglike, ndim, self.xp, "loglike", None)
        self._prior = _batchify(prior_transform, ndim, self.xp, "prior_transform", ndim)
        model = _fusable_model(loglike, prior_transform)
        usable = model is not None and sampler != "rwalk"
        if fused and not usable:
            raise ValueError("fused=True needs loglike and prior_transform to be methods of one object that offers "
                             "nested_fused_slice (as SinusoidModel does) and sampler='slice' or 'cslice'; leave "
                             "fused=None to use a fused step only where it applies.")
        available = getattr(model, "nested_fused_available", None)
        self._fused = model if ((fused is None or fused) and usable and self.xp is not np
                                and (available is None or available(self.xp))) else None
        if n_runs > 1 and nlive < NLIVE_MODES:
            warnings.warn(f"nlive={nlive} live points per run: runs this small can lose a mode of a multimodal "
                          f"posterior (the merged run then gives it too little weight); use at least "
                          f"{NLIVE_MODES} per run where modes are possible. results.runs_lost_mode flags "
                          f"runs that did.", FewLivePointsWarning, stacklevel=stacklevel)
        self._configured = self._settings()

    def _located_error(self, v, logl, where):
        """The ValueError naming the first NaN or +inf log-likelihood of the run, found by replaying the run
        from its seed with every batch checked; where that cannot repeat the draws (a gpumcmc Generator, or
        the fused kernel), the live points are searched instead."""
        note = ""
        if self._seed is not None and self._fused is None and not self._locate:
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
        with np.errstate(under="ignore"):  # weights below the smallest float are zero, by design
            t0 = time.perf_counter()
            rng = self._seeded_rng()
            state = self._init(rng)
            logx_steps, step_offsets = self._shrinkage()
            progress = self._ops.progress(self.n_runs, step_offsets, self.check_lag)
            loop = _Iterations(self, progress, logx_steps[-1])
            try:  # the driver keeps each iteration's removed points (the step's info: new arrays) by reference
                tr = run_driver(loop.step, state, rng, n_iter=self.max_iter, progress=self.progress, desc="nested",
                                n_chains=self.n_runs, stop=Stop(loop.stop, 1, "dlogz"), by_reference=True)
                converged = loop.converged(tr.stopped)
            finally:
                progress.close()
                # the rounds' capture (its graph, its pool) belongs to this run; its callable refers back here
                self._rounds_replayed = self._round_eval is not None and getattr(self._round_eval, "replayed", False)
                self._round_eval = None
            niter = tr.iterations
            if not bool(loop.fine):  # the flags of the last check_lag iterations, not read yet (synchronize!, once)
                raise self._located_error(tr.state.v, tr.state.logl, f"a point found by iteration {niter}")
            self._live = tr.state
            self._ncall += int(self._ncall_dev)
            if not converged:
                left = "" if loop.remain is None else f" (it would still change log Z by {loop.remain:.3g})"
                warnings.warn(f"NestedSampler stopped at max_iter={self.max_iter} iterations before its dlogz rule: "
                              f"the evidence left in the live points{left} is over dlogz={self.dlogz}, so log Z is "
                              f"not converged (logzerr does not cover that). Raise max_iter (or set it to None), or "
                              f"raise dlogz; results.converged is False.", UserWarning, stacklevel=2)
            self._results = self._finish(tr.stats, niter, time.perf_counter() - t0, converged)
        return self

    def _seeded_rng(self):
        """The run's generator, seeded from ``random_state`` (and the run's counters set to zero)."""
        self._ncall = self._nbatch = self._evolve_calls = self._niter = 0
        seed = self.random_state
        if seed is None:
            seed = np.random.SeedSequence()
        elif isinstance(seed, np.random.Generator):  # as default_rng does: 256 bits drawn from it
            seed = np.random.SeedSequence(seed.integers(0, 2**32, size=8, dtype=np.uint64))
        # what a replay needs to repeat this run's draws (not a gpumcmc Generator, which moves on)
        self._seed = seed if isinstance(seed, (int, np.integer, np.random.SeedSequence)) else None
        self.rng = default_rng(seed, backend="numpy" if self.xp is np else "cupy")
        return self.rng

    @property
    def fused(self) -> bool:
        """Whether each iteration's slice step runs as one fused CUDA kernel (see the ``fused`` parameter)."""
        return self._fused is not None

    @property
    def results(self) -> NestedResults:
        if self._results is None:
            raise AttributeError("No results yet: call run() first.")
        return self._results

    def _finish(self, dead, niter, seconds, converged):
        """The results from the removed points ``dead`` (the driver's stats of :class:`StepInfo`) and the live."""
        M, d = self.n_runs, self.ndim
        au, av, al, ab = (np.concatenate([dead[f"dead_{k}"].reshape(M, -1, *x.shape[2:]), _backend.to_host(x)], 1)
                          for k, x in zip(("u", "v", "logl", "birth"), self._live[:4]))
        order, nl = merge_points(al.ravel(), ab.ravel())
        fraction, draws, per_run = self._prior_share
        logz_runs = np.empty(M)
        logwt_run = np.empty(al.shape)  # each point's log weight within its own run, normalised
        for m in range(M):
            o, n = merge_points(al[m], ab[m])
            # each run's evidence from its own share of the prior (so that logzerr_runs, their spread, also
            # shows that share's error); the merged run's from the pooled share
            lz, lw = _evidence(al[m][o], n, *_start_volume(float(per_run[m]), draws // M))[:2]
            logz_runs[m] = lz
            logwt_run[m, o] = lw - lz
        _warn_plateaus(al, logwt_run)
        return _outcome(al.ravel()[order], nl.astype(np.int64), np.repeat(np.arange(M), al.shape[1])[order],
                        logwt_run.ravel()[order], M, self.check_modes, logz_runs=logz_runs,
                        samples=av.reshape(-1, d)[order], samples_u=au.reshape(-1, d)[order], ncall=int(self._ncall),
                        nbatch=int(self._nbatch), niter=int(niter), n_runs=M, nlive_per_run=self.nlive,
                        n_replace=self._n_replace, seconds=float(seconds), converged=bool(converged),
                        prior_fraction=fraction, prior_draws=draws)
