"""Write notebooks/glm.ipynb (without outputs): a hierarchical logistic regression example."""

from pathlib import Path

import nbformat as nbf

cells = [
    nbf.v4.new_markdown_cell(
        "# Hierarchical logistic regression with gpumcmc\n\n"
        "Groups (say, hospitals) each have their own coefficients `beta_g ~ N(mu, Sigma)`. "
        "`HierarchicalGLM` samples every group's coefficients at once by slice-within-Gibbs with the "
        "differential update (Mahani & Sharabiani, §3.4.4 and §4.1), and draws `mu, Sigma` from their "
        "normal-inverse-Wishart conditional. The data here are synthetic, drawn from the model, with "
        "groups of different sizes.\n\n"
        "Settings: small without a GPU or with `GPUMCMC_SMALL=1`, full on a GPU or with `GPUMCMC_SMALL=0` (`gpumcmc.demo.small_settings()`). The outputs saved in this notebook come from a CPU run with the small settings (NumPy backend, 2 cores)."),
    nbf.v4.new_code_cell(
        "import numpy as np\n"
        "import arviz as az\n"
        "import matplotlib.pyplot as plt\n"
        "from gpumcmc import backend\n"
        "from gpumcmc.models import HierarchicalGLM\n\n"
        "from gpumcmc.demo import small_settings\n"
        "SMALL = small_settings()\n"
        "BACKEND = 'cupy' if backend.cupy_available() and not SMALL else 'numpy'\n"
        "G, K = (6, 2) if SMALL else (200, 5)\n"
        "rs = np.random.default_rng(0)\n"
        "mu_true = np.array([-0.5] + [0.8] * (K - 1))\n"
        "beta_true = mu_true + 0.5 * rs.normal(size=(G, K))\n"
        "sizes = rs.integers(40, 120, size=G)\n"
        "groups = np.repeat(np.arange(G), sizes)\n"
        "X = rs.normal(size=(len(groups), K - 1))\n"
        "eta = beta_true[groups, 0] + np.sum(X * beta_true[groups, 1:], axis=1)\n"
        "y = (rs.random(len(groups)) < 1 / (1 + np.exp(-eta))).astype(float)\n"
        "X.shape, np.bincount(groups)[:6]"),
    nbf.v4.new_code_cell(
        "m = HierarchicalGLM('bernoulli', n_chains=2 if SMALL else 4, n_samples=100 if SMALL else 1000,\n"
        "                    n_warmup=60 if SMALL else 500, random_state=1, backend=BACKEND)\n"
        "m.fit(X, y, groups)\n"
        "idata = m.to_arviz()\n"
        "az.summary(idata, var_names=['mu'])"),
    nbf.v4.new_code_cell(
        "est = m.coef_\n"
        "fig, ax = plt.subplots(figsize=(4, 4))\n"
        "ax.plot(beta_true.ravel(), est.ravel(), 'o', alpha=0.6)\n"
        "lim = [beta_true.min() - 0.5, beta_true.max() + 0.5]\n"
        "ax.plot(lim, lim, 'k--', lw=0.8)\n"
        "ax.set_xlabel('planted coefficient'); ax.set_ylabel('posterior mean')\n"
        "print('correlation', np.corrcoef(beta_true.ravel(), est.ravel())[0, 1])"),
]
nb = nbf.v4.new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                 "language": "python"}})
out = Path(__file__).resolve().parent.parent / "notebooks" / "glm.ipynb"
nbf.write(nb, out)
print(out)
