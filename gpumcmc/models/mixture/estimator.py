"""The scikit-learn face of the truncated DP Gaussian mixture, :class:`DPGaussianMixture`: :mod:`.algorithm`'s
Gibbs sweeps or BEM iterates through :func:`gpumcmc.sampling.run`, and :mod:`.ops`' kernel at the fit."""

from __future__ import annotations

import functools
import time
import warnings

import numpy as np

from gpumcmc import _validate, backend as _backend, shards as _shards
from gpumcmc.random import default_rng
from gpumcmc.random._stream import host_rng
from gpumcmc.sampling import Estimator, Monitor, Stop, as_data, run
from gpumcmc.sampling._estimator import ConvergenceWarning as _ConvergenceWarning
from gpumcmc.sampling._estimator import Integral, Interval, Real, StrOptions, atomic_fit, mixin

from .ops import MODE_ARGMAX, MODE_RESP, _safe_cholesky, _score_params, _xp_of, assign, kernel_params
from .algorithm import (Info, State, _bem_kl, default_chunk, init, init_bem, make_bem_step, make_model, make_step,
                        prune_count)
from .relabel import _weighted_mean, align_draws
from .sharded import (
    _sharded_score, bem_parts, gibbs_parts, make_sharded_models, sharded_bem, sharded_gibbs)


class DPGaussianMixture(mixin("DensityMixin"), Estimator):
    """Truncated Dirichlet-process Gaussian mixture, by blocked Gibbs or Bayesian EM, on GPU or CPU.

    The model of Suchard et al. (2010): ``n_components`` Gaussian components with Normal-inverse-Wishart priors
    ``(mu_j, Sigma_j) ~ N(m, gamma Sigma_j) IW(nu + 2, nu Phi)`` (West's parametrisation:
    ``InvWishart(nu + p + 1, nu Phi)`` in the usual one, prior mean ``Phi``), truncated stick-breaking weights
    ``v_j ~ Be(1, alpha)`` and ``alpha ~ Gamma(a, b)``.

    Defaults from the data (column means ``xbar``, column variances ``s^2``): ``m = xbar``,
    ``Phi = diag(s^2) / 64``, ``nu = 2`` (a weak covariance prior, so that tight populations such as flow-cytometry
    clusters stay tight), ``gamma = 16`` (prior spread of the means ``diag(s^2) / 4``), ``alpha ~ Gamma(1, k)``
    (shape 1, rate ``k = n_components``: prior mean ``1 / k``, as scikit-learn's default concentration; with
    ``k - 1`` sticks in alpha's conditional the posterior mean stays near 1 whatever ``k``). A constant column is
    handled through the prior (its variance is taken as 1e-3 of the mean positive variance; every other column keeps
    its own). The means' prior
    is tied to each component's covariance, so a component of ``n_j`` events whose mean lies ``d`` from ``m``
    takes about ``d d^T / (gamma n_j)`` into its covariance's scatter: a rare, tight population far from the
    data's centre comes out wider than it is (60 events with sd 0.02, 4 units out among 2,000 at unit spread:
    sd 0.13). For such populations lower ``mean_precision_prior`` (``1 / gamma``; 1e-4 gave 0.03 to 0.04).

    Parameters
    ----------
    n_components : int
        The truncation ``k``: an upper bound on the number of components.
    method : {"gibbs", "bem"}
        ``"gibbs"``: the blocked Gibbs sampler (indicators, NIW draws, sticks, alpha). ``"bem"``: Bayesian EM from
        ``n_init`` starts (k-means++ on a subsample of the rows) run side by side, as a mean-field variational fit
        (Blei and Jordan 2006): the stick-breaking prior drains components the data do not need, and a component
        whose probabilities sum to less than half its number of parameters is held at zero weight (the smallest
        such component first, one an iteration, so that its points move to the others before the next is judged).
        A population needs more points than that count, (p + p (p + 1) / 2) / 2 (52 at p = 13), to be kept: with
        fewer dimensions or more data per population it is not a limit. The reported mixture is the posterior
        mean of the weights, means and covariances.
    n_iter : int or None
        Gibbs: kept iterations; BEM: the largest number of iterations. None (the default): 200 for Gibbs, 500
        for BEM (whose rule waits for the weights to settle: blobs that converged in 120-190 iterations by the
        log-likelihood alone took 270-360).
    burn_in : int
        Gibbs iterations run before keeping draws.
    n_chains : int
        Gibbs chains, run side by side in one launch.
    n_init : int
        BEM starts; the one of largest variational lower bound is kept, which charges every component for its
        parameters (the likelihood of the point estimate would prefer a start that split a cluster in two).
    tol : float
        BEM stops when no start's mean log-likelihood per sample has changed by more than ``tol`` per iteration over
        the last 10 iterations, and no weight by more than ``10 tol`` per iteration (a component that drains
        slowly barely moves the log-likelihood); checked every 10 iterations, the only times BEM reads back from
        the GPU. A fit that reaches ``n_iter`` first warns (``ConvergenceWarning``; ``converged_`` is False),
        unless ``tol = 0``, which asks for ``n_iter`` iterations.
        scikit-learn's ``BayesianGaussianMixture`` bounds the change of a sum over the samples by ``1e-3``: pass
        ``tol=1e-3 / n_samples`` for its log-likelihood rule.
    mean_prior, mean_precision_prior, covariance_prior, degrees_of_freedom_prior :
        ``m``, ``1 / gamma``, ``Phi`` (matrix or diagonal) and ``nu``; None for the defaults above.
    alpha_prior : (float, float) or None
        Shape and rate of alpha's Gamma prior; None: ``(1, n_components)``.
    relabel : bool
        Align stored Gibbs draws to a common reference by a linear assignment on component means and weights
        (:func:`align_draws`) before summarising.
    random_state : int, SeedSequence, numpy Generator or RandomState, gpumcmc Generator, or None
    chunk_size : int or None
        Rows per launch of the configuration kernel (None: sized from memory). Draws do not depend on it.
    dtype : "float32" or "float64"
        Precision of the data and of the kernel.
    progress : bool
        Show a progress bar.
    backend : {"numpy", "cupy", None}
        None: the active backend (CuPy where a GPU is present).
    devices : None, "all", int, list of int, or gpumcmc.shards.Shards
        Split the data and the indicators over devices: each device works on its rows and one all-reduce per
        iteration (NCCL between GPUs) adds their statistics up (see :func:`.sharded.gibbs` and
        :func:`.sharded.bem`). ``"all"`` or a list of GPU ids drives those GPUs from this process; a
        :class:`~gpumcmc.shards.Shards` may also come from :func:`gpumcmc.shards.worker_shards` (one GPU per Dask
        worker: each worker fits with the whole ``X`` and the same seed and its ``z_`` holds its own rows'
        indicators), ``Shards(n_virtual=2)`` (two parts on NumPy) or :func:`gpumcmc.shards.one_device`. For a seed,
        the draws equal those of one device up to the rounding of the sums' order. None (the default): one device,
        the backend's.

    Attributes
    ----------
    weights_, means_, covariances_ : host arrays (k,), (k, p), (k, p, p)
        The fitted mixture. Gibbs: the mean of the relabelled weights, and the means and covariances averaged
        over the draws weighted by each draw's weight of the component. BEM: the variational posterior means.
    alpha_ : float
    z_ : host int array (n_samples,)  (Gibbs: the best chain's final indicator draw, numbered as the
        relabelled components of ``weights_`` and ``predict``)
    chains_used_ : host int array  (Gibbs: the chains the estimates pool. With several chains, the estimates
        start from the chain whose own estimate scores the data best, and pool each other chain whose draws,
        added, keep that score within four standard deviations of its draws' log-likelihoods; a chain in
        another partition of the data is left out, with a warning: averaged in, it blurred every component.
        With ``relabel=False`` or one kept draw, every chain.)
    n_active_ : int  (components holding data / of positive weight)
    trace_ : gpumcmc.sampling.Trace (Gibbs)
        The run's record as drawn: not relabelled, and the means about the data's mean (``to_arviz`` gives
        the relabelled draws in the data's coordinates).
    converged_, n_iter_ : BEM convergence.
    lower_bound_ : float  (BEM: the kept start's lower bound per sample)
    bem_logliks_ : (n_init,) host array  (BEM: each start's mean log-likelihood under its posterior-mean mixture)
    n_shards_ : int  (fits with ``devices``: the shards the data was split over)

    Examples
    --------
    >>> import numpy as np
    >>> from gpumcmc.models import DPGaussianMixture
    >>> rs = np.random.default_rng(0)
    >>> X = np.concatenate([rs.normal(-3, 1, (100, 2)), rs.normal(3, 1, (100, 2))])
    >>> gm = DPGaussianMixture(n_components=5, n_iter=50, burn_in=100, random_state=0,
    ...                        progress=False, backend="numpy").fit(X)
    >>> int((gm.weights_ > 0.2).sum())
    2
    >>> z = gm.predict(X)
    >>> bool((z[:100] == z[0]).mean() > 0.95 and (z[100:] != z[0]).mean() > 0.95)
    True
    >>> bem = DPGaussianMixture(n_components=2, method="bem", progress=False, backend="numpy").fit(X)
    >>> bool(abs(bem.score(X) - gm.score(X)) < 0.1)
    True
    """

    # A density estimator, as scikit-learn's GaussianMixture (DensityMixin, no ClusterMixin: fit keeps no
    # labels_). Checked by scikit-learn at fit where it imports (_check_params runs without it); the priors,
    # random_state and devices are checked where they are used.
    _parameter_constraints = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "method": [StrOptions({"gibbs", "bem"})],
        "n_iter": [None, Interval(Integral, 1, None, closed="left")],
        "burn_in": [Interval(Integral, 0, None, closed="left")],
        "n_chains": [Interval(Integral, 1, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "mean_prior": "no_validation",
        "mean_precision_prior": [None, Interval(Real, 0, None, closed="neither")],
        "covariance_prior": "no_validation",
        "degrees_of_freedom_prior": [None, Interval(Real, 0, None, closed="neither")],
        "alpha_prior": [None, tuple, list],
        "relabel": ["boolean"],
        "random_state": "no_validation",
        "chunk_size": [None, Interval(Integral, 1, None, closed="left")],
        "dtype": "no_validation",
        "progress": ["boolean"],
        "backend": [None, StrOptions({"numpy", "cupy"})],
        "devices": "no_validation",
    }
    _CACHES = ("_point_params",)  # predict's kernel parameters by backend and device

    def _expected_failed_checks(self):
        why = ("the check reads classifier tags of any estimator with predict_proba, and a density estimator has "
               "none (an AttributeError inside scikit-learn's check); fit, predict and predict_proba on sparse "
               "input pass before it.")
        return {"check_estimator_sparse_array": why, "check_estimator_sparse_matrix": why}

    def __init__(self, n_components: int = 16, method: str = "gibbs", n_iter: int | None = None, burn_in: int = 100,
                 n_chains: int = 1, n_init: int = 4, tol: float = 1e-5, mean_prior=None,
                 mean_precision_prior=None, covariance_prior=None, degrees_of_freedom_prior=None,
                 alpha_prior=None, relabel: bool = True, random_state=None, chunk_size=None,
                 dtype="float32", progress: bool = True, backend=None, devices=None):
        self.n_components, self.method, self.n_iter, self.burn_in = n_components, method, n_iter, burn_in
        self.n_chains, self.n_init, self.tol = n_chains, n_init, tol
        self.mean_prior, self.mean_precision_prior = mean_prior, mean_precision_prior
        self.covariance_prior, self.degrees_of_freedom_prior = covariance_prior, degrees_of_freedom_prior
        self.alpha_prior, self.relabel, self.random_state = alpha_prior, relabel, random_state
        self.chunk_size, self.dtype, self.progress = chunk_size, dtype, progress
        self.backend, self.devices = backend, devices

    def _check_params(self):
        if self.method not in ("gibbs", "bem"):
            raise ValueError(f"method must be 'gibbs' or 'bem', got {self.method!r}.")
        for name, low in (("n_components", 1), ("n_iter", 1), ("n_chains", 1), ("n_init", 1), ("burn_in", 0)):
            if name == "n_iter" and self.n_iter is None:
                continue
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {v!r}.")
        return _validate.check_float_dtype(self.dtype)

    def _n_iter(self) -> int:
        """``n_iter``, or its default for the method: 200 kept Gibbs iterations, at most 500 BEM iterations."""
        return int(self.n_iter) if self.n_iter is not None else (200 if self.method == "gibbs" else 500)

    @atomic_fit
    def fit(self, X, y=None):
        """Fit the mixture to ``X`` (n_samples, n_features); returns self."""
        dtype = self._validate_settings(self._check_params)
        if dtype == np.float32:
            _warn_coarse_float32(X)  # on the data as given, before as_data casts them
        gibbs = self.method == "gibbs"
        self._note_feature_names(X)
        for name in ("trace_", "_draws", "z_", "chains_used_", "converged_", "n_iter_", "lower_bound_", "bem_logliks_",
                     "n_shards_"):  # a refit (perhaps by the other method) keeps nothing of an earlier fit
            self.__dict__.pop(name, None)
        if self.devices is None:
            shards, xp = None, self._xp()
        else:
            shards = _shards.resolve(self.devices, self.backend, "the events")[0]
            gpu = shards.xp is not np
            xp = _xp_of(X) if (gpu and _backend.is_cupy_array(X)) else np
        X = as_data(X, xp, dtype, "X")
        if X.shape[0] < 2:
            raise ValueError(f"DPGaussianMixture needs at least 2 samples, got n_samples={X.shape[0]}.")
        n, k = X.shape[0], int(self.n_components)
        alpha_prior = (1.0, float(k)) if self.alpha_prior is None else tuple(self.alpha_prior)
        if len(alpha_prior) != 2:
            raise ValueError(f"alpha_prior must be (shape, rate), got {self.alpha_prior!r}.")
        kw = dict(dtype=dtype, mean_prior=self.mean_prior, mean_precision_prior=self.mean_precision_prior,
                  covariance_prior=self.covariance_prior, degrees_of_freedom_prior=self.degrees_of_freedom_prior,
                  alpha_prior=alpha_prior, chunk_size=self.chunk_size,
                  chains=self.n_chains if gibbs else self.n_init)
        # the GPU Gibbs sweep sums its statistics by kernel: no design matrix to cache
        if shards is None:
            model = make_model(X, k, cache_bytes=0 if (gibbs and _xp_of(X) is not np) else None, **kw)
            rng = self._make_rng()
        else:
            models = make_sharded_models(X, k, shards, cache_bytes=0 if (gpu and gibbs) else None, **kw)
            model = models[0]
            rng = default_rng(self.random_state, backend="cupy" if gpu else "numpy")
            self.n_shards_ = shards.world
        del X
        p = model.x.shape[1]
        self.n_features_in_, self._n_samples, self._center = p, n, model.center
        self._scale = np.sqrt(np.diag(_backend.to_host(model.psi0)) / (model.df0 - p - 1))
        t0 = time.perf_counter()
        if shards is None and gibbs:
            self._fit_gibbs(model, rng, init(rng, model, self.n_chains), make_step(model),
                            functools.partial(_score_params, model.x, chunk=model.chunk))
        elif shards is None:
            state, bem = init_bem(rng, model, self.n_init), make_bem_step(model)
            self._fit_bem(model, rng, state, lambda _rng, s: (bem(s), None),
                          functools.partial(_score_params, model.x, chunk=model.chunk))
        else:
            with shards.on(0):
                if gibbs:
                    alg = sharded_gibbs(shards)
                    self._fit_gibbs(model, rng, alg.init(rng, gibbs_parts(models, shards, n), self.n_chains), alg.step,
                                    lambda prm: _sharded_score(models, shards, prm, n))
                else:
                    alg = sharded_bem(shards)
                    states = alg.init(rng, bem_parts(models, shards, n), self.n_init)
                    self._fit_bem(model, rng, states, alg.step, lambda prm: _sharded_score(models, shards, prm, n))
        self.fit_seconds_ = time.perf_counter() - t0
        self._point_params = {}  # kernel parameters by (array module, dtype, device), filled by predict
        return self

    def _pooled_params(self, w, mu, cov, chains):
        """Kernel parameters (1, k, q) of the mixture estimated from ``chains``' relabelled draws, as
        ``weights_``, ``means_`` and ``covariances_`` are (means about the data's mean)."""
        xp = _xp_of(w)
        idx = xp.asarray(np.asarray(chains))
        wc = w[idx]
        wm = _backend.to_host(wc.mean(axis=(0, 1)))
        with np.errstate(divide="ignore"):
            log_pi = np.log(wm / wm.sum())
        chol = _safe_cholesky(np.asarray(_backend.to_host(_weighted_mean(wc, cov[idx])), np.float64))
        means = _backend.to_host(_weighted_mean(wc, mu[idx]))
        return _backend.asarray(kernel_params(log_pi[None], means[None], chol[None],
                                              _validate.check_float_dtype(self.dtype)), xp)

    def _chains_to_pool(self, w, mu, cov, loglik, score):
        """``(chains, best)``: the chains whose draws make the estimates, and the best chain, the one whose
        own estimate scores the data highest (``score``: parameter sets -> mean log-likelihood per sample).
        The other chains join one at a time, the closest first, where the mixture estimated from the pool with
        it scores within four standard deviations of the best chain's kept log-likelihoods (as far as that
        chain's own draws wander) of the best chain's own estimate. Chains that found the same partition pass;
        one that split or merged clusters otherwise would blur every component it is averaged into (two
        chains on a flow-cytometry file scored 4.05 a sample pooled, 4.64 alone)."""
        C = loglik.shape[0]
        if C == 1 or loglik.shape[1] < 2 or not self.relabel:
            # one chain; no spread to judge by (one kept draw); or labels left unaligned (relabel=False), where
            # chains cannot be compared: every chain, as drawn
            return np.arange(C), 0
        xp = _xp_of(w)
        own = np.asarray(_backend.to_host(score(xp.concatenate([self._pooled_params(w, mu, cov, [c])
                                                                for c in range(C)]))), dtype=np.float64)
        best = int(np.argmax(own))
        others = [c for c in range(C) if c != best]
        pairs = np.asarray(_backend.to_host(score(xp.concatenate([self._pooled_params(w, mu, cov, [best, c])
                                                                  for c in others]))), dtype=np.float64)
        tol = 4.0 * float(loglik[best].std())
        pool, last = [best], {}
        for i in np.argsort(-pairs, kind="stable"):  # the closest first; each pool scored as it grows
            c = others[int(i)]
            trial = pool + [c]
            sc = pairs[i] if len(pool) == 1 else float(_backend.to_host(score(self._pooled_params(w, mu, cov,
                                                                                                    trial)))[0])
            last[c] = sc
            if sc >= own[best] - tol:
                pool = trial
        used = np.array(sorted(pool))
        if len(used) < C:
            out = [c for c in others if c not in set(used.tolist())]
            lowered = ", ".join(f"{last[c]:.4g}" for c in out)
            warnings.warn(f"Chain(s) {out} found another partition of the data than chain {best} (the best): pooled "
                          f"with it, each would lower the fitted mixture's mean log-likelihood per sample from "
                          f"{own[best]:.4g} to {lowered}. weights_, means_, covariances_ and predict pool chains "
                          f"{used.tolist()} only (chains_used_); every chain's draws stay in trace_ and to_arviz(). "
                          "More iterations or burn-in may bring the chains together.", UserWarning, stacklevel=5)
        return used, best

    def _fit_gibbs(self, model, rng, state, step_fn, score):
        xp = _xp_of(_shard0(state).params)
        n_iter = self._n_iter()
        keep = _KeptDraws(self.burn_in, n_iter, every=10)

        def kept_step(rng_, s):
            s, info = step_fn(rng_, s)
            keep(_shard0(s), info)
            return s, None

        # The progress bar shows the monitors (a host read every 10 iterations); without it nothing is read
        # back during the run: the monitors' values are kept on the device and read once at the end.
        monitors = ([Monitor("loglik", lambda s: _shard0(s).loglik, every=10),
                     Monitor("alpha", lambda s: _shard0(s).alpha, every=10)] if self.progress else [])
        tr = run(kept_step, state, rng, n_iter=n_iter, burn_in=self.burn_in, monitors=monitors,
                 progress=self.progress, desc="DP mixture (Gibbs)", n_chains=self.n_chains)
        d = keep.draws(xp)  # on the device, (chain, draw, ...)
        flags = xp.stack([xp.isfinite(d[name]).all() for name in ("loglik", "weights", "means", "alpha")])
        host = _backend.to_host_later(d)  # the trace's copy, beside the relabelling
        if not bool(_backend.to_host(flags).all()):
            _check_finite_fit([np.nan], "Gibbs")  # raises; the copy's thread ends on its own
        w, mu, cov, perm = d["weights"], d["means"], d["covariances"], None
        if self.relabel:
            w, mu, cov, perm = align_draws(w, mu, cov, d["loglik"], self._scale, return_perm=True)
        host = host()
        used, best = self._chains_to_pool(w, mu, cov, host["loglik"], score)
        self.chains_used_ = used
        wu, muu, covu = w, mu, cov
        if len(used) < self.n_chains:  # the estimates from the chains that agree with the best one
            idx = xp.asarray(used)
            wu, muu, covu = w[idx], mu[idx], cov[idx]
        wm, means, covs = wu.mean(axis=(0, 1)), _weighted_mean(wu, muu), _weighted_mean(wu, covu)
        tr.draws, tr.stats, tr.monitors, self.trace_ = host, {"n_active": host["n_active"]}, keep.monitors(), tr
        self._draws = {"weights": _backend.to_host(w), "means": _backend.to_host(mu) + self._center,
                       "perm": perm,  # the relabelling of each draw (None: not relabelled), for covariances
                       "alpha": host["alpha"], "loglik": host["loglik"], "n_active": host["n_active"]}
        wm = _backend.to_host(wm)
        self.weights_ = wm / wm.sum()
        self.means_ = _backend.to_host(means) + self._center
        self.covariances_ = _backend.to_host(covs)
        self.alpha_ = float(host["alpha"].mean())
        self.n_active_ = int(np.round(np.median(host["n_active"])))
        shard_states = (tr.state,) if isinstance(tr.state, State) else tuple(tr.state)
        self.z_ = np.concatenate([_backend.to_host(s.z[best]) for s in shard_states])
        if perm is not None:  # the best chain's final labels as the relabelled components: those of predict
            self.z_ = np.argsort(perm[best, -1])[self.z_].astype(self.z_.dtype)

    def _fit_bem(self, model, rng, state, step, score, check_every: int = 10):
        # the rule reads the log-likelihoods every check_every iterations: the loop's only host reads
        rule = _BemConverged(self.tol * check_every, 10 * self.tol * check_every, prune_count(model.x.shape[1]))
        tr = run(step, state, rng, n_iter=self._n_iter(), progress=self.progress, desc="DP mixture (BEM)",
                 n_chains=self.n_init, stop=Stop(lambda s, info: rule(_shard0(s), info), check_every, "loglik"))
        state = _shard0(tr.state)
        # The probabilities of the last iterate were computed at the previous parameters: one more
        # E-step scores the final ones.
        point = kernel_params(state.log_pi, state.mu, _safe_cholesky(state.sigma), model.x.dtype)
        ll = _backend.to_host(score(point))
        _check_finite_fit([np.nanmax(ll)], "BEM")
        ll = np.where(np.isfinite(ll), ll, -np.inf)
        # the start kept: the largest variational lower bound per sample
        elbo = _backend.to_host(score(state.params) - _bem_kl(model, state) / self._n_samples)
        elbo = np.where(np.isfinite(elbo) & np.isfinite(ll), elbo, -np.inf)  # a start that broke down is never chosen
        best = int(np.argmax(elbo))
        self.converged_, self.n_iter_ = tr.stopped, tr.iterations
        if not tr.stopped and self.tol > 0:  # tol = 0 asks for n_iter iterations
            warnings.warn(f"Bayesian EM did not converge in n_iter={self._n_iter()} iterations (tol={self.tol}): "
                          "weights or the log-likelihood were still moving. Raise n_iter, or raise tol.",
                          _ConvergenceWarning, stacklevel=4)
        self.lower_bound_, self.bem_logliks_ = float(elbo[best]), ll
        w = np.exp(_backend.to_host(state.log_pi[best]))
        self.weights_ = w / w.sum()
        self.means_ = _backend.to_host(state.mu[best]) + self._center
        self.covariances_ = _backend.to_host(state.sigma[best])
        self.alpha_ = float(_backend.to_host(state.alpha[best]))
        self.n_active_ = int((self.weights_ > 0).sum())

    def _prepare(self, X):
        """``X`` centred, on its backend, the fitted mixture's kernel parameters there, and the rows per launch."""
        self._check_fitted("weights_")
        self._check_feature_names(X)
        dtype = _validate.check_float_dtype(self.dtype)
        X = as_data(X, self._xp(), dtype, "X")
        self._check_n_features(X)
        xp = _xp_of(X)
        xc = xp.ascontiguousarray((X - xp.asarray(self._center, dtype=X.dtype)).astype(dtype))
        # per device too: a predict on another GPU gets parameters there (the kernel reads them by address)
        key = (xp.__name__, np.dtype(dtype).str, xp.cuda.runtime.getDevice() if xp is not np else None)
        memo = self._point_params  # fit's dict, filled in place: predict leaves the attributes as they were
        if key not in memo:
            with np.errstate(divide="ignore"):
                log_pi = np.log(self.weights_)
            chol = _safe_cholesky(np.asarray(self.covariances_, np.float64))
            memo[key] = _backend.asarray(kernel_params(log_pi[None], (self.means_ - self._center)[None], chol[None],
                                                       dtype), xp)
        n = xc.shape[0]
        chunk = default_chunk(n, int(self.n_components), 1, dtype.itemsize, xp is not np)
        return xc, memo[key], chunk if self.chunk_size is None else int(self.chunk_size)

    def score_samples(self, X):
        """Log density ``log g(x_i)`` of every sample under the fitted mixture (host array)."""
        xc, params, chunk = self._prepare(X)
        return _backend.to_host(_score_params(xc, params, chunk, per_sample=True))[0]

    def score(self, X, y=None) -> float:
        """Mean log-likelihood per sample."""
        return float(np.mean(self.score_samples(X)))

    def predict(self, X):
        """The most probable component of every sample (host int array)."""
        xc, params, chunk = self._prepare(X)
        n = xc.shape[0]
        z = _xp_of(xc).empty((1, n), dtype=np.int32)
        for s in range(0, n, chunk):
            assign(xc, params, s, min(chunk, n - s), MODE_ARGMAX, z=z)
        return _backend.to_host(z[0]).astype(np.int64)

    @property
    def precisions_(self):
        """The inverses of :attr:`covariances_`, (n_components, n_features, n_features), as scikit-learn's
        mixtures give them."""
        return np.linalg.inv(self.covariances_)

    @property
    def precisions_cholesky_(self):
        """``P_j`` with ``precisions_[j] = P_j @ P_j.T``, scikit-learn's convention: the transposed inverse of
        the lower Cholesky factor of each covariance."""
        L = np.linalg.cholesky(self.covariances_)
        eye = np.broadcast_to(np.eye(L.shape[-1]), L.shape)
        return np.swapaxes(np.linalg.solve(L, eye), -1, -2)

    def fit_predict(self, X, y=None):
        """:meth:`fit` on ``X``, then :meth:`predict` of ``X``: the most probable component of every sample
        under the fitted mixture (host int array), as scikit-learn's mixtures' ``fit_predict``."""
        return self.fit(X, y).predict(X)

    def sample(self, n_samples=1, random_state=None):
        """``n_samples`` new samples from the fitted mixture (the posterior-mean weights, means and
        covariances), as scikit-learn's mixtures' ``sample``: ``(X, y)``, host arrays of shape
        (n_samples, n_features) and (n_samples,), grouped by component ``y`` in increasing order.
        ``random_state``: an int, a ``numpy.random.SeedSequence`` or ``Generator``, or None (fresh entropy).
        """
        self._check_fitted("weights_")
        n = _validate.check_int(n_samples, "n_samples", 1)
        rs = host_rng(random_state)
        counts = rs.multinomial(n, self.weights_)
        X = np.concatenate([rs.multivariate_normal(m, c, size=int(k), method="cholesky")
                            for m, c, k in zip(self.means_, self.covariances_, counts)])
        return X, np.repeat(np.arange(len(counts)), counts)

    def predict_proba(self, X):
        """Component probabilities, (n_samples, n_components) host array."""
        xc, params, chunk = self._prepare(X)
        xp, n, k = _xp_of(xc), xc.shape[0], params.shape[1]
        out = np.empty((n, k), dtype=xc.dtype)
        lse = xp.empty((1, n), dtype=xc.dtype)
        for s in range(0, n, chunk):
            e = min(n, s + chunk)
            resp = xp.empty((1, k, e - s), dtype=xc.dtype)
            assign(xc, params, s, e - s, MODE_RESP, lse=lse, resp=resp)
            out[s:e] = _backend.to_host(resp[0]).T
        return out

    def to_arviz(self):
        """ArviZ data of the (relabelled) Gibbs draws after burn-in, in the data's coordinates: weights,
        means, covariances, alpha; the log-likelihood and the active components in ``sample_stats``."""
        self._check_fitted("weights_")
        if getattr(self, "_draws", None) is None:
            raise ValueError("to_arviz() needs draws: fit with method='gibbs'.")
        from gpumcmc.sampling import to_arviz

        d = self._draws
        k, p = d["means"].shape[-2:]
        from .relabel import _take

        cov = self.trace_.draws["covariances"]  # on the host, as drawn: relabelled here, not kept twice
        cov = cov if d.get("perm") is None else _take(cov, d["perm"])
        return to_arviz({"weights": d["weights"], "means": d["means"], "covariances": cov, "alpha": d["alpha"]},
                        {"loglik": d["loglik"], "n_active": d["n_active"]},
                        coords={"component": np.arange(k), "feature": self._feature_coords(p),
                                "feature_bis": self._feature_coords(p)},
                        dims={"weights": ["component"], "means": ["component", "feature"],
                              "covariances": ["component", "feature", "feature_bis"]})


class _KeptDraws:
    """The draws of a Gibbs run, called after every sweep: the kept fields, and the monitors' log-likelihood
    and alpha every ``every`` iterations and at the last, held by reference on the device (no later sweep
    writes a state's arrays but ``z``, which is not kept) and stacked once at the end."""

    def __init__(self, burn_in: int, n_iter: int, every: int = 10):
        self.burn_in, self.total, self.every = int(burn_in), int(burn_in) + int(n_iter), int(every)
        self.it, self.kept, self.mon_it, self.mon = 0, [], [], []  # kept fields; the monitors' iterations, values

    def __call__(self, s: State, info: Info) -> None:
        self.it += 1
        if self.it > self.burn_in:
            # counts is a view of the sweep's packed statistics: a copy keeps (C, k) values, not (C, k, q)
            self.kept.append([s.log_pi, s.mu, s.sigma, s.alpha, s.loglik, info.n_active, s.counts.copy()])
        if self.it % self.every == 0 or self.it == self.total:
            self.mon_it.append(self.it)
            self.mon.append((s.loglik, s.alpha))

    def draws(self, xp) -> dict:
        """The kept fields stacked as (chain, draw, ...) on the device (``weights = exp(log_pi)``), once: the
        sweeps' arrays are let go as each field is stacked, so that the draws are not held twice (every
        covariance draw: 3.2 GB at 4 chains of 2,000 draws of k = 64, p = 14)."""
        names = ("weights", "means", "covariances", "alpha", "loglik", "n_active", "counts")
        kept, self.kept = self.kept, None
        out = {}
        for i, name in enumerate(names):
            out[name] = xp.moveaxis(xp.stack([t[i] for t in kept]), 0, 1)
            for t in kept:  # field i's sweep arrays let go
                t[i] = None
        out["weights"] = xp.exp(out["weights"])  # kept as log_pi
        return out

    def monitors(self) -> dict:
        """``Trace.monitors``: for "loglik" and "alpha", the iterations and the values there (one host read)."""
        its = np.asarray(self.mon_it, dtype=np.int64)
        xp = _xp_of(self.mon[0][0])  # the last sweep is always recorded
        vals = _backend.to_host(xp.stack([xp.stack([a.astype(np.float64), b.astype(np.float64)])
                                          for a, b in self.mon]))
        return {"loglik": (its, np.ascontiguousarray(vals[:, 0])), "alpha": (its, np.ascontiguousarray(vals[:, 1]))}


class _BemConverged:
    """BEM's stopping rule for :class:`~gpumcmc.sampling.Stop`: since the last read, every start's mean
    log-likelihood per sample moved by less than ``limit`` and each of its weights (sorted, as the components
    may change places) by less than ``weight_limit``, and no live component but the largest holds less than
    ``prune_count`` (one that does is pruned at a coming iterate); returns ``(converged, the largest
    log-likelihood)``."""

    def __init__(self, limit: float, weight_limit: float, prune_count: float):
        self.limit, self.weight_limit, self.prune_count, self.prev = limit, weight_limit, prune_count, None

    def __call__(self, state, info):
        xp = _xp_of(state.loglik)
        rest = state.counts[:, 1:]
        pending = ((rest > 0) & (rest < self.prune_count)).sum(axis=1).astype(np.float64)
        read = xp.concatenate([state.loglik[:, None], pending[:, None], xp.sort(xp.exp(state.log_pi), axis=1)],
                              axis=1)
        read = _backend.to_host(read)  # synchronize! (every check_every iterations)
        done = self.prev is not None and not read[:, 1].any() \
            and bool(np.all(np.abs(read[:, 0] - self.prev[:, 0]) < self.limit)) \
            and bool(np.all(np.abs(read[:, 2:] - self.prev[:, 2:]) < self.weight_limit))
        self.prev = read
        return done, float(read[:, 0].max())


def _shard0(state) -> State:
    """``state``, or local shard 0's where the data are split over devices (a state of
    :func:`gpumcmc.sampling.shard_states`, whose shards hold the same global draws)."""
    return state if isinstance(state, State) else state[0]


# The |mean| / std of a column of X above which a float32 fit warns (see _warn_coarse_float32).
_COARSE_FLOAT32 = 1e3


def _warn_coarse_float32(X, rows: int = 1 << 16) -> None:
    """Warn (UserWarning) where a column of ``X``, as fit got it, has |mean| / std above ``_COARSE_FLOAT32``.

    In float32 the data are rounded before they are centred (the order every float32 fit's draws rest on), and
    float32 keeps 24 bits: a value ``r`` standard deviations from 0 lies on a grid of step up to
    ``r 2**-23 std``, 1.2e-4 of the column's spread at ``r = 1e3``, still 1 % of a population 100 times narrower
    than its column (flow-cytometry populations are that tight). Far above it the fit breaks down without an
    error: two planted clusters at ``r`` 3e6 fit to an adjusted Rand index of 0.55, at 3e7 to 0 with a positive
    score. Ordinary data stay far below 1e3: at most 16 in scikit-learn's bundled sets (wine), 62 in the FCS
    examples (fortessa). A constant column (std 0) is left out: its values round alike and centring removes them.
    Sparse, ragged or non-numeric input is left to ``as_data`` to accept or refuse. The mean and spread come
    from at most ``rows`` rows evenly strided through X (plenty for a ratio against 1e3, and a few
    milliseconds however large X is), in float64 (CuPy input: one read of ``2 p`` values from the device).
    """
    if _backend.is_cupy_array(X):
        a = X
    else:
        try:
            a = np.asarray(X)  # no copy for a NumPy array
        except (TypeError, ValueError):
            return
    if a.ndim != 2 or a.dtype.kind not in "iuf" or a.shape[0] < 2:
        return
    a = a[::-(-a.shape[0] // rows)]  # at most `rows` rows, strided through X
    n = a.shape[0]
    with np.errstate(all="ignore"):  # NaN or inf: as_data refuses them next
        mean = a.sum(axis=0, dtype=np.float64) / n
        ss = ((a - mean) ** 2).sum(axis=0)
        mean, std = _backend.to_host(mean), np.sqrt(_backend.to_host(ss) / n)
        cols = np.flatnonzero((np.abs(mean) > _COARSE_FLOAT32 * std) & (std > 0))
        worst = float(np.max(np.abs(mean[cols]) / std[cols])) if cols.size else 0.0
    if cols.size:
        named = ", ".join(str(c) for c in cols[:10]) + (", ..." if cols.size > 10 else "")
        warnings.warn(
            f"X's column(s) {named} lie far from 0 against their spread (|mean| / std up to {worst:.3g}, above "
            f"{_COARSE_FLOAT32:g}): dtype='float32' rounds X before centring it, too coarsely for those columns, and "
            "the fit may be meaningless. Centre the data (X - X.mean(axis=0)) or pass dtype='float64'.",
            UserWarning, stacklevel=4)


def _check_finite_fit(arrays, method):
    for a in arrays:
        if not np.all(np.isfinite(np.asarray(a))):
            raise FloatingPointError(
                f"The {method} fit produced NaN or inf (a covariance lost positive definiteness); fit with "
                "dtype='float64', or strengthen the covariance prior (degrees_of_freedom_prior, covariance_prior).")
