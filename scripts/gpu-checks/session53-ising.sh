#!/usr/bin/env bash
# One GPU: the multispin Ising sweep with ISING_PREFETCH (the next row pair's words copied to shared memory
# while the current pair draws). Its GPU tests (the twin's states bit for bit, every launch's arguments
# checked); the probe that times the settings and checks that they give the same states; ncu on the sweep
# with the prefetch and without it; user_path.py's ising row.
set -u
D=${OUT:-out}; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
T="timeout -s INT -k 10"
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 180 python -m pytest -q -m gpu -p no:cacheprovider tests/test_ising.py > "$D/tests.log" 2>&1
echo "tests rc=$?"; grep -E "^FAILED|^ERROR" "$D/tests.log" | head; tail -n 1 "$D/tests.log"
$T 150 python -m benchmarks.probes.ising_prefetch --out "$D/ising_prefetch.json" > "$D/ising_prefetch.log" 2>&1
echo "probe rc=$?"; cat "$D/ising_prefetch.log" | cut -c1-600
mkdir -p "$D/ncu1" "$D/ncu0"
$T 90 python -m benchmarks.probes.kernel_floor ising --out "$D/ncu1" > "$D/ncu1.log" 2>&1; echo "ncu prefetch rc=$?"; grep -A3 "== ising" "$D/ncu1.log"
sed -i 's/#define ISING_PREFETCH 1 /#define ISING_PREFETCH 0 /' kernels_cu/ising.cu
$T 90 python -m benchmarks.probes.kernel_floor ising --out "$D/ncu0" > "$D/ncu0.log" 2>&1; echo "ncu no prefetch rc=$?"; grep -A3 "== ising" "$D/ncu0.log"
sed -i 's/#define ISING_PREFETCH 0 /#define ISING_PREFETCH 1 /' kernels_cu/ising.cu
$T 60 python scripts/user_path.py ising --out "$D/user_path-ising.json" > "$D/user_path-ising.log" 2>&1; echo "user_path rc=$?"
grep flips "$D/user_path-ising.log" | head -3
cd "$D" && tar czf logs.tgz *.log host.txt ncu0 ncu1 && rm -rf *.log host.txt ncu0 ncu1
