#!/usr/bin/env bash
# GPU checks of the fixes made after the last GPU run of 53b7754 (run from the repository root on a host of
# 2 or more GPUs, nvidia-h100-x4 where lent; $OUT collects the logs):
# - sampling._protocol: shard 0's stream waits for each other GPU's copy of the shared fields;
# - nested ops: the slice rounds' done-check reads only its own step's rounds;
# - random: the Gamma/Beta/Wishart fast paths take only arrays on the current GPU;
# - mixture: alpha's rate summed as a contiguous array (the GPU draws as before the host trims).
set -x
export GPUMCMC_CHECK_KERNEL_ARGS=1
python -m pytest -m gpu -q -p no:cacheprovider tests/test_protocol.py tests/test_mixture.py tests/test_gamma.py \
    tests/test_dirichlet_beta.py tests/test_wishart.py 2>&1 | tee "$OUT/review-fixes-gpu.log" | tail -5
python -m pytest -m "gpu and not slow" -q -p no:cacheprovider tests/test_nested.py 2>&1 | tail -5
unset GPUMCMC_CHECK_KERNEL_ARGS
python -m pytest -m gpu -q -p no:cacheprovider tests/test_nccl.py 2>&1 | tee "$OUT/review-fixes-nccl.log" | tail -5
