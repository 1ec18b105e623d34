"""The scikit-learn layer shared by every model's estimator.

Where scikit-learn imports, :class:`Estimator` is a subclass of
``sklearn.base.BaseEstimator``: ``get_params``/``set_params``, ``clone``,
``__sklearn_tags__``, the HTML repr and parameter validation through each
estimator's ``_parameter_constraints`` all come from scikit-learn itself, so
``Pipeline``, ``GridSearchCV``, ``cross_val_score`` and ``check_is_fitted``
work with every gpumcmc estimator on current releases. Without scikit-learn a
small shim keeps the same conventions (parameters read from ``__init__``'s
signature and stored unchanged; fitted attributes end in an underscore), so
the library has no hard dependency on it.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import threading
import warnings
from numbers import Integral, Real

import numpy as np

from .. import backend as _backend
from ..random._generator import default_rng
from ._tree import _tree_map

__all__ = ["ConvergenceWarning", "Estimator", "NotFittedError", "all_or_nothing", "as_data", "atomic_fit", "mixin",
           "Interval", "StrOptions", "Integral", "Real"]

try:  # scikit-learn is optional; with it, its own base class, exception and parameter constraints
    from sklearn.base import BaseEstimator as _Base
    from sklearn.exceptions import ConvergenceWarning, DataConversionWarning
    from sklearn.exceptions import NotFittedError as _NotFittedBase
    from sklearn.utils._param_validation import InvalidParameterError, Interval, StrOptions
    HAVE_SKLEARN = True
except ImportError:  # pragma: no cover - exercised where scikit-learn is absent
    HAVE_SKLEARN = False

    class InvalidParameterError(ValueError, TypeError):
        pass

    class DataConversionWarning(UserWarning):
        pass

    class ConvergenceWarning(UserWarning):
        """An iterative fit stopped at its iteration limit: scikit-learn's ``ConvergenceWarning`` where it
        imports."""

    class _Constraint:
        """A stand-in for scikit-learn's constraint objects: stored, never checked (the models' own
        checks run without scikit-learn)."""

        def __init__(self, *args, **kwargs):
            self.args, self.kwargs = args, kwargs

    Interval = StrOptions = _Constraint

    class _NotFittedBase(ValueError, AttributeError):
        pass

    class _Base:
        """The part of ``sklearn.base.BaseEstimator`` gpumcmc relies on, for use without scikit-learn."""

        @classmethod
        def _get_param_names(cls) -> list[str]:
            sig = inspect.signature(cls.__init__)
            names = []
            for p in sig.parameters.values():
                if p.name == "self":
                    continue
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    raise TypeError(f"{cls.__name__}.__init__ must list its parameters explicitly "
                                    "(no *args/**kwargs).")
                names.append(p.name)
            return sorted(names)

        def get_params(self, deep: bool = True) -> dict:
            """The constructor's parameters, as scikit-learn's ``get_params``."""
            return {name: getattr(self, name) for name in self._get_param_names()}

        def set_params(self, **params):
            """Set constructor parameters; unknown names raise ValueError."""
            valid = self._get_param_names()
            for name, value in params.items():
                if name not in valid:
                    raise ValueError(f"{type(self).__name__} has no parameter {name!r}; "
                                     f"valid parameters: {valid}.")
                setattr(self, name, value)
            return self

        def __repr__(self) -> str:
            sig = inspect.signature(type(self).__init__)
            shown = []
            for name in self._get_param_names():
                default = sig.parameters[name].default
                value = getattr(self, name, None)
                try:
                    same = value is default or bool(value == default)
                except Exception:
                    same = False
                if not same:
                    shown.append(f"{name}={value!r}")
            return f"{type(self).__name__}({', '.join(shown)})"


class NotFittedError(_NotFittedBase):
    """An estimator was used before ``fit``: scikit-learn's ``NotFittedError`` where it imports."""


_EMPTY_MIXINS: dict[str, type] = {}


def mixin(name: str):
    """scikit-learn's mixin ``name`` (e.g. ``"TransformerMixin"``), or an empty class without scikit-learn.

    The mixins add only conveniences (``fit_transform``, ``score``, the estimator-type tag), which
    each gpumcmc estimator also defines where it needs them, so nothing is lost without scikit-learn.
    Listed before :class:`Estimator` in a class's bases, as scikit-learn requires; the stand-in is a class
    of its own (not ``object``, which cannot come before another base).
    """
    if not HAVE_SKLEARN:
        return _EMPTY_MIXINS.setdefault(name, type(name, (), {"__module__": __name__}))
    import sklearn.base

    return getattr(sklearn.base, name)


def _string_columns(X) -> list | None:
    """A DataFrame's column names where every one is a string (scikit-learn's feature names), else None."""
    cols = getattr(X, "columns", None)
    names = None if cols is None else list(cols)
    return names if names and all(isinstance(c, str) for c in names) else None


@contextlib.contextmanager
def all_or_nothing(obj):
    """A block that changes ``obj``'s attributes wholly or not at all: where it raises, the attributes are put
    back as they were when it began."""
    before = dict(obj.__dict__)
    try:
        yield
    except BaseException:
        obj.__dict__.clear()
        obj.__dict__.update(before)
        raise


@contextlib.contextmanager
def _this_threads_warnings():
    """Record the warnings this thread gives inside the block; those of other threads go on to be shown as they
    would have been, not recorded (and so not re-issued at this thread's caller's line). The filters stay the
    caller's: entering the block marks every module's registry stale, so a warning shown before is not lost to
    it, and one the caller's filters make an error raises where it is given (the fit then fails as a whole)."""
    me, log = threading.get_ident(), []
    with warnings.catch_warnings():
        shown = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if threading.get_ident() == me:
                log.append(warnings.WarningMessage(message, category, filename, lineno, file, line))
            else:
                shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield log


def atomic_fit(fit):
    """``fit`` as one step for the estimator: where it raises (bad input found late, a ``KeyboardInterrupt``
    in a notebook), the estimator's attributes are put back as they were before the call, so that a model
    fitted before keeps its whole earlier fit (an interrupted refit left new ``n_features_in_`` or priors
    beside the old coefficients, and gave wrong scores without an error).

    Floating-point underflow, which these samplers meet by design (a probability below the smallest float is
    zero), is ignored inside, so ``np.seterr(all="raise")`` set to hunt NaNs does not stop a fit on it. The
    warnings the fit gives are shown at the caller's line (the user's ``fit(...)``), whatever depth they
    come from (in the main thread: recording them swaps process-wide state, which fits in other threads
    would share; other threads' warnings meanwhile are shown where they come from, under their own filters);
    one turned into an error by a warnings filter fails the fit as a whole, as above. An estimator's
    ``_warn_before_fit(*args, **kwargs)`` (the fit's arguments), where it has one, runs first, outside the recording, so that what it warns of (a fit
    about to take long) shows at once."""
    @functools.wraps(fit)
    def fit_all_or_nothing(self, *args, **kwargs):
        record = threading.current_thread() is threading.main_thread()  # see above: main thread only
        early = getattr(self, "_warn_before_fit", None)
        if early is not None:  # warnings a long fit should give as it starts, not when it returns
            early(*args, **kwargs)
        with all_or_nothing(self):
            with _this_threads_warnings() if record else contextlib.nullcontext() as caught:
                try:
                    with np.errstate(under="ignore"):
                        out = fit(self, *args, **kwargs)
                except BaseException as e:
                    failed = e
                else:
                    failed = None
            for w in caught or ():  # at the caller's line; one the caller's filters make an error fails the fit
                try:
                    warnings.warn(w.message, w.category, stacklevel=2)
                except BaseException:
                    if failed is None:
                        raise
            if failed is not None:  # the fit's own error, after the warnings it gave on the way
                raise failed
        return out

    return fit_all_or_nothing


def _holds_device_arrays(value) -> bool:
    found = []
    _tree_map(value, lambda a: found.append(_backend.is_cupy_array(a)) or a)
    return any(found)


def same_array(a, b) -> bool:
    """Whether ``a`` and ``b`` are host arrays of one shape, dtype and values: a fitted attribute that a pickle
    can leave out and make again from another (``__getstate__`` of LDA and BayesianGLM)."""
    return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape and a.dtype == b.dtype
            and np.array_equal(a, b))


def portable_state(state: dict, drop=()) -> dict:
    """An object's ``__dict__`` as a pickle keeps it: CuPy arrays copied to the host (their attributes named in
    ``"_device_attrs"``, to go back to the GPU where the pickle is loaded on one), a run's
    :class:`~gpumcmc.sampling.Trace` without its final sampler ``state`` (the chains' whole position, often
    larger than the data, which no fitted model reads), and the attributes in ``drop`` (caches made again on
    use) left out. A model fitted on a GPU then loads, and predicts, on a machine without one."""
    from ._driver import Trace

    out, moved = {}, []
    for name, value in state.items():
        if name in drop:
            continue
        if isinstance(value, Trace) and value.state is not None:
            value = copy.copy(value)
            value.state = None
        if _holds_device_arrays(value):
            moved.append(name)
            value = _tree_map(value, _backend.to_host)
        out[name] = value
    if moved:
        out["_device_attrs"] = moved
    return out


def restore_devices(obj, moved, who: str) -> None:
    """After loading a :func:`portable_state`: the attributes in ``moved`` back onto the GPU where CuPy and a
    GPU are here. Where they are not, the arrays stay on the host, and an object set to ``backend="cupy"``
    is switched to ``"numpy"`` with a warning, so that it predicts (its next fit runs on NumPy too)."""
    if moved and _backend.cupy_available():
        cp = _backend.get_backend("cupy")
        for name in moved:
            setattr(obj, name, _tree_map(getattr(obj, name), cp.asarray))
    elif getattr(obj, "backend", None) == "cupy" and not _backend.cupy_available():
        warnings.warn(f"This {who} was made with backend='cupy', and CuPy or a GPU is not available here: it "
                      "runs on NumPy (backend='numpy'); set_params(backend='cupy') where a GPU is.",
                      UserWarning, stacklevel=3)
        obj.backend = "numpy"


class Estimator(_Base):
    """Base class: parameters from ``__init__``, a generator from ``random_state`` and ``backend``.

    Pickles (and deep copies) of a fitted estimator keep its arrays on the host and leave out the final
    sampler state of ``trace_`` (see :func:`portable_state`); loaded where a GPU is, the arrays that were on
    it go back."""

    _CACHES: tuple = ()  # attributes made again on use, left out of pickles

    def __getstate__(self):
        getter = getattr(super(), "__getstate__", None)  # scikit-learn's, or object's (Python 3.11 and later)
        return portable_state(getter() if getter is not None else dict(self.__dict__), self._CACHES)

    def __setstate__(self, state):
        state = dict(state)
        moved = state.pop("_device_attrs", ())
        for name in self._CACHES:
            state.setdefault(name, {})
        setter = getattr(super(), "__setstate__", None)  # scikit-learn's (its version check), where it imports
        if setter is not None:
            setter(state)
        else:
            self.__dict__.update(state)
        restore_devices(self, moved, type(self).__name__)

    @classmethod
    def _param_names(cls) -> list[str]:
        return cls._get_param_names()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # as_data densifies SciPy/CuPy sparse input (LDA keeps it sparse), so every estimator takes it.
        tags.input_tags.sparse = True
        return tags

    def _expected_failed_checks(self) -> dict[str, str]:
        """scikit-learn's ``check_estimator`` checks this estimator, as configured, cannot pass, each with
        its reason: pass it as ``check_estimator(est, expected_failed_checks=est._expected_failed_checks())``
        (scikit-learn 1.6 and later)."""
        return {}

    def _validate_settings(self, own_checks=None):
        """Check the constructor's parameters at the start of ``fit``; returns what ``own_checks()`` returns.

        With scikit-learn, its validation of ``_parameter_constraints`` runs first, so a bad value raises
        ``InvalidParameterError`` (a ValueError and a TypeError) with scikit-learn's sentence ("The 'n_chains'
        parameter of BayesianGLM must be ..."); where the model's own ``own_checks()`` also refuses the
        settings, its sentence (what to pass instead) follows. Without scikit-learn only ``own_checks`` run.
        """
        if HAVE_SKLEARN and getattr(self, "_parameter_constraints", None) is not None:
            try:
                self._validate_params()
            except InvalidParameterError as e:
                try:
                    if own_checks is not None:
                        own_checks()
                except (ValueError, TypeError) as own:
                    raise InvalidParameterError(f"{e} {own}") from None
                raise
        return None if own_checks is None else own_checks()

    def _note_feature_names(self, X) -> None:
        """``feature_names_in_`` from a DataFrame's column names, as scikit-learn sets it (only where every
        name is a string); dropped for other input. Called by ``fit`` on the data as given."""
        names = _string_columns(X)
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        else:
            self.__dict__.pop("feature_names_in_", None)

    def _check_feature_names(self, X) -> None:
        """Where ``fit`` saw a DataFrame's names, ``X`` must have the same names in the same order (a
        ValueError, as scikit-learn raises), or no names (a warning); names where fit saw none warn."""
        fitted, names = getattr(self, "feature_names_in_", None), _string_columns(X)
        valid = names is not None
        who = type(self).__name__
        if fitted is None:
            if valid:
                warnings.warn(f"X has feature names, but {who} was fitted without feature names", UserWarning,
                              stacklevel=3)
            return
        if not valid:
            warnings.warn(f"X does not have valid feature names, but {who} was fitted with feature names",
                          UserWarning, stacklevel=3)
            return
        if names != list(fitted):
            unseen = [n for n in names if n not in set(fitted)]
            missing = [n for n in fitted if n not in set(names)]
            raise ValueError("The feature names should match those that were passed during fit."
                             + (f" Feature names unseen at fit time: {unseen}." if unseen else "")
                             + (f" Feature names seen at fit time, yet now missing: {missing}." if missing else "")
                             + ("" if unseen or missing else " The columns are in another order; pass "
                                "X[model.feature_names_in_]."))

    def _feature_coords(self, n: int) -> list:
        """Labels of the n features for ArviZ: ``feature_names_in_`` where fit saw them, else 0..n-1."""
        names = getattr(self, "feature_names_in_", None)
        return list(names) if names is not None and len(names) == n else list(range(n))

    def _check_n_features(self, X, name: str = "X") -> None:
        """A ValueError in scikit-learn's words where ``X`` has not the number of columns ``fit`` saw."""
        n = getattr(self, "n_features_in_", None)
        if n is not None and X.shape[1] != n:
            raise ValueError(f"{name} has {X.shape[1]} features, but {type(self).__name__} is expecting {n} "
                             "features as input; pass data with the columns the model was fitted on.")

    def __sklearn_is_fitted__(self) -> bool:
        return any(k.endswith("_") and not k.startswith("__") for k in vars(self))

    def _make_rng(self):
        """A gpumcmc Generator from ``self.random_state`` on ``self.backend``."""
        return default_rng(getattr(self, "random_state", None), backend=getattr(self, "backend", None))

    def _xp(self):
        """The array module of ``self.backend`` (``None``: the active backend)."""
        return _backend.get_backend(getattr(self, "backend", None))

    def _check_fitted(self, *attributes: str) -> None:
        for a in attributes:
            if not hasattr(self, a):
                raise NotFittedError(f"This {type(self).__name__} is not fitted yet; call fit(...) first.")


def as_data(X, xp, dtype=None, name: str = "X", *, ndim: int | None = 2, allow_sparse: bool = False,
            finite: bool = True):
    """``X`` (NumPy, CuPy, SciPy-sparse, cupyx-sparse or a nested list) on ``xp``, checked once.

    Sparse input becomes dense unless ``allow_sparse``, in which case it is
    returned as a sparse matrix of ``xp``'s kind (``scipy.sparse`` CSR on
    NumPy, ``cupyx.scipy.sparse`` CSR on CuPy). ``finite`` raises ValueError
    for NaN or inf (one reduction, done at fit time, outside any sweep).
    """
    if dtype is not None:
        dtype = np.dtype(dtype)
    sparse = _is_sparse(X)
    if sparse:
        if allow_sparse:
            return _sparse_to(X, xp, dtype)
        X = X.toarray() if not hasattr(X, "get") else X.toarray()
    if X is None:
        raise TypeError(f"{name} is None; pass an array.")
    if getattr(getattr(X, "dtype", None), "kind", None) == "c" or (
            not hasattr(X, "dtype") and isinstance(X, (list, tuple)) and _holds_complex(X)):
        # Checked before any cast: casting complex to float would drop the imaginary part silently.
        raise ValueError(f"Complex data not supported: {name} holds complex numbers; "
                         "pass the real part (or its magnitude) explicitly.")
    try:
        X = _backend.asarray(X, xp, dtype=dtype)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name} must be a numeric array (NumPy, CuPy, SciPy sparse or a list), got "
                        f"{type(X).__name__}: {e}") from None
    if X.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold numbers, got dtype {X.dtype}.")
    if ndim is not None and X.ndim != ndim:
        if ndim == 2 and X.ndim == 1:
            raise ValueError(f"{name} must be 2-d (n_samples, n_features), got shape {X.shape}. "
                             "Reshape your data with X.reshape(-1, 1) for a single feature or "
                             "X.reshape(1, -1) for a single sample.")
        raise ValueError(f"{name} must be {ndim}-d, got shape {X.shape}.")
    if ndim == 2 and 0 in X.shape:
        what = "sample(s)" if X.shape[0] == 0 else "feature(s)"
        raise ValueError(f"{name} has 0 {what} (shape={tuple(X.shape)}) while a minimum of 1 is required; "
                         "pass at least one row and one column.")
    if finite and X.dtype.kind == "f" and X.size and not bool(xp.isfinite(X).all()):  # synchronize! (once, at fit)
        raise ValueError(f"{name} contains NaN or inf; remove or impute those values first.")
    return X


def _holds_complex(X) -> bool:
    try:
        return np.asarray(X).dtype.kind == "c"
    except (TypeError, ValueError):
        return False


def _is_sparse(X) -> bool:
    mod = type(X).__module__
    return (mod.startswith("scipy.sparse") or mod.startswith("cupyx.scipy.sparse")) and hasattr(X, "tocsr")


def _sparse_to(X, xp, dtype):
    if xp is np:
        if type(X).__module__.startswith("cupyx"):
            X = X.get()
        X = X.tocsr()
        return X.astype(dtype) if dtype is not None else X
    import cupyx.scipy.sparse as cps

    if type(X).__module__.startswith("scipy"):
        X = cps.csr_matrix(X.tocsr())
    X = X.tocsr()
    return X.astype(dtype) if dtype is not None else X
