"""Writes notebooks/mixture.ipynb (without outputs): ``python notebooks/make_mixture.py``."""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

cells = [
    new_markdown_cell("""# Dirichlet-process Gaussian mixtures on flow-cytometry data

`gpumcmc.models.DPGaussianMixture` fits the truncated Dirichlet-process mixture of Suchard et al. (2010):
`k` Gaussian components with Normal-inverse-Wishart priors, stick-breaking weights `v_j ~ Be(1, alpha)` and a
Gamma prior on `alpha`. Two methods: blocked Gibbs sampling (`method="gibbs"`) and Bayesian EM from several
starts (`method="bem"`), a mean-field variational fit that drains the components the data do not need. On a
GPU the configuration probabilities of every event and component are computed by one fused kernel, never
stored as an `n x k` matrix.

Settings: small without a GPU or with `GPUMCMC_SMALL=1`, full on a GPU or with `GPUMCMC_SMALL=0` (`gpumcmc.demo.small_settings()`). The outputs saved in this notebook come from a CPU run with the small settings (NumPy backend, 2 cores)."""),
    new_code_cell("""import numpy as np
import matplotlib.pyplot as plt
from gpumcmc.datasets import load_fcs, fcs_example_files
from gpumcmc.models import DPGaussianMixture

from gpumcmc.demo import small_settings

SMALL = small_settings()
print(sorted(fcs_example_files()))"""),
    new_markdown_cell("""## Data

The FACSCalibur file that gpumcmc ships (a copy of fcsparser's test file), read with flowio: its five
log-amplified channels. The instrument
records them over four decades, so `log10` of the values is its own scale (`arcsinh(x / 150)`, the usual
transform for linear channels, would put 97% of these events within 0.02 of zero)."""),
    new_code_cell("""channels = ["FSC-H", "SSC-H", "FL1-H", "FL2-H", "FL3-H"]
d = load_fcs("facscalibur", cofactor=None, channels=channels)
X = np.log10(d.data)
X = X[::12] if SMALL else X
print(X.shape, d.channels)"""),
    new_markdown_cell("""## Bayesian EM prunes the components the data do not need

`method="bem"` iterates the mean-field variational update of the truncated stick-breaking mixture: every
event's configuration probabilities come from the expected log weights and log densities, so a component
holding few events pays for its uncertainty and the stick-breaking prior drains it; a component with less
support than half its number of parameters is held at zero weight. Each start takes its means from k-means++
on a subsample, and the start of largest variational lower bound is kept. `n_components` is only an upper
bound: here 16."""),
    new_code_cell("""bem = DPGaussianMixture(n_components=16, method="bem", n_init=2 if SMALL else 8,
                        n_iter=300 if SMALL else 1000, random_state=0).fit(X)
print("converged:", bem.converged_, "after", bem.n_iter_, "iterations;",
      "mean log-likelihood per event:", round(bem.score(X), 4))
print("components with weight > 1%:", int((bem.weights_ > 0.01).sum()), "of 16;",
      "at zero weight:", int((bem.weights_ == 0).sum()))
print("weights, largest first:", np.sort(bem.weights_)[::-1].round(3))"""),
    new_markdown_cell("""With twice the truncation, BEM drains most of the extra components instead of splitting the populations
further: the number above 1% hardly moves."""),
    new_code_cell("""k_more = 32 if SMALL else 64
bem_more = DPGaussianMixture(n_components=k_more, method="bem", n_init=2 if SMALL else 8,
                             n_iter=300 if SMALL else 1000, random_state=0).fit(X)
print(f"k = {k_more}: converged {bem_more.converged_} after {bem_more.n_iter_} iterations; components with "
      f"weight > 1%: {int((bem_more.weights_ > 0.01).sum())} of {k_more}; at zero weight: "
      f"{int((bem_more.weights_ == 0).sum())}")
fig, ax = plt.subplots(figsize=(8, 3.2))
for model, label in ((bem, "k = 16"), (bem_more, f"k = {k_more}")):
    w = np.sort(model.weights_)[::-1]
    ax.plot(np.arange(1, w.size + 1), w, "o-", ms=4, label=label)
ax.axhline(0.01, ls="--", c="grey", lw=0.8, label="1%")
ax.set_yscale("symlog", linthresh=1e-2)
ax.set_ylim(-2e-3, 0.5)
ax.set(xlabel="component, by weight", ylabel="weight", title="BEM weights (log scale above 1e-2, linear below)")
ax.legend();"""),
    new_markdown_cell("## Gibbs sampling: two chains, draws relabelled to a common reference"),
    new_markdown_cell("""Gibbs keeps every component's draws; they are relabelled to a common reference once, after the run
(`relabel=True`), so that posterior means of the components make sense."""),
    new_code_cell("""k = 16 if SMALL else 64
gibbs = DPGaussianMixture(n_components=k, n_iter=40 if SMALL else 500, burn_in=40 if SMALL else 500,
                          n_chains=2, random_state=1).fit(X)
print("mean log-likelihood per event:", round(gibbs.score(X), 4))
idata = gibbs.to_arviz()
idata.posterior["alpha"]"""),
    new_code_cell("""import arviz as az
print(az.summary(idata, var_names=["alpha"]))"""),
    new_markdown_cell("""Side scatter against FL1, where a bright population stands apart from the debris: 4,000 events drawn
at random, coloured by their most probable component (the components of weight above 0.5% named in the
legend), with the components' means as crosses."""),
    new_code_cell("""a, b = d.channels.index("SSC-H"), d.channels.index("FL1-H")
z = gibbs.predict(X)
show = np.random.default_rng(0).choice(len(X), size=min(4000, len(X)), replace=False)
fig, ax = plt.subplots(1, 3, figsize=(16, 4.5))
major = [j for j in np.argsort(-gibbs.weights_) if gibbs.weights_[j] > 0.005][:20]
rest = show[~np.isin(z[show], major)]
ax[0].scatter(X[rest, a], X[rest, b], s=2, color="0.7", label="components < 0.5%")
for i, j in enumerate(major):
    sel = show[z[show] == j]
    ax[0].scatter(X[sel, a], X[sel, b], s=2, color=plt.cm.tab20(i), label=f"{j}: {gibbs.weights_[j]:.1%}")
    ax[0].plot(*gibbs.means_[j, [a, b]], "kx")
ax[0].legend(title="component: weight", fontsize=6, ncol=2, markerscale=4, loc="center left")
ax[0].set(xlabel=f"{d.channels[a]} (log10)", ylabel=f"{d.channels[b]} (log10)",
          title="clusters (Gibbs posterior mean)")
for c in range(2):
    ax[1].plot(idata.posterior["alpha"][c], lw=0.8)
    ax[2].plot(idata.sample_stats["n_active"][c], lw=0.8)
ax[1].set(title="alpha", xlabel="draw")
ax[2].set(title="occupied components", xlabel="draw");"""),
    new_markdown_cell("""## Against scikit-learn

scikit-learn's variational `BayesianGaussianMixture` with a Dirichlet-process prior and the same truncation,
16, on the same events: mean log-likelihood per event and the components above 1%."""),
    new_code_cell("""import time
from sklearn.mixture import BayesianGaussianMixture
t = time.perf_counter()
sk = BayesianGaussianMixture(n_components=16, weight_concentration_prior_type="dirichlet_process",
                             max_iter=300 if SMALL else 500, random_state=0).fit(X)
print(f"scikit-learn: {time.perf_counter() - t:.1f} s, mean loglik {sk.score(X):.4f}, converged {sk.converged_}, "
      f"{int((sk.weights_ > 0.01).sum())} components > 1%")
print(f"gpumcmc BEM:  {bem.fit_seconds_:.1f} s, mean loglik {bem.score(X):.4f}, converged {bem.converged_}, "
      f"{int((bem.weights_ > 0.01).sum())} components > 1%")"""),
    new_markdown_cell("""## The data split over devices

`devices=` splits the events and their indicators over devices (Gibbs): each device draws the indicators of
its rows and sums their counts, sums and scatter, one all-reduce per sweep adds them up (NCCL between GPUs),
and the global draws follow from the sums. `devices="all"` uses every GPU of this machine;
`gpumcmc.shards.Shards(n_virtual=2)` runs the same code as two parts on NumPy, and
`gpumcmc.shards.one_device(2)` as two parts on one GPU. For a seed the draws are those of one
device, up to the rounding of the sums' order."""),
    new_code_cell("""from gpumcmc.shards import Shards

Xs = X[::4]
kw = dict(n_components=16, n_iter=20, burn_in=20, random_state=2, relabel=False, progress=False, backend="numpy")
one = DPGaussianMixture(**kw).fit(Xs)
two = DPGaussianMixture(devices=Shards(n_virtual=2), **kw).fit(Xs)
print("same indicators:", np.array_equal(one.z_, two.z_))
print("largest difference of the drawn means:",
      float(np.abs(one.trace_.draws["means"] - two.trace_.draws["means"]).max()))"""),
]

nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                         "language": "python"}})
path = Path(__file__).resolve().parent / "mixture.ipynb"
nbformat.write(nb, path)
print("wrote", path)
