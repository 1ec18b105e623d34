"""The RBM's scikit-learn face: :class:`RBM`, made from weights or trained by ``fit``, and the digits it is
shown on."""

from __future__ import annotations

import functools
import time
import warnings

import numpy as np

from ... import _validate
from ... import backend as _backend
from ..._config import config
from ...random._generator import default_rng
from ...sampling._estimator import (Estimator, Integral, Interval, NotFittedError, Real, StrOptions, as_data,
                                    atomic_fit, mixin)
from .algorithm import (_BlockGibbs, _check_unit, _flipped, _free_energy, _pseudo_likelihood,
                        _pseudo_likelihood_rows, _sigmoid, pcd_epoch_step, pcd_init)
from .ops import _use_fused_pcd


class RBM(mixin("ClassNamePrefixFeaturesOutMixin"), mixin("TransformerMixin"), _BlockGibbs, Estimator):
    """A Bernoulli-Bernoulli restricted Boltzmann machine.

    Made from weights (to sample from them), or from training settings and trained by :meth:`fit` on binary
    rows or probabilities in [0, 1] (persistent contrastive divergence). Every argument is a parameter (``get_params``,
    ``sklearn.base.clone``). As a drop-in for scikit-learn's ``BernoulliRBM`` it has :meth:`transform` (the
    hidden probabilities, to feed a classifier in a ``Pipeline``), ``fit_transform``, :meth:`score_samples`
    and :meth:`gibbs`.

    Parameters
    ----------
    W : array (n_visible, n_hidden), optional
        Weights (the transpose of scikit-learn's ``components_``). :meth:`fit` writes the trained weights and
        biases here, so a fitted RBM samples from them and ``get_params`` returns them (``clone`` copies a
        trained model); ``components_``, ``intercept_visible_`` and ``intercept_hidden_`` give them under
        ``BernoulliRBM``'s names.
    visible_bias : array (n_visible,), optional
    hidden_bias : array (n_hidden,), optional
    dtype : float32 or float64
        Arithmetic of the products and the draws.
    backend : {"numpy", "cupy", None}
    n_hidden : int, optional
        Hidden units to train (``W.shape[1]`` when W is given).
    learning_rate, batch_size, n_iter, random_state, progress, fused
        The training settings of :meth:`fit`.

    Examples
    --------
    >>> import numpy as np
    >>> from gpumcmc.models import RBM
    >>> rbm = RBM(np.zeros((6, 3)), np.zeros(6), np.zeros(3), backend="numpy")
    >>> rbm.sample(n_chains=5, n_steps=10, random_state=0).shape
    (5, 6)
    >>> X = (np.random.default_rng(0).random((40, 8)) < 0.3).astype(np.uint8)
    >>> RBM(n_hidden=4, n_iter=2, random_state=0, backend="numpy", progress=False).fit(X).W.shape
    (8, 4)
    >>> RBM(n_hidden=4, n_iter=2, random_state=0, backend="numpy", progress=False).fit_transform(X).shape
    (40, 4)
    """

    _parameter_constraints = {
        "W": "no_validation",
        "visible_bias": "no_validation",
        "hidden_bias": "no_validation",
        "dtype": "no_validation",
        "backend": [None, StrOptions({"numpy", "cupy"})],
        "n_hidden": [None, Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "n_iter": [Interval(Integral, 0, None, closed="left")],
        "random_state": "no_validation",
        "progress": ["boolean"],
        "fused": [None, "boolean"],
    }

    def __init__(self, W=None, visible_bias=None, hidden_bias=None, dtype=np.float32, backend=None, *,
                 n_hidden=None, learning_rate=0.1, batch_size=10, n_iter=10, random_state=None, progress=True,
                 fused=None):
        # Settings are kept as given (scikit-learn's convention) and checked by fit; the weights, when given,
        # are the model itself and are checked here.
        self.dtype, self.backend, self.learning_rate, self.batch_size = dtype, backend, learning_rate, batch_size
        self.n_iter, self.random_state, self.progress, self.fused = n_iter, random_state, progress, fused
        if W is None:
            if visible_bias is not None or hidden_bias is not None:
                raise ValueError("visible_bias and hidden_bias come with W; pass all three, or none and fit(X).")
            self.W = self.visible_bias = self.hidden_bias = None
            self.n_hidden = n_hidden
            return
        dtype = _validate.check_float_dtype(dtype)
        if visible_bias is None or hidden_bias is None:
            raise ValueError("W comes with visible_bias and hidden_bias; pass all three (zeros for no biases).")
        xp = _backend.get_backend(backend)
        # arrays already of this backend and dtype are kept as they are (what sklearn.base.clone checks)
        W, b, c = (a if a.dtype == dtype else a.astype(dtype)
                   for a in (_backend.asarray(v, xp) for v in (W, visible_bias, hidden_bias)))
        if W.ndim != 2:
            raise ValueError(f"W must be 2-d (n_visible, n_hidden), got shape {W.shape}.")
        if b.shape != (W.shape[0],) or c.shape != (W.shape[1],):
            raise ValueError(f"W is {W.shape}, so visible_bias must have shape ({W.shape[0]},) and hidden_bias "
                             f"({W.shape[1]},); got {b.shape} and {c.shape}. scikit-learn's components_ is W.T.")
        if n_hidden is not None and n_hidden != W.shape[1]:
            raise ValueError(f"n_hidden is {n_hidden} but W has {W.shape[1]} columns; leave n_hidden out with W.")
        for name, a in (("W", W), ("visible_bias", b), ("hidden_bias", c)):
            if not bool(xp.isfinite(a).all()):  # synchronize! (once, at construction)
                raise ValueError(f"{name} contains NaN or inf; every value must be finite.")
        # contiguous, as the kernels read them by their addresses (a strided bias would be read as another)
        self.W, self.visible_bias, self.hidden_bias = (xp.ascontiguousarray(a) for a in (W, b, c))
        self.n_hidden = W.shape[1] if n_hidden is None else n_hidden

    def _dtype(self) -> np.dtype:
        return _validate.check_float_dtype(self.dtype)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True  # X holds 0/1 values or probabilities
        tags.transformer_tags.preserves_dtype = []  # transform's output has the dtype parameter's precision
        return tags

    def _expected_failed_checks(self):
        why = ("X must hold 0/1 values or probabilities in [0, 1] (a ValueError names the first value outside): "
               "the check fits on values outside that range, which scikit-learn's BernoulliRBM takes without a "
               "word.")
        out = dict.fromkeys(_RANGE_CHECKS, why)
        out["check_do_not_raise_errors_in_init_or_set_params"] = (
            "W, visible_bias and hidden_bias are the model itself, not settings: given to the constructor, they "
            "are checked there (with dtype, which they are stored in), and the check passes values that are no "
            "weights.")
        return out

    @property
    def n_visible(self) -> int:
        return self._weights().shape[0]

    def __sklearn_is_fitted__(self) -> bool:
        return self.W is not None  # fitted, or made with its weights (from_sklearn)

    def _weights(self):
        if self.W is None:
            raise NotFittedError("This RBM has no weights yet; call fit(X), or make it with W, visible_bias and "
                                 "hidden_bias.")
        return self.W

    def _xp(self):
        return _backend.get_array_module(self._weights())

    # scikit-learn's BernoulliRBM names, for code written against it (arrays of the model's backend)
    @property
    def components_(self):
        """``W.T`` (n_hidden, n_visible), as scikit-learn's ``BernoulliRBM.components_``."""
        return self._weights().T

    @property
    def intercept_visible_(self):
        """``visible_bias``, as scikit-learn's ``BernoulliRBM.intercept_visible_``."""
        self._weights()
        return self.visible_bias

    @property
    def intercept_hidden_(self):
        """``hidden_bias``, as scikit-learn's ``BernoulliRBM.intercept_hidden_``."""
        self._weights()
        return self.hidden_bias

    def sample(self, n_chains: int, n_steps: int, random_state=None, initial=None, progress: bool | None = None):
        """Final visible states of ``n_chains`` chains after ``n_steps`` block-Gibbs steps: 0/1 uint8
        (n_chains, n_visible) on the model's backend. ``random_state`` seeds this call (an int, a
        ``SeedSequence``, a NumPy or gpumcmc ``Generator``, or None); ``initial``: the chains' 0/1 visible
        start, ``(n_visible,)`` or ``(n_chains, n_visible)`` (None: uniform at random); ``progress``: a bar
        over the steps (None: the model's ``progress`` setting, on by default, as ``Ising.sample``'s)."""
        from ...sampling import run

        n_steps = _validate.check_int(n_steps, "n_steps", 0)
        xp = self._xp()
        rng = default_rng(random_state, backend="numpy" if xp is np else "cupy")
        progress = self.progress if progress is None else progress
        trace = run(self.step, self.init(n_chains, rng, initial), rng, n_steps, progress=progress, desc="RBM",
                    n_chains=n_chains)
        return trace.state.v.astype(xp.uint8)

    def free_energy(self, v):
        """``F(v) = -v.b - sum_j log(1 + exp(c_j + v W_j))``, per row of ``v`` (2-d, one column per visible
        unit, finite)."""
        xp, v = self._xp(), self._rows(v, "v")
        return _free_energy(xp, v, self.W, self.visible_bias, self.hidden_bias)

    def pseudo_likelihood(self, X, random_state=0):
        """The mean of :meth:`score_samples` (two models scored with one seed see the same flips)."""
        self._check_feature_names(X)
        xp, X = self._xp(), self._rows(X)
        _check_unit(X, "X")
        X, Xf = _flipped(X, random_state, xp, self._dtype())
        return _pseudo_likelihood(xp, X, Xf, self.W, self.visible_bias, self.hidden_bias)

    def _rows(self, X, name="X"):
        """``X`` on the model's backend and dtype, with one column per visible unit."""
        v = as_data(X, self._xp(), dtype=self._dtype(), name=name)
        if v.shape[1] != self.n_visible:
            raise ValueError(f"{name} has {v.shape[1]} features, but the RBM has {self.n_visible} visible units; "
                             "pass rows of the width it was fitted on.")
        return v

    def transform(self, X):
        """``P(h_j = 1 | v)`` for each row ``v`` of ``X`` (values in [0, 1]): (n_samples, n_hidden) on the host,
        as scikit-learn's ``BernoulliRBM.transform``."""
        xp = self._xp()
        self._check_feature_names(X)
        return _backend.to_host(_sigmoid(xp, self._rows(X) @ self.W + self.hidden_bias))

    @atomic_fit
    def fit_transform(self, X, y=None):
        """:meth:`fit` on ``X``, then :meth:`transform` of ``X`` (here too, for use without scikit-learn)."""
        return self.fit(X).transform(X)

    @property
    def _n_features_out(self):
        """The width of :meth:`transform`'s output (names from ``get_feature_names_out``)."""
        return self._weights().shape[1]

    def score_samples(self, X, random_state=0):
        """The log pseudo-likelihood of each row of ``X`` (n_samples,) on the host, as scikit-learn's
        ``BernoulliRBM.score_samples``: ``n_visible * log sigmoid(F(v~) - F(v))`` with one feature of each
        row flipped at random (``RandomState(random_state)`` picks which; a value x becomes 1 - x)."""
        self._check_feature_names(X)
        xp, X = self._xp(), self._rows(X)
        _check_unit(X, "X")
        X, Xf = _flipped(X, random_state, xp, self._dtype())
        return _backend.to_host(_pseudo_likelihood_rows(xp, X, Xf, self.W, self.visible_bias, self.hidden_bias))

    def gibbs(self, v, random_state=None):
        """One block-Gibbs step from each binary row of ``v``: ``sample(len(v), 1, random_state, v)``."""
        self._check_feature_names(v)
        v = self._rows(v, "v")
        return self.sample(v.shape[0], 1, random_state=random_state, initial=v, progress=False)

    def log_prob_visible_unnormalised(self, v):
        """``-F(v)``: the log of the unnormalised marginal of the visible units."""
        return -self.free_energy(v)

    @atomic_fit
    def _fit(self, X, y=None) -> "RBM":
        """Train on rows ``X`` (0/1, or probabilities in [0, 1] as for ``BernoulliRBM``) by persistent
        contrastive divergence and return the model.

        scikit-learn's ``BernoulliRBM`` schedule: weights from N(0, 0.01^2), biases 0; ``batch_size``
        persistent chains take one block-Gibbs step per minibatch; the gradient uses the hidden
        probabilities of the data and of the chains; ``n_iter`` epochs (iterations of
        :func:`gpumcmc.sampling.run`) at ``learning_rate``. ``random_state`` (an int, a ``SeedSequence``, a
        gpumcmc ``Generator`` or None) seeds each call. Sets ``fit_seconds_`` and ``pseudo_likelihood_``
        (the learning curve: after each epoch, on ``config.rbm_progress_rows`` evenly spaced rows of ``X``, the
        same flips every epoch; the progress bar shows it).

        On a GPU, a model whose weights and chains fit in one block's shared memory (``fused=None``
        decides) runs each epoch as one launch, with the same random words and arithmetic up to the order
        of the sums. ``RBM.fit(X, n_hidden, ...)`` on the class still works and warns: it is
        ``RBM(n_hidden=n_hidden, ...).fit(X)``.
        """
        from ...sampling import Monitor, as_data, run

        n_hidden, learning_rate, batch_size, n_iter = self.n_hidden, self.learning_rate, self.batch_size, self.n_iter

        def own_checks():
            for name, v, low in (("n_hidden", n_hidden, 1), ("batch_size", batch_size, 1), ("n_iter", n_iter, 0)):
                if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
                    raise ValueError(f"{name} must be an integer >= {low}, got {v!r}.")
            if not (isinstance(learning_rate, (int, float, np.number)) and learning_rate > 0
                    and np.isfinite(learning_rate)):  # inf passes > 0 and makes every weight NaN
                raise ValueError(f"learning_rate must be a finite number > 0, got {learning_rate!r}.")

        self._validate_settings(own_checks)
        dtype, progress, xp = self._dtype(), self.progress, _backend.get_backend(self.backend)
        self._note_feature_names(X)
        X = as_data(X, xp, dtype=dtype, name="X")
        _check_unit(X, "X")
        rng = default_rng(self.random_state, backend="numpy" if xp is np else "cupy")
        state, n = pcd_init(rng, X.shape[1], n_hidden, batch_size, dtype), X.shape[0]
        # scikit-learn's minibatches: gen_even_slices(n_batches * batch_size, n_batches, n_samples=n), that is
        # whole batches of batch_size rows and a last one of what is left
        edges = np.minimum(np.arange(int(np.ceil(n / batch_size)) + 1) * batch_size, n)
        step = pcd_epoch_step(X, edges, learning_rate, batch_size, n_hidden,
                              _use_fused_pcd(self.fused, xp, X.shape[1], n_hidden, batch_size, dtype))
        # the learning curve (and the bar's figure), with or without the bar: a fixed, evenly spaced set of
        # rows, flipped once, scored after each epoch (a few hundred rows: small beside an epoch). Each score
        # stays on the device; only the bar reads them as they come, else they are read once at the end.
        rows = np.linspace(0, n - 1, min(n, config.rbm_progress_rows)).astype(int)
        score, curve = _flipped(_backend.to_host(X)[rows], 0, xp, dtype), []

        def scored(rng_, s):
            s, info = step(rng_, s)
            curve.append(_pseudo_likelihood_rows(xp, *score, s.W, s.b, s.c).mean())
            return s, info
        monitors = [Monitor("pseudo-likelihood", lambda s: float(_backend.to_host(curve[-1])), every=1)] \
            if progress else []
        t0 = time.perf_counter()
        run(scored, state, rng, n_iter, monitors=monitors, progress=progress, desc="RBM PCD", n_chains=batch_size)
        if xp is not np:
            xp.cuda.get_current_stream().synchronize()
        self.W, self.visible_bias, self.hidden_bias = xp.ascontiguousarray(state.W), state.b, state.c
        self.n_features_in_ = X.shape[1]
        self.h_samples_ = _backend.to_host(state.h_chain)  # the persistent chains' hidden units, as scikit-learn's
        self.fit_seconds_ = time.perf_counter() - t0
        self.pseudo_likelihood_ = _backend.to_host(xp.stack(curve)).tolist() if curve else []
        return self

    @classmethod
    def _fit_new(cls, X, n_hidden, learning_rate=0.1, batch_size=10, n_iter=10, random_state=None,
                 dtype=np.float32, backend=None, progress=True, fused=None) -> "RBM":
        """The deprecated ``RBM.fit(X, n_hidden, ...)`` on the class: ``RBM(n_hidden=n_hidden, ...).fit(X)``."""
        warnings.warn("RBM.fit(X, n_hidden, ...) on the class is deprecated: use RBM(n_hidden=n_hidden, ...).fit(X), "
                      "which trains that model and returns it.", DeprecationWarning, stacklevel=3)
        return cls(dtype=dtype, backend=backend, n_hidden=n_hidden, learning_rate=learning_rate,
                   batch_size=batch_size, n_iter=n_iter, random_state=random_state, progress=progress,
                   fused=fused)._fit(X)

    @classmethod
    def from_sklearn(cls, estimator, dtype=np.float64, backend=None) -> "RBM":
        """The :class:`RBM` of a fitted scikit-learn ``BernoulliRBM`` (for scoring both with one function)."""
        return cls(estimator.components_.T, estimator.intercept_visible_, estimator.intercept_hidden_, dtype=dtype,
                   backend=backend)


# scikit-learn's checks that fit or transform on values outside [0, 1] (see RBM._expected_failed_checks)
_RANGE_CHECKS = (
    "check_estimators_overwrite_params", "check_dont_overwrite_parameters", "check_estimators_fit_returns_self",
    "check_readonly_memmap_input", "check_n_features_in_after_fitting", "check_estimators_dtypes",
    "check_pipeline_consistency", "check_estimators_pickle", "check_f_contiguous_array_estimator",
    "check_transformer_data_not_an_array", "check_transformer_general", "check_methods_sample_order_invariance",
    "check_methods_subset_invariance", "check_fit2d_1sample", "check_fit2d_1feature", "check_dict_unchanged",
    "check_fit_idempotent", "check_fit_check_is_fitted", "check_n_features_in", "check_fit2d_predict1d",
)


class _FitMethod:
    # rbm.fit(X) trains rbm; RBM.fit(X, n_hidden, ...) on the class (deprecated) trains a new one. Read on the
    # class (help(RBM), the docs, inspect.signature, RBM.fit(rbm, X)) it is the instance method, as anywhere.
    __doc__ = RBM._fit.__doc__

    def __get__(self, obj, cls=None):
        if obj is not None:
            return obj._fit

        @functools.wraps(cls._fit)
        def fit(*args, **kwargs):
            if args and isinstance(args[0], cls):
                return args[0]._fit(*args[1:], **kwargs)
            return cls._fit_new(*args, **kwargs)

        fit.__name__ = fit.__qualname__ = "fit"
        return fit


RBM.fit = _FitMethod()


def load_binary_digits():
    """scikit-learn's bundled 8 x 8 digits, binarised at half intensity: (1797, 64) uint8."""
    from sklearn.datasets import load_digits

    return (load_digits().data > 8).astype(np.uint8)
