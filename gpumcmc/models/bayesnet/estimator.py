"""The scikit-learn face: :class:`BayesianNetwork` holds the network (parents, states, CPTs), reads and writes
it, and fits its CPTs with the sampler of :mod:`.algorithm`."""
from __future__ import annotations

import numbers
import sys
import warnings

import numpy as np

from gpumcmc import _validate
from gpumcmc import backend as _backend
from gpumcmc._config import config
from gpumcmc.datasets.bif import read_bif, write_bif
from gpumcmc.random import default_rng
from gpumcmc.random._stream import host_rng
from gpumcmc.sampling import run, sharded
from gpumcmc.sampling._estimator import Estimator, NotFittedError, all_or_nothing, atomic_fit
from gpumcmc.shards import resolve

from .algorithm import _one_shard, _Plan, case_parts, collective, graph_ready

# impute's exact branch enumerates at most this many joint states of a case's missing cells (one
# log_prob row each); cases with more (99.8% of hailfinder's) are filled by Gibbs imputation.
_MAX_COMBINATIONS = 20_000
# fit's settings, given to the constructor (and, deprecated, to fit), with their defaults
_DEFAULTS = {"n_iter": 100, "same": 1, "prior": 1.0, "random_state": None, "progress": True, "backend": None,
             "learn": True, "batch_size": None, "devices": None, "burn_in": None}
_SOFT = 1e-3  # the uniform row's weight in the CPTs of the first half of impute's Gibbs sweeps


def _schedule(same, n_iter) -> list:
    """The replicas m at each of the ``n_iter`` iterations from the setting ``same``: an integer, a callable
    of the iteration or a sequence of length n_iter (whole-number floats, as np.ceil gives, count as
    integers), checked."""
    what = "same must be an integer >= 1, a callable of the iteration (0..n_iter-1) or a sequence of length n_iter"
    if isinstance(same, (str, bytes)):
        raise TypeError(f"{what}; got the string {same!r}.")
    if _backend.is_cupy_array(same):
        same = _backend.to_host(same)
    if getattr(same, "ndim", None) == 0:  # a 0-d array: its number
        same = same.item()
    if callable(same):
        ms, where = [same(t) for t in range(n_iter)], "the callable same returned {!r} at iteration {}"
    elif isinstance(same, (numbers.Number, np.generic)):
        ms, where = [same] * n_iter, "same is {!r}"
    elif hasattr(same, "__len__") and hasattr(same, "__getitem__"):
        if len(same) != n_iter:
            raise ValueError(f"The schedule same has length {len(same)}, but n_iter = {n_iter}: a sequence "
                             "schedule must give m for every iteration, so its length must be n_iter.")
        ms, where = [same[t] for t in range(n_iter)], "same[{1}] is {0!r}"
    else:
        raise TypeError(f"{what}; got {type(same).__name__}.")
    ms = [m.item() if getattr(m, "ndim", None) == 0 else m for m in ms]  # 0-d arrays (NumPy or CuPy) a callable gave
    for t, m in enumerate(ms):
        if isinstance(m, bool) or not isinstance(m, numbers.Real):  # numpy's integers and floats are Real
            raise TypeError(f"{what}; {where.format(m, t)}, not an integer.")
        if not isinstance(m, numbers.Integral) and not float(m).is_integer():
            raise ValueError(f"{what}; {where.format(m, t)}, not a whole number.")
        if not 1 <= m <= 65535:
            raise ValueError(f"same must be between 1 and 65535 at every iteration; {where.format(m, t)}.")
    return [int(m) for m in ms]


_LARGE_TABLE = 10**7  # table cells above which a fit warns (see BayesianNetwork._warn_before_fit)
_LARGE_KEPT_GB = 1.0  # ... or GB of kept draws (trace_ and its copy on the device) above which it warns


def _old_n_iter(y) -> bool:
    """Whether fit's second argument is the deprecated ``fit(data, n_iter)``'s n_iter."""
    return isinstance(y, (int, np.integer)) and not isinstance(y, bool)


def _same_value(a, b) -> bool:
    """``a`` is ``b``'s value (for the repr's defaults): arrays, such as a ``same`` schedule, compared whole."""
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


class BayesianNetwork(Estimator):
    """A discrete Bayesian network: ``parents`` (node -> parent names), ``states`` (node -> state names) and
    optional ``cpts`` (node -> array ``(*parent_cards, card)``), with the settings of :meth:`fit`, which
    learns the CPTs from cases with missing cells by SAME chromatic Gibbs.

    ``n_iter``: iterations; ``prior``: the Dirichlet prior of every CPT row; ``same``: the replicas m, an
    int or a schedule (a callable of the iteration, or a sequence of length ``n_iter``); ``random_state``:
    an int, a ``SeedSequence`` or a gpumcmc Generator; ``backend``: ``"numpy"``, ``"cupy"`` or ``None``.
    Each iteration's CPT draw is kept in ``trace_``; ``cpts_`` is the posterior mean: the mean, over the
    iterations after the first ``burn_in`` (``None``: ``n_iter // 2``), of each row's mean given the counts it
    was drawn from (the guide says why it beats the final draw at small m, and the draws' mean at small prior);
    ``cpts_last_`` is the final draw.

    ``batch_size`` splits the cases into minibatches (``None``: one): each visit to a batch sweeps its
    missing cells once, then redraws the CPTs from the latest counts of every batch; only that batch is on
    the GPU. ``devices`` (``"all"``, a GPU id, a list of ids or a :class:`gpumcmc.shards.Shards`) splits the
    cases over devices, the counts all-reduced (:func:`allreduce_bytes` per iteration), with the draws of
    one device for a seed; a Dask worker's ``imputations_`` holds its parts' rows, ``imputation_rows_``.
    ``learn=False`` keeps the given ``cpts_`` and only samples the missing cells. ``sklearn.base.clone``
    gives the network with the constructor's ``cpts``, unfitted.

    On the GPU the sweep and the counts are compiled for the network's structure where it is small enough
    (about 80 nodes of a few states): 1.2-2x faster an iteration, and the first fit of a new structure waits
    one to a few seconds for the compile, which CuPy keeps on disk for later runs. Larger networks, or
    ``gpumcmc.config.override(bayesnet_specialise=False)``, use kernels compiled once for every
    network; the draws are the same either way.

    A missing cell's conditional is a product of CPT probabilities (log space only where that product
    underflows), and one Philox call gives four cells' uniforms; NumPy and CuPy give the same draws.
    """

    def __init__(self, parents: dict, states: dict, cpts: dict | None = None, *, n_iter=100, same=1, prior=1.0,
                 burn_in=None, learn=True, batch_size=None, devices=None, backend=None, random_state=None,
                 progress=True):
        self.n_iter, self.same, self.prior, self.burn_in, self.learn = n_iter, same, prior, burn_in, learn
        self.batch_size, self.devices, self.backend = batch_size, devices, backend
        self.random_state, self.progress, self.cpts = random_state, progress, cpts
        if not isinstance(parents, dict) or not isinstance(states, dict):
            raise TypeError("parents and states must be dicts: node -> list of parent names, node -> list of "
                            f"state names; got {type(parents).__name__} and {type(states).__name__}.")
        self.nodes = list(states)
        for v, ps in parents.items():
            if v not in states:
                raise ValueError(f"Node {v!r} has parents but no states; give states for every node.")
            if isinstance(ps, str):
                raise TypeError(f"The parents of {v!r} must be a list of node names, got the string {ps!r}.")
            for p in ps:
                if p not in states:
                    raise ValueError(f"Parent {p!r} of {v!r} is not a node; add it to states.")
            if len(set(ps)) != len(ps):
                raise ValueError(f"Node {v!r} lists a parent twice ({list(ps)}); list each parent once.")
        for v in self.nodes:
            if isinstance(states[v], str) or len(states[v]) < 1:
                raise ValueError(f"The states of {v!r} must be a non-empty list of names, got {states[v]!r}.")
        # kept as given where already in this form, so that get_params returns the very objects (clone)
        self.parents = parents if list(parents) == self.nodes and all(type(p) is list for p in parents.values()) \
            else {v: list(parents.get(v, [])) for v in self.nodes}
        self.states = states if all(type(t) is list and all(type(x) is str for x in t) for t in states.values()) \
            else {v: [str(s) for s in states[v]] for v in self.nodes}
        self.card = {v: len(self.states[v]) for v in self.nodes}
        self._topo()  # raises for a directed cycle
        self.cpts_ = self.trace_ = None
        if cpts is not None:
            missing = [v for v in self.nodes if v not in cpts]
            if missing:
                raise ValueError(f"cpts has no table for node(s) {missing}; give one for every node, or cpts=None.")
            self.cpts_ = {}
            for v in self.nodes:
                shape = self._cpt_shape(v)
                a = np.asarray(cpts[v], dtype=np.float64)
                if a.size != int(np.prod(shape)):
                    raise ValueError(f"The CPT of {v!r} has {a.size} cells; its parents {self.parents[v]} and "
                                     f"states make it an array of shape {shape}.")
                a = a.reshape(shape)
                if np.any(a < 0) or not np.allclose(a.sum(-1), 1.0, atol=1e-6):
                    raise ValueError(f"The CPT of {v!r} must be non-negative with rows summing to 1.")
                self.cpts_[v] = a / a.sum(-1, keepdims=True)

    _STRUCTURE = ("parents", "states", "cpts")

    def set_params(self, **params):
        """Change settings, as scikit-learn's ``set_params``. A new ``parents``, ``states`` or ``cpts`` makes
        the network again, as the constructor does (checked at once): its nodes, cardinalities and tables
        follow, and an earlier fit's ``cpts_`` give way to the new ``cpts`` (or to none)."""
        structure = {k: params.pop(k) for k in self._STRUCTURE if k in params}
        with all_or_nothing(self):  # refused: the network stays as it was
            super().set_params(**params)
            if structure:
                rest = {k: getattr(self, k) for k in self._get_param_names() if k not in self._STRUCTURE}
                self.__init__(*(structure.get(k, getattr(self, k)) for k in self._STRUCTURE), **rest)
        return self

    @classmethod
    def koller(cls):
        """The student network of Koller & Friedman ch. 3 (the paper's "Koller" network)."""
        parents = {"I": [], "D": [], "S": ["I"], "G": ["I", "D"], "L": ["G"]}
        states = {"I": ["0", "1"], "D": ["0", "1"], "S": ["0", "1"], "G": ["0", "1", "2"], "L": ["0", "1"]}
        cpts = {"I": [0.7, 0.3], "D": [0.6, 0.4], "S": [[0.95, 0.05], [0.2, 0.8]],
                "G": [[[0.3, 0.4, 0.3], [0.05, 0.25, 0.7]], [[0.9, 0.08, 0.02], [0.5, 0.3, 0.2]]],
                "L": [[0.1, 0.9], [0.4, 0.6], [0.99, 0.01]]}
        return cls(parents, states, cpts)

    @classmethod
    def from_pgmpy(cls, model):
        """From a pgmpy ``DiscreteBayesianNetwork``/``BayesianNetwork`` with CPDs."""
        parents, states, cpts = {}, {}, {}
        for cpd in model.get_cpds():
            v = cpd.variable
            states[v] = list(cpd.state_names[v])
            parents[v] = ps = list(cpd.variables[1:])
            vals = np.asarray(cpd.get_values())  # (card, prod parent cards)
            shape = tuple(len(cpd.state_names[p]) for p in ps) + (len(states[v]),)
            cpts[v] = vals.T.reshape(shape)
        order = [v for v in model.nodes() if v in states]
        return cls({v: parents[v] for v in order}, {v: states[v] for v in order}, {v: cpts[v] for v in order})

    @classmethod
    def from_bif(cls, path):
        """Read a BIF file, gzipped (``.gz``) or not."""
        return cls(*read_bif(path))

    def to_bif(self, path):
        """Write the network (with ``cpts_``) as BIF."""
        self._need_cpts()
        write_bif(path, self.nodes, self.parents, self.states, self.cpts_)

    def __sklearn_is_fitted__(self) -> bool:
        return self.cpts_ is not None

    def __repr__(self, N_CHAR_MAX=700):
        shown = ", ".join(f"{k}={getattr(self, k)!r}" for k in _DEFAULTS
                          if not _same_value(getattr(self, k), _DEFAULTS[k]))
        return f"BayesianNetwork(<{len(self.nodes)} nodes{'' if self.cpts_ is None else ' with CPTs'}>" + \
            (f", {shown})" if shown else ")")

    def _warn_before_fit(self, X=None, y=None, **settings) -> None:
        """A warning, as a fit starts (atomic_fit calls this before it records the fit's warnings), where the
        largest table holds over ``_LARGE_TABLE`` cells: each is kept as several float64 copies (counts, draws,
        probabilities and their logs, the running mean), so memory and time grow with the product of a node's
        parents' states, which few cases can fill. A structure that cannot be sized is left to the fit's own
        checks, which name it."""
        try:
            sizes = {v: int(np.prod(self._cpt_shape(v), dtype=np.float64)) for v in self.nodes}
        except (KeyError, TypeError, ValueError):
            return
        v, cells = max(sizes, key=sizes.get), sum(sizes.values())
        if _old_n_iter(y):
            settings.setdefault("n_iter", y)
        n_iter, learn = settings.get("n_iter", self.n_iter), settings.get("learn", self.learn)
        n_iter = n_iter if isinstance(n_iter, (int, np.integer)) and learn else 0
        kept = n_iter * cells * 28 / 2**30  # each iteration's draw: 12 bytes a cell on the device, 16 on the host
        if sizes[v] > _LARGE_TABLE or kept > _LARGE_KEPT_GB:
            warnings.warn(f"Node {v!r}'s table has {sizes[v]:.3g} cells ({len(self.parents[v])} parents), "
                          f"{cells:.3g} in all: a fit keeps several float64 copies of them, about "
                          f"{5 * 8 * cells / 2**30:.3g} GB, and each of its {n_iter} iterations' draws (trace_), "
                          f"about {kept:.3g} GB more; its time grows with them. Give the node fewer parents or its "
                          "parents fewer states, or run fewer iterations.", UserWarning, stacklevel=3)

    def _cpt_shape(self, v) -> tuple:
        return tuple(self.card[p] for p in self.parents[v]) + (self.card[v],)

    def _need_cpts(self):
        if self.cpts_ is None:
            raise NotFittedError("This network has no CPTs; fit it or give cpts to the constructor.")

    def sample(self, n: int, random_state=None) -> np.ndarray:
        """Forward-sample ``n`` complete cases as an int array (n, n_nodes) of state indices."""
        self._need_cpts()
        rs, idx = host_rng(random_state), {v: i for i, v in enumerate(self.nodes)}
        X = np.full((n, len(self.nodes)), -1, dtype=np.int64)
        for v in self._topo():
            t = self.cpts_[v]
            p = t[tuple(X[:, idx[q]] for q in self.parents[v])]  # (n, card), or (card,) for a root
            X[:, idx[v]] = np.minimum((np.cumsum(p, -1) < rs.random(n)[:, None]).sum(-1), t.shape[-1] - 1)
        return X

    def _topo(self):
        done, order = set(), []
        while len(order) < len(self.nodes):
            progressed = False
            for v in self.nodes:
                if v not in done and all(p in done for p in self.parents[v]):
                    done.add(v); order.append(v); progressed = True
            if not progressed:
                left = [v for v in self.nodes if v not in done]
                raise ValueError(f"The parents make a directed cycle among {left}; a Bayesian network's "
                                 "parents must form a DAG: remove a parent on the cycle.")
        return order

    def _encode(self, data, name="data", complete=False) -> np.ndarray:
        """The cases ``data`` (the parameter ``name`` of the caller) as an int64 array of state indices, -1 for
        missing; ``complete``: log_prob's cases, where a DataFrame must have a column for every node."""
        pd = sys.modules.get("pandas")  # not imported: data is no DataFrame
        if pd is not None and isinstance(data, pd.DataFrame):
            if unknown := [c for c in data.columns if c not in self.card]:
                raise ValueError(f"Columns {unknown} are not nodes of the network ({self.nodes}).")
            absent = [v for v in self.nodes if v not in data.columns]
            if complete and absent:
                raise ValueError(f"log_prob needs complete cases, but the DataFrame {name} has no column for "
                                 f"node(s) {absent}; fill the missing cells with impute first.")
            if absent:
                warnings.warn(f"The DataFrame has no column for node(s) {absent}: they are taken as missing in "
                              "every case (latent). Add a column of None for each to say so and silence this "
                              "warning.", UserWarning, stacklevel=3)
            X = np.full((len(data), len(self.nodes)), -1, dtype=np.int64)
            for j, v in enumerate(self.nodes):
                if v not in data.columns:
                    continue
                lookup = {s: i for i, s in enumerate(self.states[v])}
                for r, val in enumerate(data[v].to_numpy()):
                    if val is None or val is pd.NA or (isinstance(val, float) and np.isnan(val)):
                        continue  # missing: None, NaN, or pandas' NA (nullable and "string" columns)
                    key = str(val)
                    if key not in lookup and isinstance(val, (float, np.floating)) and float(val).is_integer():
                        key = str(int(val))  # a number read as a float (a CSV column with a blank cell)
                    if key not in lookup:
                        hint = "; DataFrames mark missing cells with None or NaN, not -1" if key in ("-1", "-1.0") \
                            else ""
                        raise ValueError(f"Unknown state {str(val)!r} of node {v!r}; its states are "
                                         f"{self.states[v]}{hint}.")
                    X[r, j] = lookup[key]
            return X
        X = np.asarray(_backend.to_host(data))
        if X.ndim != 2 or X.shape[1] != len(self.nodes) or not np.issubdtype(X.dtype, np.integer):
            raise TypeError(f"{name} must be a DataFrame or an integer array (n_cases, {len(self.nodes)}) with -1 "
                            f"for missing; got an array of shape {X.shape} and dtype {X.dtype}.")
        cards = np.array([self.card[v] for v in self.nodes])
        if X.size and (X.min() < -1 or np.any(X >= cards)):
            r, j = np.argwhere((X < -1) | (X >= cards))[0]
            raise ValueError(f"An integer cell of {name} is out of range (row {r}, node {self.nodes[j]!r}: "
                             f"{X[r, j]}; its states are 0..{cards[j] - 1}): use 0..card-1 for states and -1 "
                             "for missing.")
        return X.astype(np.int64, copy=False)  # read only by fit (impute copies it)

    def _colour(self):
        try:
            import networkx as nx
        except ImportError as e:
            raise ImportError("BayesianNetwork.fit colours the network's moral graph with networkx: pip install "
                              'networkx (or "gpumcmc[networkx]").') from e
        g = nx.Graph()
        g.add_nodes_from(self.nodes)
        for v in self.nodes:
            ps = self.parents[v]
            g.add_edges_from((p, v) for p in ps)
            g.add_edges_from((a, b) for i, a in enumerate(ps) for b in ps[i + 1:])
        col, groups = nx.greedy_color(g, strategy="largest_first"), {}
        for v in self.nodes:
            groups.setdefault(col[v], []).append(v)
        return [groups[k] for k in sorted(groups)]

    @atomic_fit
    def fit(self, X, y=None, **settings):
        """Learn the CPTs from the cases ``X`` (an integer array (n_cases, n_nodes) of state indices, -1 for
        missing, or a DataFrame with None/NaN for missing) by SAME chromatic Gibbs, with the constructor's
        settings. ``y`` is not used. The replicas' final imputations are in ``imputations_``, uint8 (m,
        n_cases, n_nodes); the CPTs in ``cpts_``, ``cpts_last_`` and ``trace_``.

        Settings given to ``fit`` (``fit(X, n_iter=...)``, or ``n_iter`` second) still work for this
        release and warn: give them to the constructor or to ``set_params`` instead.
        """
        if y is not None:
            if _old_n_iter(y) and "n_iter" not in settings:
                settings["n_iter"] = y
            else:
                raise TypeError("fit(X, y=None) takes no targets: y is not used; give the settings to the "
                                "constructor, e.g. BayesianNetwork(parents, states, n_iter=100).")
        if unknown := sorted(set(settings) - set(_DEFAULTS)):
            raise TypeError(f"fit() got unexpected keyword argument(s) {unknown}; the settings are {list(_DEFAULTS)}.")
        if settings:
            given = ", ".join(f"{k}=..." for k in settings)
            warnings.warn(f"Passing settings to BayesianNetwork.fit is deprecated and will stop working in the next "
                          f"release; give them to the constructor, BayesianNetwork(parents, states, {given}), or "
                          f"call net.set_params({given}).fit(X).", DeprecationWarning, stacklevel=3)
        return self._fit(X, **{k: settings.get(k, getattr(self, k)) for k in _DEFAULTS})

    def _fit(self, cases, n_iter, same, prior, random_state, progress, backend, learn, batch_size, devices,
             burn_in):
        """:meth:`fit` with every setting given: :func:`.algorithm.collective` on the shards, through
        :func:`gpumcmc.sampling.sharded`, run by :func:`gpumcmc.sampling.run`."""
        X = self._encode(cases, "X")
        ms, burn, bs = self._checked(len(X), n_iter, same, prior, learn, batch_size, burn_in)
        sh, backend = (None, backend) if devices is None else resolve(devices, backend, "the cases")
        rng = default_rng(random_state, backend=backend)
        sh = _one_shard(rng.xp()) if sh is None else sh
        plan = _Plan(self)
        parts = case_parts(X, plan, sh, bs)
        alg = sharded(collective(plan, ms, prior, None if learn else self.cpts_), sh)
        state = alg.init(rng, parts)
        # one chain: (1, C) per draw, the CPTs drawn and the counts they were drawn from
        keep = (lambda s, info: {"logc": s.tables[:1], "counts": s.counts[None]}) if learn else None
        # one GPU, one batch, one m: the iteration captured as a CUDA graph and replayed, the same draws
        graph = config.bayesnet_graph and rng.xp() is not np and sh.world == 1 and len(parts[0]) == 1 \
            and len(set(ms)) == 1
        step, start, back = graph_ready(alg.step, state) if graph else (alg.step, state, None)
        with sh.on(0):  # the kept draws stay on the device of the CPTs until the end of the run
            trace = run(step, start, rng, n_iter, collect=keep, progress=progress, desc="BayesianNetwork",
                        n_chains=1, graph=graph)
        state = back(trace.state) if graph else trace.state
        for i in range(len(sh)):
            with sh.on(i):
                _validate.report(state.bads[i][0] != 0, "Some cases have probability 0 under the CPTs (a missing "
                                 "cell has no possible state); check the data against the CPTs' zeros.")
        _validate.check()
        self._imputations(parts, state.Zs, max(ms), len(sh) == sh.world)
        self.n_shards_ = sh.world
        if learn:
            self._keep_draws(plan, state.tables[0], trace.draws["logc"][0], trace.draws["counts"][0], ms, prior, burn)
        return self

    def _checked(self, n, n_iter, same, prior, learn, batch_size, burn_in):
        """The settings of a fit of n cases, checked: (m at every iteration, burn-in, batch size)."""
        if n < 1:
            raise ValueError("X has no cases (0 rows); fit needs at least one case, complete or with missing cells.")
        if not isinstance(n_iter, (int, np.integer)) or n_iter < 1:
            raise ValueError("n_iter must be a positive integer.")
        burn = n_iter // 2 if burn_in is None else burn_in
        if not isinstance(burn, (int, np.integer)) or not 0 <= burn < n_iter:
            raise ValueError(f"burn_in must be an integer from 0 to n_iter - 1 = {n_iter - 1}, or None "
                             f"(n_iter // 2); got {burn_in!r}.")
        burn = int(burn)
        ms = _schedule(same, n_iter)
        m_max = max(ms)
        if not prior > 0:
            raise ValueError("prior must be positive.")
        if learn and not m_max * (prior - 1.0) + 1.0 > 0:
            raise ValueError(f"With prior = {prior} and m = {m_max} replicas, the Dirichlet parameters "
                             "m (prior - 1) + 1 + counts can be non-positive; use prior > 1 - 1/m.")
        if max(self.card.values()) > 255:
            raise ValueError("Nodes with more than 255 states are not supported.")
        self._topo()  # parents changed since the constructor may have made a cycle
        if not learn:
            self._need_cpts()
        bs = n if batch_size is None else int(batch_size)
        if bs < 1:
            raise ValueError("batch_size must be a positive integer or None.")
        return ms, burn, bs

    def _keep_draws(self, plan, logc, trace, counts, ms, prior, burn):
        """``trace_``, ``cpts_`` and ``cpts_last_`` from the log-probability draws of a fit: the final ``logc``,
        the (n_iter, C) ``trace`` and the (n_iter, C) ``counts`` each iteration's CPTs were drawn from, with
        ``ms[t]`` replicas. ``cpts_`` averages, over the iterations after ``burn``, each row's posterior mean
        given its counts, ``(m (prior - 1) + 1 + count) / (row sum)`` (Rao-Blackwellised): the same expectation
        as the mean of the draws, without the draws' underflow when a state's shape is far below 1."""
        lc, tr = _backend.to_host(logc), np.exp(_backend.to_host(trace))
        a = _backend.to_host(counts)[burn:].astype(np.float64)
        a += (np.asarray(ms[burn:], dtype=np.float64) * (prior - 1.0) + 1.0)[:, None]
        self.cpts_, self.cpts_last_, self.trace_ = {}, {}, {}
        for j, v in enumerate(self.nodes):
            s, e, shape, k = plan.toff[j], plan.toff[j + 1], self._cpt_shape(v), self.card[v]
            rows = a[:, s:e].reshape(len(a), -1, k)
            self.cpts_[v] = (rows / rows.sum(-1, keepdims=True)).mean(0).reshape(shape)
            self.cpts_last_[v] = np.exp(lc[s:e]).reshape(shape)
            self.trace_[v] = tr[:, s:e].reshape((len(tr), -1, k))
        self.burn_in_ = burn

    def _imputations(self, parts, Zs, m_max, whole):
        """``imputations_`` from :func:`.algorithm.case_parts`'s ``parts`` (and ``imputation_rows_`` where
        they are not every row): the case matrices ``Zs`` of one batch, else the parts' cells."""
        pieces, rows, resident = [], [], len(parts[0]) == 1
        for row in zip(*parts):  # batch by batch
            for i, b in enumerate(row):
                if resident:
                    pieces.append(_backend.to_host(Zs[i]))
                else:
                    Zh = np.repeat(b.obs[None], m_max, 0)
                    Zh[:, b.case, b.node] = b.vals
                    pieces.append(Zh)
                rows.append(np.arange(b.start, b.stop))
        self.imputations_ = pieces[0] if len(pieces) == 1 else np.concatenate(pieces, axis=1)
        self.imputation_rows_ = None if whole else np.concatenate(rows)

    def to_arviz(self):
        """The CPT draws as ArviZ data, one chain: ``cpt_<node>`` with the draws after ``burn_in_`` in
        ``posterior`` (those whose mean-given-counts is ``cpts_``) and the burn-in's in ``warmup_posterior``;
        each table's axes are named after its parents and its node, labelled by their states."""
        if self.trace_ is None:
            raise NotFittedError("This network has no draws to export; fit it first.")
        from gpumcmc.sampling import to_arviz

        def dim(v):
            return f"{v}_" if v in ("chain", "draw") else str(v)
        draws = {f"cpt_{v}": self.trace_[v].reshape((1, len(self.trace_[v])) + self._cpt_shape(v)) for v in self.nodes}
        b = self.burn_in_
        return to_arviz({k: d[:, b:] for k, d in draws.items()},
                        coords={dim(v): list(self.states[v]) for v in self.nodes},
                        dims={f"cpt_{v}": [dim(p) for p in self.parents[v]] + [dim(v)] for v in self.nodes},
                        warmup={k: d[:, :b] for k, d in draws.items()} if b else None)

    def impute(self, data, method="mode", random_state=None, max_combinations=_MAX_COMBINATIONS,
               n_sweeps=50, replicas=64, backend=None):
        """Fill the missing cells from their conditional given the observed ones and ``cpts_``.

        A case whose missing cells have at most ``max_combinations`` joint states is filled exactly by
        enumerating them: ``method="mode"`` takes the most probable, ``"draw"`` draws one. The others are
        filled by Gibbs imputation (see the guide): ``replicas`` chains of the fit's sweep with the CPTs
        fixed, ``n_sweeps`` sweeps each, on ``backend``; ``"mode"`` takes the most probable of their final
        joint states, ``"draw"`` the first replica's. Raises ValueError for a case of probability 0.

        Returns an int64 array (n_cases, n_nodes) of state indices, every cell filled, the columns in the
        order of ``nodes`` (a DataFrame's state names come back as their indices in ``states``).
        """
        self._need_cpts()
        if method not in ("mode", "draw"):
            raise ValueError(f"method must be 'mode' or 'draw', got {method!r}.")
        for name, val in (("max_combinations", max_combinations), ("n_sweeps", n_sweeps), ("replicas", replicas)):
            if not isinstance(val, (int, np.integer)) or isinstance(val, bool) or val < 1:
                raise ValueError(f"{name} must be a positive integer, got {val!r}.")
        X, rs, large = self._encode(data).copy(), host_rng(random_state), []
        cards = np.array([self.card[v] for v in self.nodes], dtype=np.float64)
        for r in range(len(X)):
            mis = np.flatnonzero(X[r] < 0)
            if not len(mis):
                continue
            if np.prod(cards[mis]) > max_combinations:
                large.append(r)
                continue
            dims = [self.card[self.nodes[j]] for j in mis]
            combos = np.indices(dims).reshape(len(dims), -1).T  # every joint state, as np.ndindex lists them
            Y = np.repeat(X[r][None], len(combos), 0)
            Y[:, mis] = combos
            with np.errstate(divide="ignore"):
                lp = self._log_prob(Y)
            if not np.isfinite(lp.max()):
                raise ValueError(f"Case {r} has probability 0 under cpts_ (no state of its missing cells is "
                                 "possible); check the data against the CPTs' zeros.")
            p = np.exp(lp - lp.max()); p /= p.sum()
            k = int(np.argmax(p)) if method == "mode" else int(rs.choice(len(p), p=p))
            X[r] = Y[k]
        # Gibbs imputation in chunks of about bayesnet_impute_cells cells over the replicas (their states and
        # log-probabilities are held on the host as int64 at the end)
        chunk = max(1, config.bayesnet_impute_cells // (replicas * len(self.nodes)))
        for s in range(0, len(large), chunk):
            rows = large[s:s + chunk]
            X[rows] = self._gibbs_impute(X[rows], method, int(rs.integers(2**63)), n_sweeps, replicas, backend)
        return X

    def _gibbs_impute(self, X, method, seed, n_sweeps, replicas, backend):
        """Gibbs imputation of the cases ``X`` (see :meth:`impute`) with ``cpts_`` fixed. The replicas start
        from uniform states, which CPTs with zeros can make impossible (the exact sweep cannot move a cell
        none of whose states is possible), so the first half of the sweeps runs on the CPTs mixed with
        ``_SOFT`` of the uniform row; replicas whose final state is still impossible are left out."""
        rng = default_rng(seed, backend=backend)
        plan, sh = _Plan(self), _one_shard(rng.xp())
        soft = {v: (1 - _SOFT) * t + _SOFT / t.shape[-1] for v, t in self.cpts_.items()}
        alg = sharded(collective(plan, [replicas] * n_sweeps, 1.0, soft), sh)  # fit's, with the CPTs fixed
        state = alg.init(rng, case_parts(X, plan, sh, len(X)))
        exact = rng.xp().asarray(plan.tables_of(self.cpts_))
        for t in range(n_sweeps):  # cells that cannot move: read below
            state, _ = alg.step(rng, state if 2 * t < n_sweeps else state._replace(tables=exact))
        Z = _backend.to_host(state.Zs[0]).astype(np.int64)  # (replicas, n, V)
        with np.errstate(divide="ignore"):
            lp = self._log_prob(Z.reshape(-1, plan.V)).reshape(Z.shape[:2])
        lost = np.flatnonzero(~np.isfinite(lp).any(0))
        if len(lost):
            raise ValueError(f"{len(lost)} case(s) (the first: row {lost[0]} of the cases imputed by Gibbs "
                             "sampling) have probability 0 under cpts_, or none of their chains found a possible "
                             f"state in {n_sweeps} sweeps; check the data against the CPTs' zeros, or raise n_sweeps "
                             "or replicas.")
        # "mode": the most probable of the replicas' joint states (each cell's majority state can make
        # an impossible joint state under CPTs with zeros); "draw": the first replica in a possible state
        pick = lp.argmax(0) if method == "mode" else np.isfinite(lp).argmax(0)
        return Z[pick, np.arange(Z.shape[1])]

    def log_prob(self, X):
        """Log joint probability of complete cases: an integer array (n_cases, n_nodes) of state indices or a
        DataFrame of state names, as :meth:`fit` takes them, without missing cells (:meth:`impute` fills
        them)."""
        self._need_cpts()
        X = self._encode(X, "X", complete=True)
        if X.size and X.min() < 0 and (missing := np.flatnonzero((X < 0).any(1))).size:
            raise ValueError(f"log_prob needs complete cases, but {missing.size} case(s) of X (the first: row "
                             f"{missing[0]}) have missing cells (-1, or None/NaN in a DataFrame); fill them with "
                             "impute first, net.log_prob(net.impute(X)), or leave those cases out.")
        return self._log_prob(X)

    def _log_prob(self, X):
        """:meth:`log_prob` of the complete cases ``X``, an int array of state indices already checked."""
        out = np.zeros(len(X))
        for j, v in enumerate(self.nodes):
            ix = tuple(X[:, self.nodes.index(p)] for p in self.parents[v]) + (X[:, j],)
            out += np.log(self.cpts_[v][ix])
        return out

    def kl_avg(self, other) -> float:
        """KL_avg of the paper: the mean over all CPT rows of KL(other's row || self's row), ``other`` the
        reference."""
        if not isinstance(other, BayesianNetwork):
            raise TypeError(f"kl_avg compares with another BayesianNetwork, got {type(other).__name__}.")
        self._need_cpts(); other._need_cpts()
        if set(other.nodes) != set(self.nodes):  # the same nodes in another order are compared by name
            raise ValueError(f"kl_avg compares networks of the same nodes; these differ in "
                             f"{sorted(set(self.nodes) ^ set(other.nodes))}. Fit a network with other's parents "
                             "and states to compare with it.")
        for v in self.nodes:
            if other.parents[v] != self.parents[v] or other.states[v] != self.states[v]:
                raise ValueError(f"kl_avg compares networks of the same structure; node {v!r} has parents "
                                 f"{self.parents[v]} and states {self.states[v]} here but {other.parents[v]} and "
                                 f"{other.states[v]} in other.")
        tot, rows, eps = 0.0, 0, 1e-300
        for v in self.nodes:
            P = np.asarray(other.cpts_[v]).reshape(-1, self.card[v])
            Q = np.asarray(self.cpts_[v]).reshape(-1, self.card[v])
            kl = np.where(P > 0, P * (np.log(np.maximum(P, eps)) - np.log(np.maximum(Q, eps))), 0.0).sum(-1)
            tot += kl.sum(); rows += len(kl)
        return float(tot / rows)

