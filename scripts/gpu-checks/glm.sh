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

# --- After the GLM package's line cut (issue 35): the CuPy code it touched, each by a mechanical move, and
# the GPU tests that run it (the whole of the two files above covers them all; these are the pointed ones).
# - models/glm/ops.py _slice_kernel_coordinate: the prior's terms from _prior_terms and the width from
#   _tuned_width (the same expressions as before, now shared with the NumPy sweep):
python -m pytest -m gpu tests/test_glm.py -q -p no:cacheprovider -k "slice_kernel_matches_numpy_sweep" 2>&1 | tail -3
# - models/glm/algorithm.py _sweep_coefs, its CuPy branch (beta, eta, width copied in one statement) and
#   ops.py _ShardedPasses.__init__ (two locals inlined); estimator.py _GLMBase._sample (one device and
#   devices=, psi0 * I built under shards.on(0) as before) and _checked_data:
python -m pytest -m gpu tests/test_glm.py -q -p no:cacheprovider \
    -k "slice_pass_kernel or graph_gives or sharded_glm_one_gpu or niw_kernel or cpu_gpu_agree" 2>&1 | tail -3
# - models/glm/sharded.py over_rows (its GPU branch of init and step, no longer shared with the NumPy
#   twin, which now runs the single-device array code with reduced row sums) and _device_states (GPU only):
python -m pytest -m gpu tests/test_glm_devices.py -q -p no:cacheprovider 2>&1 | tail -3
# - gpumcmc/glm.py check_y and _first_bad (the support test as one _outside), _kernel_fg_out (through _shaped):
python -m pytest -m gpu tests/test_glm.py -q -p no:cacheprovider -k "loglik_bad or kernel_matches_twin or tiled" \
    2>&1 | tail -3
# On 2 GPUs: python -m pytest -m gpu tests/test_nccl.py -k glm -q -p no:cacheprovider
