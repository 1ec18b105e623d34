#!/usr/bin/env bash
# One GPU: where the mixture's relabelling goes; the Bayesian network's specialised step with fewer registers a
# thread (more warps resident), and Nsight Compute's view of the best of them.
OUT=${OUT:-out}; mkdir -p "$OUT"
pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ date -u; cat scripts/.commit; nvidia-smi -L; } > "$OUT/host.txt"
T="timeout -s INT -k 10"
$T 200 python scripts/gpu-checks/mixture_relabel_profile.py "$OUT" > "$OUT/mixture-relabel.log" 2>&1
echo "relabel profile rc=$?"; tail -n 4 "$OUT/mixture-relabel.log"
BN_DEFINES_JSON=bn-defines-occupancy.json $T 150 python scripts/gpu-checks/bn_defines.py "$OUT" --occupancy \
  > "$OUT/bn-defines-occupancy.log" 2>&1; echo "bn defines rc=$?"; tail -n 8 "$OUT/bn-defines-occupancy.log"
