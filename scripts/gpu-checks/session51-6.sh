#!/usr/bin/env bash
# One GPU: the mixture's Gibbs fit with the trace's host copy beside the relabelling (backend.to_host_later):
# its GPU tests and the backend's, its phases at 5 and 65 iterations, the suite's fit against its step (5 and
# 305 iterations), and user_path.py's mixture section.
OUT=${OUT:-out}; mkdir -p "$OUT"
pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ date -u; cat scripts/.commit; git status --short | grep -v '^??'; nvidia-smi -L; } > "$OUT/host.txt"
T="timeout -s INT -k 10"
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 200 python -m pytest -q -m gpu -p no:cacheprovider tests/test_backend.py \
  tests/test_mixture.py > "$OUT/tests-mixture-backend.log" 2>&1; echo "tests rc=$?"; tail -n 1 "$OUT/tests-mixture-backend.log"
$T 150 python scripts/gpu-checks/mixture_fit_phases.py "$OUT" > "$OUT/mixture-fit-phases.log" 2>&1
echo "phases rc=$?"; grep '^{"[56]' "$OUT/mixture-fit-phases.log"
$T 150 python -m benchmarks.mixture --profile-fit --out "$OUT/mixture-profile-fit.json" > "$OUT/mixture-profile-fit.log" 2>&1
echo "profile-fit rc=$?"; grep -E 'step_ms|fit_ms|over_step' "$OUT/mixture-profile-fit.json"
$T 120 python scripts/user_path.py mixture --out "$OUT/user_path.json" > "$OUT/user_path.log" 2>&1
echo "user_path rc=$?"; grep -v setup "$OUT/user_path.json" | head -6
