"""Writes notebooks/lda.ipynb (without outputs): run `python scripts/make_lda_notebook.py`."""

from pathlib import Path

import nbformat as nbf

cells = [
    nbf.v4.new_markdown_cell(
        "# Topics on Reuters with uncollapsed Gibbs LDA\n\n"
        "Latent Dirichlet allocation models each document as a mixture of K topics (theta) and each topic as a "
        "distribution over words (phi). `gpumcmc.models.LDA` samples it by *uncollapsed* Gibbs: every sweep "
        "draws a topic z for every token at once given theta and phi, counts topics per document and per word, "
        "and draws theta and phi from their Dirichlet posteriors. With theta and phi fixed, all tokens are "
        "independent, so the whole sweep is a few wide GPU launches.\n\n"
        "Settings: small without a GPU or with `GPUMCMC_SMALL=1`, full on a GPU or with `GPUMCMC_SMALL=0` (`gpumcmc.demo.small_settings()`). The outputs saved in this notebook come from a CPU run with the small settings (NumPy backend, 2 cores)."),
    nbf.v4.new_code_cell(
        "import matplotlib.pyplot as plt\nfrom gpumcmc.datasets import load_reuters\n"
        "from gpumcmc.models import LDA\n\n"
        "from gpumcmc.demo import small_settings\n"
        "small = small_settings()\n"
        "X, vocab, titles = load_reuters()\nprint(X.shape, 'tokens:', X.sum())"),
    nbf.v4.new_markdown_cell(
        "## Fit\n\nThe priors default to 1/K, as in scikit-learn. `burn_in` sweeps are discarded; "
        "`components_` is the posterior mean of phi over the kept sweeps."),
    nbf.v4.new_code_cell(
        "K, burn_in, n_iter = (10, 30, 20) if small else (50, 500, 500)\n"
        "model = LDA(n_components=K, burn_in=burn_in, n_iter=n_iter, random_state=0)\n"
        "doc_topic = model.fit_transform(X)\n"
        "for k, words in enumerate(model.top_words(vocab, 8)):\n    print(k, ' '.join(words))"),
    nbf.v4.new_markdown_cell(
        "## Convergence\n\nThe log-likelihood per token, computed every `monitor_every` sweeps. Uncollapsed "
        "Gibbs mixes more slowly per sweep than collapsed Gibbs, but each sweep is far cheaper on a GPU."),
    nbf.v4.new_code_cell(
        "it, ll = model.loglik_trace_\nplt.plot(it, ll, '.-'); plt.axvline(burn_in, ls='--', c='grey')\n"
        "plt.xlabel('sweep'); plt.ylabel('log-likelihood per token');"),
    nbf.v4.new_markdown_cell("## New documents\n\n`transform` samples theta with phi fixed; `perplexity` "
                             "scores documents under the fitted topics."),
    nbf.v4.new_code_cell(
        "print(model.transform(X[:3]).round(2))\nprint('perplexity:', round(model.perplexity(X[:50]), 1))"),
]
nb = nbf.v4.new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                "language": "python"}})
out = Path(__file__).resolve().parent.parent / "notebooks" / "lda.ipynb"
nbf.write(nb, out)
print(out)
