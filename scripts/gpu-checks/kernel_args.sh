#!/usr/bin/env bash
# GPU checks of the launchers that name their kernel arguments (gpumcmc/_kernel_args.py): the GPU
# tests of every converted launcher (draws equal to the NumPy twins, so the same arguments in the same
# order), run with GPUMCMC_CHECK_KERNEL_ARGS=1 so that each launch also checks every value's kind and
# dtype against its C parameter (a wrong one raises TypeError naming the kernel and the argument).
# Run from the repository root on a GPU machine; $OUT collects the log.
set -x
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu -q -p no:cacheprovider -x \
    tests/test_bayesnet.py tests/test_categorical.py tests/test_butterfly.py tests/test_gamma.py \
    tests/test_dirichlet_beta.py tests/test_philox.py tests/test_ising.py tests/test_rbm.py tests/test_nested.py \
    tests/test_kernel_args.py 2>&1 | tee "$OUT/kernel_args_gpu.log" | tail -30
# The same without the per-launch check (as users run it), for the draws and the timings' path.
python -m pytest -m gpu -q -p no:cacheprovider tests/test_bayesnet.py tests/test_categorical.py \
    tests/test_dirichlet_beta.py tests/test_ising.py tests/test_nested.py 2>&1 | tail -5
# Host cost of naming the arguments, per launch, on this machine's CPU (no GPU work): JSON in $OUT.
python scripts/gpu-checks/kernel_args_overhead.py > "$OUT/kernel_args_overhead.json"
cat "$OUT/kernel_args_overhead.json"
