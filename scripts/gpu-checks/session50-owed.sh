#!/usr/bin/env bash
# What the changes since the last GPU run (46adb3a) owe to the GPU, in one call on a host of 2 or 4 GPUs:
#   - bn-specialise.sh: the Bayesian network's GPU tests (the set-up's new cell lists, the counts kernel's
#     refactor, bn_sweep's off_dev, the specialised kernels and the graph replay against the eager fit and the
#     twin), their timings, and bn_scaling.py with the fits' loops timed inside the calls (issue 40 item 6);
#   - the other users of a captured step (a field updated in place is no longer copied onto itself) and of
#     run()'s kept draws (stored by a copy of their bytes): the sampling, GLM and LDA GPU tests.
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
NGPU=$(nvidia-smi -L | wc -l)
T="timeout -s INT -k 10"
PT="python -m pytest -q -m gpu -p no:cacheprovider"
bash scripts/gpu-checks/bn-specialise.sh                 # installs the package; about 5 minutes
last=$((NGPU - 1))
(CUDA_VISIBLE_DEVICES=$last GPUMCMC_CHECK_KERNEL_ARGS=1 $T 240 $PT tests/test_sampling.py tests/test_glm.py \
   > "$OUT/tests-sampling-glm.log" 2>&1; echo "sampling, glm rc=$?") &
(CUDA_VISIBLE_DEVICES=0 GPUMCMC_CHECK_KERNEL_ARGS=1 $T 240 $PT tests/test_lda.py > "$OUT/tests-lda.log" 2>&1
 echo "lda rc=$?") &
wait
tail -n 1 "$OUT"/tests-*.log
