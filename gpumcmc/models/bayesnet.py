"""Discrete Bayesian networks learnt from incomplete cases by SAME-replicated chromatic Gibbs.

The sampler follows Seita, Chen & Canny: the moral graph is coloured; all the
missing cells of one colour are drawn at once (in every case and every SAME
replica) from their Markov-blanket conditionals; then every CPT row is drawn
from Dirichlet(m (prior - 1) + 1 + counts summed over the m replicas), the
posterior raised to the power m.

Examples
--------
>>> from gpumcmc.models.bayesnet import BayesianNetwork
>>> net = BayesianNetwork.koller()
>>> X = net.sample(200, random_state=0)
>>> X[::3, 2] = -1
>>> fit = BayesianNetwork.koller().fit(X, n_iter=5, same=2, random_state=0, progress=False, backend="numpy")
>>> fit.kl_avg(net) >= 0
True
"""
from __future__ import annotations

import gzip
import re

import numpy as np

from gpumcmc import _validate
from gpumcmc import backend as _backend
from gpumcmc.random import default_rng


class BayesianNetwork:
    """A discrete Bayesian network: ``parents`` (node -> parent names), ``states`` (node -> state names)
    and optional ``cpts`` (node -> array of shape (*parent cards, card))."""

    def __init__(self, parents: dict, states: dict, cpts: dict | None = None):
        self.nodes = list(states)
        for v, ps in parents.items():
            if v not in states:
                raise ValueError(f"Node {v!r} has parents but no states; give states for every node.")
            for p in ps:
                if p not in states:
                    raise ValueError(f"Parent {p!r} of {v!r} is not a node; add it to states.")
        self.parents = {v: list(parents.get(v, [])) for v in self.nodes}
        self.states = {v: [str(s) for s in states[v]] for v in self.nodes}
        self.card = {v: len(self.states[v]) for v in self.nodes}
        self.cpts_ = None
        if cpts is not None:
            self.cpts_ = {}
            for v in self.nodes:
                shape = tuple(self.card[p] for p in self.parents[v]) + (self.card[v],)
                a = np.asarray(cpts[v], dtype=np.float64).reshape(shape)
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
        with opener(path, "rt") as f:
            text = f.read()
        states, parents, cpts = {}, {}, {}
        for m in re.finditer(r"variable\s+([^\s{]+)\s*\{(.*?)\n\s*\}", text, re.S):
            sm = re.search(r"\{\s*(.*?)\s*\}", m.group(2), re.S)
            if sm is None:
                raise ValueError(f"Variable {m.group(1)} in {path} has no states.")
            states[m.group(1)] = [s.strip() for s in sm.group(1).split(",")]
        for m in re.finditer(r"probability\s*\(\s*([^|)]+?)\s*(?:\|\s*([^)]*))?\)\s*\{(.*?)\}", text, re.S):
            v = m.group(1).strip()
            ps = [p.strip() for p in m.group(2).split(",")] if m.group(2) else []
            parents[v] = ps
            body = m.group(3)
            card = len(states[v])
            shape = tuple(len(states[p]) for p in ps) + (card,)
            t = np.zeros(shape)
            tab = re.search(r"table\s+([^;]*);", body)
            if tab is not None:
                t = np.array([float(x) for x in re.split(r"[\s,]+", tab.group(1).strip())])
                # BIF tables list the child's state slowest.
                t = t.reshape((card,) + shape[:-1])
                t = np.moveaxis(t, 0, -1)
            else:
                for row in re.finditer(r"\(([^)]*)\)\s*([^;]*);", body):
                    idx = tuple(states[p].index(s.strip()) for p, s in zip(ps, row.group(1).split(",")))
                    t[idx] = [float(x) for x in re.split(r"[\s,]+", row.group(2).strip())]
            cpts[v] = t
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
            p = t[tuple(X[:, idx[q]] for q in self.parents[v])] if self.parents[v] else np.broadcast_to(t, (n, t.shape[-1]))
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
                raise ValueError("The network has a directed cycle.")
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
                        raise ValueError(f"Unknown state {val!r} of node {v!r}; its states are {self.states[v]}.")
                    X[r, j] = lookup[key]
            return X
        X = np.asarray(_backend.to_host(data))
        if X.ndim != 2 or X.shape[1] != len(self.nodes) or not np.issubdtype(X.dtype, np.integer):
            raise TypeError(f"data must be a DataFrame or an integer array (n_cases, {len(self.nodes)}) with -1 for missing.")
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

    def fit(self, data, n_iter=100, same=1, prior=1.0, random_state=None, progress=True, backend=None,
            learn=True):
        """Learn the CPTs from cases with missing cells by SAME chromatic Gibbs.

        ``same`` is the number of replicas m (an int) or a schedule: a callable of the iteration or a
        sequence of length ``n_iter``. Each iteration's CPT draw is kept in ``trace_``.
        ``learn=False`` keeps the given ``cpts_`` fixed and only samples the missing cells (the
        replicas' final imputations are in ``imputations_``, shape (m, n_cases, n_nodes)).
        """
        if prior <= 0:
            raise ValueError("prior must be positive.")
        X = self._encode(data)
        rng = default_rng(random_state, backend=backend)
        xp = rng.xp()
        sched = same if callable(same) else (lambda t, s=same: s[t]) if not np.isscalar(same) else (lambda t, s=same: s)
        m_max = int(max(sched(t) for t in range(n_iter)))
        if m_max < 1:
            raise ValueError("same must be at least 1.")
        n, V = X.shape
        idx = {v: i for i, v in enumerate(self.nodes)}
        # flat CPT layout: node v has rows indexed by parent configuration
        strides = {}
        for v in self.nodes:
            s, st = 1, {}
            for p in reversed(self.parents[v]):
                st[p] = s; s *= self.card[p]
            strides[v] = (st, s)
        children = {v: [c for c in self.nodes if v in self.parents[c]] for v in self.nodes}
        Xd = xp.asarray(X)
        miss = Xd < 0
        miss_any = (X < 0).any(0)  # host-side: which nodes have missing cells
        # init: missing cells uniform over states, same in every replica draw
        cards = xp.asarray(np.array([self.card[v] for v in self.nodes]))
        u0 = rng.random((m_max, n, V))
        Z = xp.where(miss[None], xp.floor(u0 * cards).astype(xp.int64), Xd[None])
        if not learn:
            self._need_cpts()
        if not learn:
            logc = {v: xp.log(xp.asarray(self.cpts_[v].reshape(strides[v][1], -1))) for v in self.nodes}
        else:
            logc = {v: xp.full((strides[v][1], self.card[v]), -np.log(self.card[v])) for v in self.nodes}
        groups = self._colour()
        draws = {v: [] for v in self.nodes}

        def cfg(Zr, v):
            c = 0
            for p, s in strides[v][0].items():
                c = c + Zr[..., idx[p]] * s
            return c

        it = range(n_iter)
        if progress:
            from tqdm.auto import tqdm
            it = tqdm(it, desc="BayesianNetwork")
        # Value checks in the sweeps are recorded on the device and read once, after the loop.
        with _validate.deferred():
            for t in it:
                m = int(sched(t))
                Zr = Z[:m]
                for grp in groups:
                    for v in grp:
                        j = idx[v]
                        if not miss_any[j]:
                            continue
                        K = self.card[v]
                        lp = logc[v][cfg(Zr, v)]  # (m, n, K)
                        for c in children[v]:
                            s = strides[c][0][v]
                            base = cfg(Zr, c) - Zr[..., j] * s
                            rows = base[..., None] + xp.arange(K) * s
                            lp = lp + logc[c][rows, Zr[..., idx[c]][..., None]]
                        lp = lp - lp.max(-1, keepdims=True)
                        p = xp.exp(lp)
                        cum = xp.cumsum(p, -1)
                        u = rng.random((m, n)) * cum[..., -1]
                        k = xp.minimum((cum < u[..., None]).sum(-1), K - 1)
                        Zr[..., j] = xp.where(miss[:, j][None], k, Zr[..., j])
                for v in (self.nodes if learn else ()):
                    R, K = strides[v][1], self.card[v]
                    flat = (cfg(Zr, v) * K + Zr[..., idx[v]]).ravel()
                    counts = xp.bincount(flat, minlength=R * K).reshape(R, K)
                    alpha = m * (prior - 1.0) + 1.0 + counts
                    logc[v] = rng.dirichlet(alpha, log=True)
                    draws[v].append(xp.exp(logc[v]))  # stays on the device: no sync per iteration
        _validate.check()
        self.imputations_ = _backend.to_host(Z)
        if not learn:
            return self
        self._logc = logc
        self.cpts_ = {v: _backend.to_host(xp.exp(logc[v])).reshape(
            tuple(self.card[p] for p in self.parents[v]) + (self.card[v],)) for v in self.nodes}
        self.trace_ = {v: _backend.to_host(xp.stack(draws[v])) for v in self.nodes}
        return self

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

    def impute(self, data, method="mode", random_state=None):
        """Fill missing cells from the conditional given the observed ones and ``cpts_`` (exact, by
        enumeration over each case's missing cells; for small numbers of missing cells per case)."""
        self._need_cpts()
        X = self._encode(data).copy()
        rs = np.random.default_rng(random_state)
        for r in range(len(X)):
            mis = np.flatnonzero(X[r] < 0)
            if not len(mis):
                continue
            combos = np.array(list(np.ndindex(*[self.card[self.nodes[j]] for j in mis])))
            Y = np.repeat(X[r][None], len(combos), 0)
            Y[:, mis] = combos
            lp = self.log_prob(Y)
            p = np.exp(lp - lp.max()); p /= p.sum()
            k = int(np.argmax(p)) if method == "mode" else int(rs.choice(len(p), p=p))
            X[r] = Y[k]
        return X

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
        self._need_cpts(); other._need_cpts()
        tot, rows = 0.0, 0
        eps = 1e-300
        for v in self.nodes:
            P = np.asarray(other.cpts_[v]).reshape(-1, self.card[v])
            Q = np.asarray(self.cpts_[v]).reshape(-1, self.card[v])
            kl = np.where(P > 0, P * (np.log(np.maximum(P, eps)) - np.log(np.maximum(Q, eps))), 0.0).sum(-1)
            tot += kl.sum(); rows += len(kl)
        return float(tot / rows)
