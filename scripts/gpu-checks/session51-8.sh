#!/usr/bin/env bash
# One GPU: the specialised Bayesian-network kernels on larger random networks (compile time and speed), and the
# other GPU tests that fit a Bayesian network (scikit-learn's checks) now that the specialised kernels are the
# default.
OUT=${OUT:-out}; mkdir -p "$OUT"
pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ date -u; cat scripts/.commit; git status --short | grep -v '^??'; nvidia-smi -L; } > "$OUT/host.txt"
T="timeout -s INT -k 10"
(GPUMCMC_CHECK_KERNEL_ARGS=1 $T 240 python -m pytest -q -m gpu -p no:cacheprovider tests/test_sklearn.py \
  > "$OUT/tests-sklearn.log" 2>&1; echo "sklearn tests rc=$?") &
CUPY_CACHE_DIR=$(mktemp -d) $T 300 python scripts/gpu-checks/bn_specialise_sizes.py "$OUT" > "$OUT/bn-specialise-sizes.log" 2>&1
echo "sizes rc=$?"; grep '^{' "$OUT/bn-specialise-sizes.log"
wait; tail -n 1 "$OUT/tests-sklearn.log"
