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
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[1] // 2
    if n < 2:
        return np.full(x.shape[2:], np.nan)
    halves = np.concatenate([x[:, :n], x[:, x.shape[1] - n:]], axis=0)
    w = halves.var(axis=1, ddof=1).mean(axis=0)
    b_n = halves.mean(axis=1).var(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.sqrt(((n - 1) / n * w + b_n) / w)
    return np.where(w > 0, r, np.where(b_n > 0, np.inf, 1.0))
