"""Writes notebooks/bayesnet.ipynb (without outputs)."""
import pathlib

import nbformat as nbf

cells = [
    nbf.v4.new_markdown_cell("# Discrete Bayesian networks with missing data\n"
                             "SAME chromatic Gibbs (Seita, Chen & Canny) on the Koller student network: half of "
                             "the cells are hidden, and the CPTs are learnt from what is left.\n\n"
                             "Settings: small without a GPU or with `GPUMCMC_SMALL=1`, full on a GPU or with `GPUMCMC_SMALL=0` (`gpumcmc.demo.small_settings()`). The outputs saved in this notebook come from a CPU run with the small settings (NumPy backend, 2 cores)."),
    nbf.v4.new_code_cell("import numpy as np\nimport matplotlib.pyplot as plt\n"
                         "from gpumcmc.models.bayesnet import BayesianNetwork\n"
                         "from gpumcmc.demo import small_settings\nsmall = small_settings()\n"
                         "truth = BayesianNetwork.koller()\nn = 2000 if small else 100_000\n"
                         "X = truth.sample(n, 0)\nX[np.random.default_rng(1).random(X.shape) < 0.5] = -1"),
    nbf.v4.new_code_cell("n_iter = 20 if small else 100\n"
                         "fit = BayesianNetwork(truth.parents, truth.states, n_iter=n_iter, same=2, random_state=0).fit(X)\n"
                         "print('KL_avg to the true CPTs:', fit.kl_avg(truth))\nfit.cpts_['G']"),
    nbf.v4.new_markdown_cell("KL_avg (the mean over CPT rows of KL(true row || learnt row)) of each iteration's "
                             "CPT draw, from `trace_`. With `batch_size`, the cases are swept in minibatches "
                             "and the CPTs are redrawn after each one, from the latest counts of every batch."),
    nbf.v4.new_code_cell("def kl_trace(fit):\n"
                         "    return [BayesianNetwork(fit.parents, fit.states,\n"
                         "                            {v: fit.trace_[v][t].reshape(fit.cpts_[v].shape) for v in fit.nodes}"
                         ").kl_avg(truth)\n"
                         "            for t in range(len(fit.trace_[fit.nodes[0]]))]\n\n"
                         "mini = BayesianNetwork(truth.parents, truth.states, n_iter=n_iter, same=2, random_state=0,\n"
                         "                       batch_size=n // 4, progress=False).fit(X)\n"
                         "plt.semilogy(kl_trace(fit), label='one batch')\n"
                         "plt.semilogy(kl_trace(mini), label='4 minibatches')\n"
                         "plt.xlabel('iteration'); plt.ylabel('KL_avg'); plt.legend();"),
    nbf.v4.new_code_cell("fit.impute(X[:5])"),
]
nb = nbf.v4.new_notebook(cells=cells)
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbf.write(nb, pathlib.Path(__file__).with_name("bayesnet.ipynb"))
