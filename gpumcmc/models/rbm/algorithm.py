"""Restricted Boltzmann machines: block Gibbs over many chains, and training by persistent contrastive divergence.

Binary visible units v and hidden units h, energy ``E(v, h) = -v.b - h.c - v W h``. The graph is bipartite, so
the hidden units are independent given v and the visible ones given h (Mahani & Sharabiani, section 4.3.2): a
Gibbs step is ``h ~ Bernoulli(sigmoid(v W + c))``, then ``v ~ Bernoulli(sigmoid(h W^T + b))``, for all chains
at once. The products go through the BLAS; the bias, sigmoid and Bernoulli draw are one kernel
(``kernels_cu/rbm.cu``) whose uniforms are Philox words keyed by (chain, unit, half-step). The NumPy twin uses
the same words; the BLAS libraries sum in different orders and ``exp`` differs in the last bit, so a CPU and a
GPU run agree in distribution, and in nearly every draw of a step. Training is persistent contrastive
divergence, one epoch a step over ``PCDState``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import backend as _backend
from ...random._stream import host_random_state
from .ops import _pcd_epoch, bernoulli_logits


class RBMState(NamedTuple):
    """Chains of an RBM: ``v`` (chains, n_visible) and ``h`` (chains, n_hidden), 0/1 in the model's dtype."""

    v: object
    h: object


class _BlockGibbs:
    """``init`` and ``step`` over :class:`RBMState`, which :class:`RBM` inherits."""

    def init(self, n_chains: int, rng, initial=None) -> RBMState:
        """Chains started from ``initial`` (0/1, (n_visible,) or (n_chains, n_visible)) or uniformly at random."""
        xp = self._xp()
        if isinstance(n_chains, bool) or not isinstance(n_chains, (int, np.integer)) or n_chains < 1:
            raise ValueError(f"n_chains must be a positive integer, got {n_chains!r}.")
        if initial is None:
            v = (rng.random((n_chains, self.n_visible), dtype=np.float32) < 0.5).astype(self._dtype())
        else:
            v = _backend.asarray(initial, xp)
            if v.shape not in ((self.n_visible,), (n_chains, self.n_visible)):
                raise ValueError(f"initial has shape {v.shape}; pass ({self.n_visible},) or "
                                 f"(n_chains, {self.n_visible}).")
            _check_binary(v, "initial")
            v = xp.broadcast_to(v.astype(self._dtype()), (n_chains, self.n_visible)).copy()  # written by each step
        return RBMState(v, xp.zeros((n_chains, self.n_hidden), dtype=self._dtype()))

    def step(self, rng, state: RBMState):
        """One block-Gibbs step of every chain, in place: h given v, then v given h."""
        xp, off = self._xp(), rng.advance(2)
        xp.matmul(state.v, self.W, out=state.h)
        bernoulli_logits(state.h, self.hidden_bias, rng.key, off, out=state.h)
        xp.matmul(state.h, self.W.T, out=state.v)
        bernoulli_logits(state.v, self.visible_bias, rng.key, off + 1, out=state.v)
        return state, None


class PCDState(NamedTuple):
    """Training state of persistent contrastive divergence, updated in place by each epoch, in one dtype:
    ``W`` (n_visible, n_hidden), the biases ``b`` (n_visible,) and ``c`` (n_hidden,), and ``h_chain``
    (batch_size, n_hidden), the 0/1 hidden states of the persistent chains."""

    W: object
    b: object
    c: object
    h_chain: object


def pcd_init(rng, n_visible: int, n_hidden: int, chains: int, dtype) -> PCDState:
    """scikit-learn's start: weights N(0, 0.01^2), biases 0, hidden chains at 0 (on ``rng``'s backend)."""
    W = rng.normal(0.0, 0.01, size=(n_visible, n_hidden), dtype=dtype)
    xp = _backend.get_array_module(W)
    return PCDState(W, xp.zeros(n_visible, dtype=dtype), xp.zeros(n_hidden, dtype=dtype),
                    xp.zeros((chains, n_hidden), dtype=dtype))


def pcd_epoch_step(X, edges, learning_rate, chains: int, n_hidden: int, fused: bool):
    """``step(rng, state) -> (state, None)``: one epoch of PCD over the minibatches ``X[edges[t]:edges[t + 1]]``
    for ``chains`` persistent chains of ``n_hidden`` hidden units. Each minibatch: the chains take one
    block-Gibbs step (two call offsets of ``rng``), and the weights move along the gradient from the hidden
    probabilities of the data and of the chains. ``fused``: the epoch in one launch of ``rbm_pcd_epoch``
    (GPU), with the same random words.
    """
    xp, dtype, n_batches = _backend.get_array_module(X), X.dtype, len(edges) - 1
    if fused:
        from ... import _loader

        X, edges_dev = _loader.contiguous(X), xp.asarray(edges, dtype=xp.int64)

        def fused_step(rng, state: PCDState):
            off0 = rng.advance(2 * n_batches)  # the offsets the unfused loop takes, two per minibatch
            _pcd_epoch(X, edges_dev, n_batches, *state, learning_rate, rng.key, off0)
            return state, None

        return fused_step

    v_neg, pre = xp.empty((chains, X.shape[1]), dtype=dtype), xp.empty((chains, n_hidden), dtype=dtype)

    def step(rng, state: PCDState):
        W, b, c, h_chain = state
        for s, e in zip(edges[:-1], edges[1:]):
            v_pos, off = X[s:e], rng.advance(2)
            h_pos = _sigmoid(xp, v_pos @ W + c)
            xp.matmul(h_chain, W.T, out=v_neg)
            bernoulli_logits(v_neg, b, rng.key, off, out=v_neg)
            xp.matmul(v_neg, W, out=pre)
            h_neg = _sigmoid(xp, pre + c)
            bernoulli_logits(pre, c, rng.key, off + 1, out=h_chain)
            lr = dtype.type(learning_rate / (e - s))
            W += lr * (v_pos.T @ h_pos - v_neg.T @ h_neg)
            c += lr * (h_pos.sum(axis=0) - h_neg.sum(axis=0))
            b += lr * (v_pos.sum(axis=0) - v_neg.sum(axis=0))
        return state, None

    return step


def _sigmoid(xp, x):
    return 0.5 * (xp.tanh(0.5 * x) + 1.0)  # no overflow warnings for large |x|


def _check_binary(X, name):
    vals = _backend.to_host(X)
    if not np.all((vals == 0) | (vals == 1)):  # synchronize! (once, before a run)
        raise ValueError(f"{name} must be binary (0/1 or booleans); threshold it first, e.g. X > 0.5.")


def _check_unit(X, name):
    """Values in [0, 1]: binary data, or probabilities, as scikit-learn's ``BernoulliRBM`` takes them."""
    vals = _backend.to_host(X)
    if not np.all((vals >= 0) & (vals <= 1)):  # synchronize! (once, before a run); NaN fails too
        negative = bool(np.any(vals < 0))  # scikit-learn's words for negative input, which its checks look for
        raise ValueError(("Negative values in data passed to RBM. " if negative else "")
                         + f"{name} must hold values in [0, 1] (0/1, booleans, or probabilities as scikit-learn's "
                         "BernoulliRBM takes them); scale it first, e.g. sklearn.preprocessing.minmax_scale.")


def _free_energy(xp, v, W, b, c):
    return -(v @ b) - xp.logaddexp(0, v @ W + c).sum(axis=1)


def _flipped(X, random_state, xp, dtype):
    """Binary rows ``X`` and the same rows with one feature each flipped (``RandomState(random_state)`` picks it),
    both on ``xp`` in ``dtype``."""
    X, rs = np.asarray(_backend.to_host(X), dtype=np.float64), host_random_state(random_state)
    ind, Xf = (np.arange(X.shape[0]), rs.randint(0, X.shape[1], X.shape[0])), X.copy()
    Xf[ind] = 1 - Xf[ind]
    return xp.asarray(X, dtype=dtype), xp.asarray(Xf, dtype=dtype)


def _pseudo_likelihood_rows(xp, X, Xf, W, b, c):
    """Log pseudo-likelihood of each row of ``X`` from its flipped twin in ``Xf``, on ``xp``."""
    fe, fe_ = _free_energy(xp, X, W, b, c), _free_energy(xp, Xf, W, b, c)
    return -(X.shape[1] * xp.logaddexp(0, -(fe_ - fe)))


def _pseudo_likelihood(xp, X, Xf, W, b, c) -> float:
    """Mean log pseudo-likelihood from rows ``X`` and their flipped twins ``Xf`` (synchronises)."""
    return float(_backend.to_host(_pseudo_likelihood_rows(xp, X, Xf, W, b, c).mean()))
