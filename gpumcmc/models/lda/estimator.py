"""The scikit-learn face of LDA: :class:`LDA` (``fit``, ``transform``, ``score``, ``perplexity``), which
runs :mod:`.algorithm`'s sweep (or :mod:`.sharded`'s) through :func:`gpumcmc.sampling.run`."""

from __future__ import annotations

import functools
import os

import numpy as np

from gpumcmc import _validate
from gpumcmc import backend as _backend
from gpumcmc._config import config
from gpumcmc.random import default_rng
from gpumcmc.sampling import Estimator, Monitor, run, to_arviz
from gpumcmc.sampling._estimator import Integral, Interval, Real, StrOptions, atomic_fit, mixin, same_array
from gpumcmc.shards import resolve

from .algorithm import LDAInfo, init, log_likelihood, step
from .corpus import _seed_picks, _seeded_phi, completion_split, tokens_from
from .sharded import shard_corpus, shard_data, sharded_gibbs


def _monitored(sweep_fn, read):
    """``(sweep, monitor)``: ``sweep_fn(rng, state, loglik=True)``, its ``info.loglik`` kept aside for the
    monitor, ``read(loglik)``; ``sweep_fn(rng, state)``, without the sums, where the driver's
    ``sweep.monitored`` says no monitor reads the sweep (never under a CUDA graph)."""
    last = [None]

    class _Sweep:
        monitored = True

        def __call__(self, rng, state):
            if self.monitored:
                state, info = sweep_fn(rng, state, loglik=True)
                last[0] = info.loglik
            else:
                state, _ = sweep_fn(rng, state)
            return state, LDAInfo()

    return _Sweep(), lambda state: read(last[0])


class LDA(mixin("ClassNamePrefixFeaturesOutMixin"), mixin("TransformerMixin"), Estimator):
    """Latent Dirichlet allocation by uncollapsed Gibbs sampling, on the GPU or NumPy.

    The guide's LDA page explains the sweep and how to choose every setting. Parameters follow
    scikit-learn's ``LatentDirichletAllocation``: ``doc_topic_prior`` (alpha) and ``topic_word_prior``
    (beta) default to ``1 / n_components``. ``n_iter`` sweeps are kept after ``burn_in``;
    ``components_`` and ``doc_topic_`` are posterior means over the kept sweeps (each sweep's given its topic
    counts: ``(n + prior) / (total + L prior)``), of chain
    ``best_chain_``, the one of the ``n_chains`` (run in the same launches) with the highest final
    log-likelihood, as is ``loglik_trace_`` (iterations, values); ``loglik_traces_`` holds every
    chain's, ``(n_chains, n)``, and :meth:`to_arviz` returns them. The log-likelihood per token (every
    ``monitor_every`` sweeps and at the last) is summed by the z-draw as it draws: the value at sweep
    ``i`` scores the state after ``i - 1`` sweeps.

    ``start``: ``"seeded"`` (topics from documents picked k-means++-style, :func:`seeded_topics`, and
    theta = 1 / K), ``"random"`` (a random topic for every token, then theta and phi given them) or
    ``"auto"`` (seeded where K times the tokens is at most ``config.lda_seed_exact_work`` and at least K
    documents have tokens, else random).
    ``checkpoint=path`` (with a fixed ``random_state``) saves the sampler every ``checkpoint_every`` sweeps;
    fitting again with the same path, data and seed resumes with the draws of an uninterrupted fit (delete
    the file to start afresh). ``graph`` (GPU): replay the sweep from
    a CUDA graph, for the same draws (None: below ``config.lda_graph_max_tokens`` tokens, all chains).
    ``transform_iter``: the Gibbs sweeps :meth:`transform` makes over new documents' topics with the fitted
    topics held fixed. ``dtype`` (``"float32"`` or ``"float64"``): the precision of theta, phi and their
    draws.

    ``devices`` splits the documents over devices (``"all"``, GPU ids or a :class:`gpumcmc.shards.Shards`;
    see :mod:`gpumcmc.models.lda.sharded`): the draws are those of ``devices=None`` for any number of
    shards, bit for bit; the log-likelihood trace is a sum over the shards (``devices=None``'s to rounding).
    It runs eagerly (no CUDA graph) and does not checkpoint. ``doc_topic_`` holds this process's documents;
    ``n_shards_`` and ``doc_bounds_`` record the split.

    Examples
    --------
    >>> import numpy as np
    >>> from gpumcmc.models import LDA
    >>> X = np.random.default_rng(0).poisson(1.0, size=(20, 30))
    >>> lda = LDA(n_components=3, n_iter=20, burn_in=10, random_state=0, progress=False, backend="numpy")
    >>> theta = lda.fit_transform(X)
    >>> theta.shape, lda.components_.shape
    ((20, 3), (3, 30))
    """

    # Checked by scikit-learn at fit where it imports (_check_settings runs without it too); devices,
    # random_state and dtype are checked where they are resolved.
    _parameter_constraints = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "doc_topic_prior": [None, Interval(Real, 0, None, closed="neither")],
        "topic_word_prior": [None, Interval(Real, 0, None, closed="neither")],
        "n_iter": [Interval(Integral, 1, None, closed="left")],
        "burn_in": [Interval(Integral, 0, None, closed="left")],
        "transform_iter": [Interval(Integral, 1, None, closed="left")],
        "monitor_every": [Interval(Integral, 1, None, closed="left")],
        "random_state": "no_validation",
        "dtype": "no_validation",
        "progress": ["boolean"],
        "backend": [None, StrOptions({"numpy", "cupy"})],
        "checkpoint": [None, str, os.PathLike],
        "checkpoint_every": [Interval(Integral, 1, None, closed="left")],
        "n_chains": [Interval(Integral, 1, None, closed="left")],
        "graph": [None, "boolean"],
        "devices": "no_validation",
        "start": [StrOptions({"auto", "random", "seeded"})],
    }

    def __init__(self, n_components=10, doc_topic_prior=None, topic_word_prior=None, n_iter=200, burn_in=100,
                 transform_iter=50, monitor_every=10, random_state=None, dtype="float32", progress=True,
                 backend=None, checkpoint=None, checkpoint_every=100, n_chains=1, graph=None, devices=None,
                 start="auto"):
        self.n_components, self.doc_topic_prior, self.topic_word_prior = n_components, doc_topic_prior, topic_word_prior
        self.n_iter, self.burn_in, self.n_chains, self.start = n_iter, burn_in, n_chains, start
        self.transform_iter, self.monitor_every, self.random_state = transform_iter, monitor_every, random_state
        self.dtype, self.progress, self.backend, self.graph = dtype, progress, backend, graph
        self.checkpoint, self.checkpoint_every, self.devices = checkpoint, checkpoint_every, devices

    def __getstate__(self):
        state = super().__getstate__()
        phi, comp = state.get("phi_"), state.get("components_")  # on the host here
        if isinstance(phi, np.ndarray) and same_array(comp, phi.T):
            del state["components_"]  # phi_.T, as fit made it: made again on load, not pickled twice
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if getattr(self, "phi_", None) is not None and "components_" not in self.__dict__:
            self.components_ = _backend.to_host(self.phi_.T)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # X holds word counts: non-negative integers. scikit-learn has no tag for counts; "categorical"
        # with "positive_only" is the one that makes its checks pass non-negative integers.
        tags.input_tags.positive_only = True
        tags.input_tags.categorical = True
        # transform's output has the dtype parameter's precision, whatever X's dtype.
        tags.transformer_tags.preserves_dtype = []
        return tags

    def _expected_failed_checks(self):
        why = ("fit_transform returns doc_topic_, the fit's posterior mean of theta, and transform draws theta "
               "anew with the topics fixed: two Monte Carlo estimates of one mean, which agree to their Monte "
               "Carlo error, not to the check's 0.01.")
        return {"check_transformer_general": why, "check_transformer_data_not_an_array": why}

    def _priors(self):
        K = self.n_components
        if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
            raise ValueError(f"n_components must be a positive integer, got {K!r}.")
        a, b = (1.0 / int(K) if p is None else float(p) for p in (self.doc_topic_prior, self.topic_word_prior))
        if not (a > 0 and b > 0):
            raise ValueError("doc_topic_prior and topic_word_prior must be positive.")
        return int(K), a, b

    def _check_prior_floor(self, a: float, b: float) -> None:
        """Refuse a prior too small for ``dtype``'s Dirichlet draws. A shape below 1 is drawn as
        ``log G(a + 1) + log(U) / a``, with ``U >= 2**-24`` (float32) or ``2**-53`` (float64): where
        ``log(U) / a`` overflows, that log-gamma is -inf, and a document (or topic) with no token, all of
        whose log-gammas are then -inf, is NaN. The division cannot overflow for a prior of at least
        ``|log(2**-24)| / max`` = 4.9e-38 in float32 (2.0e-307 in float64); below it (every subnormal, and
        a prior that rounds to 0) it can. Reads only numbers: no synchronisation."""
        try:
            dt = np.dtype(self.dtype)
        except TypeError:
            return                      # refused where the dtype is resolved
        if dt not in (np.float32, np.float64):
            return
        lu = -float(np.log(dt.type(2.0 ** -(np.finfo(dt).nmant + 1))))     # the largest |log(U)|
        for name, p in (("doc_topic_prior", a), ("topic_word_prior", b)):
            with np.errstate(all="ignore"):
                ok = bool(np.isfinite(dt.type(lu) / dt.type(p)))
            if not ok:
                least = lu / float(np.finfo(dt).max)
                other = " with dtype='float64' (which takes priors down to 2.0e-307)" if dt == np.float32 else ""
                raise ValueError(f"{name}={p!r} is too small for dtype {dt.name}: its Dirichlet draws divide "
                                 f"log(U) by it, which overflows for a prior below {least:.2g} and makes a document "
                                 f"or topic without tokens NaN. Pass {name} of at least {least:.2g}, or fit{other}.")

    def _check_settings(self):
        K, a, b = self._priors()
        self._check_prior_floor(a, b)
        if self.start not in ("auto", "random", "seeded"):
            raise ValueError(f"start must be 'auto', 'random' or 'seeded', got {self.start!r}.")
        for name, least in (("n_chains", 1), ("n_iter", 1), ("burn_in", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < least:
                raise ValueError(f"{name} must be an integer >= {least}, got {v!r}.")
        return K, a, b

    @atomic_fit
    def fit(self, X, y=None):
        """Sample the topics of the corpus ``X`` and return the model.

        ``X``: a document-word count matrix (NumPy, SciPy sparse, CuPy, or a DataFrame whose column names
        become ``feature_names_in_``), or a list of documents each given as a list of word ids. A list of
        lists is read as word ids, not as a dense count matrix: pass ``np.asarray(counts)`` for that. The
        priors used (``doc_topic_prior_``, ``topic_word_prior_``) and the topics are kept for ``transform``,
        ``score`` and ``perplexity``, whatever the settings become afterwards."""
        self.fit_transform(X)
        return self

    @atomic_fit
    def fit_transform(self, X, y=None):
        """:meth:`fit` on ``X``, returning ``doc_topic_`` (the fit's posterior mean of each document's
        topics)."""
        K, a, b = self._validate_settings(self._check_settings)
        C, n = int(self.n_chains), int(self.n_iter)
        shards = None
        if self.devices is not None:
            shards = resolve(self.devices, self.backend, "the documents")[0]  # checked before any GPU is asked
            if self.checkpoint is not None:
                raise ValueError("checkpoint= is not available with devices=: fit on one device (devices=None) to "
                                 "checkpoint, or drop checkpoint.")
            if self.graph:
                raise ValueError("graph=True needs devices=None: the sweep over several devices is not captured "
                                 "as a CUDA graph; leave graph at None or False.")
        if self.checkpoint is not None and not isinstance(self.random_state, (int, np.integer, np.random.SeedSequence)):
            raise ValueError("checkpoint= needs a fixed random_state (an int, say random_state=0, or a SeedSequence): "
                             f"with {type(self.random_state).__name__} each fit starts from another seed, so a later "
                             "fit could never resume the checkpoint.")
        rng = self._make_rng() if shards is None else default_rng(self.random_state, backend=(
            "numpy" if shards.xp is np else "cupy"))
        self._note_feature_names(X)
        rows, cols, M, V = tokens_from(X, self._xp() if shards is None else np)
        n_tok = int(rows.size)
        self.doc_topic_prior_, self.topic_word_prior_ = a, b
        phi_start = self._phi_start(rng, rows, cols, M, V, K, C)
        if shards is None:
            data, state = init(rng, rows, cols, M, V, K, a, b, self.dtype, burn_in=int(self.burn_in), n_chains=C,
                               phi_start=phi_start)
            sweep, ll = _monitored(functools.partial(step, data=data), lambda v: v / n_tok)
            graph = (n_tok * C < config.lda_graph_max_tokens) if self.graph is None else bool(self.graph)
            key = None if self.checkpoint is None else self._checkpoint_key(rows, cols, M, V, K, a, b)
            s, best = self._sample(sweep, state, rng, ll, V, n_tok, checkpoint=self.checkpoint,
                                   checkpoint_every=int(self.checkpoint_every), graph=graph, checkpoint_key=key)
            self.phi_ = s.phi_sum[best] / n                   # (V, K) on the backend
            self.doc_topic_ = _backend.to_host(s.theta_sum[best] / n)
            for stale in ("n_shards_", "doc_bounds_"):  # an earlier fit's over devices
                self.__dict__.pop(stale, None)
        else:
            bounds, parts = shard_corpus(rows, cols, M, shards)
            del rows, cols
            with shards.on(0):
                alg = sharded_gibbs(shards)
                datas = shard_data(parts, shards, V, K, a, b, self.dtype, burn_in=int(self.burn_in))
                del parts
                state = alg.init(rng, datas, K, self.dtype, n_chains=C, phi_start=phi_start)
                del datas
                # info.loglik: the shards' sums, all-reduced with the counts of the sweeps a monitor reads
                sweep, ll = _monitored(alg.step, lambda v: np.asarray(_backend.to_host(v), dtype=np.float64) / n_tok)
                s, best = self._sample(sweep, state, rng, ll, V, n_tok, n_chains=C)
                self.phi_ = s[0].phi_sum[best] / n             # (V, K) on local shard 0's device
                self.doc_topic_ = np.concatenate(shards.each(s, lambda i, sh: _backend.to_host(sh.theta_sum[best] / n)))
            self.n_shards_, self.doc_bounds_ = shards.world, bounds
        self.components_ = _backend.to_host(self.phi_.T)      # (K, V)
        return self.doc_topic_

    def _checkpoint_key(self, rows, cols, M, V, K, a, b) -> str:
        """What a checkpointed fit is of: the model's settings and the corpus (its sizes and a checksum of its
        tokens in order, one reduction), so that a fit of other documents of the same sizes is not resumed."""
        xp = _backend.get_array_module(rows)
        t = xp.arange(rows.size, dtype=np.int64)
        mix = (rows.astype(np.int64) * 1000003 + cols.astype(np.int64)) * (t % 65521 + 1)
        check = int(mix.sum()) if rows.size else 0  # synchronize! (once, at the start of a checkpointed fit)
        return (f"LDA K={K} alpha={a!r} beta={b!r} start={self.start} dtype={np.dtype(self.dtype).name} "
                f"docs={M} words={V} tokens={int(rows.size)} check={check}")

    def _sample(self, sweep, state, rng, loglik, V, n_tok, **options):
        """:func:`gpumcmc.sampling.run` of ``n_iter`` kept sweeps after ``burn_in``, ``loglik`` monitored, and
        the fitted attributes from its record: ``(final state, the chain with the best final loglik)``."""
        trace = run(sweep, state, rng, int(self.n_iter), burn_in=int(self.burn_in),
                    monitors=[Monitor("loglik_per_token", loglik, every=int(self.monitor_every))],
                    progress=self.progress, desc="LDA", **options)
        it, vals = trace.monitors["loglik_per_token"]
        vals = np.asarray(vals, dtype=float).reshape(len(it), int(self.n_chains)).T      # (chain, monitor point)
        best = int(np.argmax(vals[:, -1]))
        self.trace_, self.n_features_in_, self.n_tokens_, self.best_chain_ = trace, V, n_tok, best
        self.burn_in_ = int(self.burn_in)  # the fit's, for to_arviz after a set_params
        self.loglik_trace_, self.loglik_traces_ = (np.asarray(it), vals[best]), vals
        return trace.state, best

    def _phi_start(self, rng, rows, cols, M, V, K, C):
        """The topics every chain starts from, on the array module of ``rows``: :func:`seeded_topics`' (seeded by
        ``rng``'s key, which it does not advance) where ``start`` asks for them (see the class), else None."""
        if self.start == "random" or (self.start == "auto" and K * int(rows.size) > config.lda_seed_exact_work):
            return None
        parts = _seed_picks(rows, cols, M, V, K, C, [int(k) for k in rng.key], fallback=self.start == "auto")
        if parts is None:
            return None
        return _seeded_phi(parts, V, C, K, _backend.get_array_module(rows), self.dtype)

    def _tokens(self, X):
        """``(rows, cols, M, V)`` of ``X`` on the backend phi_ lives on (a corpus with no token is allowed)."""
        self._check_fitted("phi_")
        self._check_feature_names(X)
        xp = _backend.get_array_module(self.phi_)
        return tokens_from(X, xp, n_words=self.n_features_in_, allow_empty=True)

    def _theta(self, X, tokens=None):
        """``(theta (M, K), rows, cols)``: each document's theta averaged over ``transform_iter`` Gibbs sweeps
        of theta with phi fixed (half of them burn-in), fitted on the tokens ``rows``, ``cols`` (by default
        all of ``X``'s); a document with no token gets the prior mean, 1 / K."""
        # the fit's topics and priors, whatever the settings became since (set_params)
        self._check_fitted("phi_")
        K = int(self.phi_.shape[1])
        a, b = getattr(self, "doc_topic_prior_", None), getattr(self, "topic_word_prior_", None)
        if a is None or b is None:  # a model pickled before the fit kept them
            _, a, b = self._priors()
        rows, cols, M, V = self._tokens(X) if tokens is None else tokens
        xp = _backend.get_array_module(self.phi_)
        if rows.size == 0:
            return xp.full((M, K), 1.0 / K, dtype=self.phi_.dtype), rows, cols
        # On the backend phi_ lives on (a fit with devices= may differ from self.backend); the same draws.
        rng = default_rng(self.random_state, backend="numpy" if xp is np else "cupy")
        n_b = max(1, int(self.transform_iter) // 2)
        n_keep = max(1, int(self.transform_iter) - n_b)
        data, state = init(rng, rows, cols, M, V, K, a, b, self.phi_.dtype, burn_in=n_b)
        # phi is the fitted one; theta starts uniform, so each token's weights sum to the mean of its word's
        # topic probabilities, which is positive for every word seen in training.
        state = state._replace(phi=self.phi_.astype(state.phi.dtype)[None], theta=xp.full_like(state.theta, 1.0 / K))
        for _ in range(n_b + n_keep):
            state, _ = step(rng, state, data, fixed_phi=True)
        theta = state.theta_sum[0] / n_keep
        theta[xp.bincount(rows, minlength=M) == 0] = 1.0 / K     # the prior mean, not one noisy draw from it
        return theta, rows, cols

    def transform(self, X):
        """Doc-topic distributions of new documents, averaged over Gibbs sweeps of theta with phi fixed.

        A document with no token (in the fitted vocabulary) gets the prior mean, ``1 / n_components`` in
        every topic."""
        return _backend.to_host(self._theta(X)[0])

    @property
    def _n_features_out(self):
        """The width of :meth:`transform`'s output, one column a topic (``get_feature_names_out`` names them
        ``lda0``, ``lda1``, ...)."""
        return self.components_.shape[0]

    def _held_out(self, X, method: str):
        """``(log-likelihood, tokens scored)`` of ``X`` by ``method`` (see :meth:`score`)."""
        if method not in ("completion", "full"):
            raise ValueError(f"method must be 'completion' or 'full', got {method!r}.")
        rows, cols, M, V = self._tokens(X)
        if rows.size == 0:
            raise ValueError("X has no token in the fitted vocabulary; there is nothing to score.")
        r, c = rows, cols
        if method == "completion":
            est, ev = completion_split(rows)
            if not bool(ev.any()):
                raise ValueError("method='completion' needs documents of at least 2 tokens (one to fit theta on, "
                                 "one to score); X has none. Use method='full', or longer documents.")
            rows, cols, r, c = rows[est], cols[est], rows[ev], cols[ev]
        theta = self._theta(X, (rows, cols, M, V))[0]
        return float(log_likelihood(theta.astype(self.phi_.dtype), self.phi_, r, c)), int(r.size)

    def score(self, X, y=None, method: str = "full"):
        """Log-likelihood of ``X`` under the fitted topics, summed over the tokens scored.

        ``method="completion"`` (document completion, the held-out measure to choose models by, e.g.
        ``n_components``): each document's tokens are split in two halves (:func:`completion_split`),
        theta is fitted on the first half (as :meth:`transform` does, phi fixed) and the second half is
        scored, ``sum log sum_k theta_dk phi_wk`` over its tokens. Documents of one token only add to theta.

        ``method="full"`` (the default): theta fitted on all of a document's tokens and those same tokens
        scored. It measures how well the topics can fit the documents, not how well they predict unseen
        words, so it favours larger models: use it to follow a fit, not to compare models. ``GridSearchCV``
        and ``cross_val_score`` call ``score(X)``, so give them the completion measure to choose
        ``n_components``: ``scoring=lambda est, X, y=None: est.score(X, method="completion")``.
        """
        return self._held_out(X, method)[0]

    def perplexity(self, X, method: str = "full"):
        """``exp(-log-likelihood per token scored)`` of ``X``; ``method`` as for :meth:`score`
        (``"completion"`` for model choice: the perplexity of each document's second half given its first)."""
        ll, n = self._held_out(X, method)
        return float(np.exp(-ll / n))

    def top_words(self, vocab=None, n=10):
        """The ``n`` most probable words of each topic (indices when ``vocab`` is None): ``vocab`` holds one
        word per column of the X fitted on (``n_features_in_``), ``n`` is a positive int."""
        self._check_fitted("components_")
        if n is not None:  # None: every word, in order
            _validate.check_int(n, "n")
        if vocab is not None:
            vocab = np.asarray(vocab)
            if vocab.ndim != 1 or vocab.shape[0] != self.n_features_in_:
                raise ValueError(f"vocab must hold one word per column of the X the model was fitted on "
                                 f"(n_features_in_ = {self.n_features_in_}), got shape {vocab.shape}; pass the "
                                 "vocabulary the counts were made with.")
        idx = np.argsort(-self.components_, axis=1)[:, :n]
        if vocab is None:
            return idx.tolist()
        return [vocab[i].tolist() for i in idx]  # Python str (or the vocabulary's own scalars), not np.str_

    def to_arviz(self):
        """The monitored log-likelihood per token of every chain as ArviZ data, a convergence diagnostic:
        ``posterior`` holds its values at the kept sweeps, ``(chain, draw)``, with the sweep of each draw in
        ``sample_stats.sweep``, and ``warmup_posterior`` those during burn-in. The topic and document draws
        themselves are not kept (``components_`` and ``doc_topic_`` are their posterior means); for more
        draws, lower ``monitor_every``."""
        self._check_fitted("trace_")
        it = np.asarray(self.loglik_trace_[0])
        vals, kept = np.asarray(self.loglik_traces_, dtype=float), it > self.burn_in_
        sweeps = np.broadcast_to(it[kept], (len(vals), int(kept.sum())))
        return to_arviz({"loglik_per_token": vals[:, kept]}, {"sweep": sweeps},
                        warmup={"loglik_per_token": vals[:, ~kept]} if not kept.all() else None)
