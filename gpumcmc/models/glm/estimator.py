"""The Bayesian GLMs' scikit-learn face, :class:`BayesianGLM` and :class:`HierarchicalGLM`: settings and data
checked, the sampler run through :func:`gpumcmc.sampling.run`, predictions from its draws.
"""

from __future__ import annotations

import contextlib
import math
import warnings

import numpy as np

from ... import _validate
from ... import backend as _backend
from ...glm import check_family, check_y, mean_function
from ...sampling import Estimator, Trace, as_data, run, sharded, to_arviz
from ...sampling._diagnostics import RHAT_WARN, split_rhat
from ...sampling._estimator import (HAVE_SKLEARN, ConvergenceWarning, DataConversionWarning, Integral, Interval, Real,
                                    StrOptions, atomic_fit, same_array)
from .algorithm import HyperPrior, _check_prior_scale, init, step
from .ops import _PMAX
from .sharded import group_parts, over_groups, over_rows, row_parts

__all__ = ["BayesianGLM", "HierarchicalGLM"]


def _positive_float(value, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a positive number, got {value!r}.") from None
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}.")
    return v


# How far above psi0 HierarchicalGLM lets a draw of Sigma (or tau^2) reach before the dtype overflows: its
# draws are psi0 over chi-square draws, whose lower tail lifts a few of them orders of magnitude above psi0.
_PSI0_MARGIN = 1e6


def _check_psi0(psi0, dtype) -> None:
    """Refuse a ``psi0`` whose draws of Sigma would overflow ``dtype``: they are drawn in float64 and cast to
    the dtype, where a value past its largest number becomes inf (and mu, drawn with it, NaN)."""
    dt = np.dtype(dtype)
    top = float(np.finfo(dt).max) / _PSI0_MARGIN
    if float(psi0) > top:
        other = ", or dtype='float64'" if dt == np.float32 else ""
        raise ValueError(f"psi0={psi0!r} is too large for dtype {dt.name}: the draws of Sigma, psi0 over "
                         f"chi-square draws, reach orders of magnitude above psi0 and must stay below the largest "
                         f"{dt.name} number, {float(np.finfo(dt).max):.2g}, so psi0 must be at most {top:.2g}. Pass "
                         f"psi0=1e6 for a vague hyperprior{other}.")


def _available_if(check):
    """``sklearn.utils.metaestimators.available_if`` where scikit-learn imports, else the same idea: the
    method exists on an instance only where ``check(instance)`` holds (or raises AttributeError itself)."""
    if HAVE_SKLEARN:
        from sklearn.utils.metaestimators import available_if

        return available_if(check)

    class _Descriptor:
        def __init__(self, fn):
            self.fn, self.__doc__ = fn, fn.__doc__

        def __get__(self, obj, owner=None):
            if obj is None:
                return self.fn
            if not check(obj):
                raise AttributeError(f"This {type(obj).__name__} has no attribute {self.fn.__name__!r}.")
            return self.fn.__get__(obj, owner)

    return _Descriptor


if HAVE_SKLEARN:  # a valid value not named in scikit-learn's messages
    from sklearn.utils._param_validation import Hidden
else:
    def Hidden(constraint):
        return constraint

# The settings both estimators share, checked by scikit-learn at fit where it imports (_check_settings runs
# without it). random_state, dtype and devices are checked where they are resolved.
_SHARED_CONSTRAINTS = {
    "family": [StrOptions({"bernoulli", "poisson", "gaussian"}),
               Hidden(StrOptions({"Bernoulli", "Poisson", "Gaussian"}))],
    "n_chains": [Interval(Integral, 1, None, closed="left")],
    "n_samples": [Interval(Integral, 1, None, closed="left")],
    "n_warmup": [Interval(Integral, 0, None, closed="left")],
    "sigma": [Interval(Real, 0, None, closed="neither")],
    "fit_intercept": ["boolean"],
    "max_steps_out": [Interval(Integral, 1, None, closed="left")],
    "max_shrink": [Interval(Integral, 1, None, closed="left")],
    "random_state": "no_validation",
    "progress": ["boolean"],
    "backend": [None, StrOptions({"numpy", "cupy"})],
    "dtype": "no_validation",
    "graph": [None, "boolean"],
    "devices": "no_validation",
}


class _GLMBase(Estimator):
    def __sklearn_tags__(self):
        # The estimator type follows the family parameter, as scikit-learn does for estimators whose kind
        # depends on a parameter: bernoulli classifies (labels 0 and 1), poisson and gaussian regress.
        from sklearn.utils import ClassifierTags, RegressorTags

        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        family = self.family.lower() if isinstance(self.family, str) else self.family
        if family == "bernoulli":
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags(multi_class=False)
        else:
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags()
            tags.target_tags.positive_only = family == "poisson"
        return tags

    def _expected_failed_checks(self):
        family = self.family.lower() if isinstance(self.family, str) else self.family
        if family == "poisson":
            why = ("family='poisson' takes y as non-negative integer counts, the likelihood's support, and refuses "
                   "other values with a ValueError that says so: the checks regress on continuous targets.")
            return dict.fromkeys(["check_fit_check_is_fitted", "check_fit_idempotent", "check_n_features_in",
                                  "check_n_features_in_after_fitting", "check_regressor_data_not_an_array",
                                  "check_regressors_no_decision_function", "check_regressors_train"], why)
        if family != "bernoulli":
            return {}
        why = ("family='bernoulli' takes y in {0, 1}, the likelihood's support, and refuses other labels with "
               "a ValueError that names them (it does not encode labels): the check fits on labels other than 0 "
               "and 1 (strings, three classes, a continuous target) and expects them encoded or refused in "
               "scikit-learn's words.")
        return dict.fromkeys(["check_estimators_dtypes", "check_classifier_data_not_an_array",
                              "check_classifiers_classes", "check_classifiers_regression_target",
                              "check_classifier_not_supporting_multiclass", "check_fit2d_1feature"], why)

    def summary(self, **kw):
        """ArviZ's summary table of :meth:`to_arviz` (means, intervals, R-hat, ESS); ``kw`` go to
        ``arviz.summary`` (e.g. ``var_names=["mu"]``)."""
        import arviz as az
        return az.summary(self.to_arviz(), **kw)

    def _is_classifier(self) -> bool:
        family = getattr(self, "family_", self.family)
        if isinstance(family, str) and family.lower() == "bernoulli":
            return True
        raise AttributeError(f"predict_proba exists only for family='bernoulli' (this model has family={family!r}); "
                             "use predict_mean for the posterior predictive mean.")

    def _check_settings(self):
        """The settings shared by both estimators, checked at fit (sigma: the gaussian noise)."""
        family = check_family(self.family)
        _validate.check_int(self.n_chains, "n_chains")
        _validate.check_int(self.n_samples, "n_samples")
        _validate.check_int(self.n_warmup, "n_warmup", 0)
        _validate.check_int(self.max_steps_out, "max_steps_out")
        _validate.check_int(self.max_shrink, "max_shrink")
        _positive_float(self.sigma, "sigma")
        self.family_ = family  # only once every setting passed: a refused refit leaves the last fit whole

    def _checked_data(self, X, y, what: str):
        """``(shards, X, y)``: the shards of ``devices`` (or None) and X, y checked, on the host for shards."""
        shards = None
        if self.devices is not None:
            from ...shards import resolve

            if self.graph:
                raise ValueError("graph=True needs devices=None: the sweep over several devices is not captured "
                                 "as a CUDA graph; leave graph at None or False.")
            shards = resolve(self.devices, self.backend, what)[0]
            X = _backend.to_host(X) if _backend.is_cupy_array(X) else X
            y = _backend.to_host(y) if _backend.is_cupy_array(y) else y
        if y is None:
            raise ValueError("This estimator requires y to be passed, but the target y is None; pass one target "
                             "per row of X.")
        if getattr(y, "ndim", None) == 2 and y.shape[1] == 1:  # a column vector, as scikit-learn takes it
            warnings.warn("A column-vector y was passed when a 1d array was expected; y is raveled to shape "
                          "(n_samples,). Pass y.ravel() to avoid this warning.", DataConversionWarning, stacklevel=4)
            y = y[:, 0]
        xp = self._xp() if shards is None else np
        X = as_data(X, xp, np.dtype(self.dtype), "X")
        y = as_data(y, xp, np.dtype(self.dtype), "y", ndim=1, finite=False)
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]} values; pass one y per row of X.")
        check_y(y, self.family_, xp)
        return shards, X, y

    def _design(self, X, intercept: bool):
        xp = _backend.get_array_module(X)
        if intercept:
            X = xp.concatenate([xp.ones((X.shape[0], 1), dtype=X.dtype), X], axis=1)
        return X

    def _at_fit(self, name: str):
        """The setting ``name`` (``fit_intercept``, ``dtype``) as the fit used it, whatever ``set_params`` did
        since: the draws' layout and precision follow it."""
        return getattr(self, "_fit_with", {}).get(name, getattr(self, name))

    def _sample(self, design: list, y, shards, prior_scale, gid=None, hyper=None):
        """The sampler's trace on the design ``D``, on one device or split over ``shards`` (the rows, or the
        groups ``gid`` for ``hyper``, whose full ``psi0`` comes as the scale of ``psi0 I``). ``design`` is
        ``[D]``, emptied here so that no one holds ``D`` once the sampler has its own copy (the kernels read
        a transposed one): with the caller's copies of X, a fit held the rows three times over the run."""
        D = design.pop()
        fam, sig, K = self.family_, float(self.sigma), D.shape[1]
        kw = dict(burn_in=self.n_warmup, collect=self._collector(hyper), progress=self.progress,
                  desc=type(self).__name__)
        xp = _backend.get_array_module(D) if shards is None else shards.xp
        with contextlib.nullcontext() if shards is None else shards.on(0):
            if hyper is not None and hyper.covariance == "full":
                hyper = hyper._replace(psi0=xp.eye(K, dtype=np.float64) * hyper.psi0)
        if shards is None:
            state, data = init(D, y, fam, self.n_chains, prior_scale, None if gid is None else xp.asarray(gid))
            del D  # the sampler reads data's transposed copy

            def st(r, s):
                return step(r, s, data, fam, sig, self.n_warmup, self.max_steps_out, self.max_shrink, hyper)

            # a CUDA graph of the sweep: on the GPU, by default where max_steps_out < _PMAX
            graph = data.plan is not None and (self.max_steps_out < _PMAX if self.graph is None else bool(self.graph))
            return run(st, state, self._make_rng(), self.n_samples, graph=graph, **kw)
        if hyper is None:
            parts = row_parts(D, y, shards, fam, self.n_chains)
            alg = sharded(over_rows(fam, sig, self.n_warmup, self.max_steps_out, self.max_shrink), shards)
        else:
            parts = group_parts(D, y, gid, shards, fam, self.n_chains)
            alg = sharded(over_groups(fam, sig, self.n_warmup, hyper, self.max_steps_out, self.max_shrink), shards)
        del D  # each shard holds its own part
        from ...random import default_rng

        with shards.on(0):
            rng = default_rng(self.random_state, backend="numpy" if xp is np else "cupy")
            state = alg.init(rng, parts, self.n_chains, prior_scale)
            return run(alg.step, state, rng, self.n_samples, **kw)

    @staticmethod
    def _collector(hyper):
        """What the run driver keeps of each draw: beta, and mu with Sigma (or tau) for the hierarchy."""
        def collect(s, info):
            if hyper is None:
                return {"beta": s.beta}
            if hyper.covariance == "diag":
                xp = _backend.get_array_module(s.sigma)
                return {"beta": s.beta, "mu": s.mu, "tau": xp.sqrt(xp.diagonal(s.sigma, axis1=1, axis2=2))}
            return {"beta": s.beta, "mu": s.mu, "Sigma": s.sigma}

        return collect

    def _fitted(self, draws):
        """Set ``classes_`` for the family (y's support, as predict returns it) and note the settings that
        prediction must follow; warns where the chains have not mixed; returns ``draws``."""
        self._fit_with = {"fit_intercept": bool(self.fit_intercept), "dtype": np.dtype(self.dtype)}
        self._warn_unmixed(draws)
        if self.family_ == "bernoulli":
            self.classes_ = np.array([0, 1])
        else:
            self.__dict__.pop("classes_", None)  # from an earlier bernoulli fit
        return draws

    def _warn_unmixed(self, draws) -> None:
        """A ConvergenceWarning where a coefficient's split-R-hat over the kept draws (chain, draw, ..., K')
        exceeds ``RHAT_WARN``: chains that disagree, or that still drift, give no posterior to report. The
        usual cause is a column far from zero mean or unit scale (a calendar year, a salary), which the slice
        steps of unit width cross slowly, or strongly correlated columns, along whose ridge one coordinate at a
        time moves in small steps."""
        rhat = split_rhat(draws)
        if not rhat.size or not np.nanmax(rhat, initial=0.0) > RHAT_WARN:
            return
        where = np.unravel_index(int(np.nanargmax(rhat)), rhat.shape)
        which = self._coef_names()[where[-1]]
        if len(where) > 1:
            which += f" of group {self.groups_[where[0]]}"
        warnings.warn(f"The chains have not mixed: split-R-hat of {which} is {rhat[where]:.3g} (above "
                      f"{RHAT_WARN}; {int(np.sum(rhat > RHAT_WARN))} of {rhat.size} coefficients are). Raise "
                      "n_warmup and n_samples (strongly correlated columns need many more sweeps), centre and "
                      "scale the columns of X (e.g. sklearn.preprocessing.StandardScaler), or put y on a unit "
                      "scale for family='gaussian'; then fit again.",
                      ConvergenceWarning, stacklevel=5)

    def _coef_names(self, feature_names=None) -> list:
        """The fit's coefficients' names: "intercept" (where fitted), then ``feature_names``, else
        ``feature_names_in_`` (a DataFrame's columns), else "x0", "x1", ..."""
        names = feature_names if feature_names is not None else getattr(self, "feature_names_in_", None)
        names = [str(c) for c in names] if names is not None else [f"x{j}" for j in range(self.n_features_in_)]
        if len(names) != self.n_features_in_:
            raise ValueError(f"feature_names holds {len(names)} names for {self.n_features_in_} features.")
        return (["intercept"] if self._at_fit("fit_intercept") else []) + names

    def _warn_prior_conflict(self, means, prior_scale) -> None:
        """For ``family="gaussian"``, a warning where a coefficient's posterior mean lies more than 4 prior
        standard deviations from 0: the data pull against ``beta ~ N(0, prior_scale^2)``, which then holds the
        estimate back (y in centimetres with the default prior_scale=2.5 put a 169 cm intercept at 157)."""
        if self.family_ != "gaussian":  # large logistic or log-rate coefficients are mostly separation, where
            return                       # the prior is what keeps the posterior proper
        z = np.abs(np.asarray(means, dtype=np.float64)) / float(prior_scale)
        if not z.size or not z.max() > 4:
            return
        j = int(np.argmax(z))
        warnings.warn(f"The posterior mean of {self._coef_names()[j]} is {means[j]:.4g}, {z[j]:.3g} prior "
                      f"standard deviations (prior_scale={prior_scale:g}) from 0: the prior holds it back. If that "
                      "is not meant, raise prior_scale (1e6 is flat), or centre and scale y and the columns of X.",
                      UserWarning, stacklevel=4)

    def _host_X(self, X, fitted: str):
        """``X`` for prediction, on the host in float64, once the model is fitted."""
        self._check_fitted(fitted)
        self._check_feature_names(X)
        X = np.asarray(_backend.to_host(as_data(X, self._xp(), self._at_fit("dtype"), "X")), dtype=np.float64)
        self._check_n_features(X)
        return X

    def _labels(self, p):
        """Class labels (bernoulli, threshold 0.5) or the posterior predictive mean ``p`` itself."""
        return (p > 0.5).astype(np.int64) if self.family_ == "bernoulli" else p

    def _family_score(self, y, sample_weight, predict_mean):
        """Accuracy (bernoulli, threshold 0.5) or R^2 of ``predict_mean()`` against ``y``, weighted."""
        y = np.asarray(_backend.to_host(as_data(y, np, np.float64, "y", ndim=1)), dtype=np.float64)
        w = None if sample_weight is None else np.asarray(_backend.to_host(sample_weight), dtype=np.float64)
        if w is not None and w.shape != y.shape:
            raise ValueError(f"sample_weight must have one weight per value of y ({y.shape[0]}), got {w.shape}.")
        pred = predict_mean()
        if pred.shape != y.shape:
            raise ValueError(f"X has {pred.shape[0]} rows but y has {y.shape[0]} values; pass one y per row of X.")
        if self.family_ == "bernoulli":
            return float(np.average((pred > 0.5) == y, weights=w))
        ww = np.ones_like(y) if w is None else w
        ybar = np.average(y, weights=ww)
        ss_res = float(np.sum(ww * (y - pred) ** 2))
        ss_tot = float(np.sum(ww * (y - ybar) ** 2))
        if ss_tot == 0.0:  # scikit-learn's r2_score for constant y
            return 1.0 if ss_res == 0.0 else 0.0
        return 1.0 - ss_res / ss_tot


def _labels_per_row(groups, n):
    groups = np.asarray(_backend.to_host(groups))
    if groups.ndim != 1 or groups.shape[0] != n:
        raise ValueError(f"groups must be 1-d with one label per row of X ({n}), got shape {groups.shape}.")
    return groups


def _check_max_draws(max_draws):
    """``max_draws`` of the prediction methods: None (all the draws) or a positive int."""
    if max_draws is not None:
        _validate.check_int(max_draws, "max_draws", 1, "or None (every draw)")


def _thin(b, max_draws):
    """At most ``max_draws`` (None: all) of the draws ``b`` (along axis 0), evenly spaced."""
    if max_draws is None or b.shape[0] <= max_draws:
        return b
    return b[np.linspace(0, b.shape[0] - 1, max_draws).astype(int)]


# Elements of a (draws, rows) block of the predictions: the rows go in blocks of about 32 MB of float64 a
# temporary, so that predicting on a million rows does not take draws x rows of memory several times over.
_PREDICT_BLOCK = 1 << 22


def _predictive_mean(n_draws: int, n_rows: int, eta_of, family) -> np.ndarray:
    """The mean over the draws of the mean function of ``eta_of(s, e)`` (draws, e - s), block of rows by block
    of rows (each row's value as from the whole (draws, n) array: a mean down the draws, column by column)."""
    out = np.empty(n_rows)
    step = max(1, _PREDICT_BLOCK // max(1, n_draws))
    with np.errstate(under="ignore"):  # probabilities below the smallest float are 0
        for s in range(0, n_rows, step):
            e = min(n_rows, s + step)
            out[s:e] = mean_function(eta_of(s, e), family, np).mean(axis=0)
    return out


class BayesianGLM(_GLMBase):
    """Bayesian GLM with ``beta ~ N(0, prior_scale^2 I)``, sampled by slice-within-Gibbs.

    ``fit`` warns (``ConvergenceWarning``) where a coefficient's split-R-hat over the kept draws is above 1.1:
    raise ``n_warmup`` and ``n_samples``, or centre and scale the columns (see the GLM guide).

    Parameters
    ----------
    family : {"bernoulli", "poisson", "gaussian"}
    prior_scale : float
        Prior standard deviation of every coefficient (and the intercept).
    n_chains, n_samples, n_warmup : int
        Chains run together; kept draws per chain; warm-up sweeps (step widths tuned, draws discarded).
    sigma : float
        Known noise standard deviation of the gaussian family.
    fit_intercept : bool
        Add a column of ones; its coefficient is ``intercept_``.
    max_steps_out, max_shrink : int
        The fixed bounds of the stepping-out and shrinkage rounds.
    random_state : int, SeedSequence, numpy Generator or RandomState, gpumcmc Generator, or None
    progress : bool
        Show a progress bar.
    backend : {"numpy", "cupy", None}
        None: the active backend (CuPy where a GPU is present).
    dtype : "float32" or "float64"
    graph : bool or None
        On the GPU, capture one sweep as a CUDA graph and replay it (:func:`gpumcmc.sampling.graph_step`):
        one launch per sweep instead of about 2 K kernel launches and the Python around them, for the same
        draws bit for bit. ``None`` (the default): on the GPU, yes. The graph keeps a second copy of the
        state (``eta`` is chains x rows).
    devices : None, "all", int, list of int, or gpumcmc.shards.Shards
        Split the rows over devices (:func:`gpumcmc.models.glm.over_rows`): each keeps ``eta`` of its rows,
        and the slice sampler's log-density evaluations are all-reduced, so every device takes the same
        decisions. ``Shards(n_virtual=k)`` splits on NumPy, :func:`gpumcmc.shards.one_device` on one GPU.
        With one shard the draws equal those of ``devices=None`` for the same seed; with several, up to the
        order of the sums over rows (a chain can take another step where a candidate lies within rounding
        of the slice level). X and y are checked on the host and copied part by part to the devices.
    """

    _parameter_constraints = {**_SHARED_CONSTRAINTS, "prior_scale": [Interval(Real, 0, None, closed="neither")]}

    def __getstate__(self):
        state = super().__getstate__()
        tr, b = state.get("trace_"), state.get("coef_draws_")
        if isinstance(tr, Trace) and b is not None and same_array(b, tr.draws["beta"][:, :, 0, :]):
            del state["coef_draws_"]  # the trace's draws, as fit took them: made again on load, not pickled twice
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if "coef_draws_" not in self.__dict__ and isinstance(getattr(self, "trace_", None), Trace):
            self.coef_draws_ = self.trace_.draws["beta"][:, :, 0, :]

    def __init__(self, family="bernoulli", prior_scale=2.5, n_chains=4, n_samples=1000, n_warmup=500,
                 sigma=1.0, fit_intercept=True, max_steps_out=4, max_shrink=24, random_state=None,
                 progress=True, backend=None, dtype="float64", graph=None, devices=None):
        self.family, self.prior_scale, self.n_chains, self.n_samples = family, prior_scale, n_chains, n_samples
        self.n_warmup, self.sigma, self.fit_intercept = n_warmup, sigma, fit_intercept
        self.max_steps_out, self.max_shrink, self.random_state = max_steps_out, max_shrink, random_state
        self.progress, self.backend, self.dtype, self.graph, self.devices = progress, backend, dtype, graph, devices

    @atomic_fit
    def fit(self, X, y):
        """Sample the posterior given ``X`` and ``y``."""
        self._validate_settings(lambda: (self._check_settings(), _positive_float(self.prior_scale, "prior_scale")))
        self._note_feature_names(X)
        shards, X, y = self._checked_data(X, y, "the rows")
        prior_scale = _check_prior_scale(self.prior_scale, X.dtype)     # its square must fit the dtype
        self.n_features_in_ = X.shape[1]
        design = [self._design(X, self.fit_intercept)]
        del X  # (see _sample)
        self.trace_ = self._sample(design, y, shards, prior_scale)
        b = self.coef_draws_ = self._fitted(self.trace_.draws["beta"][:, :, 0, :])    # (chain, draw, K')
        self._warn_prior_conflict(b.mean(axis=(0, 1)), prior_scale)
        if self.fit_intercept:
            self.intercept_ = float(b[..., 0].mean())
            self.coef_ = b[..., 1:].mean(axis=(0, 1))
        else:
            self.intercept_ = 0.0
            self.coef_ = b.mean(axis=(0, 1))
        return self

    def predict_mean(self, X, max_draws=1000):
        """The posterior predictive mean E[y | X] (averaged over the draws), on the host. ``max_draws``: at
        most this many of the draws, evenly spaced (a positive int, or None for every draw); the other
        prediction methods and :meth:`score` take it too."""
        _check_max_draws(max_draws)
        X = self._host_X(X, "coef_draws_")
        b = _thin(self.coef_draws_.reshape(-1, self.coef_draws_.shape[-1]), max_draws)
        if self._at_fit("fit_intercept"):
            return _predictive_mean(b.shape[0], X.shape[0], lambda s, e: b[:, :1] + b[:, 1:] @ X[s:e].T, self.family_)
        return _predictive_mean(b.shape[0], X.shape[0], lambda s, e: b @ X[s:e].T, self.family_)

    @_available_if(_GLMBase._is_classifier)
    def predict_proba(self, X, max_draws=1000):
        """(n, 2) class probabilities from the posterior predictive. Only for ``family="bernoulli"``:
        for the other families the attribute does not exist (``hasattr`` is False)."""
        p = self.predict_mean(X, max_draws)
        return np.stack([1 - p, p], axis=1)

    def score(self, X, y, sample_weight=None, max_draws=1000):
        """scikit-learn's score for the family: for ``"bernoulli"`` the accuracy of :meth:`predict` (as
        ``ClassifierMixin``), for ``"poisson"`` and ``"gaussian"`` the coefficient of determination R^2 of
        the posterior predictive mean (as ``RegressorMixin``)."""
        self._check_fitted("coef_draws_")
        _check_max_draws(max_draws)
        return self._family_score(y, sample_weight, lambda: self.predict_mean(X, max_draws))

    def predict(self, X, max_draws=1000):
        """Class labels (bernoulli, threshold 0.5) or the posterior predictive mean."""
        return self._labels(self.predict_mean(X, max_draws))

    def to_arviz(self, feature_names=None):
        """ArviZ InferenceData: posterior ``beta`` (chain, draw, K), ``intercept``; sample stats. The features
        are labelled by ``feature_names``, else by ``feature_names_in_`` (a DataFrame's columns), else 0..K-1."""
        self._check_fitted("coef_draws_")
        b = self.coef_draws_
        intercept = self._at_fit("fit_intercept")
        post = {"beta": b[..., 1:] if intercept else b}
        if intercept:
            post["intercept"] = b[..., 0]
        if feature_names is not None:
            self._coef_names(list(feature_names))  # one name a feature, or a ValueError saying so
        coords = {"feature": list(feature_names) if feature_names is not None else
                  self._feature_coords(self.n_features_in_)}
        return to_arviz(post, self.trace_.stats, coords=coords, dims={"beta": ["feature"]})


class HierarchicalGLM(_GLMBase):
    """Hierarchical GLM: each group g has its own coefficients ``beta_g``, drawn around a common mean.

    For groups g = 1..G and coefficients k = 1..K (the intercept first when ``fit_intercept``), ``y`` given
    ``beta_g`` follows the GLM of ``family`` within each group, and with ``covariance="full"`` (the default)::

        beta_g | mu, Sigma ~ N(mu, Sigma)
        mu | Sigma         ~ N(0, Sigma / kappa0)
        Sigma              ~ InvWishart(nu0, psi0 * I)        nu0 = K + 2 by default

    or with ``covariance="diag"`` (each coefficient varies across groups with its own scale; ``nu0 = 3``
    gives ``tau_k^2`` the prior of a diagonal entry of ``Sigma`` under the full default)::

        beta_gk | mu_k, tau_k ~ N(mu_k, tau_k^2)
        mu_k | tau_k          ~ N(0, tau_k^2 / kappa0)
        tau_k^2               ~ InvGamma(nu0 / 2, psi0 / 2)    nu0 = 3 by default

    All groups' coefficients move at once by slice-within-Gibbs; ``mu, Sigma`` are then drawn from their
    conjugate conditional (on the GPU one kernel, a block per chain, with no host round trip). The diagonal
    model has K variances to learn instead of K (K + 1) / 2 covariances, so it needs fewer groups.
    ``fit(X, y, groups)`` takes integer or string group labels, one per row (``groups=None``: one group);
    :meth:`predict`, :meth:`predict_proba` (bernoulli), :meth:`predict_mean` and :meth:`score` take labels
    seen at fit. In ``cross_val_score``
    or ``GridSearchCV``, route them with ``sklearn.set_config(enable_metadata_routing=True)`` and
    ``set_fit_request(groups=True).set_score_request(groups=True)``.

    Parameters
    ----------
    family : {"bernoulli", "poisson", "gaussian"}
    kappa0, nu0, psi0 : float
        The hyperprior above (``nu0=None``: the default for ``covariance``). ``kappa0 = 0`` (the default) is
        the improper limit, a flat prior on ``mu``. A positive ``kappa0`` centres ``mu`` on 0 with spread
        ``Sigma / kappa0``, which ties the groups' spread to ``mu``'s distance from 0: with ``kappa0 = 1``, a
        common intercept near 10 and a true spread of 0.1, ``tau`` came out near 3 (0.37 at ``kappa0 = 0``, the
        floor ``psi0`` sets there). ``psi0`` must be positive: its improper limit 0 has no posterior where the
        groups' coefficients do not span every direction (one group, say); a small value such as 1e-3 gives a
        weak hyperprior.
    covariance : {"full", "diag"}
        The groups' covariance: a full ``Sigma`` or ``diag(tau^2)``.
    n_chains, n_samples, n_warmup, sigma, fit_intercept, max_steps_out, max_shrink
        As for :class:`BayesianGLM`.
    random_state, progress, backend, dtype, graph
        As for :class:`BayesianGLM`.
    devices : None, "all", int, list of int, or gpumcmc.shards.Shards
        Split the groups over devices (:func:`gpumcmc.models.glm.over_groups`): each holds whole groups
        (about equal rows per device) and sweeps them with no communication; once a sweep, every group's
        coefficients are all-reduced (``C G K`` values) for the draw of ``mu, Sigma``. On the GPU the draws
        equal those of ``devices=None`` for the same seed, bit for bit; on NumPy (``Shards(n_virtual=k)``),
        up to the rounding of the sums over a group's rows. There must be at least as many groups as devices.

    Attributes
    ----------
    groups_ : array (G,)
        The group labels, sorted; row g of the per-group attributes is group ``groups_[g]``.
    coef_ : array (G, K)
        Each group's posterior mean coefficients in the design's order: the intercept first (column 0) when
        ``fit_intercept``, then the features. (``BayesianGLM.coef_`` leaves its intercept out.)
    intercept_ : array (G,)
        Each group's posterior mean intercept, ``coef_[:, 0]`` (zeros without ``fit_intercept``).
    beta_draws_ : array (chain, draw, G, K)
        The kept draws of every group's coefficients.
    trace_ : gpumcmc.sampling.Trace
        The run's record, with ``mu`` and ``Sigma`` (or ``tau``).
    feature_names_in_ : array of str
        A DataFrame's column names, where ``fit`` got one.
    """

    _parameter_constraints = {
        **_SHARED_CONSTRAINTS,
        "kappa0": [Interval(Real, 0, None, closed="left")],
        "nu0": [None, Interval(Real, 0, None, closed="neither")],
        # psi0 = 0, the improper limit, gives a degenerate Sigma (frozen chains) where the groups do not span it
        "psi0": [Interval(Real, 0, None, closed="neither")],
        "covariance": [StrOptions({"full", "diag"})],
    }

    def __init__(self, family="bernoulli", kappa0=0.0, nu0=None, psi0=1.0, n_chains=4, n_samples=1000,
                 n_warmup=500, sigma=1.0, fit_intercept=True, max_steps_out=4, max_shrink=24,
                 random_state=None, progress=True, backend=None, dtype="float64", covariance="full",
                 graph=None, devices=None):
        self.family, self.kappa0, self.nu0, self.psi0, self.covariance = family, kappa0, nu0, psi0, covariance
        self.n_chains, self.n_samples, self.n_warmup, self.sigma = n_chains, n_samples, n_warmup, sigma
        self.fit_intercept, self.max_steps_out, self.max_shrink = fit_intercept, max_steps_out, max_shrink
        self.random_state, self.progress, self.backend, self.dtype = random_state, progress, backend, dtype
        self.graph, self.devices = graph, devices

    def _check_hier_settings(self):
        self._check_settings()
        if self.covariance not in ("full", "diag"):
            raise ValueError(f"covariance must be 'full' (Sigma with an inverse-Wishart prior) or 'diag' "
                             f"(diag(tau^2) with inverse-gamma priors), got {self.covariance!r}.")
        if not (float(self.kappa0) >= 0 and float(self.psi0) >= 0):
            raise ValueError(f"kappa0 and psi0 must be non-negative numbers (0: the improper limit), "
                             f"got kappa0={self.kappa0!r}, psi0={self.psi0!r}.")
        if self.covariance == "diag" and self.nu0 is not None and not float(self.nu0) > 0:
            raise ValueError(f"nu0 must be positive for covariance='diag', got {float(self.nu0)}.")

    @atomic_fit
    def fit(self, X, y, groups=None):
        """Sample the posterior given ``X``, ``y`` and one group label per row (``groups=None``: all rows in
        one group)."""
        self._validate_settings(self._check_hier_settings)
        self._note_feature_names(X)
        shards, X, y = self._checked_data(X, y, "the groups")
        _check_psi0(self.psi0, X.dtype)
        groups = np.zeros(X.shape[0], np.int64) if groups is None else _labels_per_row(groups, X.shape[0])
        missing = groups != groups  # NaN (float or object labels): a label that equals nothing
        if groups.dtype == object:
            missing = missing | np.array([g is None for g in groups], dtype=bool)
        if missing.any():
            raise ValueError(f"groups holds a missing label (NaN or None) at row {int(np.argmax(missing))}; give "
                             "every row a group, or drop the rows without one.")
        try:
            self.groups_, gid = np.unique(groups, return_inverse=True)
        except TypeError as e:  # labels that do not sort together, such as 1 and "a"
            raise TypeError(f"groups holds labels that cannot be sorted together ({e}); give every group a label "
                            "of one kind, e.g. all strings: groups.astype(str).") from None
        order = np.argsort(gid, kind="stable")
        o = _backend.get_array_module(X).asarray(order)
        X, y = X[o], y[o]
        self.n_features_in_ = X.shape[1]
        D = self._design(X, self.fit_intercept)
        K = D.shape[1]
        if self.covariance == "diag":
            nu0 = float(3.0 if self.nu0 is None else self.nu0)
        else:
            nu0 = float(K + 2 if self.nu0 is None else self.nu0)
            if nu0 <= K - 1:
                raise ValueError(f"nu0 must exceed K - 1 = {K - 1}, got {nu0}.")
        hyper = HyperPrior(float(self.kappa0), nu0, float(self.psi0), self.covariance)
        design = [D]
        del X, D  # (see _sample)
        self.trace_ = self._sample(design, y, shards, 1.0, gid[order].astype(np.int64), hyper)
        self.beta_draws_ = self._fitted(self.trace_.draws["beta"])              # (chain, draw, G, K')
        self.coef_ = self.beta_draws_.mean(axis=(0, 1))
        self.intercept_ = self.coef_[:, 0].copy() if self.fit_intercept else np.zeros(len(self.groups_))
        return self

    def _group_ids(self, groups, n):
        """Each row's index into ``groups_`` (labels seen at fit; ``None`` where fit saw one group)."""
        G = len(self.groups_)
        if groups is None:
            if G != 1:
                raise ValueError(f"groups is None but the model was fitted on {G} groups; pass one group label "
                                 "per row of X.")
            return np.zeros(n, np.int64)
        groups = _labels_per_row(groups, n)
        gid = np.minimum(np.searchsorted(self.groups_, groups), G - 1)   # groups_ is sorted (np.unique)
        unseen = self.groups_[gid] != groups
        if unseen.any():
            i = int(np.argmax(unseen))
            raise ValueError(f"groups holds the label {groups[i]!r} (row {i}), not seen at fit; predict for the "
                             "groups the model was fitted on.")
        return gid

    def predict_mean(self, X, groups=None, max_draws=1000):
        """The posterior predictive mean E[y | X] on the host, each row under the draws of its group's
        coefficients (``groups`` as at fit, one label per row; ``None`` where fit saw one group);
        ``max_draws`` as for :meth:`BayesianGLM.predict_mean`."""
        _check_max_draws(max_draws)
        X = self._host_X(X, "beta_draws_")
        gid = self._group_ids(groups, X.shape[0])
        D = self._design(X, self._at_fit("fit_intercept"))
        b = _thin(self.beta_draws_.reshape((-1,) + self.beta_draws_.shape[2:]), max_draws)     # (draw, G, K')

        def eta_of(s, e):
            eta, gb = np.empty((b.shape[0], e - s)), gid[s:e]
            for g in np.unique(gb):
                rows = gb == g
                eta[:, rows] = b[:, g, :] @ D[s:e][rows].T
            return eta
        return _predictive_mean(b.shape[0], X.shape[0], eta_of, self.family_)

    @_available_if(_GLMBase._is_classifier)
    def predict_proba(self, X, groups=None, max_draws=1000):
        """(n, 2) class probabilities from the posterior predictive, each row under its group's draws
        (``groups`` as for :meth:`predict_mean`). Only for ``family="bernoulli"``: for the other families
        the attribute does not exist (``hasattr`` is False)."""
        p = self.predict_mean(X, groups, max_draws)
        return np.stack([1 - p, p], axis=1)

    def predict(self, X, groups=None, max_draws=1000):
        """Class labels (bernoulli, threshold 0.5) or the posterior predictive mean; ``groups`` as for
        :meth:`predict_mean`."""
        return self._labels(self.predict_mean(X, groups, max_draws))

    def score(self, X, y, groups=None, sample_weight=None, max_draws=1000):
        """Accuracy (bernoulli) or R^2 of the posterior predictive mean, as :meth:`BayesianGLM.score`;
        ``groups`` as for :meth:`predict_mean`."""
        self._check_fitted("beta_draws_")
        _check_max_draws(max_draws)
        return self._family_score(y, sample_weight, lambda: self.predict_mean(X, groups, max_draws))

    def to_arviz(self, feature_names=None):
        """ArviZ InferenceData: ``beta`` (chain, draw, G, K), ``mu`` (chain, draw, K), and ``Sigma``
        (chain, draw, K, K) or, for ``covariance="diag"``, ``tau`` (chain, draw, K). The coefficients are
        labelled ``"intercept"`` (first, when ``fit_intercept``) and then by ``feature_names``, else by
        ``feature_names_in_`` (a DataFrame's columns), else ``"x0"``, ``"x1"``, ... (the labels were 0..K-1,
        the intercept 0, before this release)."""
        self._check_fitted("beta_draws_")
        d = self.trace_.draws
        names = self._coef_names(None if feature_names is None else list(feature_names))
        coords = {"group": list(self.groups_), "coef": names}
        post = {"beta": d["beta"], "mu": d["mu"]}
        dims = {"beta": ["group", "coef"], "mu": ["coef"]}
        if "tau" in d:
            post["tau"] = d["tau"]
            dims["tau"] = ["coef"]
        else:
            post["Sigma"] = d["Sigma"]
            dims["Sigma"] = ["coef", "coef2"]
            coords["coef2"] = names
        return to_arviz(post, self.trace_.stats, coords=coords, dims=dims)
