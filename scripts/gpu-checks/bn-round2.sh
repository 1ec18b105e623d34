#!/usr/bin/env bash
# Issue 38, second round (Bayesian network: BN_GROUP=2 by default, counts of the families with a missing cell only,
# every colour in one launch): the bayesnet GPU tests with every launch's arguments checked, then the timings
# (public fit against its bare step, user_path.py bayesnet, each kernel and its launch variants), JSON under $OUT.
# About 2-3 minutes on one H100/H200.
OUT=${OUT:-out}; mkdir -p "$OUT"
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu -q -p no:cacheprovider tests/test_bayesnet.py \
  tests/test_bayesnet_devices.py 2>&1 | tee "$OUT/bn-round2-tests.log"
bash scripts/gpu-checks/bn-timing.sh "$OUT" 2>&1 | tee "$OUT/bn-timing.log"
