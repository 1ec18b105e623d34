#!/usr/bin/env bash
# The GPU tests of every path changed since the last GPU run, every launch's arguments checked, one lane per GPU
# (4 GPUs): the Bayesian network's product sweep and its kernel timings; the mixture's GPU relabelling and
# align_draws by piece; the shorter GLM and LDA packages; then the NCCL tests of the four models on all GPUs.
# $OUT gets session48-tests.tgz.
set -u
out=${OUT:-out}; D=/tmp/s48; mkdir -p "$out" "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 GPUMCMC_CHECK_KERNEL_ARGS=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
T="timeout -s INT -k 10"
PT="python -m pytest -q -m gpu -p no:cacheprovider"
(export CUDA_VISIBLE_DEVICES=0
 $T 200 $PT tests/test_bayesnet.py tests/test_bayesnet_devices.py > "$D/tests-bayesnet.log" 2>&1; echo "bayesnet tests rc=$?"
 GPUMCMC_CHECK_KERNEL_ARGS=0 $T 100 bash scripts/gpu-checks/bn-timing.sh "$D" > "$D/bn-timing.log" 2>&1; echo "bn timing rc=$?") &
(export CUDA_VISIBLE_DEVICES=1
 $T 200 $PT tests/test_mixture.py > "$D/tests-mixture.log" 2>&1; echo "mixture tests rc=$?"
 GPUMCMC_CHECK_KERNEL_ARGS=0 OUT=$D $T 90 python scripts/gpu-checks/align_pieces.py > "$D/align_pieces.log" 2>&1; echo "pieces rc=$?") &
(export CUDA_VISIBLE_DEVICES=2
 $T 280 $PT tests/test_glm.py tests/test_glm_devices.py > "$D/tests-glm.log" 2>&1; echo "glm tests rc=$?") &
(export CUDA_VISIBLE_DEVICES=3
 $T 280 $PT tests/test_lda.py tests/test_lda_devices.py tests/test_lda_quality.py > "$D/tests-lda.log" 2>&1; echo "lda tests rc=$?"
 $T 60 $PT tests/test_sklearn.py > "$D/tests-sklearn.log" 2>&1; echo "sklearn tests rc=$?") &
wait
$T 150 $PT tests/test_nccl.py -k "glm or lda or bayesnet or mixture" > "$D/tests-nccl.log" 2>&1; echo "nccl tests rc=$?"
for f in "$D"/tests-*.log; do echo "== $(basename "$f")"; grep -E "^FAILED|^ERROR" "$f" | head -5; tail -n 1 "$f"; done
tail -n 1 "$D/align_pieces.log"; tail -n 8 "$D/bn-timing.log"
tar czf "$out/session48-tests.tgz" -C "$D" .
