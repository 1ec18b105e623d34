#!/usr/bin/env bash
# One GPU, first thing next: the GPU tests of the files whose input checks changed after the last GPU run
# (Ising.energy's +-1 check, token_order's checks, NestedSampler's probes and max_iter warning, the mixture's
# offset warning and prior checks on CuPy input, LDA's prior floor, the Bayesian network's log_prob and same),
# every launch's arguments checked; then where loglik_and_grad's default loses against check=False (issue 40
# item 5): benchmarks/probes/fg_host.py, whose queued_deferred row gives the checking kernels' own pace.
OUT=${OUT:-out}; mkdir -p "$OUT"
pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T="timeout -s INT -k 10"
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 420 python -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_ising.py \
  tests/test_token_order.py tests/test_nested.py tests/test_mixture.py tests/test_lda.py tests/test_bayesnet.py \
  tests/test_sampling.py tests/test_philox.py tests/test_rbm.py tests/test_glm.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head; tail -n 1 "$OUT/tests.log"
$T 120 python -m benchmarks.probes.fg_host --out "$OUT/fg_host.json" > "$OUT/fg_host.log" 2>&1
echo "fg_host rc=$?"; head -n 20 "$OUT/fg_host.log"
