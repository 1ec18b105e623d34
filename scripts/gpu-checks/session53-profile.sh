#!/usr/bin/env bash
# One GPU: what LDA's sweep (K = 1024, the paper's corpus shape) and Bayesian EM's iteration are made of now,
# kernel by kernel (sweep_kernels.py: every kernel's time a sweep; kernel_floor.py: DRAM and SM shares of our own).
set -u
D=${OUT:-out}; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
T="timeout -s INT -k 10"
mkdir -p "$D/sweep" "$D/floor"
$T 200 python -m benchmarks.probes.sweep_kernels lda bem --out "$D/sweep" > "$D/sweep.log" 2>&1; echo "sweep rc=$?"
cat "$D/sweep.log" | cut -c1-160 | head -70
$T 150 python -m benchmarks.probes.kernel_floor lda --out "$D/floor" > "$D/floor.log" 2>&1; echo "floor rc=$?"
grep -A14 "== lda" "$D/floor.log" | cut -c1-170
cd "$D" && tar czf logs.tgz *.log host.txt sweep floor && rm -rf *.log host.txt sweep floor
