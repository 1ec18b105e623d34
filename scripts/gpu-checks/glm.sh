#!/usr/bin/env bash
# GPU checks of the GLM area (run from the repository root on a GPU machine; $OUT receives the JSON).
set -euo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
# Every launch of kernels_cu/glm.cu now names its arguments (gpumcmc._kernel_args): the GPU tests with
# each launch's values checked against the C parameters (a wrong kind or dtype raises TypeError naming the
# kernel and the argument). They cover loglik_and_grad's kernels against the twin (rows, tiled, gemm; the
# status-word checks; chains split over launches), the slice sweeps against the NumPy path (glm_slice_pass
# with one and several chunks a group, glm_slice_segment through max_steps_out=16), the NIW kernel against
# its twin, the samplers, and the sharded sweeps on one GPU (glm_slice_shard_eval / glm_slice_decide).
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu tests/test_glm.py tests/test_glm_devices.py -q -x \
    -p no:cacheprovider 2>&1 | tee "$OUT/glm_gpu_checked.log" | tail -30
# The same as users run them (no per-launch check), slow tests included.
python -m pytest -m gpu tests/test_glm.py tests/test_glm_devices.py -q -p no:cacheprovider 2>&1 | tail -10
# The suite's f+g rows (defaults = check=True against check=False; goal <= 1.05x) and the public fit
# against its bare step loop (goal <= 1.1x), JSON into $OUT.
GPUMCMC_GLM_CASES="f+g,public" python -m benchmarks glm --out "$OUT"
# The reference measurement of the same, through the public calls.
python ../shared/bench/user_path.py glm --out "$OUT/user_path_glm.json"
# On a machine with 2 GPUs (nvidia-h100-x2): the GLM's NCCL tests (rows and groups over two GPUs).
# GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu tests/test_nccl.py -k glm -q -p no:cacheprovider
# On a machine with 2 and 4 GPUs (nvidia-h100-x4): BayesianGLM(devices=...) efficiency.
# python ../shared/bench/user_path.py scaling --out "$OUT/user_path_scaling.json"
