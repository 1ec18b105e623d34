#!/usr/bin/env bash
# 4 GPUs, about 5 minutes: user_path.py (the public calls with their defaults) one section a GPU, at the
# Bayesian network's cpts_ from the counts and LDA's tidied sums; then LDA's sweep and its kernels' DRAM and SM
# shares at the paper's shape (K = 1024), to see what the two column passes cost beside the sweep.
set -u
D=${OUT:-out}; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
T="timeout -s INT -k 10"
i=0
for s in bayesnet lda mixture ising; do
  (CUDA_VISIBLE_DEVICES=$i $T 280 python scripts/user_path.py $s --out "$D/user_path-$s.json" > "$D/user_path-$s.log" 2>&1
   echo "user_path $s rc=$?") &
  i=$((i + 1))
done
wait
for s in bayesnet lda mixture ising; do echo "== $s"; cat "$D/user_path-$s.json" | cut -c1-900; echo; done
mkdir -p "$D/sweep" "$D/floor"
export CUDA_VISIBLE_DEVICES=0
$T 120 python -m benchmarks.probes.sweep_kernels lda --out "$D/sweep" > "$D/sweep.log" 2>&1; echo "sweep rc=$?"
cut -c1-160 "$D/sweep.log" | head -40
$T 150 python -m benchmarks.probes.kernel_floor lda --out "$D/floor" > "$D/floor.log" 2>&1; echo "floor rc=$?"
grep -A16 "== lda" "$D/floor.log" | cut -c1-170
cd "$D" && tar czf logs.tgz *.log host.txt sweep floor && rm -rf *.log host.txt sweep floor
