#!/usr/bin/env bash
# The mixture's GPU tests owed since the relabelling's launcher was rewired (2286040), with two GPUs visible, beside
# where the Bayesian network's iteration over 1, 2 and 4 GPUs goes (bn_profile.py) and its scaling (bn_scaling.py).
OUT=${OUT:-out}; mkdir -p "$OUT"
pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1
export PYTHONPATH=$PWD
nvidia-smi -L > "$OUT/gpus.txt"
(CUDA_VISIBLE_DEVICES=2,3 GPUMCMC_CHECK_KERNEL_ARGS=1 timeout 400 python -m pytest -q -m gpu tests/test_mixture.py \
   -p no:cacheprovider > "$OUT/mixture-gpu.log" 2>&1; echo "rc=$?" >> "$OUT/mixture-gpu.log") &
CUDA_VISIBLE_DEVICES=0,1 timeout 200 python scripts/gpu-checks/bn_profile.py "$OUT" 1e6 1 2 > "$OUT/bn_profile_1e6_w12.log" 2>&1
wait
timeout 150 python scripts/gpu-checks/bn_profile.py "$OUT" 1e6 4 > "$OUT/bn_profile_1e6_w4.log" 2>&1
timeout 200 python scripts/gpu-checks/bn_profile.py "$OUT" 1e7 1 2 4 > "$OUT/bn_profile_1e7.log" 2>&1
timeout 200 python scripts/gpu-checks/bn_scaling.py "$OUT" > "$OUT/bn_scaling.log" 2>&1
tail -3 "$OUT/mixture-gpu.log"; grep '^{' "$OUT"/bn_*.log
