"""Writes notebooks/ising.ipynb (without outputs): python notebooks/make_ising.py"""

from pathlib import Path

import nbformat as nbf

cells = [
    nbf.v4.new_markdown_cell("""# Ising models and restricted Boltzmann machines

Checkerboard heat-bath Gibbs on the 2-D Ising model (Mahani & Sharabiani, section 4.3): the two colours of
the checkerboard are sampled in turn, every site of a colour at once, for all chains in one launch. On a GPU
the uniform-field lattice runs in multispin coding (16 spins per 64-bit word); any per-site field runs one
byte per spin. Both paths, and the NumPy twin on a CPU, give the same states for one seed.

The small settings run in about a minute on two CPU cores. Settings: small without a GPU or with `GPUMCMC_SMALL=1`, full on a GPU or with `GPUMCMC_SMALL=0` (`gpumcmc.demo.small_settings()`). The outputs saved in this notebook come from a CPU run with the small settings (NumPy backend, 2 cores)."""),
    nbf.v4.new_code_cell("""import time
import numpy as np
import matplotlib.pyplot as plt
import gpumcmc
from gpumcmc.models import Ising, RBM
from gpumcmc.models import ising as I

from gpumcmc.demo import small_settings

SMALL = small_settings()
print("backend:", gpumcmc.backend.backend_name(), "| small settings:", SMALL)"""),
    nbf.v4.new_markdown_cell("""## Energy and magnetisation against the exact results

Energy per site against Kaufman's exact finite-lattice value and Onsager's infinite-lattice one; the error
bar is the spread of the chain means (chains are independent)."""),
    nbf.v4.new_code_cell("""L = 32 if SMALL else 256
sweeps, burn = (400, 100) if SMALL else (4000, 1000)
for beta in (0.3, I.BETA_C, 0.6):
    res = Ising((L, L), beta=beta).sample(sweeps, burn_in=burn, n_chains=16, random_state=0, progress=False,
                                          initial="up" if beta > 0.5 else "random")
    means = res.energy.mean(axis=1)
    print(f"beta={beta:.4f}: e = {means.mean():.4f} +- {means.std(ddof=1) / 4:.4f}   "
          f"exact (L={L}) {I.exact_energy_finite(beta, (L, L)):.4f}   infinite {float(I.onsager_energy(beta)):.4f}   "
          f"|m| = {np.abs(res.magnetization).mean():.4f} (Onsager {float(I.onsager_magnetization(beta)):.4f})")
res.to_arviz()"""),
    nbf.v4.new_markdown_cell("""## Magnetisation against temperature near T_c"""),
    nbf.v4.new_code_cell("""temps = np.linspace(1.8, 3.0, 7 if SMALL else 25)
absm = []
for T in temps:
    r = Ising((L, L), beta=1 / T).sample(sweeps // 2, burn_in=burn, n_chains=8, random_state=1, progress=False,
                                         initial="up" if T < 2.27 else "random")
    absm.append(np.abs(r.magnetization).mean())
tt = np.linspace(1.7, 3.1, 300)
plt.plot(tt, I.onsager_magnetization(1 / tt), "k-", label="Onsager")
plt.plot(temps, absm, "o", label=f"L = {L}")
plt.xlabel("T"); plt.ylabel("<|m|>"); plt.legend();"""),
    nbf.v4.new_markdown_cell("""## Denoising a binary image (Bishop, ch. 8)

The noisy image sets a field on every site (`strength * y_i`); the coupling pulls neighbours together.
`denoise` returns the posterior mean of each pixel."""),
    nbf.v4.new_code_cell("""from gpumcmc.demo.ising import make_image

clean = make_image(*((100, 90) if SMALL else (560, 516)))
noisy = np.where(np.random.default_rng(0).random(clean.shape) < 0.1, 1 - clean, clean)
t = time.perf_counter()
post = gpumcmc.to_host(I.denoise(noisy, n_sweeps=30 if SMALL else 1000, burn_in=10 if SMALL else 100,
                                 n_chains=2 if SMALL else 16, random_state=0, progress=False))
err_before, err_after = np.mean(noisy != clean), np.mean((post > .5) != clean)
print(f"{time.perf_counter() - t:.2f} s; pixel error {err_before:.2%} -> {err_after:.2%}")
fig, ax = plt.subplots(1, 2, figsize=(8, 4))
ax[0].imshow(noisy, cmap="gray"); ax[0].set_title(f"noisy ({err_before:.1%} wrong)")
ax[1].imshow(post, cmap="gray"); ax[1].set_title(f"posterior P(pixel = 1)\\n({err_after:.2%} wrong at P > 0.5)")
for a in ax: a.axis("off")"""),
    nbf.v4.new_markdown_cell("""## An RBM on binarised digits, beside scikit-learn

Persistent contrastive divergence with scikit-learn's schedule; pseudo-likelihood of both machines scored by
one function with the same flipped bits."""),
    nbf.v4.new_code_cell("""from sklearn.neural_network import BernoulliRBM
from gpumcmc.models.rbm import load_binary_digits

X = load_binary_digits()
n_hidden, n_iter = (32, 3) if SMALL else (128, 20)
ours = RBM(n_hidden=n_hidden, learning_rate=0.05, n_iter=n_iter, random_state=0, progress=False).fit(X)
t = time.perf_counter()
sk = BernoulliRBM(n_components=n_hidden, learning_rate=0.05, n_iter=n_iter, random_state=0).fit(X)
sk_s = time.perf_counter() - t
print(f"gpumcmc:      pseudo-likelihood {ours.pseudo_likelihood(X):.2f}, {ours.fit_seconds_:.2f} s")
print(f"scikit-learn: pseudo-likelihood {RBM.from_sklearn(sk).pseudo_likelihood(X):.2f}, {sk_s:.2f} s")
v = gpumcmc.to_host(ours.sample(n_chains=8, n_steps=200, random_state=1))
fig, ax = plt.subplots(1, 8, figsize=(8, 1.2))
for a, img in zip(ax, v):
    a.imshow(img.reshape(8, 8), cmap="gray_r"); a.axis("off")"""),
]
nb = nbf.v4.new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                "language": "python"}})
nbf.write(nb, Path(__file__).resolve().parent / "ising.ipynb")
