#!/usr/bin/env bash
# One GPU: the GPU tests of number parameters with a size (gamma(0.5, size=...) and every other draw method)
# and of the loader's compile notice and log; then each model's first call with an empty kernel cache, every
# compilation logged (GPUMCMC_LOG_COMPILES=1): which files, kernels and defines a first call compiles, and for
# how long.
set -u
D=${OUT:-out}; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
T="timeout -s INT -k 10"
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 150 python -m pytest -q -m gpu -p no:cacheprovider tests/test_loader.py \
  tests/test_gamma.py -k "number_parameters or compile or loader or memoised or stale or scalar_scale" > "$D/tests.log" 2>&1
echo "tests rc=$?"; grep -E "^FAILED|^ERROR" "$D/tests.log" | head; tail -n 1 "$D/tests.log"
for m in primitives lda mixture bayesnet glm; do
  C=$(mktemp -d)
  CUPY_CACHE_DIR=$C GPUMCMC_LOG_COMPILES=1 timeout 150 python scripts/gpu-checks/coldstart.py $m > "$D/cold-$m.out" 2> "$D/cold-$m.err"
  tail -n 1 "$D/cold-$m.out"; grep -c "ready in" "$D/cold-$m.err"; grep "ready in" "$D/cold-$m.err" | sort -t' ' -k2 | cut -c1-150 | head -30
done
cd "$D" && tar czf logs.tgz *.log *.out *.err host.txt && rm -f *.log *.out *.err host.txt
