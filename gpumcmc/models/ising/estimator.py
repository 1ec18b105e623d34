"""The Ising model's scikit-learn face: :class:`Ising` (its settings, checked when set, and ``sample``), its
result and :func:`denoise`."""

from __future__ import annotations

import numpy as np

from ... import _validate
from ... import backend as _backend
from ...random._generator import default_rng
from ...sampling._estimator import Estimator
from .algorithm import _CheckerboardGibbs, _pattern_thresholds, _thresholds, _weighted_bond_sum
from .ops import bond_sum


class IsingResult:
    """What :meth:`Ising.sample` returns.

    Attributes: ``magnetization``, ``energy`` (chains, sweeps), per site after each kept sweep; ``states``
    (chains, L, W) int8, the final spins on the model's backend; ``trace`` (:class:`gpumcmc.sampling.Trace`),
    the run's record; ``seconds``.
    """

    def __init__(self, trace, states):
        self.trace, self.states, self.seconds = trace, states, trace.seconds
        self.magnetization, self.energy = trace.draws["magnetization"], trace.draws["energy"]

    def __repr__(self) -> str:
        c, n = self.magnetization.shape
        return f"IsingResult(chains={c}, sweeps={n}, seconds={self.seconds:.3g})"

    def to_arviz(self):
        """Magnetisation and energy per site as an ArviZ ``InferenceData``."""
        return self.trace.to_arviz(sample_stats=False)


_SETTINGS = ("shape", "coupling", "field", "beta", "boundary", "method", "backend")  # what _configure reads


class Ising(_CheckerboardGibbs, Estimator):
    """The 2-D Ising model on an L x W square lattice, sampled by checkerboard heat-bath Gibbs.

    Parameters
    ----------
    shape : (int, int) or (int, int, int)
        Rows and columns of the square lattice, or depth, rows and columns of the cubic one (byte path).
        Periodic boundaries need every side even (the checkerboard must close on itself).
    coupling : float or array (2, L, W)
        J, ferromagnetic when positive; on a 2-D lattice one per bond: ``coupling[0, i, j]`` joins site
        (i, j) to its right neighbour, ``coupling[1, i, j]`` to the one below (ignored past an open edge).
    field : float or array of ``shape``
        h, one number or one per site. Arrays (coupling and field) are copied when set: to change them,
        assign a new array or call ``set_params``; an edit in place afterwards is not seen (nor is the same
        array assigned again after such an edit).
    beta : float
        Inverse temperature, one number (it may change between sweeps: ``set_params(beta=...)`` keeps a
        state made by :meth:`init` usable; shape, boundary and method do not).
    boundary : {"periodic", "open"}
    method : {"auto", "multispin", "byte"}
        ``"auto"``: multispin where it applies (periodic, one field and one coupling, W a multiple of 32),
        else bytes; both give the same states for a seed.
    backend : {"numpy", "cupy", None}

    Notes
    -----
    The settings are checked when set (constructor, ``set_params``); the model keeps no draws, so
    ``sklearn.base.clone`` copies it, and :meth:`sample` seeds each call from its ``random_state``.

    Examples
    --------
    >>> from gpumcmc.models import Ising
    >>> res = Ising((8, 8), beta=0.3, backend="numpy").sample(20, n_chains=2, random_state=0, progress=False)
    >>> res.magnetization.shape, res.energy.shape, res.states.shape
    ((2, 20), (2, 20), (2, 8, 8))
    """

    _CACHES = ("_dev",)  # the thresholds and tables on each device, made again on use

    def __init__(self, shape, coupling=1.0, field=0.0, beta=1.0, boundary="periodic", method="auto",
                 backend=None):
        self.shape, self.coupling, self.field, self.beta = shape, coupling, field, beta
        self.boundary, self.method, self.backend = boundary, method, backend
        self._configure()

    def set_params(self, **params):
        """Set settings (scikit-learn's ``set_params``), checked and applied at once; bad ones change nothing."""
        old = self.get_params(deep=False)
        try:
            super().set_params(**params)  # an unknown name raises after the names before it were set
            self._configure()
        except (TypeError, ValueError):
            super().set_params(**old)
            self._configure()
            raise
        return self

    def _configure(self) -> None:
        """Check the settings and work out the thresholds and the path from them."""
        shape, beta, boundary, method = self.shape, self.beta, self.boundary, self.method
        try:
            dims = tuple(shape)
        except TypeError:
            dims = ()
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in dims):
            raise ValueError(f"shape must hold integers (the number of sites along each side), got {shape!r}.")
        dims = tuple(int(v) for v in dims)
        if len(dims) not in (2, 3):
            raise ValueError(f"shape must be (rows, columns) for a square lattice or (depth, rows, columns) for a "
                             f"cubic one, got {shape!r}.")
        if min(dims) < 2:
            raise ValueError(f"every side must be at least 2, got {dims}.")
        if boundary not in ("periodic", "open"):
            raise ValueError(f"boundary must be 'periodic' or 'open', got {boundary!r}.")
        if boundary == "periodic" and any(v % 2 for v in dims):
            raise ValueError(f"A periodic lattice needs even sides for the two-colour checkerboard, got {dims}; "
                             "use an even size or boundary='open'.")
        if isinstance(beta, (bool, np.bool_)) or not isinstance(beta, (int, float, np.integer, np.floating)):
            raise TypeError(f"beta must be one number, the inverse temperature, got {type(beta).__name__} "
                            f"{beta!r}; for several temperatures, make one model per temperature.")
        if not 0 <= float(beta) < np.inf:
            raise ValueError(f"beta must be a finite number >= 0, got {beta!r}.")
        for name in ("coupling", "field"):
            if np.iscomplexobj(getattr(self, name)):
                raise TypeError(f"{name} must be real, got complex values.")
        # copies: an array edited in place after it was set changes neither the sampler nor the energies
        # (assign it again, or set_params, for the model to take the new values)
        J = np.array(_backend.to_host(self.coupling), dtype=np.float64)
        if J.ndim and (len(dims) != 2 or J.shape != (2, *dims)):
            raise ValueError(f"coupling must be one number, or (2-D lattices) an array of shape (2, L, W) = "
                             f"{(2, *dims[-2:])} holding each site's bond to its right neighbour ([0]) and to the "
                             f"one below ([1]); got shape {J.shape} for a lattice of shape {dims}.")
        if not np.all(np.isfinite(J)):
            raise ValueError("coupling contains NaN or inf; every value must be finite.")
        f = np.array(_backend.to_host(self.field), dtype=np.float64)
        if f.ndim and f.shape != dims:
            raise ValueError(f"field has shape {f.shape} but the lattice is {dims}; pass one number or an "
                             "array of the lattice's shape.")
        if not np.all(np.isfinite(f)):
            raise ValueError("field contains NaN or inf; every value must be finite.")
        if method not in ("auto", "multispin", "byte"):
            raise ValueError(f"method must be 'auto', 'multispin' or 'byte', got {method!r}.")
        multispin_ok = len(dims) == 2 and boundary == "periodic" and f.ndim == 0 and J.ndim == 0 and dims[1] % 32 == 0
        if method == "multispin" and not multispin_ok:
            raise ValueError("method='multispin' needs a 2-D periodic lattice, one field and one coupling "
                             "for every site and a width that is a multiple of 32 (got shape "
                             f"{dims}, boundary {boundary!r}, field {'per site' if f.ndim else 'uniform'}, "
                             f"coupling {'per bond' if J.ndim else 'uniform'}); use method='byte' or 'auto'.")
        # what the sampler reads: the lattice (D, L, W), the path, the thresholds by S + 6, or (couplings
        # per bond) by the pattern of up neighbours, and those of the multispin path by up neighbours n
        # (S = 2n - 4); the caches of device copies and of the twin's site order
        self._shape, self._dims = dims, dims if len(dims) == 3 else (1,) + dims
        self._method = "multispin" if (method == "multispin" or (method == "auto" and multispin_ok)) else "byte"
        self._field, self._J, self._by_pattern = f, J, J.ndim > 0
        self._thr = (_pattern_thresholds(float(beta), J, f, boundary == "periodic") if self._by_pattern
                     else _thresholds(float(beta), float(J), f))
        self._thr5 = np.ascontiguousarray(self._thr[2:11:2]) if self._thr.ndim == 1 else None
        self._dev, self._index = {}, None
        self._configured = tuple(getattr(self, k) for k in _SETTINGS)

    def _fresh(self) -> bool:
        """Work the thresholds and the path out again where a setting was assigned since (``model.beta = 0.5``
        as well as ``set_params``): True where it did. Sampling on would use the old ones silently."""
        if all(getattr(self, k) is v for k, v in zip(_SETTINGS, self._configured)):
            return False
        self._configure()
        return True

    @property
    def n_sites(self) -> int:
        self._fresh()
        return int(np.prod(self._shape))

    @property
    def path(self) -> str:
        """The path in use: ``"multispin"`` or ``"byte"``."""
        self._fresh()
        return self._method

    def sample(self, n_sweeps: int, burn_in: int = 0, n_chains: int = 1, random_state=None, progress: bool = True,
               initial="random", thin: int = 1) -> IsingResult:
        """Run ``burn_in + n_sweeps`` heat-bath sweeps of ``n_chains`` chains.

        Returns an :class:`IsingResult`: each chain's magnetisation and energy per site after each kept
        sweep, ``(chains, n_sweeps // thin)`` (``n_sweeps=0``: empty), the final spins, and ``to_arviz()``.
        ``random_state`` (an int, a ``SeedSequence``, a numpy ``Generator`` or ``RandomState``, a gpumcmc
        ``Generator`` or None) seeds this call. ``initial``: ``"random"`` (each spin +-1 with probability 1/2),
        ``"up"``/``"down"``, or an array of +-1 spins (the lattice's shape, or ``(n_chains, *shape)``).
        ``progress``: a progress bar over the sweeps.

        With one coupling and one field, the kernels count each kept sweep's up spins and bond sum into a
        slot of their own on the device, read once at the end; a field per site or couplings per bond
        need the spins for the energy, computed in a pass of its own after each kept sweep.
        """
        from ...sampling import Monitor, run

        self._fresh()
        n_sweeps = _validate.check_int(n_sweeps, "n_sweeps", 0)
        burn_in = _validate.check_int(burn_in, "burn_in", 0)
        thin = _validate.check_int(thin, "thin", 1)
        xp = self._xp()
        rng = default_rng(random_state, backend="numpy" if xp is np else "cupy")
        state = self.init(n_chains, rng, initial)
        desc, total = f"Ising {'x'.join(map(str, self._shape))}", burn_in + n_sweeps
        every = max(1, total // 20)

        def abs_m(up):  # the progress bar's figure (synchronises)
            return float(np.abs(_backend.to_host(up) * 2.0 / self.n_sites - 1).mean())

        if self._field.ndim or self._by_pattern:
            mon = [Monitor("|m|", lambda s: abs_m(s.counts[:, 0]), every=every)] if progress else []
            trace = run(self.step, state, rng, n_sweeps, burn_in=burn_in, thin=thin,
                        collect=lambda s, info: {"magnetization": info.magnetization, "energy": info.energy},
                        monitors=mon, progress=progress, desc=desc, n_chains=n_chains)
            for name in ("magnetization", "energy"):
                trace.draws.setdefault(name, np.zeros((n_chains, 0)))
            return IsingResult(trace, self.spins(trace.state))

        kept, where = n_sweeps // thin, {"sweep": 0, "last": -1}
        slots = xp.zeros((kept + 1, n_chains, 2), dtype=xp.int64)  # slot `kept`: the last sweep when not kept
        slot = (lambda k: slots[k]) if xp is np else (lambda k, base=slots.data.ptr: base + 16 * n_chains * k)

        def sweep(r, s):
            j, i = where["sweep"], where["sweep"] - burn_in
            where["sweep"] = j + 1
            k = i // thin if i >= 0 and (i + 1) % thin == 0 else (kept if j + 1 == total else -1)
            if k >= 0:
                where["last"] = k
            self._sweep(r, s, slot(k) if k >= 0 else None)
            return s, None

        last_abs_m = lambda s: float("nan") if where["last"] < 0 else abs_m(slots[where["last"], :, 0])  # noqa: E731
        mon = [Monitor("|m|", last_abs_m, every=every)] if progress else []
        trace = run(sweep, state, rng, n_sweeps, burn_in=burn_in, thin=thin, monitors=mon, progress=progress,
                    desc=desc, n_chains=n_chains)
        if where["last"] >= 0:
            state.counts[...] = slots[where["last"]]
        counts, N = np.moveaxis(_backend.to_host(slots[:kept]), 0, 1), self.n_sites  # (chains, kept, 2)
        mag, bond = 2.0 * counts[..., 0].astype(np.float64) - N, counts[..., 1].astype(np.float64)
        trace.draws = {"magnetization": mag / N, "energy": (-(float(self._J) * bond) - float(self._field) * mag) / N}
        return IsingResult(trace, self.spins(trace.state))

    def _check_spins(self, spins):
        """``spins`` as an array (a list goes to the model's backend; an array stays where it is), checked to be
        +-1 of the lattice's shape, with or without a leading chain axis."""
        if not hasattr(spins, "ndim"):
            spins = _backend.asarray(spins, self._xp())
        if spins.dtype.kind not in "biuf":
            raise TypeError(f"spins must hold numbers (+1 and -1), got dtype {spins.dtype}.")
        shape = self._shape
        if spins.ndim not in (len(shape), len(shape) + 1) or tuple(spins.shape[-len(shape):]) != shape:
            raise ValueError(f"spins has shape {tuple(spins.shape)}, but the lattice is {shape}; pass spins of the "
                             f"lattice's shape or (n_chains, *shape) = (n_chains, {', '.join(map(str, shape))}).")
        xp = _backend.get_array_module(spins)
        if _validate.validating() and bool((xp.abs(spins) != 1).any()):  # synchronize! (once; not with checks off)
            raise ValueError("spins must hold only +1 and -1; map a 0/1 array b with 2 * b - 1.")
        return spins

    def energy(self, spins):
        """Energy per site of +-1 ``spins`` of the lattice's shape, or with a leading chain axis."""
        self._fresh()
        spins = self._check_spins(spins)
        xp, batched, periodic = _backend.get_array_module(spins), spins.ndim == len(self._shape) + 1, \
            self.boundary == "periodic"
        s = spins if batched else spins[None]
        if self._by_pattern:
            bond = _weighted_bond_sum(s, self._J if xp is np else xp.asarray(self._J), periodic)
        else:
            bond = float(self._J) * bond_sum(s, periodic).astype(xp.float64)
        h = self._field if xp is np else xp.asarray(self._field)
        e = (-bond - (s * h).sum(axis=tuple(range(1, s.ndim)))) / self.n_sites
        return e if batched else e[0]


def denoise(image, coupling: float = 1.0, strength: float = 2.1, bias: float = 0.0, n_sweeps: int = 200,
            burn_in: int = 50, n_chains: int = 4, random_state=None, progress: bool = True, backend=None):
    """Posterior mean of a binary image under the Ising prior of Bishop (2006, section 8.3.3).

    The energy is ``-coupling sum_<ij> x_i x_j - strength sum_i x_i y_i - bias sum_i x_i`` for the clean
    image x and the noisy image y (both +-1), open boundaries, chains started from y. ``image`` may hold 0/1,
    booleans or +-1; the result is in its coding: ``P(x_i = 1)`` for 0/1 or booleans, ``E[x_i]`` for +-1
    (threshold at 0.5, or 0, for the MAP-like clean image).

    Examples
    --------
    >>> import numpy as np
    >>> from gpumcmc.models.ising import denoise
    >>> img = np.zeros((12, 12), dtype=np.uint8); img[3:9, 3:9] = 1
    >>> post = denoise(img, n_sweeps=20, burn_in=5, n_chains=2, random_state=0, progress=False, backend="numpy")
    >>> post.shape, float(post.min()) >= 0.0
    ((12, 12), True)
    """
    from ...sampling import run

    n_sweeps = _validate.check_int(n_sweeps, "n_sweeps", 1)  # the mean is over n_sweeps: 0 would give 0 / 0
    xp = _backend.get_backend(backend)
    y = np.asarray(_backend.to_host(image))
    if y.ndim != 2:
        raise ValueError(f"image must be 2-d (rows, columns), got shape {y.shape}.")
    vals = np.unique(y)
    if y.dtype == bool or set(vals.tolist()) <= {0, 1}:
        pm1, zero_one = 2 * y.astype(np.int8) - 1, True
    elif set(vals.tolist()) <= {-1, 1}:
        pm1, zero_one = y.astype(np.int8), False
    else:
        raise ValueError(f"image must be binary (0/1, booleans or +-1), got values {vals[:6].tolist()}...; "
                         "threshold it first, e.g. image > 0.5.")
    model = Ising(y.shape, coupling=coupling, field=strength * pm1 + bias, beta=1.0, boundary="open",
                  method="byte", backend=backend)
    rng = default_rng(random_state, backend="numpy" if xp is np else "cupy")
    state = model.init(n_chains, rng, initial=xp.asarray(pm1))
    acc = xp.zeros((y.shape[0], y.shape[1]), dtype=xp.float64)

    def add(it, s, info):
        if it > burn_in:
            acc[...] += s.spins.sum(axis=0)

    run(lambda r, s: model.step(r, s, observe=False), state, rng, n_sweeps, burn_in=burn_in, progress=progress,
        desc="denoise", n_chains=n_chains, callback=add)
    mean = acc / (n_sweeps * n_chains)
    return (mean + 1.0) / 2.0 if zero_one else mean


Ising.denoise = staticmethod(denoise)
