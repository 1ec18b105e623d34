"""Convergence diagnostics the fits read on their kept draws (host arrays, no device work)."""

from __future__ import annotations

import numpy as np

# The split-R-hat above which a fit warns: Gelman et al.'s 1.1 flags chains that have not mixed; Stan's 1.01
# would also flag the short runs that examples and tests make on purpose.
RHAT_WARN = 1.1


def split_rhat(x) -> np.ndarray:
    """Split-R-hat (Gelman et al., *Bayesian Data Analysis*, 3rd ed., 11.4) of draws ``x`` of shape
    ``(chain, draw, ...)``, one value for each trailing element: each chain cut in halves, then the potential
    scale reduction of the halves. NaN with fewer than four draws a chain; 1 for an element that never moves
    in any chain, inf for one that is constant within each half but differs between them."""
    x = np.asarray(x)
    n = x.shape[1] // 2
    if n < 2:
        return np.full(x.shape[2:], np.nan)
    # the trailing elements a block at a time, in float64: the temporaries stay a few blocks' worth however many
    # draws are kept (whole, they took about three times the draws: 3 GB for a hierarchical GLM's 1 GB)
    flat = x.reshape(x.shape[0], x.shape[1], -1)
    out = np.empty(flat.shape[2])
    step = max(1, _BLOCK // max(1, x.shape[0] * x.shape[1]))
    for s in range(0, flat.shape[2], step):
        out[s:s + step] = _split_rhat(flat[:, :, s:s + step].astype(np.float64), n)
    return out.reshape(x.shape[2:])


_BLOCK = 1 << 22  # float64 values of one block of split_rhat's draws


def _split_rhat(x, n):
    halves = np.concatenate([x[:, :n], x[:, x.shape[1] - n:]], axis=0)
    w = halves.var(axis=1, ddof=1).mean(axis=0)
    b_n = halves.mean(axis=1).var(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.sqrt(((n - 1) / n * w + b_n) / w)
    return np.where(w > 0, r, np.where(b_n > 0, np.inf, 1.0))
