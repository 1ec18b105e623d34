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
        "Settings: small without a GPU or with `GPUMCMC_SMALL=1`, full on a GPU or with `GPUMCMC_SMALL=0` "
        "(`gpumcmc.demo.small_settings()`). The outputs saved in this notebook come from a CPU run with the small "
        "settings (NumPy backend, 2 cores)."),
    nbf.v4.new_code_cell(
        "import numpy as np\nimport matplotlib.pyplot as plt\nfrom gpumcmc.datasets import load_reuters\n"
        "from gpumcmc.models import LDA\n\n"
        "from gpumcmc.demo import small_settings\n"
        "small = small_settings()\n"
        "X, vocab, titles = load_reuters()\nprint(X.shape, 'tokens:', X.sum())"),
    nbf.v4.new_markdown_cell(
        "## Fit\n\nThe priors default to 1/K, as in scikit-learn. `burn_in` sweeps are discarded; "
        "`components_` is the posterior mean of phi over the kept sweeps. (`start=\"seeded\"` starts from topics "
        "seeded by documents picked k-means++-style instead of random topics, which on small planted corpora "
        "left fewer chains with two topics merged; the default, `\"auto\"`, does so on a corpus of this size, "
        "and `start=\"random\"` asks for random topics.)"),
    nbf.v4.new_code_cell(
        "K, burn_in, n_iter = (10, 30, 20) if small else (50, 500, 500)\n"
        "model = LDA(n_components=K, burn_in=burn_in, n_iter=n_iter, random_state=0)\n"
        "doc_topic = model.fit_transform(X)\n"
        "for k, words in enumerate(model.top_words(vocab, 8)):\n    print(k, ' '.join(words))"),
    nbf.v4.new_markdown_cell(
        "## Convergence\n\nThe log-likelihood per token, recorded every `monitor_every` sweeps and at the last. "
        "The z-draw sums it as it draws each token's topic, so it costs no pass of its own; the value at sweep i "
        "scores the theta and phi that sweep i drew from, the state after i - 1 sweeps. Uncollapsed Gibbs mixes "
        "more slowly per sweep than collapsed Gibbs, but each sweep is far cheaper on a GPU."),
    nbf.v4.new_code_cell(
        "it, ll = model.loglik_trace_\nplt.plot(it, ll, '.-'); plt.axvline(burn_in, ls='--', c='grey')\n"
        "plt.xlabel('sweep'); plt.ylabel('log-likelihood per token');"),
    nbf.v4.new_markdown_cell("## New documents\n\n`transform` samples theta with phi fixed."),
    nbf.v4.new_code_cell("print(model.transform(X[:3]).round(2))"),
    nbf.v4.new_markdown_cell(
        "## Choosing K by document completion\n\n"
        "To compare numbers of topics, fit on some documents and score the others by **document completion**: "
        "`perplexity(X_test, method=\"completion\")` splits each held-out document's tokens in two halves, fits "
        "theta on the first (phi fixed) and scores the second, so every word it scores is one the model has not "
        "seen. The default, `method=\"full\"`, fits theta on all of a document's tokens and scores those same "
        "tokens: it tells how well the topics can fit a document, not how well they predict its unseen words, "
        "so it keeps falling as K grows. Lower is better for both."),
    nbf.v4.new_code_cell(
        "X_train, X_test = X[:300], X[300:]\n"
        "Ks, burn, keep = ((10, 20, 40, 80), 100, 50) if small else ((10, 20, 40, 80, 160), 500, 500)\n"
        "completion, full = [], []\n"
        "for k in Ks:\n"
        "    m = LDA(n_components=k, burn_in=burn, n_iter=keep, random_state=0, progress=False).fit(X_train)\n"
        "    completion.append(m.perplexity(X_test, method='completion'))\n"
        "    full.append(m.perplexity(X_test))\n"
        "    print(f'K = {k:3d}: completion {completion[-1]:7.1f}   full {full[-1]:7.1f}')\n"
        "print('lowest completion perplexity at K =', Ks[int(np.argmin(completion))])\n"
        "fig, ax = plt.subplots(figsize=(6, 3.5))\n"
        "ax.plot(Ks, completion, 'o-', label='completion (held-out words)')\n"
        "ax.plot(Ks, full, 's--', label='full (the words theta was fitted on)')\n"
        "ax.set(xscale='log', xticks=Ks, xticklabels=[str(k) for k in Ks], xlabel='K (n_components)',\n"
        "       ylabel='perplexity of the held-out documents')\n"
        "ax.minorticks_off(); ax.legend();"),
]
nb = nbf.v4.new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                "language": "python"}})
out = Path(__file__).resolve().parent.parent / "notebooks" / "lda.ipynb"
nbf.write(nb, out)
print(out)
