#!/usr/bin/env bash
# GPU checks of the primitives' bad-input tables, the demo and the notebooks (run from the
# repository root on a GPU machine; $OUT collects the logs).
set -x
# The variates' bad-parameter table on CuPy (normal's scale array check is deferred under
# @checked: one sync per call), the damaged-checkpoint table, and every primitive's GPU tests.
python -m pytest -m gpu -q -p no:cacheprovider tests/test_philox.py tests/test_gamma.py \
    tests/test_dirichlet_beta.py tests/test_wishart.py tests/test_sampling.py tests/test_categorical.py \
    tests/test_deferred.py tests/test_twins.py 2>&1 | tail -30
# The demo on a GPU (full settings), with its plots kept.
python -m gpumcmc demo --out "$OUT/demo" 2>&1 | grep -v "it/s" | tail -40
