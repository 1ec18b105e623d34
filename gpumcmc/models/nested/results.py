"""A nested-sampling run's results: the evidence from the dead points, combined runs, and the mode check."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np

__all__ = ["NestedResults", "combine_runs", "plot_run", "merge_points", "mode_check", "FewLivePointsWarning"]


def merge_points(logl, birth):
    """Order points by log-likelihood and give each the number of live points it was the lowest of.

    A point born at threshold ``birth`` (``-inf`` for the initial live points) and removed at ``logl`` was live
    for every threshold in ``[birth, logl)``, so the k-th lowest point overall was the lowest of
    ``n_k = #{j: birth_j < logl_k <= logl_j}`` live points: ``M N`` for M merged runs of N points (Henderson),
    ``N - i`` for the i-th of R points removed at once. Returns ``(order, nlive)``: the sorting permutation
    and ``n_k`` in sorted order.
    """
    logl, birth = np.asarray(logl, np.float64), np.asarray(birth, np.float64)
    order = np.argsort(logl, kind="stable")
    ls = logl[order]
    born_before = np.searchsorted(np.sort(birth), ls, side="left")
    return order, np.maximum(born_before - np.arange(ls.size), 1)


@np.errstate(under="ignore")  # probabilities below the smallest float are zero, by design
def _evidence(ls, nlive, logx0=0.0, var0=0.0):
    """logz, logwt, logX, information and Skilling's error from sorted logl and live counts. ``logx0``: the log
    prior volume the run starts from (the log of :attr:`NestedResults.prior_fraction`), ``var0`` the variance
    of that estimate, added to the error's."""
    logx = logx0 - np.cumsum(1.0 / nlive)
    logx_prev = np.concatenate([[logx0], logx[:-1]])
    # X_{k-1} - X_k = X_{k-1} (1 - exp(-1/n_k))
    logdx = logx_prev + np.log(-np.expm1(-1.0 / nlive))
    logwt = ls + logdx
    m = np.max(logwt, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)  # all -inf: logz = -inf, not NaN
    logz = float((np.log(np.sum(np.exp(logwt - m), keepdims=True)) + m).reshape(()))
    p = np.exp(logwt - logz)
    fin = p > 0
    h = max(float(np.sum(p[fin] * (ls[fin] - logz))), 0.0)
    # Var(log X) at the bulk of the posterior (log X = -H): sum of 1/n_k^2 up to there.
    # For a constant n = N this is (N H) / N^2 = H / N, Skilling's estimate.
    upto = logx >= -h
    var = float(np.sum(1.0 / nlive[upto] ** 2)) if h > 0 else 0.0
    if upto.sum() < upto.size and h > 0:  # the step that crosses -H, interpolated
        k = int(upto.sum())
        var += (1.0 / nlive[k] ** 2) * min(1.0, (logx_prev[k] + h) * nlive[k])
    var += var0
    return logz, logwt, logx, h, math.sqrt(var)


@dataclasses.dataclass(frozen=True)
class NestedResults:
    """The outcome of a nested-sampling run (immutable; arrays are read-only NumPy).

    Attributes
    ----------
    logz, logzerr : float
        log evidence and its error: Skilling's ``sqrt(H/N)`` for live-point counts that vary,
        ``sqrt(sum 1/n_k**2)`` over the points down to the bulk of the posterior, ``log X = -H``.
    logzerr_runs : float or None
        For ``n_runs > 1``: the spread of the runs' evidences over ``sqrt(n_runs)``, a check on ``logzerr``.
    logz_runs : ndarray (n_runs,)
        Each run's own log evidence.
    samples : ndarray (n, ndim)
        Every dead point and the final live points, sorted by log-likelihood; ``samples_u`` in the unit cube.
    logl, logwt, logvol, nlive : ndarray (n,)
        Their log-likelihoods, log weights (``logsumexp(logwt) == logz``), expected log prior volumes and
        the number of live points each was the lowest of.
    information : float
        H, the KL divergence from prior to posterior (nats).
    ncall, nbatch : int
        Likelihood evaluations (every walker counted) and calls of the batched ``loglike``.
    niter, n_runs, nlive_per_run, n_replace, seconds : run settings and wall time (merged by
        :func:`combine_runs`: the longest run's iterations, the runs, the total time, -1 for a setting
        the runs do not share).
    run : ndarray (n,) of int
        The run of each point (runs merged by :func:`combine_runs` numbered in the order given).
    logwt_run : ndarray (n,)
        Each point's log weight within its own run: ``exp(logwt_run[run == m])`` sums to 1 for each run m.
    mode_mass, mode_mass_runs, runs_lost_mode : ndarray (C,), (n_runs, C), (n_runs,) of bool
        :func:`mode_check`: each mode's posterior mass, merged and per run, and the runs that lost a mode
        (a warning says so, and where the runs disagree on a mass by more than ``MODE_ERR_MAX``, see
        :attr:`mode_mass_err`). Empty for a single run.
    converged : bool or None
        Whether the run met its ``dlogz`` stopping rule (False: it stopped at ``max_iter`` first, with a
        warning: log Z is not converged); for :func:`combine_runs`, whether every run did. None where unknown.
    prior_fraction, prior_draws : float, int
        Where ``loglike`` is ``-inf`` on part of the prior, the live points start from the prior's draws of
        finite likelihood: ``prior_fraction`` is the share of the ``prior_draws`` points drawn at the start
        that had one. The run's volumes start at it (``logvol``, ``logz``), and its binomial error,
        ``(1 - f) / (f prior_draws)`` in ``log f``, is part of ``logzerr``. 1.0 where every draw was finite.
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
    converged: bool | None = None
    prior_fraction: float = 1.0
    prior_draws: int = 0

    def __post_init__(self):
        for f in dataclasses.fields(self):
            if isinstance(a := getattr(self, f.name), np.ndarray):
                a.setflags(write=False)

    def __setstate__(self, state):
        """Unpickled read-only too (pickle makes its arrays afresh, writable)."""
        self.__dict__.update(state)
        self.__post_init__()

    @property
    def weights(self) -> np.ndarray:
        """Normalised posterior weights of :attr:`samples`."""
        return np.exp(self.logwt - self.logz)

    @property
    def mode_mass_err(self) -> np.ndarray:
        """Each mode's between-run error of its merged mass (C,), as ``logzerr_runs`` for log Z (empty for a
        single run); over ``MODE_ERR_MAX`` the runs disagree on the mode."""
        return np.zeros(0) if self.mode_mass_runs is None else _mass_err(self.mode_mass_runs)

    @property
    def eff(self) -> float:
        """Sampling efficiency: points kept over likelihood calls (percent)."""
        return 100.0 * self.samples.shape[0] / max(self.ncall, 1)

    def posterior_samples(self, n=None, random_state=None) -> np.ndarray:
        """Equally weighted posterior draws by systematic resampling of :attr:`samples`; ``n`` defaults to
        the effective sample size ``1 / sum(w**2)``."""
        w = self.weights / self.weights.sum()
        if n is None:
            n = max(1, int(1.0 / np.sum(w ** 2)))
        from gpumcmc.random._stream import host_rng

        return self.samples[_systematic(w, n, host_rng(random_state))]

    def to_arviz(self, n=None, random_state=None, var_names=None):
        """Equally weighted posterior draws as ArviZ data: one variable ``theta`` (chain, draw, dim), or one per
        dimension named by ``var_names``. Runs merged from ``n_runs > 1`` (or by :func:`combine_runs`) give one
        chain each, every run's own points resampled by its own weights (``logwt_run``), so that R-hat compares
        the independent runs; ``n`` draws a chain (default: the smallest run's effective sample size). A
        single run is one chain of ``n`` draws (default its effective sample size)."""
        from ...sampling import to_arviz
        from gpumcmc.random._stream import host_rng

        runs = None if self.run is None or self.logwt_run is None else np.unique(self.run)
        if runs is None or runs.size < 2:
            draws = self.posterior_samples(n, random_state)[None]
        else:
            ws = [np.exp(self.logwt_run[self.run == m]) for m in runs]
            ws = [w / w.sum() for w in ws]
            n = min(max(1, int(1.0 / np.sum(w ** 2))) for w in ws) if n is None else int(n)
            rng = host_rng(random_state)
            draws = np.stack([self.samples[self.run == m][_systematic(w, n, rng)] for m, w in zip(runs, ws)])
        if var_names is None:
            post = {"theta": draws}
        else:
            if len(var_names) != draws.shape[2]:
                raise ValueError(f"var_names has {len(var_names)} names for {draws.shape[2]} dimensions.")
            post = {v: draws[:, :, i] for i, v in enumerate(var_names)}
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
        if self.prior_fraction < 1.0:
            s += f", started from the {self.prior_fraction:.3g} of the prior where loglike > -inf"
        if self.converged is False:
            s += ", not converged (stopped at max_iter before dlogz)"
        return s

    def __repr__(self) -> str:
        return f"NestedResults({self.summary()})"


def _systematic(w, n: int, rng) -> np.ndarray:
    """``n`` indices drawn by systematic resampling of the normalised weights ``w``, in random order."""
    pos = (rng.random() + np.arange(n)) / n
    idx = np.minimum(np.searchsorted(np.cumsum(w), pos, side="right"), w.size - 1)
    return rng.permutation(idx)


# A run holding under LOST_FRACTION of the runs' mean mass of a mode to which some run gives at least
# MODE_MIN_MASS lost it: on the equal-width mixture of gpumcmc.nested's docstring, runs that kept its 0.3
# mode held 0.13 to 0.48 of their mass there at 50 live points (6 seeds), clear of a fifth of the mean.
MODE_MIN_MASS, LOST_FRACTION, CLUSTER_MIN_MASS = 0.05, 0.2, 0.02
# Where no run lost a mode, runs disagreeing on its mass by more than MODE_ERR_MAX (mode_mass_err) are
# flagged: on that mixture (5 runs, R = 10) the error was 0.07 to 0.13 at 50 live points per run (8 seeds),
# 0.04 to 0.06 at 100 and 0.02 to 0.05 at the default 500.
MODE_ERR_MAX = 0.05
NLIVE_MODES = 100  # live points per run under which NestedSampler warns, with n_runs > 1


class FewLivePointsWarning(UserWarning):
    """Few live points per run for merged runs: a run may lose a mode (filter it where modes are not a risk)."""


def _clusters(x, w, keep=0.98, max_points=500, cut=5.0, min_mass=CLUSTER_MIN_MASS):
    """Mode labels (n,) of the points ``x`` carrying ``keep`` of the weight ``w`` (-1 for the rest): the
    single-linkage tree of at most ``max_points`` of them, split from the top where a merge is over ``cut``
    median merges long and both sides carry ``min_mass``; the others join their nearest point's mode."""
    from scipy.cluster.hierarchy import linkage

    n = w.size
    labels = np.full(n, -1, np.int64)
    by_weight = np.argsort(-w, kind="stable")
    k = int(np.searchsorted(np.cumsum(w[by_weight]), keep * w.sum())) + 1
    k = max(min(k, n), min(n, 10))
    kept = by_weight[:k]
    if k > max_points:
        # The tree's points drawn in proportion to their weight (systematic resampling, no random draw): the
        # heaviest points alone can all lie in the mode of highest likelihood and leave a lighter mode out.
        # Each carries the mass it was drawn for (its draws times 1 / max_points of the whole).
        cw = np.cumsum(w[kept])
        at, draws = np.unique(np.minimum(np.searchsorted(cw, (np.arange(max_points) + 0.5) * (cw[-1] / max_points)),
                                         k - 1), return_counts=True)
        inside = np.zeros(k, bool)
        inside[at] = True
        idx, rest = kept[inside], kept[~inside]
        leaf_mass = draws * (cw[-1] / max_points)  # at is sorted, as kept[inside] is
    else:
        idx, rest, leaf_mass = kept, kept[:0], w[kept]
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

    ``samples_u`` (n, d): the points (unit cube); ``weights``: their merged weights; ``run``: each one's run;
    ``weights_run``: its weight within its run. Modes are single-linkage clusters of the points carrying 98%
    of the merged mass, kept where they hold 2% of it. Returns ``(mass (C,), mass_runs (n_runs, C), lost
    (n_runs,))``: a run lost a mode when it holds under a fifth of the runs' mean mass of a mode to which
    some run gives 5%. Such a run pulls the mode's merged weight down while log Z moves little, so neither
    logzerr nor logzerr_runs shows it.
    """
    w = np.asarray(weights, np.float64)
    labels = _clusters(np.asarray(samples_u, np.float64), w)
    found = [c for c in range(labels.max() + 1) if w[labels == c].sum() >= CLUSTER_MIN_MASS * w.sum()]
    mass = np.array([w[labels == c].sum() for c in found]) / w.sum()
    mass_runs = np.zeros((n_runs, len(found)))
    for j, c in enumerate(found):
        inside = labels == c
        mass_runs[:, j] = np.bincount(run[inside], weights=weights_run[inside], minlength=n_runs)[:n_runs]
    if n_runs < 2 or not mass_runs.size:
        return mass, mass_runs, np.zeros(n_runs, bool)
    big = mass_runs.max(axis=0) >= MODE_MIN_MASS
    return mass, mass_runs, (mass_runs[:, big] < LOST_FRACTION * mass_runs[:, big].mean(axis=0)).any(axis=1)


def _mass_err(mass_runs):
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
    """One :class:`NestedResults` from independent runs (Dask tasks of :func:`gpumcmc.distributed.map_runs`,
    separate sessions): the combined-runs estimator.

    The merged point at level ``L`` was the lowest of ``sum_r n_r(L)`` live points, ``n_r(L)`` being run r's
    ``nlive`` at its first point at or above ``L`` (0 once run r ended), the counts :func:`merge_points`
    gives; the evidence, weights and error follow as for one run. The runs must share the model.

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
    logz_runs = np.concatenate([np.atleast_1d(r.logz_runs) for r in runs]).astype(np.float64)
    offsets = np.cumsum([0] + [r.n_runs for r in runs])
    run = np.concatenate([(r.run if r.run is not None else np.zeros(r.logl.size, np.int64)) + o
                          for r, o in zip(runs, offsets)])[order]
    logwt_run = np.concatenate([r.logwt_run if r.logwt_run is not None else r.logwt - r.logz for r in runs])[order]
    per_run, replace = {r.nlive_per_run for r in runs}, {r.n_replace for r in runs}
    return _outcome(ls, nlive, run, logwt_run, int(offsets[-1]), True, logz_runs=logz_runs,
                    samples=np.concatenate([r.samples for r in runs])[order],
                    samples_u=np.concatenate([r.samples_u for r in runs])[order], ncall=sum(r.ncall for r in runs),
                    nbatch=sum(r.nbatch for r in runs), niter=max(r.niter for r in runs), n_runs=logz_runs.size,
                    nlive_per_run=per_run.pop() if len(per_run) == 1 else -1,
                    n_replace=replace.pop() if len(replace) == 1 else -1, seconds=sum(r.seconds for r in runs),
                    converged=None if any(r.converged is None for r in runs) else all(r.converged for r in runs),
                    **_pooled_fraction(runs))


def _pooled_fraction(runs):
    """The runs' prior fractions pooled over their draws (the merged run starts from their common volume)."""
    draws = sum(r.prior_draws for r in runs)
    if not draws:
        return {"prior_fraction": 1.0, "prior_draws": 0}
    return {"prior_fraction": sum(r.prior_fraction * r.prior_draws for r in runs) / draws, "prior_draws": draws}


def _start_volume(fraction, draws):
    """``(log f, Var(log f))`` of the share ``f`` of ``draws`` prior points with a finite likelihood."""
    if fraction >= 1.0 or not draws:
        return 0.0, 0.0
    return math.log(fraction), (1.0 - fraction) / (fraction * draws)


def _outcome(ls, nlive, run, logwt_run, n_all, check_modes, **fields):
    """The :class:`NestedResults` of the sorted points ``ls`` with live counts ``nlive`` (and ``fields``),
    mode-checked over ``n_all`` runs where ``check_modes`` (warning from the caller's caller)."""
    logz, logwt, logx, info, err = _evidence(ls, nlive, *_start_volume(fields.get("prior_fraction", 1.0),
                                                                       fields.get("prior_draws", 0)))
    lz = fields["logz_runs"]
    if n_all > 1 and check_modes:
        mass, mass_runs, lost = mode_check(fields["samples_u"], np.exp(logwt - logz), run, np.exp(logwt_run), n_all)
        _warn_lost(lost, mass, mass_runs, fields["nlive_per_run"], stacklevel=4)
    else:
        mass, mass_runs, lost = np.zeros(0), np.zeros((n_all, 0)), np.zeros(n_all, bool)
    return NestedResults(logz=float(logz), logzerr=float(err), logl=ls, logwt=logwt, logvol=logx, nlive=nlive,
                         logzerr_runs=float(np.std(lz, ddof=1) / math.sqrt(lz.size)) if lz.size > 1 else None,
                         information=float(info), run=run, logwt_run=logwt_run, mode_mass=mass,
                         mode_mass_runs=mass_runs, runs_lost_mode=lost, **fields)


def plot_run(results: NestedResults, axes=None, color="C0"):
    """The run plot: log-likelihood and posterior weight against log prior volume (a matplotlib figure)."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 1, figsize=(6, 5), sharex=True) if axes is None else (axes[0].figure, axes)
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
