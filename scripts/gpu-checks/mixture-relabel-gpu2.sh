#!/usr/bin/env bash
# lsa_solve with each lane's column loads grouped, the one-gather _take and the fused costs: the relabelling GPU tests (every
# launch's arguments checked), align_draws by piece (with candidate fused costs' bits against relabel_costs'),
# the GPU path against the host's on a fit's draws, and DPGaussianMixture.fit against its step.
set -u
out=${OUT:-out}; mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
GPUMCMC_CHECK_KERNEL_ARGS=1 timeout 200 python -m pytest -q -m gpu -p no:cacheprovider tests/test_mixture.py \
    -k "relabel or assignments or align or attributes or summaries or fused" > "$out/tests-relabel.log" 2>&1
echo "tests rc=$?"; tail -n 2 "$out/tests-relabel.log"
OUT=$out timeout 100 python scripts/gpu-checks/align_pieces.py > "$out/align_pieces.log" 2>&1; tail -n 1 "$out/align_pieces.log"
OUT=$out timeout 100 python scripts/gpu-checks/align_probe.py > "$out/align_probe.log" 2>&1; tail -c 700 "$out/align_probe.log"
timeout 120 python -m benchmarks.mixture --profile-fit --out "$out/mixture-profile-fit.json" > "$out/mixture-profile-fit.log" 2>&1
tail -n 10 "$out/mixture-profile-fit.log"
