#!/usr/bin/env bash
# Two GPUs: the review's fixes. backend.to_host_later (contiguous copies made on the caller's stream, an event
# per device recorded on that device) under the mixture's tests and its own, over one and two GPUs; the
# Bayesian network's GPU tests with the generic kernels and the specialised ones side by side.
OUT=${OUT:-out}; mkdir -p "$OUT"
pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ date -u; cat scripts/.commit; git status --short | grep -v '^??'; nvidia-smi -L; } > "$OUT/host.txt"
T="timeout -s INT -k 10"
PT="python -m pytest -q -m gpu -p no:cacheprovider -rs"
(CUDA_VISIBLE_DEVICES=0 GPUMCMC_CHECK_KERNEL_ARGS=1 $T 200 $PT tests/test_bayesnet.py > "$OUT/tests-bayesnet.log" 2>&1
 echo "bayesnet rc=$?") &
(CUDA_VISIBLE_DEVICES=1 GPUMCMC_CHECK_KERNEL_ARGS=1 $T 200 $PT tests/test_mixture.py tests/test_backend.py \
   > "$OUT/tests-mixture-backend.log" 2>&1; echo "mixture, backend rc=$?") &
wait
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 150 $PT tests/test_bayesnet_devices.py tests/test_backend.py \
  tests/test_mixture.py::test_nccl_sharded_gibbs_gives_the_draws_of_one_device > "$OUT/tests-multi.log" 2>&1
echo "multi rc=$?"
for f in "$OUT"/tests-*.log; do echo "== $(basename $f)"; grep -E "^FAILED|^ERROR" "$f" | head -5; tail -n 1 "$f"; done
