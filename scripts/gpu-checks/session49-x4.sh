#!/usr/bin/env bash
# Issue 40's last figures on 4 GPUs with the fits' set-up noise taken out (1,000-2,000 iterations between the
# calls, a median of five): the mixture's fits against their steps (item 4), then the Bayesian network's fit over
# 1, 2 and 4 GPUs against its bare step at 10^7 cases (its scaling case) and at 10^6. JSON and logs under $OUT.
OUT=${OUT:-out}; mkdir -p "$OUT"
pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ date -u; cat scripts/.commit; nvidia-smi -L; } > "$OUT/host.txt"
T="timeout -s INT -k 10"
CUDA_VISIBLE_DEVICES=0 $T 45 python -m benchmarks.mixture --profile-fit --out "$OUT/mixture-profile-fit.json" > "$OUT/mixture-profile-fit.log" 2>&1
$T 170 python scripts/gpu-checks/bn_scaling.py "$OUT" --cases 1e7 > "$OUT/bn-scaling-1e7.log" 2>&1
$T 75 python scripts/gpu-checks/bn_scaling.py "$OUT" > "$OUT/bn-scaling.log" 2>&1
tail -n 8 "$OUT/mixture-profile-fit.log"; grep '^{' "$OUT"/bn-scaling*.log
