"""Topics on the Reuters subset bundled with the ``lda`` package, by uncollapsed Gibbs."""

from __future__ import annotations

import time
from pathlib import Path


def run(outdir: Path, small: bool) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gpumcmc import backend
    from gpumcmc.datasets import load_reuters
    from gpumcmc.models import LDA

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    X, vocab, _ = load_reuters()
    gpu = backend.backend_name() == "cupy"
    K = 20 if (small and not gpu) else 50
    n_iter, burn_in = (40, 60) if small and not gpu else (500, 500)
    t0 = time.perf_counter()
    model = LDA(n_components=K, n_iter=n_iter, burn_in=burn_in, monitor_every=10, random_state=0, progress=True)
    model.fit(X)
    seconds = time.perf_counter() - t0
    top = model.top_words(vocab, 8)
    shown = min(10, len(top))
    print(f"the first {shown} of {len(top)} topics, 8 words each (all are in model.top_words(vocab, 8)):")
    for k, words in enumerate(top[:shown]):
        print(f"topic {k:2d}: {' '.join(words)}")
    it, ll = model.loglik_trace_
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(it, ll, marker=".")
    ax.axvline(burn_in, color="grey", ls="--", lw=1, label="end of burn-in")
    ax.set_xlabel("iteration")
    ax.set_ylabel("log-likelihood per token")
    ax.set_title(f"LDA on Reuters (K = {K}, uncollapsed Gibbs)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(outdir / "lda_loglik.png", dpi=100)
    plt.close(fig)
    perp = float(__import__("math").exp(-ll[-1]))
    return {"model": f"LDA (K={K}, {burn_in}+{n_iter} sweeps)", "data": "Reuters, 395 docs, 84,010 tokens",
            "seconds": round(seconds, 2), "quality": f"training perplexity = {perp:.0f}"}
