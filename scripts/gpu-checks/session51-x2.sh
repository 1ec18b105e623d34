#!/usr/bin/env bash
# Two GPUs: the multi-GPU tests of this stop's changes (the Bayesian network's specialised kernels and counts in
# registers on every device; the mixture's host copy of a sharded fit's draws), then the Bayesian network's
# fit over two GPUs at 10^7 cases with each fit's sampling loop timed inside the call (issue 40 item 6).
OUT=${OUT:-out}; mkdir -p "$OUT"
pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ date -u; cat scripts/.commit; git status --short | grep -v '^??'; nvidia-smi -L; } > "$OUT/host.txt"
T="timeout -s INT -k 10"
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 240 python -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_bayesnet_devices.py \
  tests/test_nccl.py tests/test_mixture.py::test_nccl_sharded_gibbs_gives_the_draws_of_one_device \
  > "$OUT/tests-multi.log" 2>&1; echo "multi-GPU tests rc=$?"; grep -E "^FAILED|^ERROR" "$OUT/tests-multi.log" | head; tail -n 1 "$OUT/tests-multi.log"
$T 280 python scripts/gpu-checks/bn_scaling.py "$OUT" --cases 1e7 > "$OUT/bn-scaling-1e7.log" 2>&1
echo "bn_scaling rc=$?"; tail -n 30 "$OUT/bn-scaling-1e7.log" | grep -v '^ *$' | tail -n 20
