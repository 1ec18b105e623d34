"""Ising model and RBM: denoising a binary image, magnetisation across T_c, an RBM on digits.

* A binary picture drawn here (shapes, 10% of its pixels flipped) is cleaned
  by the Ising posterior of Bishop (2006, ch. 8): before/after PNGs and the
  pixel error rates.
* |m| per site against temperature near T_c = 2.269, with Onsager's exact
  spontaneous magnetisation.
* An RBM trained by persistent contrastive divergence on scikit-learn's
  digits (binarised), scored beside scikit-learn's BernoulliRBM by
  pseudo-likelihood and time, and samples from it.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np


def make_image(rows: int, cols: int) -> np.ndarray:
    """A binary picture (0/1 uint8): a disc, a ring, a bar and a triangle, scaled to the size asked."""
    y, x = np.mgrid[0:rows, 0:cols] / np.array([rows, cols])[:, None, None]
    img = (x - 0.3) ** 2 + (y - 0.35) ** 2 < 0.18**2  # disc
    r2 = (x - 0.72) ** 2 + (y - 0.3) ** 2
    img |= (r2 < 0.17**2) & (r2 > 0.1**2)  # ring
    img |= (np.abs(y - 0.78) < 0.07) & (x > 0.1) & (x < 0.9)  # bar
    img |= (y > 0.5) & (y < 0.68) & (np.abs(x - 0.6) < (y - 0.5) * 0.9)  # triangle
    return img.astype(np.uint8)


def run(outdir: Path, small: bool) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outdir = Path(outdir)
    t0 = time.perf_counter()
    rows, cols, err_before, err_after = _denoising(outdir, small, plt)
    L, dev = _magnetization(outdir, small, plt)
    pl = _rbm_on_digits(outdir, small, plt)
    return {
        "model": "ising",
        "data": f"a {rows}x{cols} binary picture drawn here with 10% noise; {L}x{L} lattices; "
                "scikit-learn digits (binarised) for the RBM",
        "seconds": time.perf_counter() - t0,
        "quality": f"denoised pixel error = {err_after:.2%} (noisy {err_before:.1%}); "
                   f"max | |m| - Onsager | below T=2 = {dev:.3f}; RBM pseudo-likelihood = {pl:.2f}",
    }


def _denoising(outdir: Path, small: bool, plt) -> tuple:
    """1. Denoising (the paper's 560 x 516 image size on a GPU): the image's size and its error rates."""
    from .. import backend as _backend
    from ..models import ising as I

    rows, cols = (120, 110) if small else (560, 516)
    clean = make_image(rows, cols)
    noisy = np.where(np.random.default_rng(0).random(clean.shape) < 0.1, 1 - clean, clean).astype(np.uint8)
    post = I.denoise(noisy, n_sweeps=30 if small else 1000, burn_in=10 if small else 100,
                     n_chains=2 if small else 16, random_state=1)
    post = np.asarray(_backend.to_host(post))
    err_before = float((noisy != clean).mean())
    err_after = float(((post > 0.5) != clean).mean())
    fig, ax = plt.subplots(1, 3, figsize=(12, 4.6), layout="constrained")
    for a, im, title in zip(ax, (noisy, post, post > 0.5),
                            (f"noisy\n{err_before:.1%} of pixels wrong", "posterior\nP(pixel = 1)",
                             f"denoised (P > 0.5)\n{err_after:.2%} of pixels wrong")):
        a.imshow(im, cmap="gray", vmin=0, vmax=1)
        a.set_title(title, fontsize=11)
        a.axis("off")
    fig.savefig(outdir / "ising_denoise.png", dpi=100, bbox_inches="tight", pad_inches=0.2)
    plt.close(fig)
    return rows, cols, err_before, err_after


def _magnetization(outdir: Path, small: bool, plt) -> tuple:
    """2. |m| against temperature near T_c, beside Onsager's: the lattice's side and the largest gap below T = 2."""
    from ..models import Ising
    from ..models import ising as I

    L = 32 if small else 256
    temps = np.linspace(1.6, 3.2, 9 if small else 17)
    sweeps, burn = (300, 150) if small else (3000, 1000)
    absm, err = [], []
    for T in temps:
        res = Ising((L, L), beta=1.0 / T).sample(sweeps, burn_in=burn, n_chains=8, random_state=int(T * 1000),
                                                 progress=False, initial="up" if T < 2.269 else "random")
        m = np.abs(res.magnetization).mean(axis=1)
        absm.append(m.mean())
        err.append(m.std(ddof=1) / np.sqrt(len(m)))
    tt = np.linspace(1.5, 3.3, 400)
    fig, a = plt.subplots(figsize=(6, 4))
    a.plot(tt, I.onsager_magnetization(1.0 / tt), "k-", label="Onsager (infinite lattice)")
    a.errorbar(temps, absm, yerr=err, fmt="o", color="C3", label=f"heat-bath checkerboard, L = {L}")
    a.axvline(1.0 / I.BETA_C, color="gray", ls=":", label="T_c")
    a.set_xlabel("temperature T (J = 1)")
    a.set_ylabel("<|m|> per site")
    a.legend()
    fig.tight_layout()
    fig.savefig(outdir / "ising_magnetization.png", dpi=100)
    plt.close(fig)
    low = temps < 2.0
    dev = float(np.max(np.abs(np.array(absm)[low] - I.onsager_magnetization(1.0 / temps[low]))))
    return L, dev


def _rbm_on_digits(outdir: Path, small: bool, plt) -> float:
    """3. An RBM on binarised digits, beside scikit-learn: its pseudo-likelihood."""
    from .. import backend as _backend
    from ..models import RBM
    from ..models.rbm import load_binary_digits

    X = load_binary_digits()
    n_hidden, n_iter = (32, 3) if small else (128, 20)
    rbm = RBM(n_hidden=n_hidden, learning_rate=0.05, n_iter=n_iter, random_state=0).fit(X)
    pl = rbm.pseudo_likelihood(X)
    line = f"gpumcmc RBM: pseudo-likelihood {pl:.2f} in {rbm.fit_seconds_:.2f} s"
    try:
        from sklearn.neural_network import BernoulliRBM

        t1 = time.perf_counter()
        sk = BernoulliRBM(n_components=n_hidden, learning_rate=0.05, n_iter=n_iter, random_state=0).fit(X)
        sk_s = time.perf_counter() - t1
        line += (f"; scikit-learn BernoulliRBM: {RBM.from_sklearn(sk).pseudo_likelihood(X):.2f} "
                 f"in {sk_s:.2f} s")
    except ImportError:
        pass
    print(line)
    v = np.asarray(_backend.to_host(rbm.sample(n_chains=16, n_steps=200 if small else 1000, random_state=3)))
    fig, ax = plt.subplots(2, 8, figsize=(8, 2.2))
    for a, img in zip(ax.ravel(), v):
        a.imshow(img.reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
        a.axis("off")
    fig.suptitle("RBM samples (block Gibbs)")
    fig.savefig(outdir / "rbm_samples.png", dpi=100)
    plt.close(fig)
    return pl
