#!/usr/bin/env bash
# GPU checks of LDA (run from the repository root on a GPU machine; $OUT collects the JSON and logs).
set -x
# Every LDA GPU test: the z-draw's log-likelihood sum against log_likelihood (fused, two-kernel with each
# method, sharded on one_device), draws unchanged with it, the monitor under a CUDA graph, the categorical
# kernels' log_total.
python -m pytest -m gpu tests/test_lda.py tests/test_lda_devices.py tests/test_token_order.py -q -p no:cacheprovider 2>&1 | tail -40
python -m pytest -m gpu tests/test_categorical.py tests/test_products_base.py tests/test_loader.py -q -p no:cacheprovider -x 2>&1 | tail -15
# The public call (fit, defaults) against the bare step loop, and LDA.fit's set-up, on the user_path corpora.
python ../shared/bench/user_path.py lda --out "$OUT/user_path_lda.json"
python -m benchmarks.lda --out "$OUT/lda_fit_vs_step.json" 2>&1 | tail -30
# Issue 37: single seeded chains against lda's collapsed Gibbs over 20 planted corpora (slow; prints the counts
# on failure). If it passes, consider making start="seeded" the default (it changes default draws).
python -m pytest -m "gpu and slow" tests/test_lda.py -q -p no:cacheprovider -k "stick or seeded" 2>&1 | tail -15
