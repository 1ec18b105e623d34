#!/usr/bin/env bash
# GPU checks of the last review of sampling/random/nested (run from the repository root; $OUT collects the logs):
# - random._gamma: the fast path's shape/scale/dtype test as one expression (the same calls take it);
# - nested: _propose_eval's clip bounds shared with the masked rounds' twin (the same values).
set -x
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu -q -p no:cacheprovider tests/test_gamma.py \
    tests/test_dirichlet_beta.py 2>&1 | tee "$OUT/core-random-gpu.log" | tail -5
python -m pytest -m "gpu and not slow" -q -p no:cacheprovider tests/test_nested.py 2>&1 \
    | tee "$OUT/core-nested-gpu.log" | tail -5
