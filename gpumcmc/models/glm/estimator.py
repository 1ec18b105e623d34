"""The Bayesian GLMs' scikit-learn face: :class:`BayesianGLM` and :class:`HierarchicalGLM`.

Each checks its settings and data, builds the sampler's state
(:func:`.algorithm.init`, or for ``devices=`` :mod:`.sharded`'s algorithms through
:func:`gpumcmc.sampling.sharded`) and runs it
through :func:`gpumcmc.sampling.run`, which keeps the draws; the fitted
estimator predicts from them.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _validate
from ... import backend as _backend
from ...glm import check_family, check_y, mean_function
from ...sampling import Estimator, as_data, run, sharded, to_arviz
from ...sampling._estimator import HAVE_SKLEARN, Integral, Interval, Real, StrOptions
from .algorithm import HyperPrior, init, step
from .ops import _PMAX
from .sharded import group_parts, over_groups, over_rows, row_parts

__all__ = ["BayesianGLM", "HierarchicalGLM"]


def _check_xy(X, y, family, xp, dtype):
    if y is None:
        raise ValueError("This estimator requires y to be passed, but the target y is None; pass one target "
                         "per row of X.")
    if getattr(y, "ndim", None) == 2 and y.shape[1] == 1:  # a column vector, as scikit-learn takes it
        import warnings

        from ...sampling._estimator import DataConversionWarning

        warnings.warn("A column-vector y was passed when a 1d array was expected; y is raveled to shape "
                      "(n_samples,). Pass y.ravel() to avoid this warning.", DataConversionWarning, stacklevel=3)
        y = y[:, 0]
    X = as_data(X, xp, dtype, "X")
    y = as_data(y, xp, dtype, "y", ndim=1, finite=False)
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]} values; pass one y per row of X.")
    check_y(y, family, xp)
    return X, y


def _positive_float(value, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a positive number, got {value!r}.") from None
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}.")
    return v


def _available_if(check):
    """``sklearn.utils.metaestimators.available_if`` where scikit-learn imports, else the same idea: the
    method exists on an instance only where ``check(instance)`` holds (or raises AttributeError itself)."""
    try:
        from sklearn.utils.metaestimators import available_if
    except ImportError:
        available_if = None
    if available_if is not None:
        return available_if(check)

    class _Descriptor:
        def __init__(self, fn):
            self.fn = fn
            self.__doc__ = fn.__doc__

        def __get__(self, obj, owner=None):
            if obj is None:
                return self.fn
            if not check(obj):
                raise AttributeError(f"This {type(obj).__name__} has no attribute {self.fn.__name__!r}.")
            return self.fn.__get__(obj, owner)

    return _Descriptor


def _hidden(constraint):
    """scikit-learn's ``Hidden`` (valid, not named in messages) where it imports."""
    if not HAVE_SKLEARN:
        return constraint
    from sklearn.utils._param_validation import Hidden

    return Hidden(constraint)


# The settings both estimators share, checked by scikit-learn at fit where it imports (_check_settings runs
# without it). random_state (an int, a SeedSequence or a generator), dtype and devices are checked where
# they are resolved.
_SHARED_CONSTRAINTS = {
    "family": [StrOptions({"bernoulli", "poisson", "gaussian"}),
               _hidden(StrOptions({"Bernoulli", "Poisson", "Gaussian"}))],
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
        # One class for the three families, so the estimator type follows the family parameter, as
        # scikit-learn does for estimators whose kind depends on a parameter: bernoulli classifies (labels
        # 0 and 1), poisson and gaussian regress.
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
        if (self.family.lower() if isinstance(self.family, str) else self.family) != "bernoulli":
            return {}
        why = ("family='bernoulli' takes y in {0, 1}, the likelihood's support, and refuses other labels with "
               "a ValueError that names them (it does not encode labels): the check fits on labels other than 0 "
               "and 1 (strings, three classes, a continuous target) and expects them encoded or refused in "
               "scikit-learn's words.")
        return dict.fromkeys(["check_estimators_dtypes", "check_classifier_data_not_an_array",
                              "check_classifiers_classes", "check_classifiers_regression_target",
                              "check_classifier_not_supporting_multiclass", "check_fit2d_1feature"], why)

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

    def _design(self, X):
        xp = _backend.get_array_module(X)
        if self.fit_intercept:
            X = xp.concatenate([xp.ones((X.shape[0], 1), dtype=X.dtype), X], axis=1)
        return X

    def _dtype(self):
        return np.dtype(self.dtype)

    def _run(self, state, data, hyper):
        rng = self._make_rng()
        fam = self.family_
        sig = float(self.sigma)

        def st(r, s):
            return step(r, s, data, fam, sig, self.n_warmup, self.max_steps_out, self.max_shrink, hyper)

        return run(st, state, rng, self.n_samples, burn_in=self.n_warmup, collect=self._collector(hyper),
                   progress=self.progress, desc=type(self).__name__, graph=self._use_graph(data))

    @staticmethod
    def _collector(hyper):
        """What the run driver keeps of each draw: beta, and mu with Sigma (or tau) for the hierarchy."""
        diag = hyper is not None and len(hyper) > 3 and hyper[3] == "diag"

        def collect(s, info):
            out = {"beta": s.beta}
            if hyper is not None:
                out["mu"] = s.mu
                if diag:
                    xp = _backend.get_array_module(s.sigma)
                    out["tau"] = xp.sqrt(xp.diagonal(s.sigma, axis1=1, axis2=2))
                else:
                    out["Sigma"] = s.sigma
            return out

        return collect

    def _use_graph(self, data):
        """Replay the sweep from a CUDA graph: on the GPU unless ``graph=False`` (by default not for
        ``max_steps_out >= _PMAX``, whose sweep is one launch per coordinate already)."""
        g = getattr(self, "graph", None)
        if data.plan is None:  # NumPy
            return False
        if g is None:
            return self.max_steps_out < _PMAX
        return bool(g)


class BayesianGLM(_GLMBase):
    _parameter_constraints = {**_SHARED_CONSTRAINTS, "prior_scale": [Interval(Real, 0, None, closed="neither")]}

    """Bayesian GLM with ``beta ~ N(0, prior_scale^2 I)``, sampled by slice-within-Gibbs.

    Parameters
    ----------
    family : {"bernoulli", "poisson", "gaussian"}
    prior_scale : float
        Prior standard deviation of every coefficient (and the intercept).
    n_chains, n_samples, n_warmup : int
        Chains run together; kept draws per chain; warm-up sweeps (step widths
        tuned, draws discarded).
    sigma : float
        Known noise standard deviation of the gaussian family.
    fit_intercept : bool
        Add a column of ones; its coefficient is ``intercept`` in the results.
    max_steps_out, max_shrink : int
        The fixed bounds of the stepping-out and shrinkage rounds.
    graph : bool or None
        On the GPU, capture one sweep as a CUDA graph and replay it
        (:func:`gpumcmc.sampling.graph_step`): one launch per sweep instead
        of about 2 K kernel launches and the Python around them, for the same
        draws bit for bit. ``None`` (the default): on the GPU, yes. The graph
        keeps a second copy of the state (``eta`` is chains x rows).
    devices : None, "all", int, list of int, or gpumcmc.shards.Shards
        Split the rows over devices (:func:`gpumcmc.models.glm.over_rows`): each keeps
        ``eta`` of its rows and moves it by the differential update; the
        slice sampler's log-density evaluations are all-reduced, so every
        device takes the same decisions. ``Shards(n_virtual=k)`` splits on
        NumPy, :func:`gpumcmc.shards.one_device` on one GPU. With one shard
        the draws equal those of ``devices=None`` for the same seed; with
        several, up to the order of the sums over rows (a chain can take
        another step where a candidate lies within rounding of the slice
        level). X and y are checked on the host and copied part by part to
        the devices.
    random_state, progress, backend, dtype : as everywhere in gpumcmc.
    """

    def __init__(self, family="bernoulli", prior_scale=2.5, n_chains=4, n_samples=1000, n_warmup=500,
                 sigma=1.0, fit_intercept=True, max_steps_out=4, max_shrink=24, random_state=None,
                 progress=True, backend=None, dtype="float64", graph=None, devices=None):
        self.family = family
        self.prior_scale = prior_scale
        self.n_chains = n_chains
        self.n_samples = n_samples
        self.n_warmup = n_warmup
        self.sigma = sigma
        self.fit_intercept = fit_intercept
        self.max_steps_out = max_steps_out
        self.max_shrink = max_shrink
        self.random_state = random_state
        self.progress = progress
        self.backend = backend
        self.dtype = dtype
        self.graph = graph
        self.devices = devices

    def _check_flat_settings(self):
        self._check_settings()
        _positive_float(self.prior_scale, "prior_scale")

    def fit(self, X, y):
        self._validate_settings(self._check_flat_settings)
        if self.devices is not None:
            self.trace_ = self._fit_sharded(X, y)
        else:
            xp = self._xp()
            X, y = _check_xy(X, y, self.family_, xp, self._dtype())
            self.n_features_in_ = X.shape[1]
            D = self._design(X)
            state, data = init(D, y, self.family_, self.n_chains, float(self.prior_scale))
            self.trace_ = self._run(state, data, None)
        b = self.trace_.draws["beta"][:, :, 0, :]                    # (chain, draw, K')
        self.coef_draws_ = b
        if self.family_ == "bernoulli":
            self.classes_ = np.array([0, 1])  # y's support, as predict returns it
        else:
            self.__dict__.pop("classes_", None)  # from an earlier bernoulli fit
        if self.fit_intercept:
            self.intercept_ = float(b[..., 0].mean())
            self.coef_ = b[..., 1:].mean(axis=(0, 1))
        else:
            self.intercept_ = 0.0
            self.coef_ = b.mean(axis=(0, 1))
        return self

    def _fit_sharded(self, X, y):
        """The rows split over ``self.devices`` (see :func:`.sharded.over_rows`)."""
        from ...random import default_rng
        from ...shards import resolve

        if self.graph:
            raise ValueError("graph=True needs devices=None: the sweep over several devices is not captured as "
                             "a CUDA graph; leave graph at None or False.")
        shards = resolve(self.devices, self.backend, "the rows")[0]
        X = _backend.to_host(X) if _backend.is_cupy_array(X) else X
        y = _backend.to_host(y) if _backend.is_cupy_array(y) else y
        X, y = _check_xy(X, y, self.family_, np, self._dtype())   # on the host, before the split
        self.n_features_in_ = X.shape[1]
        D = self._design(X)
        parts = row_parts(D, y, shards, self.family_, self.n_chains)
        alg = sharded(over_rows(self.family_, float(self.sigma), self.n_warmup, self.max_steps_out, self.max_shrink),
                      shards)
        with shards.on(0):
            rng = default_rng(self.random_state, backend="numpy" if shards.xp is np else "cupy")
            state = alg.init(rng, parts, self.n_chains, float(self.prior_scale))
            return run(alg.step, state, rng, self.n_samples, burn_in=self.n_warmup,
                       collect=lambda s, info: {"beta": s.beta}, progress=self.progress,
                       desc=type(self).__name__)

    def _draws(self, max_draws=None):
        b = self.coef_draws_.reshape(-1, self.coef_draws_.shape[-1])
        if max_draws is not None and b.shape[0] > max_draws:
            b = b[np.linspace(0, b.shape[0] - 1, max_draws).astype(int)]
        return b

    def predict_mean(self, X, max_draws=1000):
        """The posterior predictive mean E[y | X] (averaged over the draws), on the host."""
        self._check_fitted("coef_draws_")
        X = np.asarray(_backend.to_host(as_data(X, self._xp(), self._dtype(), "X")), dtype=np.float64)
        self._check_n_features(X)
        b = self._draws(max_draws)
        if self.fit_intercept:
            eta = b[:, :1] + b[:, 1:] @ X.T
        else:
            eta = b @ X.T
        return mean_function(eta, self.family_, np).mean(axis=0)

    def _is_classifier(self) -> bool:
        family = getattr(self, "family_", self.family)
        if isinstance(family, str) and family.lower() == "bernoulli":
            return True
        raise AttributeError(f"predict_proba exists only for family='bernoulli' (this model has family={family!r}); "
                             "use predict_mean for the posterior predictive mean.")

    @_available_if(_is_classifier)
    def predict_proba(self, X, max_draws=1000):
        """(n, 2) class probabilities from the posterior predictive. Only for ``family="bernoulli"``:
        for the other families the attribute does not exist (``hasattr`` is False)."""
        p = self.predict_mean(X, max_draws)
        return np.stack([1 - p, p], axis=1)

    def score(self, X, y, sample_weight=None, max_draws=1000):
        """scikit-learn's score for the family: for ``"bernoulli"`` the accuracy of :meth:`predict` (as
        ``ClassifierMixin``), for ``"poisson"`` and ``"gaussian"`` the coefficient of determination R^2 of
        the posterior predictive mean (as ``RegressorMixin``). So ``GridSearchCV`` and
        ``cross_val_score`` rank fits as they rank scikit-learn's own classifiers and regressors."""
        self._check_fitted("coef_draws_")
        return self._family_score(y, sample_weight, lambda: self.predict_mean(X, max_draws))

    def predict(self, X, max_draws=1000):
        """Class labels (bernoulli, threshold 0.5) or the posterior predictive mean."""
        p = self.predict_mean(X, max_draws)
        return (p > 0.5).astype(np.int64) if self.family_ == "bernoulli" else p

    def to_arviz(self, feature_names=None):
        """ArviZ InferenceData: posterior ``beta`` (chain, draw, K), ``intercept``; sample stats."""
        self._check_fitted("coef_draws_")
        b = self.coef_draws_
        post = {"beta": b[..., 1:] if self.fit_intercept else b}
        if self.fit_intercept:
            post["intercept"] = b[..., 0]
        coords = {"feature": list(feature_names) if feature_names is not None else list(range(self.n_features_in_))}
        return to_arviz(post, self.trace_.stats, coords=coords, dims={"beta": ["feature"]})

    def summary(self, **kw):
        """ArviZ's summary table (means, intervals, R-hat, ESS)."""
        import arviz as az
        return az.summary(self.to_arviz(), **kw)


class HierarchicalGLM(_GLMBase):
    _parameter_constraints = {
        **_SHARED_CONSTRAINTS,
        "kappa0": [Interval(Real, 0, None, closed="left")],
        "nu0": [None, Interval(Real, 0, None, closed="neither")],
        "psi0": [Interval(Real, 0, None, closed="left")],
        "covariance": [StrOptions({"full", "diag"})],
    }

    """Hierarchical GLM: each group g has its own coefficients ``beta_g``, drawn around a common mean.

    The model, for groups g = 1..G and coefficients k = 1..K (the intercept
    first when ``fit_intercept``):

    ``covariance="full"`` (the default)::

        beta_g | mu, Sigma ~ N(mu, Sigma)
        mu | Sigma         ~ N(0, Sigma / kappa0)
        Sigma              ~ InvWishart(nu0, psi0 * I)        nu0 = K + 2 by default

    ``covariance="diag"``: the coefficients vary across groups independently,
    each with its own scale ``tau_k``::

        beta_gk | mu_k, tau_k ~ N(mu_k, tau_k^2)
        mu_k | tau_k          ~ N(0, tau_k^2 / kappa0)
        tau_k^2               ~ InvGamma(nu0 / 2, psi0 / 2)    nu0 = 3 by default

    (with ``nu0 = 3`` each ``tau_k^2`` has the same prior as a diagonal entry
    of ``Sigma`` under the full model's default), and ``y`` given ``beta_g``
    follows the GLM of ``family`` within each group.

    All groups' coefficients move at once (conditionally independent given
    ``mu, Sigma``), each by slice-within-Gibbs with the differential update;
    ``mu, Sigma`` are then drawn from their conjugate conditional for all
    chains at once: the inverse-Wishart by the Bartlett decomposition (on
    the GPU one kernel, a block per chain, from the groups' scatter to
    ``mu``, ``Sigma`` and its inverse, with no host round trip), or for
    ``"diag"`` an inverse-gamma per coefficient (from the generator's gamma
    draws) and a normal for ``mu``. The diagonal model has K variances to learn instead of
    K (K + 1) / 2 covariances, so it needs fewer groups and keeps no (K, K)
    matrix per draw. ``fit(X, y, groups)`` takes integer or string group
    labels, one per row (``groups=None``: one group); :meth:`predict`,
    :meth:`predict_mean` and :meth:`score` take labels seen at fit. In
    scikit-learn's ``cross_val_score`` or ``GridSearchCV``, route them with
    ``sklearn.set_config(enable_metadata_routing=True)`` and
    ``set_fit_request(groups=True).set_score_request(groups=True)``.

    Parameters
    ----------
    family : {"bernoulli", "poisson", "gaussian"}
    kappa0, nu0, psi0 : float
        The hyperprior above (``nu0=None``: the default for ``covariance``).
    covariance : {"full", "diag"}
        The groups' covariance: a full ``Sigma`` or ``diag(tau^2)``.
    n_chains, n_samples, n_warmup, sigma, fit_intercept, max_steps_out, max_shrink,
    random_state, progress, backend, dtype, graph : as for :class:`BayesianGLM`.
    devices : None, "all", int, list of int, or gpumcmc.shards.Shards
        Split the groups over devices (:func:`gpumcmc.models.glm.over_groups`):
        each holds whole groups (their rows, coefficients and ``eta``,
        about equal rows per device) and sweeps them with no communication;
        once a sweep, every group's coefficients are all-reduced (``C G K``
        values) for the draw of ``mu, Sigma``. Group g's random numbers are
        the same on any device, so on the GPU the draws equal those of
        ``devices=None`` for the same seed, bit for bit; on NumPy
        (``Shards(n_virtual=k)``), up to the rounding of the sums over a
        group's rows. There must be at least as many groups as devices.
    """

    def __init__(self, family="bernoulli", kappa0=1.0, nu0=None, psi0=1.0, n_chains=4, n_samples=1000,
                 n_warmup=500, sigma=1.0, fit_intercept=True, max_steps_out=4, max_shrink=24,
                 random_state=None, progress=True, backend=None, dtype="float64", covariance="full",
                 graph=None, devices=None):
        self.family = family
        self.kappa0 = kappa0
        self.nu0 = nu0
        self.psi0 = psi0
        self.n_chains = n_chains
        self.n_samples = n_samples
        self.n_warmup = n_warmup
        self.sigma = sigma
        self.fit_intercept = fit_intercept
        self.max_steps_out = max_steps_out
        self.max_shrink = max_shrink
        self.random_state = random_state
        self.progress = progress
        self.backend = backend
        self.dtype = dtype
        self.covariance = covariance
        self.graph = graph
        self.devices = devices

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

    def fit(self, X, y, groups=None):
        """Sample the posterior given ``X``, ``y`` and one group label per row (``groups=None``: all rows in
        one group)."""
        self._validate_settings(self._check_hier_settings)
        shards = None
        if self.devices is not None:
            from ...shards import resolve

            if self.graph:
                raise ValueError("graph=True needs devices=None: the sweep over several devices is not captured "
                                 "as a CUDA graph; leave graph at None or False.")
            shards = resolve(self.devices, self.backend, "the groups")[0]
            xp = np  # X and y are checked on the host, then copied group by group to the devices
            X = _backend.to_host(X) if _backend.is_cupy_array(X) else X
            y = _backend.to_host(y) if _backend.is_cupy_array(y) else y
        else:
            xp = self._xp()
        X, y = _check_xy(X, y, self.family_, xp, self._dtype())
        groups = np.zeros(X.shape[0], np.int64) if groups is None else np.asarray(_backend.to_host(groups))
        if groups.ndim != 1 or groups.shape[0] != X.shape[0]:
            raise ValueError(f"groups must be 1-d with one label per row of X ({X.shape[0]}), "
                             f"got shape {groups.shape}.")
        missing = groups != groups  # NaN (float or object labels): a label that equals nothing
        if groups.dtype == object:
            missing = missing | np.array([g is None for g in groups], dtype=bool)
        if missing.any():
            raise ValueError(f"groups holds a missing label (NaN or None) at row {int(np.argmax(missing))}; give "
                             "every row a group, or drop the rows without one.")
        self.groups_, gid = np.unique(groups, return_inverse=True)
        order = np.argsort(gid, kind="stable")
        o = xp.asarray(order)
        X, y = X[o], y[o]
        self.n_features_in_ = X.shape[1]
        D = self._design(X)
        K = D.shape[1]
        if shards is None:
            state, data = init(D, y, self.family_, self.n_chains, 1.0, xp.asarray(gid[order].astype(np.int64)))
        else:
            parts = group_parts(D, y, gid[order], shards, self.family_, self.n_chains)
            xp = shards.xp
        if self.covariance == "diag":
            nu0 = float(3.0 if self.nu0 is None else self.nu0)
            if not nu0 > 0:
                raise ValueError(f"nu0 must be positive for covariance='diag', got {nu0}.")
            hyper = HyperPrior(float(self.kappa0), nu0, float(self.psi0), "diag")
        else:
            nu0 = float(K + 2 if self.nu0 is None else self.nu0)
            if nu0 <= K - 1:
                raise ValueError(f"nu0 must exceed K - 1 = {K - 1}, got {nu0}.")
            if shards is None:
                hyper = HyperPrior(float(self.kappa0), nu0, xp.eye(K, dtype=np.float64) * float(self.psi0))
            else:
                with shards.on(0):
                    hyper = HyperPrior(float(self.kappa0), nu0, xp.eye(K, dtype=np.float64) * float(self.psi0))
        if shards is None:
            self.trace_ = self._run(state, data, hyper)
        else:
            from ...random import default_rng

            alg = sharded(over_groups(self.family_, float(self.sigma), self.n_warmup, hyper, self.max_steps_out,
                                      self.max_shrink), shards)
            with shards.on(0):
                rng = default_rng(self.random_state, backend="numpy" if xp is np else "cupy")
                state = alg.init(rng, parts, self.n_chains, 1.0)
                self.trace_ = run(alg.step, state, rng, self.n_samples, burn_in=self.n_warmup,
                                  collect=self._collector(hyper), progress=self.progress, desc=type(self).__name__)
        self.beta_draws_ = self.trace_.draws["beta"]              # (chain, draw, G, K')
        if self.family_ == "bernoulli":
            self.classes_ = np.array([0, 1])  # y's support, as predict returns it
        else:
            self.__dict__.pop("classes_", None)  # from an earlier bernoulli fit
        self.coef_ = self.beta_draws_.mean(axis=(0, 1))
        return self

    def _group_ids(self, groups, n):
        """Each row's index into ``groups_`` (labels seen at fit; ``None`` where fit saw one group)."""
        G = len(self.groups_)
        if groups is None:
            if G != 1:
                raise ValueError(f"groups is None but the model was fitted on {G} groups; pass one group label "
                                 "per row of X.")
            return np.zeros(n, np.int64)
        groups = np.asarray(_backend.to_host(groups))
        if groups.ndim != 1 or groups.shape[0] != n:
            raise ValueError(f"groups must be 1-d with one label per row of X ({n}), got shape {groups.shape}.")
        gid = np.minimum(np.searchsorted(self.groups_, groups), G - 1)   # groups_ is sorted (np.unique)
        unseen = self.groups_[gid] != groups
        if unseen.any():
            i = int(np.argmax(unseen))
            raise ValueError(f"groups holds the label {groups[i]!r} (row {i}), not seen at fit; predict for the "
                             "groups the model was fitted on.")
        return gid

    def predict_mean(self, X, groups=None, max_draws=1000):
        """The posterior predictive mean E[y | X] on the host, each row under the draws of its group's
        coefficients (``groups`` as at fit, one label per row; ``None`` where fit saw one group)."""
        self._check_fitted("beta_draws_")
        X = np.asarray(_backend.to_host(as_data(X, self._xp(), self._dtype(), "X")), dtype=np.float64)
        self._check_n_features(X)
        gid = self._group_ids(groups, X.shape[0])
        D = self._design(X)
        b = self.beta_draws_.reshape((-1,) + self.beta_draws_.shape[2:])          # (draw, G, K')
        if b.shape[0] > max_draws:
            b = b[np.linspace(0, b.shape[0] - 1, max_draws).astype(int)]
        eta = np.empty((b.shape[0], X.shape[0]))
        for g in np.unique(gid):
            rows = gid == g
            eta[:, rows] = b[:, g, :] @ D[rows].T
        return mean_function(eta, self.family_, np).mean(axis=0)

    def predict(self, X, groups=None, max_draws=1000):
        """Class labels (bernoulli, threshold 0.5) or the posterior predictive mean; ``groups`` as for
        :meth:`predict_mean`."""
        p = self.predict_mean(X, groups, max_draws)
        return (p > 0.5).astype(np.int64) if self.family_ == "bernoulli" else p

    def score(self, X, y, groups=None, sample_weight=None, max_draws=1000):
        """Accuracy (bernoulli) or R^2 of the posterior predictive mean, as :meth:`BayesianGLM.score`;
        ``groups`` as for :meth:`predict_mean`."""
        self._check_fitted("beta_draws_")
        return self._family_score(y, sample_weight, lambda: self.predict_mean(X, groups, max_draws))

    def to_arviz(self):
        """ArviZ InferenceData: ``beta`` (chain, draw, G, K), ``mu`` (chain, draw, K), and ``Sigma``
        (chain, draw, K, K) or, for ``covariance="diag"``, ``tau`` (chain, draw, K)."""
        self._check_fitted("beta_draws_")
        d = self.trace_.draws
        K = d["beta"].shape[-1]
        coords = {"group": list(self.groups_), "coef": list(range(K))}
        post = {"beta": d["beta"], "mu": d["mu"]}
        dims = {"beta": ["group", "coef"], "mu": ["coef"]}
        if "tau" in d:
            post["tau"] = d["tau"]
            dims["tau"] = ["coef"]
        else:
            post["Sigma"] = d["Sigma"]
            dims["Sigma"] = ["coef", "coef2"]
            coords["coef2"] = list(range(K))
        return to_arviz(post, self.trace_.stats, coords=coords, dims=dims)
