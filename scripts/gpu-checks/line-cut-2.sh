#!/usr/bin/env bash
# GPU checks of the line cuts in models/nested, bayesnet, ising and rbm (issue 35's line goal): the CuPy
# branches these commits reshaped (bayesnet's _GpuOps launch set-up and _Batch.upload, ising's _GpuOps.sweep
# grid and counts flag, nested's sinusoid_ssq grid and sinusoid_fused_slice buffers, nested's slice rounds,
# rbm's fused epoch). Every launch's arguments are checked against the kernel's C parameters. Run from the
# repository root on one GPU; each line stands alone, the logs go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export GPUMCMC_CHECK_KERNEL_ARGS=1
python -m pytest -m gpu -q -p no:cacheprovider tests/test_bayesnet.py tests/test_bayesnet_devices.py 2>&1 | tail -15 | tee "$OUT/line_cut_2_bayesnet.log"
python -m pytest -m gpu -q -p no:cacheprovider tests/test_ising.py tests/test_rbm.py 2>&1 | tail -15 | tee "$OUT/line_cut_2_ising_rbm.log"
python -m pytest -m gpu -q -p no:cacheprovider tests/test_nested.py 2>&1 | tail -15 | tee "$OUT/line_cut_2_nested.log"
# On two GPUs (nvidia-h100-x2): the bayesnet NCCL path.
# python -m pytest -m gpu -q -p no:cacheprovider tests/test_nccl.py -k bayesnet
