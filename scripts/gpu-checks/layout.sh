#!/usr/bin/env bash
# GPU checks of issue 35 items 5 and 6 (run from the repository root on a GPU machine; $OUT collects
# the logs): the categorical draws' new stream module, the knobs moved into gpumcmc._config.config
# and the launch plans and compiled kernels moved into gpumcmc._config.memo.
set -x
mkdir -p "$OUT"
# Generator / discrete share gpumcmc.random._stream; gamma's dynamic schedule, Dirichlet plans,
# categorical plans and the loader's tables are now memo tables; the Bayesian network reads its
# shared-memory threshold and macros from config. Same draws as before: the GPU-vs-twin tests say so.
python -m pytest -m gpu -q -p no:cacheprovider tests/test_philox.py tests/test_categorical.py \
    tests/test_gamma.py tests/test_dirichlet_beta.py tests/test_twins.py tests/test_bayesnet.py \
    tests/test_loader.py tests/test_butterfly.py tests/test_config.py 2>&1 | tee "$OUT/layout-gpu-tests.log" | tail -30
# The categorical and Bayesian-network suites: per-call cost of the public paths after the move
# (a module class with properties for the old knob names; plans looked up in the same dicts).
python -m benchmarks rng --small --out "$OUT" 2>&1 | tail -20
python -m benchmarks categorical --small --out "$OUT" 2>&1 | tail -20
python -m benchmarks bayesnet --small --out "$OUT" 2>&1 | tail -20
