"""Discrete Bayesian networks learnt from incomplete cases by SAME-replicated chromatic Gibbs.

The sampler follows Seita, Chen & Canny: the moral graph is coloured; all the
missing cells of one colour are drawn at once (in every case and every SAME
replica) from their Markov-blanket conditionals; then every CPT row is drawn
from Dirichlet(m (prior - 1) + 1 + counts summed over the m replicas), the
posterior raised to the power m.

``fit(..., devices=...)`` splits the cases over devices: each sweeps its own
cases' missing cells and counts them, the counts are all-reduced, and every
device draws the same CPTs from the sums with the same key; the draws for a
seed are those of one device.

Examples
--------
>>> from gpumcmc.models.bayesnet import BayesianNetwork
>>> net = BayesianNetwork.koller()
>>> X = net.sample(200, random_state=0)
>>> X[::3, 2] = -1
>>> fit = BayesianNetwork(net.parents, net.states, n_iter=5, same=2, random_state=0, progress=False,
...                       backend="numpy").fit(X)
>>> fit.kl_avg(net) >= 0
True
>>> from gpumcmc.shards import Shards
>>> two = BayesianNetwork(net.parents, net.states, n_iter=5, same=2, random_state=0, progress=False,
...                       devices=Shards(n_virtual=2)).fit(X)
>>> all((two.cpts_[v] == fit.cpts_[v]).all() for v in net.nodes)
True
"""
from __future__ import annotations

import contextlib
import gzip
import re
import warnings

import numpy as np

from gpumcmc import _kernel_args, _loader, _validate
from gpumcmc import backend as _backend
from gpumcmc._config import config, forward
from gpumcmc import shards as _shards
from gpumcmc.random import default_rng
from gpumcmc.sampling._estimator import Estimator

# impute's exact branch: at most this many joint states of a case's missing cells are enumerated
# (one log_prob row each); cases with more are filled by Gibbs imputation.
_MAX_COMBINATIONS = 20_000
# fit's settings, given to the constructor (and, deprecated, to fit), with their defaults
_DEFAULTS = {"n_iter": 100, "same": 1, "prior": 1.0, "random_state": None, "progress": True, "backend": None,
             "learn": True, "batch_size": None, "devices": None, "burn_in": None}
_SETTINGS = tuple(_DEFAULTS)
_SOFT = 1e-3  # the uniform row's weight in the CPTs of the first half of impute's Gibbs sweeps
# config.bayesnet_impute_cells: cells (replicas x cases x nodes) of one chunk of impute's Gibbs imputation
forward(__name__, {"_IMPUTE_CELLS": "bayesnet_impute_cells"})


class BayesianNetwork(Estimator):
    """A discrete Bayesian network: ``parents`` (node -> parent names), ``states`` (node -> state names)
    and optional ``cpts`` (node -> array of shape ``(*parent_cards, card)``), with the settings of
    :meth:`fit`, which learns the CPTs from cases with missing cells by SAME chromatic Gibbs.

    ``n_iter`` is the number of iterations. ``prior`` is the Dirichlet prior of every CPT row.
    ``random_state`` is an int, a ``SeedSequence`` or a gpumcmc Generator; ``backend`` is
    ``"numpy"``, ``"cupy"`` or ``None`` (the active backend); ``progress`` shows a progress bar.
    ``same`` is the number of replicas m (an int) or a schedule: a callable of the iteration or a
    sequence of length ``n_iter``. Each iteration's CPT draw is kept in ``trace_``.

    ``cpts_`` is the mean of the CPT draws after the first ``burn_in`` iterations (``None``:
    ``n_iter // 2``), the posterior-mean estimate; ``cpts_last_`` is the final draw alone. The
    mean is the better estimate at small m: the final draw of a SAME chain still carries the
    posterior's spread, which averaging removes (on sachs, KL_avg 0.078 for the final draw
    against 0.033 for the mean of the trace). With a growing ``same`` schedule, set ``burn_in``
    past the iterations of small m. (Before this release, ``cpts_`` was the final draw.)

    ``batch_size`` splits the cases into minibatches of that many cases (``None``: one batch).
    Each visit to a batch sweeps its missing cells once and then redraws the CPTs from the
    counts of the latest sweep of every batch (the moving sum of BIDMach): the batch's new
    counts replace its counts of the previous pass. With more than one batch, only the batch
    being swept is on the GPU; the observed cases and every replica's imputed cells stay in host
    memory between visits, so the cases need not fit in GPU memory.

    ``devices`` splits the cases over devices (data parallel): ``"all"``, a GPU id, a list of
    ids, or a :class:`gpumcmc.shards.Shards` (``Shards(n_virtual=k)``: k parts on NumPy;
    :func:`gpumcmc.shards.one_device`: parts on one GPU; :func:`gpumcmc.shards.worker_shards`:
    one GPU per Dask worker). Each device sweeps the missing cells of its cases and counts
    them; the counts are summed over the devices (one all-reduce of the CPT cells per batch
    visit, :func:`allreduce_bytes`), and the CPTs are drawn from the sums with the same
    counter-based key everywhere, so every device holds the same CPTs. Every missing cell
    draws from the counter of its place in the whole batch's list, so for a seed the draws
    (``trace_`` and ``imputations_``) equal those of one device. With ``batch_size`` too,
    every batch is split over the devices, which sweep their parts of it at once. A Dask
    worker fits with all the cases and the same seed; its ``imputations_`` holds the rows of
    its own parts only, whose indices are in ``imputation_rows_``.

    ``learn=False`` keeps the given ``cpts_`` fixed and only samples the missing cells.

    The network is a scikit-learn estimator: ``get_params``/``set_params`` and
    ``sklearn.base.clone`` (which gives the network with the constructor's ``cpts``, unfitted).
    """

    def __init__(self, parents: dict, states: dict, cpts: dict | None = None, *, n_iter=100, same=1, prior=1.0,
                 burn_in=None, learn=True, batch_size=None, devices=None, backend=None, random_state=None,
                 progress=True):
        self.n_iter, self.same, self.prior, self.burn_in, self.learn = n_iter, same, prior, burn_in, learn
        self.batch_size, self.devices, self.backend = batch_size, devices, backend
        self.random_state, self.progress = random_state, progress
        self.cpts = cpts
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
        self.cpts_ = None
        if cpts is not None:
            missing = [v for v in self.nodes if v not in cpts]
            if missing:
                raise ValueError(f"cpts has no table for node(s) {missing}; give one for every node, or cpts=None.")
            self.cpts_ = {}
            for v in self.nodes:
                shape = tuple(self.card[p] for p in self.parents[v]) + (self.card[v],)
                a = np.asarray(cpts[v], dtype=np.float64)
                if a.size != int(np.prod(shape)):
                    raise ValueError(f"The CPT of {v!r} has {a.size} cells; its parents {self.parents[v]} and "
                                     f"states make it an array of shape {shape}.")
                a = a.reshape(shape)
                if np.any(a < 0) or not np.allclose(a.sum(-1), 1.0, atol=1e-6):
                    raise ValueError(f"The CPT of {v!r} must be non-negative with rows summing to 1.")
                self.cpts_[v] = a / a.sum(-1, keepdims=True)
        self.trace_ = None

    # ---------------------------------------------------------------- networks
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
            ps = list(cpd.variables[1:])
            parents[v] = ps
            vals = np.asarray(cpd.get_values())  # (card, prod parent cards)
            shape = tuple(len(cpd.state_names[p]) for p in ps) + (len(states[v]),)
            cpts[v] = vals.T.reshape(shape)
        order = [v for v in model.nodes() if v in states]
        return cls({v: parents[v] for v in order}, {v: states[v] for v in order}, {v: cpts[v] for v in order})

    @classmethod
    def from_bif(cls, path):
        """Read a BIF file, gzipped (``.gz``) or not."""
        path = str(path)
        opener = gzip.open if path.endswith(".gz") else open
        try:
            with opener(path, "rt") as f:
                text = f.read()
        except (gzip.BadGzipFile, UnicodeDecodeError, EOFError) as e:
            raise ValueError(f"{path} cannot be read as {'gzipped ' if opener is gzip.open else ''}BIF text "
                             f"({e}); give a BIF file (.bif, or .bif.gz gzipped).") from None
        states, parents, cpts = {}, {}, {}
        for m in re.finditer(r"variable\s+([^\s{]+)\s*\{(.*?)\n\s*\}", text, re.S):
            sm = re.search(r"\{\s*(.*?)\s*\}", m.group(2), re.S)
            if sm is None:
                raise ValueError(f"Variable {m.group(1)} in {path} has no states.")
            states[m.group(1)] = [s.strip() for s in sm.group(1).split(",")]
        if not states:
            raise ValueError(f"{path} declares no variables ('variable NAME {{ type discrete [ k ] {{ ... }}; }}'); "
                             "is it a BIF file?")

        def _declared(v, where):
            if v not in states:
                raise ValueError(f"{where} in {path} names {v!r}, which no variable block declares; declare it "
                                 "with 'variable ... { type discrete [ k ] { ... }; }'.")

        def _numbers(text_, v):
            try:
                return np.array([float(x) for x in re.split(r"[\s,]+", text_.strip())])
            except ValueError:
                raise ValueError(f"The probability block of {v!r} in {path} holds a value that is not a number: "
                                 f"{text_.strip()!r}.") from None

        for m in re.finditer(r"probability\s*\(\s*([^|)]+?)\s*(?:\|\s*([^)]*))?\)\s*\{(.*?)\}", text, re.S):
            v = m.group(1).strip()
            ps = [p.strip() for p in m.group(2).split(",")] if m.group(2) else []
            for u in [v, *ps]:
                _declared(u, f"The probability block ( {v}{' | ' + ', '.join(ps) if ps else ''} )")
            if v in parents:
                raise ValueError(f"{path} has two probability blocks for {v!r}; keep one.")
            parents[v] = ps
            body = m.group(3)
            card = len(states[v])
            shape = tuple(len(states[p]) for p in ps) + (card,)
            tab = re.search(r"table\s+([^;]*);", body)
            if tab is not None:
                t = _numbers(tab.group(1), v)
                if t.size != int(np.prod(shape)):
                    raise ValueError(f"The table of {v!r} in {path} has {t.size} values; with {card} states and "
                                     f"parents {ps} it needs {int(np.prod(shape))}.")
                # BIF tables list the child's state slowest.
                t = t.reshape((card,) + shape[:-1])
                t = np.moveaxis(t, 0, -1)
            else:
                t = np.full(shape, np.nan)
                for row in re.finditer(r"\(([^)]*)\)\s*([^;]*);", body):
                    names = [x.strip() for x in row.group(1).split(",")]
                    if len(names) != len(ps):
                        raise ValueError(f"The row ({row.group(1)}) of {v!r} in {path} names {len(names)} parent "
                                         f"states; {v!r} has the parents {ps}.")
                    for p, x in zip(ps, names):
                        if x not in states[p]:
                            raise ValueError(f"The row ({row.group(1)}) of {v!r} in {path} names state {x!r} of "
                                             f"{p!r}, whose states are {states[p]}.")
                    vals = _numbers(row.group(2), v)
                    if vals.size != card:
                        raise ValueError(f"The row ({row.group(1)}) of {v!r} in {path} has {vals.size} values; "
                                         f"{v!r} has {card} states.")
                    t[tuple(states[p].index(x) for p, x in zip(ps, names))] = vals
                if np.isnan(t).any():
                    first = next(np.ndindex(*shape[:-1])) if not ps else np.argwhere(np.isnan(t[..., 0]))[0]
                    names = ", ".join(states[p][k] for p, k in zip(ps, first))
                    raise ValueError(f"The probability block of {v!r} in {path} has no row ({names}); give a row "
                                     "for every combination of its parents' states, or a table.")
            cpts[v] = t
        missing = [v for v in states if v not in parents]
        if missing:
            raise ValueError(f"{path} has no probability block for {missing}; add 'probability ( NAME ) {{ table "
                             "...; }' for each.")
        order = list(states)
        return cls({v: parents.get(v, []) for v in order}, states, cpts)

    def to_bif(self, path):
        """Write the network (with ``cpts_``) as BIF."""
        self._need_cpts()
        lines = ["network unknown {\n}"]
        for v in self.nodes:
            lines.append(f"variable {v} {{\n  type discrete [ {self.card[v]} ] {{ {', '.join(self.states[v])} }};\n}}")
        for v in self.nodes:
            ps = self.parents[v]
            head = f"probability ( {v}{' | ' + ', '.join(ps) if ps else ''} ) {{"
            t = self.cpts_[v]
            if not ps:
                body = ["  table " + ", ".join(repr(float(x)) for x in t) + ";"]
            else:
                body = []
                for idx in np.ndindex(*t.shape[:-1]):
                    names = ", ".join(self.states[p][i] for p, i in zip(ps, idx))
                    body.append(f"  ({names}) " + ", ".join(repr(float(x)) for x in t[idx]) + ";")
            lines.append("\n".join([head, *body, "}"]))
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")

    def __sklearn_is_fitted__(self) -> bool:
        return self.cpts_ is not None

    def __repr__(self, N_CHAR_MAX=700):
        shown = ", ".join(f"{k}={getattr(self, k)!r}" for k in _SETTINGS
                          if getattr(self, k) is not _DEFAULTS[k] and getattr(self, k) != _DEFAULTS[k])
        return f"BayesianNetwork(<{len(self.nodes)} nodes{'' if self.cpts_ is None else ' with CPTs'}>" + \
            (f", {shown})" if shown else ")")

    def _need_cpts(self):
        if self.cpts_ is None:
            raise ValueError("This network has no CPTs; fit it or give cpts to the constructor.")

    # ---------------------------------------------------------------- data
    def sample(self, n: int, random_state=None) -> np.ndarray:
        """Forward-sample ``n`` complete cases as an int array (n, n_nodes) of state indices."""
        self._need_cpts()
        rs = np.random.default_rng(random_state)
        idx = {v: i for i, v in enumerate(self.nodes)}
        X = np.full((n, len(self.nodes)), -1, dtype=np.int64)
        for v in self._topo():
            t = self.cpts_[v]
            p = (t[tuple(X[:, idx[q]] for q in self.parents[v])] if self.parents[v]
                 else np.broadcast_to(t, (n, t.shape[-1])))
            u = rs.random(n)[:, None]
            X[:, idx[v]] = np.minimum((np.cumsum(p, -1) < u).sum(-1), t.shape[-1] - 1)
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

    def _encode(self, data) -> np.ndarray:
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover
            pd = None
        if pd is not None and isinstance(data, pd.DataFrame):
            unknown = [c for c in data.columns if c not in self.card]
            if unknown:
                raise ValueError(f"Columns {unknown} are not nodes of the network ({self.nodes}).")
            absent = [v for v in self.nodes if v not in data.columns]
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
                    if val is None or (isinstance(val, float) and np.isnan(val)):
                        continue
                    key = str(val)
                    if key not in lookup:
                        hint = ("; DataFrames mark missing cells with None or NaN, not -1" if key in ("-1", "-1.0")
                                else "")
                        raise ValueError(f"Unknown state {val!r} of node {v!r}; its states are "
                                         f"{self.states[v]}{hint}.")
                    X[r, j] = lookup[key]
            return X
        X = np.asarray(_backend.to_host(data))
        if X.ndim != 2 or X.shape[1] != len(self.nodes) or not np.issubdtype(X.dtype, np.integer):
            raise TypeError(f"data must be a DataFrame or an integer array (n_cases, {len(self.nodes)}) with -1 "
                            "for missing.")
        cards = np.array([self.card[v] for v in self.nodes])
        if np.any(X < -1) or np.any(X >= cards):
            raise ValueError("An integer cell is out of range: use 0..card-1 for states and -1 for missing.")
        return X.astype(np.int64)

    # ---------------------------------------------------------------- sampler
    def _colour(self):
        import networkx as nx
        g = nx.Graph()
        g.add_nodes_from(self.nodes)
        for v in self.nodes:
            ps = self.parents[v]
            g.add_edges_from((p, v) for p in ps)
            g.add_edges_from((a, b) for i, a in enumerate(ps) for b in ps[i + 1:])
        col = nx.greedy_color(g, strategy="largest_first")
        groups = {}
        for v in self.nodes:
            groups.setdefault(col[v], []).append(v)
        return [groups[k] for k in sorted(groups)]

    def fit(self, X, y=None, **settings):
        """Learn the CPTs from the cases ``X`` (an integer array (n_cases, n_nodes) of state indices
        with -1 for missing, or a DataFrame with None/NaN for missing) by SAME chromatic Gibbs, with
        the settings given to the constructor (see the class docstring). ``y`` is not used.

        The replicas' final imputations are in ``imputations_``, a uint8 array (m, n_cases,
        n_nodes) of state indices; the CPT draws are in ``trace_``, their mean after ``burn_in``
        in ``cpts_`` and the final draw in ``cpts_last_``.

        Settings given to ``fit`` (``fit(X, n_iter=..., same=...)``, or ``n_iter`` as its second
        argument) still work for this release and warn: give them to the constructor or to
        ``set_params`` instead.
        """
        if y is not None:
            if isinstance(y, (int, np.integer)) and not isinstance(y, bool) and "n_iter" not in settings:
                settings["n_iter"] = y  # the old fit(data, n_iter)
            else:
                raise TypeError("fit(X, y=None) takes no targets: y is not used; give the settings to the "
                                "constructor, e.g. BayesianNetwork(parents, states, n_iter=100).")
        unknown = sorted(set(settings) - set(_SETTINGS))
        if unknown:
            raise TypeError(f"fit() got unexpected keyword argument(s) {unknown}; the settings are {list(_SETTINGS)}.")
        if settings:
            given = ", ".join(f"{k}=..." for k in settings)
            warnings.warn(f"Passing settings to BayesianNetwork.fit is deprecated and will stop working in the next "
                          f"release; give them to the constructor, BayesianNetwork(parents, states, {given}), or "
                          f"call net.set_params({given}).fit(X).", DeprecationWarning, stacklevel=2)
        return self._fit(X, **{k: settings.get(k, getattr(self, k)) for k in _SETTINGS})

    def _fit(self, data, n_iter, same, prior, random_state, progress, backend, learn, batch_size, devices, burn_in):
        """:meth:`fit` with every setting given."""
        X = self._encode(data)
        ms, burn, bs = self._checked(len(X), n_iter, same, prior, learn, batch_size, burn_in)
        m_max = max(ms)
        sh, backend = _shards_for(devices, backend)
        rng = default_rng(random_state, backend=backend)
        xp = rng.xp() if sh is None else sh.xp
        if sh is None:
            sh = _Single(xp)
        plan = _Plan(self)
        ops = []
        for i in range(len(sh)):
            with sh.on(i):
                ops.append(_GpuOps(plan) if xp is not np else _NumpyOps(plan))

        parts, Zs, resident = _layout(X, bs, sh, rng, xp, plan, m_max)
        empty = np.int64 if xp is np else np.int32  # the counts' type when a device has no part of a batch

        with sh.on(0):
            if learn:
                logc = xp.asarray(plan.uniform_logc())
                total = xp.zeros(plan.C, dtype=xp.float64) if len(parts) > 1 else None
                last = [None] * len(parts)
            else:
                logc = xp.asarray(plan.logc_of(self.cpts_))
            trace = xp.empty((n_iter, plan.C), dtype=xp.float64) if learn else None
        bads = []
        for i in range(len(sh)):
            with sh.on(i):
                bads.append(xp.zeros(1, dtype=xp.int32))

        it = range(n_iter)
        if progress:
            from tqdm.auto import tqdm
            it = tqdm(it, desc="BayesianNetwork")
        # Value checks of the CPT draws are recorded on the device and read once, after the loop.
        with _validate.deferred():
            for t in it:
                m = ms[t]
                for q, row in enumerate(parts):
                    off = rng.advance(1)
                    copies = _shards.Replica(sh, logc)
                    counts = []
                    for i, b in enumerate(row):
                        if not b.n:
                            if learn:
                                with sh.on(i):
                                    counts.append(xp.zeros(plan.C, dtype=empty))
                            continue
                        lc = copies(i)
                        with sh.on(i):
                            if not resident:
                                Zs[i] = b.load(xp, m_max)
                            for c in range(len(plan.groups)):
                                ops[i].sweep(Zs[i], m, b, c, lc, rng.key, off, bads[i])
                            if learn:
                                counts.append(ops[i].counts(Zs[i], m, b.n))
                    if learn:
                        if sh.world > 1:
                            sh.allreduce(counts)
                        with sh.on(0):
                            # counts are whole numbers below 2**53, so every sum here is exact
                            if len(parts) == 1:  # the total is this batch's counts: one launch
                                alpha = xp.add(m * (prior - 1.0) + 1.0, counts[0], dtype=xp.float64)
                            else:
                                cq = counts[0].astype(xp.float64)
                                total += cq if last[q] is None else cq - last[q]
                                last[q] = cq
                                alpha = m * (prior - 1.0) + 1.0 + total
                            # the draw is normalised straight into the trace, where the sweeps read it
                            logc = ops[0].normalise(rng.gamma(alpha, log=True), out=trace[t])
                    if not resident:
                        for i, b in enumerate(row):
                            if b.n:
                                with sh.on(i):
                                    b.store(Zs[i])
        for i in range(len(sh)):
            with sh.on(i):
                _validate.report(bads[i][0] != 0, "Some cases have probability 0 under the CPTs (a missing cell "
                                 "has no possible state); check the data against the CPTs' zeros.")
        _validate.check()
        self._imputations(parts, Zs, resident, m_max, len(sh) == sh.world)
        self.n_shards_ = sh.world
        if not learn:
            return self
        self._keep_draws(plan, logc, trace, burn)
        return self

    def _checked(self, n, n_iter, same, prior, learn, batch_size, burn_in):
        """The settings of a fit of n cases, checked: (m at every iteration, burn-in, batch size)."""
        if not isinstance(n_iter, (int, np.integer)) or n_iter < 1:
            raise ValueError("n_iter must be a positive integer.")
        burn = n_iter // 2 if burn_in is None else burn_in
        if not isinstance(burn, (int, np.integer)) or not 0 <= burn < n_iter:
            raise ValueError(f"burn_in must be an integer from 0 to n_iter - 1 = {n_iter - 1}, or None "
                             f"(n_iter // 2); got {burn_in!r}.")
        burn = int(burn)
        sched = same if callable(same) else (lambda t, s=same: s[t]) if not np.isscalar(same) else (lambda t, s=same: s)
        ms = [int(sched(t)) for t in range(n_iter)]
        m_max = max(ms)
        if min(ms) < 1 or m_max > 65535:
            raise ValueError("same must be between 1 and 65535 at every iteration.")
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

    def _keep_draws(self, plan, logc, trace, burn):
        """``trace_``, ``cpts_`` (the mean of the draws after ``burn``) and ``cpts_last_`` from the
        draws of a fit (log-probabilities, the final draw ``logc`` and the (n_iter, C) ``trace``)."""
        lc = _backend.to_host(logc)
        tr = np.exp(_backend.to_host(trace))
        mean = tr[burn:].mean(0)
        self.cpts_, self.cpts_last_, self.trace_ = {}, {}, {}
        for j, v in enumerate(self.nodes):
            a, e = plan.toff[j], plan.toff[j + 1]
            shape = tuple(self.card[p] for p in self.parents[v]) + (self.card[v],)
            self.cpts_[v] = mean[a:e].reshape(shape)
            self.cpts_last_[v] = np.exp(lc[a:e]).reshape(shape)
            self.trace_[v] = tr[:, a:e].reshape((len(tr), -1, self.card[v]))
        self.burn_in_ = burn

    def _imputations(self, parts, Zs, resident, m_max, whole):
        """``imputations_`` from the parts (and ``imputation_rows_`` where they are not every row)."""
        pieces, rows = [], []
        for q, row in enumerate(parts):
            for i, b in enumerate(row):
                if resident:
                    pieces.append(_backend.to_host(Zs[i]))
                else:
                    Zh = np.repeat(b.obs[None], m_max, 0)
                    Zh[:, b.case, b.node] = b.vals
                    pieces.append(Zh)
                rows.append(np.arange(b.start, b.stop))
        self.imputations_ = pieces[0] if len(pieces) == 1 else np.concatenate(pieces, axis=1)
        if whole:
            self.imputation_rows_ = None
        else:
            self.imputation_rows_ = np.concatenate(rows)

    def to_arviz(self):
        """The CPT draws (one chain) as an ArviZ InferenceData."""
        if self.trace_ is None:
            raise ValueError("Fit the network first.")
        from gpumcmc.sampling import to_arviz
        post = {}
        for v in self.nodes:
            shape = tuple(self.card[p] for p in self.parents[v]) + (self.card[v],)
            post[f"cpt_{v}"] = self.trace_[v].reshape((1, len(self.trace_[v])) + shape)
        return to_arviz(post)

    def impute(self, data, method="mode", random_state=None, max_combinations=_MAX_COMBINATIONS,
               n_sweeps=50, replicas=64, backend=None):
        """Fill the missing cells from their conditional given the observed ones and ``cpts_``.

        A case whose missing cells have at most ``max_combinations`` joint states is filled exactly,
        by enumerating them: ``method="mode"`` takes the most probable joint state, ``"draw"`` draws
        one. The other cases (most cases of large networks with many missing cells: the joint
        states of hailfinder's cases number above 20,000 for 99.8% of them) are filled by Gibbs
        imputation: ``replicas`` independent chains of the fit's chromatic sweep, with the CPTs
        held fixed, run ``n_sweeps`` sweeps from uniform states; ``"mode"`` takes the most probable
        of the replicas' final joint states (an approximate joint mode, as good as the chains'
        exploration) and ``"draw"`` takes the first replica's (one approximate joint draw, exact
        as the chains converge). ``backend`` is the Gibbs imputation's backend (``None``: the
        active one).

        Raises ValueError for a case that has probability 0 under ``cpts_``.
        """
        self._need_cpts()
        if method not in ("mode", "draw"):
            raise ValueError(f"method must be 'mode' or 'draw', got {method!r}.")
        for name, val in (("max_combinations", max_combinations), ("n_sweeps", n_sweeps), ("replicas", replicas)):
            if not isinstance(val, (int, np.integer)) or isinstance(val, bool) or val < 1:
                raise ValueError(f"{name} must be a positive integer, got {val!r}.")
        X = self._encode(data).copy()
        rs = np.random.default_rng(random_state)
        cards = np.array([self.card[v] for v in self.nodes], dtype=np.float64)
        large = []
        for r in range(len(X)):
            mis = np.flatnonzero(X[r] < 0)
            if not len(mis):
                continue
            if np.prod(cards[mis]) > max_combinations:
                large.append(r)
                continue
            combos = np.array(list(np.ndindex(*[self.card[self.nodes[j]] for j in mis])))
            Y = np.repeat(X[r][None], len(combos), 0)
            Y[:, mis] = combos
            with np.errstate(divide="ignore"):
                lp = self.log_prob(Y)
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
        """Gibbs imputation of the cases ``X`` (see :meth:`impute`) with ``cpts_`` fixed.

        The replicas start from uniform states, which CPTs with zeros can make impossible (every
        state of a cell has probability 0 given the rest, so the exact sweep cannot move it).
        The first half of the sweeps therefore runs on the CPTs mixed with ``_SOFT`` of the
        uniform row, the second half on ``cpts_`` themselves; replicas whose final state is
        still impossible are left out of the result."""
        rng = default_rng(seed, backend=backend)
        xp = rng.xp()
        plan = _Plan(self)
        ops = _GpuOps(plan) if xp is not np else _NumpyOps(plan)
        b = plan.batch(X, 0, len(X))
        b.vals = xp.floor(_uniforms(xp, rng.key, rng.advance(1), replicas, b)
                          * xp.asarray(plan.card_of(b.node))).astype(xp.uint8)
        Z = b.load(xp, replicas)
        exact = xp.asarray(plan.logc_of(self.cpts_))
        soft = xp.asarray(plan.logc_of({v: (1 - _SOFT) * t + _SOFT / t.shape[-1] for v, t in self.cpts_.items()}))
        bad = xp.zeros(1, dtype=xp.int32)  # cells that could not move (read through the final states instead)
        for t in range(n_sweeps):
            off = rng.advance(1)
            for c in range(len(plan.groups)):
                ops.sweep(Z, replicas, b, c, soft if 2 * t < n_sweeps else exact, rng.key, off, bad)
        Z = _backend.to_host(Z).astype(np.int64)  # (replicas, n, V)
        with np.errstate(divide="ignore"):
            lp = self.log_prob(Z.reshape(-1, plan.V)).reshape(Z.shape[:2])
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
        """Log joint probability of complete cases (int array)."""
        self._need_cpts()
        X = np.asarray(X)
        out = np.zeros(len(X))
        for j, v in enumerate(self.nodes):
            ix = tuple(X[:, self.nodes.index(p)] for p in self.parents[v]) + (X[:, j],)
            out += np.log(self.cpts_[v][ix])
        return out

    def kl_avg(self, other) -> float:
        """KL_avg of the paper: the mean over all CPT rows of KL(true row || learnt row), with
        ``self`` the learnt network and ``other`` the reference (or the other way round: the rows
        of ``other`` are taken as the truth)."""
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
        tot, rows = 0.0, 0
        eps = 1e-300
        for v in self.nodes:
            P = np.asarray(other.cpts_[v]).reshape(-1, self.card[v])
            Q = np.asarray(self.cpts_[v]).reshape(-1, self.card[v])
            kl = np.where(P > 0, P * (np.log(np.maximum(P, eps)) - np.log(np.maximum(Q, eps))), 0.0).sum(-1)
            tot += kl.sum(); rows += len(kl)
        return float(tot / rows)


# ------------------------------------------------------------------------ sweep, counts, CPT draws
# The GPU path runs kernels_cu/bayesnet.cu; the NumPy path below is its twin (same counter layout,
# same double-precision operations in the same order, so the same draws for one seed).
FILE = "bayesnet.cu"
_KMAX = (4, 16, 64, 256)  # instantiations of bn_sweep: the largest number of states they take
# config.bayesnet_defines: tunable macros of bayesnet.cu, e.g. (("BN_AGG", 0),);
# config.bayesnet_shared_cells: counts in shared memory when every CPT together has at most this many cells
forward(__name__, {"_DEFINES": "bayesnet_defines", "_SHARED_CELLS": "bayesnet_shared_cells"})


_BLOCK_MAX = 4096  # the largest block of the cell order, in cases



def allreduce_bytes(net, n_batches: int = 1) -> int:
    """Bytes all-reduced per iteration of ``net.fit(..., devices=...)``: the counts of every CPT
    cell (int32), once per visit to a batch (``n_batches`` = ceil(n_cases / batch_size))."""
    return 4 * _Plan(net).C * int(n_batches)


def _block_rows(rows: int) -> int:
    """Cases per block of the cell order: a power of two near rows / 128, from 32 to 4096.

    Devices take whole blocks of a batch, so the balance between them is within a block; within
    a block the cells of one node are consecutive, so most warps of the sweep work on one node.
    The order (and so the draws for a seed) depends on the batch's size, not on the devices.
    """
    want, b = -(-int(rows) // 128), 32
    while b < want and b < _BLOCK_MAX:
        b *= 2
    return b


def _block_cuts(s: int, e: int, block: int) -> list:
    """The case boundaries of the blocks of batch s..e: s, the multiples of ``block`` inside, e."""
    return [s, *range((s // block + 1) * block, e, block), e]


def _uniforms(xp, key, off, m_max, b):
    """Uniforms (m_max, b.M) for the cells of part ``b``: those of ``rng.random((m_max, b.Mtot))``
    at call ``off`` in the columns of the cells' numbers in the whole batch."""
    from gpumcmc.random import _fill

    if b.M == b.Mtot:  # the whole batch: the fill itself
        return _fill.fill(xp, "uniform", m_max * b.M, np.float64, key, off).reshape(m_max, b.M)
    pos = np.concatenate([int(b.g0[c]) + np.arange(int(b.gptr[c + 1] - b.gptr[c]), dtype=np.int64)
                          for c in range(len(b.g0))])
    elements = np.arange(m_max, dtype=np.int64)[:, None] * b.Mtot + pos[None, :]
    return _fill.uniform_at(xp, xp.asarray(elements), np.float64, key, off)


def _layout(X, bs, sh, rng, xp, plan, m_max):
    """The cases ``X`` in batches of ``bs`` and each batch in parts, one per local shard of ``sh``,
    cut at whole blocks of the cell order: ``parts[q][i]``, shard i's part of batch q, with every
    replica's imputed cells drawn uniformly; and, where there is one batch, each part's case
    matrix ``Zs[i]`` on its device (``resident``; else the parts are loaded at each visit)."""
    n, V = X.shape
    obs = np.where(X < 0, 0, X).astype(np.uint8)
    block = _block_rows(min(n, bs))
    # parts[q][i]: local shard i's part of batch q (global rows s..e), cut at whole blocks
    parts = []
    for s in range(0, n, bs):
        e = min(n, s + bs)
        cuts = _block_cuts(s, e, block)
        every = _shards.bounds(len(cuts) - 1, sh.world)
        parts.append([plan.batch(X, cuts[every[r][0]], cuts[every[r][1]], obs, within=(s, e), block=block)
                      for r in sh.ranks])
    resident = len(parts) == 1
    # the imputed cells of every replica, per part: (m_max, M) state indices, uniform at the start
    for row in parts:
        off = rng.advance(1)
        for i, b in enumerate(row):
            with sh.on(i):
                u = _uniforms(xp, rng.key, off, m_max, b)
                b.vals = xp.floor(u * xp.asarray(plan.card_of(b.node))).astype(xp.uint8)
                if not resident:
                    b.vals = _backend.to_host(b.vals)
                    if xp is not np and b.n:
                        b.pin()
    Zs = [None] * len(sh)
    if resident:
        for i, b in enumerate(parts[0]):
            with sh.on(i):
                Zs[i] = b.load(xp, m_max) if b.n else xp.empty((m_max, 0, V), dtype=xp.uint8)
    return parts, Zs, resident


def _shards_for(devices, backend):
    """The :class:`~gpumcmc.shards.Shards` of ``devices`` (None: None) and the backend they run on."""
    if devices is None:
        return None, backend
    return _shards.resolve(devices, backend, "the cases")


class _Single:
    """Every case in one part, on the backend's device: the layout of a fit without ``devices``."""

    world, ranks, devices = 1, [0], [None]

    def __init__(self, xp):
        self.xp = xp

    def __len__(self):
        return 1

    def on(self, i):
        return contextlib.nullcontext()


class _Plan:
    """The network as flat integer arrays (the layout documented in kernels_cu/bayesnet.cu)."""

    def __init__(self, net):
        nodes = net.nodes
        ix = {v: i for i, v in enumerate(nodes)}
        self.V = len(nodes)
        self.card = np.array([net.card[v] for v in nodes], dtype=np.int32)
        rows = np.array([int(np.prod([net.card[p] for p in net.parents[v]])) for v in nodes], dtype=np.int64)
        self.toff = np.concatenate([[0], np.cumsum(rows * self.card)]).astype(np.int64)
        self.C = int(self.toff[-1])
        if self.C >= 2**31:
            raise ValueError("The CPTs have more than 2**31 cells together; this network is too large.")
        self.toff = self.toff.astype(np.int32)
        self.row_ptr = np.concatenate([[0], np.cumsum(np.repeat(self.card, rows))]).astype(np.int32)
        par, pstride, pptr = [], [], [0]
        stride_in = {}
        for v in nodes:
            s = 1
            st = {}
            for p in reversed(net.parents[v]):
                st[p] = s
                s *= net.card[p]
            for p in net.parents[v]:
                par.append(ix[p]); pstride.append(st[p])
            pptr.append(len(par))
            stride_in[v] = st
        ch, cstride, cptr = [], [], [0]
        for v in nodes:
            for c in nodes:
                if v in net.parents[c]:
                    ch.append(ix[c]); cstride.append(stride_in[c][v])
            cptr.append(len(ch))
        as32 = lambda a: np.array(a, dtype=np.int32)  # noqa: E731
        self.par_ptr, self.par, self.par_stride = as32(pptr), as32(par), as32(pstride)
        self.ch_ptr, self.ch, self.ch_stride = as32(cptr), as32(ch), as32(cstride)
        self.groups = [sorted(ix[v] for v in g) for g in net._colour()]

    def uniform_logc(self):
        return np.repeat(-np.log(self.card.astype(np.float64)), np.diff(self.toff))

    def logc_of(self, cpts):
        with np.errstate(divide="ignore"):
            return np.concatenate([np.log(np.asarray(cpts[v], dtype=np.float64).ravel()) for v in cpts])

    def card_of(self, node):
        return self.card[node]

    def batch(self, X, start, stop, obs=None, within=None, block=None):
        """The missing cells of cases start..stop-1 of the batch ``within`` = (s, e) (default: the
        cases themselves): colour by colour; in a colour, block of ``block`` cases (global case
        index // block) by block, then node by node, then case by case.

        Numbered the same way over the whole batch, a colour's cells of a run of whole blocks
        are consecutive, so a part of a batch cut at block boundaries holds one range of the
        batch's cell numbers per colour (``g0``: where each colour's range starts)."""
        if obs is None:
            obs = np.where(X < 0, 0, X).astype(np.uint8)
        s, e = (start, stop) if within is None else within
        if block is None:
            block = _block_rows(e - s)
        lo = (start // block) * block  # pad to whole blocks, so that a reshape gives (block, node, case) order
        nb = -(-(stop - lo) // block) if stop > start else 0
        case, node, gptr, g0 = [], [], [0], []
        before, whole = (X[s:start] < 0).sum(0), (X[s:e] < 0).sum(0)
        first = 0
        for g in self.groups:
            pad = np.zeros((nb * block, len(g)), dtype=bool)
            if nb:
                pad[start - lo:stop - lo] = X[start:stop][:, g] < 0
            bi, gi, ri = np.nonzero(pad.reshape(nb, block, len(g)).transpose(0, 2, 1))
            case.append((bi * block + ri + lo - start).astype(np.int32))
            node.append(np.asarray(g, dtype=np.int32)[gi])
            gptr.append(gptr[-1] + len(bi))
            g0.append(first + int(before[g].sum()))
            first += int(whole[g].sum())
        return _Batch(start, stop, obs[start:stop], np.concatenate(case), np.concatenate(node),
                      np.array(gptr, dtype=np.int64), np.array(g0, dtype=np.int64), first)


def _to_device(xp, a):
    if xp is np or isinstance(a, xp.ndarray):
        return a
    d = xp.empty(a.shape, dtype=a.dtype)
    d.set(a)  # from page-locked memory (see _Batch.pin), a DMA copy without staging
    return d


class _Batch:
    """A batch of cases (or a device's part of one): its observed cells ``obs`` (0 where missing),
    its missing cells (``case`` relative to ``start``, ``node``), the colour groups' ranges in that
    list (``gptr``), where each range starts in the numbering of the whole batch's ``Mtot`` cells
    (``g0``) and, between visits, the replicas' imputed values ``vals`` (m_max, M)."""

    def __init__(self, start, stop, obs, case, node, gptr, g0=None, Mtot=None):
        self.start, self.stop, self.n = start, stop, stop - start
        self.obs, self.case, self.node, self.gptr = obs, case, node, gptr
        self.M = len(case)
        self.g0 = gptr[:-1] if g0 is None else g0
        self.Mtot = self.M if Mtot is None else Mtot
        self.vals = None
        self.case_d = self.node_d = None
        self.launches = None  # the sweep's launch arguments (GPU) or cell lists by node (twin), per upload

    def pin(self):
        """Keep the host arrays in page-locked memory, for batches streamed to the GPU at each visit."""
        import cupyx

        for name in ("obs", "case", "node", "vals"):
            a = getattr(self, name)
            p = cupyx.empty_pinned(a.shape, dtype=a.dtype)
            p[...] = a
            setattr(self, name, p)

    def upload(self, xp):
        self.case_d, self.node_d = _to_device(xp, self.case), _to_device(xp, self.node)
        self.launches = None

    def load(self, xp, m_max):
        """The batch's case matrix, replicated m_max times, with the imputed cells filled in."""
        self.upload(xp)
        Z = xp.empty((m_max,) + self.obs.shape, dtype=xp.uint8)
        Z[...] = _to_device(xp, self.obs)[None]
        Z[:, self.case_d, self.node_d] = _to_device(xp, self.vals)
        return Z

    def store(self, Z):
        """Keep the imputed cells of ``Z`` (in host memory) and free the device copies."""
        v = Z[:, self.case_d, self.node_d]
        if isinstance(v, np.ndarray):
            self.vals = v
        else:
            v.get(out=self.vals)
        self.case_d = self.node_d = self.launches = None


def _row_of(rows, pars):
    """Row index (intp) of a CPT for every case in ``rows`` (..., columns): sum over the parents'
    (column, stride) of the column's state times the stride."""
    r = np.zeros(rows.shape[:-1], dtype=np.intp)
    for j, st in pars:
        r += rows[..., j] * st
    return r


def _row(rows, f, plan):
    """Row index of node f's CPT for every case in ``rows`` (..., V)."""
    r = np.zeros(rows.shape[:-1], dtype=np.int64)
    for q in range(plan.par_ptr[f], plan.par_ptr[f + 1]):
        r += rows[..., plan.par[q]].astype(np.int64) * int(plan.par_stride[q])
    return r


class _NumpyOps:
    """The NumPy twin of the kernels of bayesnet.cu."""

    def __init__(self, plan):
        self.plan = plan

    def _cells(self, b, c):
        """Colour ``c``'s missing cells of part ``b``, node by node: (v, their cases, their numbers in
        the whole batch (uint64), the columns of Z that v's Markov blanket reads, v's column among
        them, v's parents' (column, stride) and each child's (table offset, card, column, stride of
        v, parents' (column, stride))). Made once per upload of the part, as the GPU launches are."""
        cache = b.launches if b.launches is not None else {}
        b.launches = cache
        got = cache.get(("cells", c))
        if got is None:
            P = self.plan
            a, e = int(b.gptr[c]), int(b.gptr[c + 1])
            nodes = b.node[a:e]
            got = []
            for v in P.groups[c]:
                sel = np.flatnonzero(nodes == v)
                if not len(sel):
                    continue
                pars = lambda f: [(int(P.par[q]), int(P.par_stride[q]))  # noqa: E731
                                  for q in range(P.par_ptr[f], P.par_ptr[f + 1])]
                chs = [(int(P.ch[q]), int(P.ch_stride[q])) for q in range(P.ch_ptr[v], P.ch_ptr[v + 1])]
                cols = sorted({v, *(p for p, _ in pars(v)), *(h for h, _ in chs),
                               *(p for h, _ in chs for p, _ in pars(h))})
                at = {col: j for j, col in enumerate(cols)}
                kids = [(int(P.toff[h]), int(P.card[h]), at[h], s, [(at[p], st) for p, st in pars(h)])
                        for h, s in chs]
                got.append((v, b.case[a + sel].astype(np.intp), (int(b.g0[c]) + sel).astype(np.uint64),
                            np.array(cols, dtype=np.intp), at[v], [(at[p], st) for p, st in pars(v)], kids))
            cache[("cells", c)] = got
        return got

    def sweep(self, Z, m, b, c, logc, key, off, bad):
        """Draw every missing cell of colour group ``c`` in replicas 0..m-1 of ``Z`` (in place)."""
        from gpumcmc.random._philox import Words, philox32

        P = self.plan
        Mtot = int(b.Mtot)
        for v, cs, pos, cols, jv, vpars, kids in self._cells(b, c):
            # (m, Mv, the blanket's columns), gathered with take rather than fancy indexing, the faster of
            # the two here (benchmarks/NOTES.md)
            rows = np.take(np.take(Z[:m], cs, axis=1), cols, axis=2).astype(np.intp)
            K = int(P.card[v])
            tv = _row_of(rows, vpars)
            tv *= K
            tv += int(P.toff[v])
            lp = [logc.take(tv + k) for k in range(K)]
            xv = rows[..., jv]
            for toff, Kc, jc, s, cpars in kids:
                base = _row_of(rows, cpars) - xv * s
                tc = toff + rows[..., jc]
                for k in range(K):
                    lp[k] += logc.take(tc + (base + k * s) * Kc)
            mx = lp[0]
            for k in range(1, K):
                mx = np.where(lp[k] > mx, lp[k], mx)
            ok = mx > -1.0e308
            cum, cums = 0.0, []
            with np.errstate(invalid="ignore"):
                for k in range(K):
                    cum = cum + np.exp(lp[k] - mx)
                    cums.append(cum)
            # Philox counters (r Mtot + cell number, offset): the fill's uniforms u01_f64(w0, w1)
            idx = (np.arange(m, dtype=np.uint64)[:, None] * np.uint64(Mtot) + pos[None]).ravel()
            n = idx.size
            hi = idx >> np.uint64(32)
            c1 = int(hi[0]) if hi[0] == hi[-1] else hi.astype(np.uint32)
            u = np.empty(n), np.empty(n)
            philox32(idx.astype(np.uint32), c1, off & 0xFFFFFFFF, off >> 32, int(key[0]), int(key[1]), Words(n), n,
                     u01=u)
            target = u[0].reshape(cum.shape) * cum
            draw = np.zeros(target.shape, dtype=np.intp)
            for ck in cums:
                draw += ck < target
            Z[:m, cs, v] = np.where(ok, np.minimum(draw, K - 1), xv)
            if not ok.all():
                bad[0] = 1

    def counts(self, Z, m, n):
        """Counts of every CPT cell over replicas 0..m-1 and every case (int64, length C)."""
        P = self.plan
        rows = Z[:m].reshape(-1, P.V)
        out = np.zeros(P.C, dtype=np.int64)
        for v in range(P.V):
            cell = P.toff[v] + _row(rows, v, P) * int(P.card[v]) + rows[:, v]
            out += np.bincount(cell, minlength=P.C)
        return out

    def normalise(self, x, out=None):
        """Row-wise log-normalisation of log-gammas (max and sum in order, as the kernel), into
        ``out`` (default: ``x`` itself)."""
        P = self.plan
        start, lens = P.row_ptr[:-1], np.diff(P.row_ptr)
        mx = x[start].copy()
        for k in range(1, int(lens.max())):
            sel = lens > k
            xk = x[start[sel] + k]
            mx[sel] = np.where(xk > mx[sel], xk, mx[sel])
        s = np.zeros(len(start))
        for k in range(int(lens.max())):
            sel = lens > k
            s[sel] = s[sel] + np.exp(x[start[sel] + k] - mx[sel])
        if out is None:
            out = x
        np.subtract(x, np.repeat(mx + np.log(s), lens), out=out)
        return out


class _GpuOps:
    """Launchers of the kernels of bayesnet.cu (same interface as :class:`_NumpyOps`)."""

    def __init__(self, plan):
        import cupy as cp

        self.plan = plan
        self.cp = cp
        d = {k: cp.asarray(getattr(plan, k)) for k in
             ("card", "toff", "par_ptr", "par", "par_stride", "ch_ptr", "ch", "ch_stride", "row_ptr")}
        self.d = d
        # the sweep's instantiation per colour group: the smallest KMAX that holds its largest node
        self.kmax = [next(k for k in _KMAX if k >= int(plan.card[g].max())) for g in plan.groups]
        self.names = tuple(f"bn_sweep<{k}>" for k in sorted(set(self.kmax)))  # only these are compiled
        self._counts = None

    def _fn(self, name):
        return _loader.get_function(FILE, name, self.names, config.bayesnet_defines)

    def _sweep_args(self, b, c, m):
        """The launch of colour ``c``'s sweep of part ``b`` with m replicas, but for the per-call
        arguments: (kernel, grid, block, the other arguments by name), made once per upload of the
        part's cell lists and kept on the part."""
        cache = b.launches if b.launches is not None else {}
        b.launches = cache
        got = cache.get((c, m))
        if got is None:
            a, e = int(b.gptr[c]), int(b.gptr[c + 1])
            P, d = self.plan, self.d
            fn = self._fn(f"bn_sweep<{self.kmax[c]}>")
            block = dict(config.bayesnet_defines).get("BN_BLOCK", 256)
            gx = max(1, min(-(-(e - a) // block), -(-_loader.sm_count() * 32 // m)))
            fixed = _kernel_args.part(
                FILE, "bn_sweep", n=_loader.i64(b.n), V=_loader.i32(P.V), cell_case=b.case_d[a:e],
                cell_node=b.node_d[a:e], Mc=_loader.i64(e - a), cell0=_loader.i64(b.g0[c]), Mtot=_loader.i64(b.Mtot),
                card=d["card"], toff=d["toff"], par_ptr=d["par_ptr"], par=d["par"], par_stride=d["par_stride"],
                ch_ptr=d["ch_ptr"], ch=d["ch"], ch_stride=d["ch_stride"])
            got = cache[(c, m)] = (fn, (gx, m), (block,), fixed)
        return got

    def sweep(self, Z, m, b, c, logc, key, off, bad):
        if b.gptr[c] == b.gptr[c + 1]:
            return
        fn, grid, block, fixed = self._sweep_args(b, c, m)
        fn(grid, block, _kernel_args.args(FILE, "bn_sweep", Z=Z, logc=logc, **_kernel_args.philox(key, off), bad=bad,
                                          **fixed))

    def counts(self, Z, m, n):
        P, d, cp = self.plan, self.d, self.cp
        if self._counts is None:
            self._counts = cp.empty(P.C, dtype=cp.int32)
        out = self._counts  # one buffer, read (by the CPT draw or the all-reduce) before the next call
        out.data.memset_async(0, out.nbytes)
        fn = self._fn("bn_counts")
        shared = P.C <= config.bayesnet_shared_cells
        smem = 4 * P.C if shared else 0
        block = dict(config.bayesnet_defines).get("BN_COUNT_BLOCK", 256)
        rows = m * n
        grid = max(1, min(-(-rows // block), _loader.sm_count() * _loader.resident_blocks(fn, block, smem)))
        fn((grid,), (block,),
           _kernel_args.args(FILE, "bn_counts", Z=Z, rows=_loader.i64(rows), V=_loader.i32(P.V), card=d["card"],
                             toff=d["toff"], par_ptr=d["par_ptr"], par=d["par"], par_stride=d["par_stride"],
                             counts=out, C=_loader.i32(P.C), use_shared=_loader.i32(shared)),
           shared_mem=smem)
        return out

    def normalise(self, x, out=None):
        fn = self._fn("bn_normalise")
        R = len(self.plan.row_ptr) - 1
        if out is None:
            out = x
        _loader.launch(fn, R, _kernel_args.args(FILE, "bn_normalise", x=x, out=out, row_ptr=self.d["row_ptr"],
                                                R=_loader.i32(R)), block=128)
        return out
