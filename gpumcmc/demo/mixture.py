"""Demo part ``mixture``: a truncated DP Gaussian mixture on a real flow-cytometry file.

Fits :class:`gpumcmc.models.DPGaussianMixture` by Bayesian EM and by Gibbs
sampling to the FACSCalibur file bundled with fcsparser (37,395 events x 7
channels, arcsinh(x / 150)), and plots two channels coloured by cluster and
the Gibbs traces of alpha and of the number of occupied components.
"""

from __future__ import annotations

import time
from pathlib import Path


def run(outdir: Path, small: bool) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from gpumcmc.datasets import load_fcs
    from gpumcmc.models import DPGaussianMixture

    t0 = time.perf_counter()
    d = load_fcs("facscalibur")
    X = d.data
    if small:  # a 2-core CPU: every 12th event, fewer components and sweeps
        X = X[::12]
    k = 16 if small else 64
    n_iter, burn_in = (50, 50) if small else (500, 500)
    bem = DPGaussianMixture(n_components=k, method="bem", n_init=2 if small else 8, n_iter=150 if small else 1000,
                            random_state=0).fit(X)
    gibbs = DPGaussianMixture(n_components=k, n_iter=n_iter, burn_in=burn_in, n_chains=2, random_state=0).fit(X)
    z = gibbs.predict(X)

    a, b = d.channels.index("FL1-H"), d.channels.index("FL2-H")
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.5))
    for axis, (name, model) in zip(ax, (("Gibbs (posterior mean)", gibbs), ("Bayesian EM", bem))):
        lab = z if model is gibbs else model.predict(X)
        axis.scatter(X[:, a], X[:, b], c=lab % 20, cmap="tab20", s=1, alpha=0.5, rasterized=True)
        big = model.weights_ > 0.01
        axis.scatter(model.means_[big, a], model.means_[big, b], c="k", marker="x", s=30)
        axis.set(xlabel=d.channels[a], ylabel=d.channels[b],
                 title=f"{name}: {int(big.sum())} components > 1%, mean loglik {model.score(X):.3f}")
    fig.tight_layout()
    fig.savefig(Path(outdir) / "mixture_clusters.png", dpi=110)
    plt.close(fig)

    draws = gibbs._draws
    fig, ax = plt.subplots(1, 2, figsize=(11, 3.5))
    for c in range(draws["alpha"].shape[0]):
        ax[0].plot(draws["alpha"][c], lw=0.8, label=f"chain {c}")
        ax[1].plot(draws["n_active"][c], lw=0.8, label=f"chain {c}")
    ax[0].set(xlabel="kept draw", ylabel="alpha", title="DP precision")
    ax[1].set(xlabel="kept draw", ylabel="occupied components", title="Active components")
    ax[0].legend()
    fig.tight_layout()
    fig.savefig(Path(outdir) / "mixture_traces.png", dpi=110)
    plt.close(fig)
    return {
        "model": "mixture",
        "data": f"FACSCalibur FCS file (fcsparser), {X.shape[0]} events x {X.shape[1]} channels, k = {k}",
        "seconds": time.perf_counter() - t0,
        "quality": f"mean log-likelihood per event = {gibbs.score(X):.3f} (Gibbs), {bem.score(X):.3f} (BEM)",
    }
