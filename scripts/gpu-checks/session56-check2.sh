#!/usr/bin/env bash
# 4 GPUs, about 6 minutes: the whole `pytest -m gpu` again after the day's fixes (the Bayesian network's counts
# kept beside its draws, LDA's column normalisation a thread a column, BEM's one-at-a-time pruning and its
# weights rule on CuPy, Gibbs's relabelled z_), then user_path.py for LDA, the mixture and the Bayesian
# network one section a GPU, then LDA's kernels against their floors at the paper's shape.
set -u
D=${OUT:-out}; mkdir -p "$D"
bash scripts/gpu-checks/session56-suite.sh
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T="timeout -s INT -k 10"
i=0
for s in bayesnet lda mixture; do
  (CUDA_VISIBLE_DEVICES=$i $T 200 python scripts/user_path.py $s --out "$D/user_path-$s.json" > "$D/user_path-$s.log" 2>&1
   echo "user_path $s rc=$?") &
  i=$((i + 1))
done
wait
for s in bayesnet lda mixture; do echo "== $s"; grep -v '"docs"\|"words"\|"tokens"' "$D/user_path-$s.json" | cut -c1-200 | head -14; done
mkdir -p "$D/floor"
CUDA_VISIBLE_DEVICES=0 $T 120 python -m benchmarks.probes.kernel_floor lda --out "$D/floor" > "$D/floor.log" 2>&1; echo "floor rc=$?"
grep -A8 "== lda" "$D/floor.log" | cut -c1-170
cd "$D" && tar czf logs2.tgz user_path-*.log floor.log floor && rm -rf user_path-*.log floor.log floor
