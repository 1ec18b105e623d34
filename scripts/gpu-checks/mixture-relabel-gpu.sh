#!/usr/bin/env bash
# The mixture's relabelling solved on the GPU (kernels_cu/relabel.cu, lsa_solve): its GPU tests (SciPy's
# permutations on every kind of cost, ties included; the fit's attributes as the host path's), with every
# launch's arguments checked; where align_draws' time goes now (align_probe.py); DPGaussianMixture.fit
# against its step (user_path.py mixture and the suite's --profile-fit). $OUT gets the logs and JSON.
set -u
out=${OUT:-out}; mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
python -c "import scipy; print('scipy', scipy.__version__)"
GPUMCMC_CHECK_KERNEL_ARGS=1 timeout 300 python -m pytest -q -m gpu -p no:cacheprovider tests/test_mixture.py \
    > "$out/tests-mixture.log" 2>&1; echo "tests rc=$?"; tail -n 3 "$out/tests-mixture.log"
OUT=$out timeout 120 python scripts/gpu-checks/align_probe.py > "$out/align_probe.log" 2>&1; tail -c 1500 "$out/align_probe.log"
timeout 120 python scripts/user_path.py mixture --out "$out/user_path-mixture.json" > "$out/user_path-mixture.log" 2>&1
tail -n 4 "$out/user_path-mixture.log"
timeout 120 python -m benchmarks.mixture --profile-fit --out "$out/mixture-profile-fit.json" > "$out/mixture-profile-fit.log" 2>&1
tail -n 12 "$out/mixture-profile-fit.log"
