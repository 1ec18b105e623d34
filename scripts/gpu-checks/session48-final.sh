#!/usr/bin/env bash
# The whole `pytest -m gpu` at the final code on a host of 4 GPUs, every launch's arguments checked: the test
# files in four lanes (one GPU each), then the multi-GPU files with every GPU visible; then the Bayesian
# network's timings (issue 38) and the public calls of the packages shortened since the last figures (the
# mixture's fits against their steps, nested sampling's public rows). $OUT gets session48-final.tgz.
set -u
out=${OUT:-out}; D=/tmp/s48f; mkdir -p "$out" "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
T="timeout -s INT -k 10"
GPU_TESTS_DIR="$D" bash scripts/gpu-checks/session49-final.sh --tests-only
(CUDA_VISIBLE_DEVICES=0 $T 170 bash scripts/gpu-checks/bn-timing.sh "$D" > "$D/bn-timing.log" 2>&1; echo "bn timing rc=$?") &
(export CUDA_VISIBLE_DEVICES=1
 $T 60 python scripts/user_path.py mixture --out "$D/user_path-mixture.json" > "$D/user_path-mixture.log" 2>&1
 $T 60 python -m benchmarks.mixture --profile-fit --out "$D/mixture-profile-fit.json" > "$D/mixture-profile-fit.log" 2>&1
 echo "mixture timing rc=$?") &
(export CUDA_VISIBLE_DEVICES=2
 $T 90 python scripts/user_path.py nested --out "$D/user_path-nested.json" > "$D/user_path-nested.log" 2>&1
 echo "nested timing rc=$?") &
wait
for f in "$D"/tests-*.log; do echo "== $(basename "$f")"; grep -E "^FAILED|^ERROR" "$f" | head -8; tail -n 1 "$f"; done
grep -h "bayesnet_koller\|koller-1M-50%-m10 " "$D/bn-timing.log" | head -30
tail -n 12 "$D/mixture-profile-fit.log"; tail -c 600 "$D/user_path-nested.log"
tar czf "$out/session48-final.tgz" -C "$D" .
