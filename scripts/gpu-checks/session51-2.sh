#!/usr/bin/env bash
# One GPU: the Bayesian network's GPU tests with the specialised kernels on by default, its bare step over
# bayesnet.cu's macros, where the mixture's relabelling goes, and user_path.py's mixture and Bayesian-network
# sections (the reference figures of the public fits).
OUT=${OUT:-out}; mkdir -p "$OUT"
pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ date -u; cat scripts/.commit; nvidia-smi -L; } > "$OUT/host.txt"
T="timeout -s INT -k 10"
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 200 python -m pytest -q -m gpu -p no:cacheprovider tests/test_bayesnet.py \
  > "$OUT/tests-bayesnet.log" 2>&1; echo "bayesnet tests rc=$?"; tail -n 1 "$OUT/tests-bayesnet.log"
$T 150 python scripts/gpu-checks/mixture_relabel_profile.py "$OUT" > "$OUT/mixture-relabel.log" 2>&1
echo "relabel profile rc=$?"; tail -n 4 "$OUT/mixture-relabel.log"
$T 150 python scripts/gpu-checks/bn_defines.py "$OUT" > "$OUT/bn-defines.log" 2>&1
echo "bn defines rc=$?"; cat "$OUT/bn-defines.log" | tail -n 12
$T 150 python scripts/user_path.py mixture bayesnet --out "$OUT/user_path.json" > "$OUT/user_path.log" 2>&1
echo "user_path rc=$?"; grep -v setup "$OUT/user_path.json" | head
