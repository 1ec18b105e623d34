#!/usr/bin/env bash
# GPU checks after the line cuts in gpumcmc/models/glm/ and gpumcmc/models/lda/ (issue 35): each CuPy path
# those commits reshaped, with the GPU tests that reach it, then every GPU test of the two models with each
# launch's arguments checked against the kernel's C parameters. Run from the repository root on one GPU
# (the NCCL block at the end on two: nvidia-h100-x2); each block stands alone (no -x across blocks), and the
# logs go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export GPUMCMC_CHECK_KERNEL_ARGS=1
t() { python -m pytest -m gpu -q -p no:cacheprovider "$@" 2>&1 | tail -15; }

# 1. algorithm._sweep_coefs' CuPy branch (NumPy first, then the copies and the kernels; the fallbacks of the
#    per-coordinate kernel summed in place) and the estimator's graph choice written in _GLMBase._sample:
#    glm_slice_pass and glm_slice_segment sweeps against the NumPy sweep, the graph replay, many columns.
t tests/test_glm.py -k "slice_kernel_matches_numpy_sweep or slice_pass_kernel or kernel_many_columns \
or cpu_gpu_agree or graph_gives" | tee "$OUT/cut3_glm_sweep.log"
# 1b. BayesianGLM/HierarchicalGLM._checked_data (X and y checked there, _check_xy gone): CuPy input on one
#    GPU and on the host for devices=.
t tests/test_sklearn.py -k "GLM or glm" | tee -a "$OUT/cut3_glm_sweep.log"
t tests/test_glm_devices.py -k "gpu_two_shards_fit" | tee -a "$OUT/cut3_glm_sweep.log"
# 2. The rows over GPUs: ops._ShardedPasses finds each device's copy (dev_of, first_shard), holds the prior's
#    replicas, makes each device's state (states) and runs the pass loop itself (_Passes and _run_passes
#    are gone); over_rows' step copies eta through Shards.each. One GPU, shards of it:
t tests/test_glm.py -k "sharded_glm_one_gpu" | tee "$OUT/cut3_glm_rows.log"
t tests/test_glm_devices.py | tee -a "$OUT/cut3_glm_rows.log"
# 3. LDA.fit_transform: one body for devices=None and devices= (the sharded branch's rng, tokens and
#    seeded start now come before shard_corpus); _monitored calls one sweep function with or without
#    loglik=True (eager, under the CUDA graph, and over shards).
t tests/test_lda.py -k "fit_gpu_planted or graph_switch or cpu_gpu_sweep_chains or graph_sweeps \
or fit_monitor_reads" \
    | tee "$OUT/cut3_lda_fit.log"
t tests/test_lda_devices.py -k "gpu_fit_one_device_two_shards or gpu_one_shard or gpu_bad_device" \
    | tee -a "$OUT/cut3_lda_fit.log"
# 4. LDA's gibbs_update forms the running sums' 0/1 weight itself (_keep is gone): on the device from the
#    (C,) counter on one GPU (and under the CUDA graph), from the keeps memo per device with the documents
#    split; and group_parts' copies of X and y on each shard's GPU (HierarchicalGLM(devices=...)).
t tests/test_lda.py -k "graph_sweeps or cpu_gpu_sweep_chains or cpu_gpu_one_sweep" | tee "$OUT/cut3_lda_keep.log"
t tests/test_lda_devices.py -k "gpu_shards_are_one_device or gpu_shards_match_numpy" | tee -a "$OUT/cut3_lda_keep.log"
t tests/test_glm_devices.py -k "hierarchical or group" | tee "$OUT/cut3_glm_groups.log"
# 5. LDA's two-pass z-draw (_two_pass): one categorical_products call for a whole corpus on the GPU (no
#    counter index) and for NumPy's shards (with one); the GPU's shards still go through _placed_products.
t tests/test_lda.py -k "cpu_gpu_sweep_chains or zdraw_loglik or step_loglik" | tee "$OUT/cut3_lda_two_pass.log"
t tests/test_lda_devices.py -k "gpu_shards_are_one_device_each_method or gpu_shards_match_numpy" \
    | tee -a "$OUT/cut3_lda_two_pass.log"

# Every GPU test of the two models, each launch's arguments checked.
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu -q -p no:cacheprovider tests/test_glm.py \
    tests/test_glm_devices.py tests/test_lda.py tests/test_lda_devices.py tests/test_lda_quality.py \
    2>&1 | tail -20 | tee "$OUT/cut3_all.log"
# On two GPUs (nvidia-h100-x2): the NCCL paths of the two models.
# GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu -q -p no:cacheprovider tests/test_nccl.py -k "glm or lda"
