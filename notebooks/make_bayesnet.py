"""Writes notebooks/bayesnet.ipynb (without outputs)."""
import pathlib

import nbformat as nbf

cells = [
    nbf.v4.new_markdown_cell("# Discrete Bayesian networks with missing data\n"
                             "SAME chromatic Gibbs (Seita, Chen & Canny) on the Koller student network."),
    nbf.v4.new_code_cell("import os\nimport numpy as np\nfrom gpumcmc.models.bayesnet import BayesianNetwork\n"
                         "small = os.environ.get('GPUMCMC_SMALL') == '1'\n"
                         "truth = BayesianNetwork.koller()\nn = 2000 if small else 100_000\n"
                         "X = truth.sample(n, 0)\nX[np.random.default_rng(1).random(X.shape) < 0.5] = -1"),
    nbf.v4.new_code_cell("fit = BayesianNetwork(truth.parents, truth.states).fit(X, n_iter=20 if small else 100, same=2, random_state=0)\n"
                         "print('KL_avg to the true CPTs:', fit.kl_avg(truth))\nfit.cpts_['G']"),
    nbf.v4.new_code_cell("fit.impute(X[:5])"),
]
nb = nbf.v4.new_notebook(cells=cells)
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbf.write(nb, pathlib.Path(__file__).with_name("bayesnet.ipynb"))
