#!/usr/bin/env bash
# GPU checks after the line cuts in gpumcmc/models/mixture/ and gpumcmc/models/nested/ (issue 35): each CuPy
# path those commits reshaped, with the GPU tests that reach it, then every GPU test of the two models with
# each launch's arguments checked against the kernel's C parameters. Run from the repository root on one GPU
# (the NCCL block at the end on two: nvidia-h100-x2); each block stands alone (no -x across blocks), and the
# logs go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export GPUMCMC_CHECK_KERNEL_ARGS=1
t() { python -m pytest -m gpu -q -p no:cacheprovider "$@" 2>&1 | tail -15; }

# 1. algorithm._make_bem_stats: the blocked chunk (one batched GEMM over row blocks, float32 data) and the
#    plain chunk (one GEMM, into the chunk's slot where there are several chunks) share one tail; float32 and
#    float64, gemm_rows None and 64, unchunked and in chunks of 97 rows; BEM on CuPy against NumPy; sharded
#    BEM over one shard against make_bem_step bit for bit.
t tests/test_mixture.py -k "gpu_bem_matches_numpy_and_chunks or cpu_and_gpu_bem_agree or gpu_bem_prunes_as_numpy" \
    | tee "$OUT/cut4_mixture_bem.log"
t tests/test_protocol.py -k "gpu_bem_sharded_over_one_shard" | tee -a "$OUT/cut4_mixture_bem.log"
# 2. ops._stats_consts (the GPU statistics' index constants, cached per device; its NumPy branch is gone,
#    as no NumPy caller reached it) and ops._tri (the triangle's indices copied once per device): the
#    statistics kernel against its twin, one and several chains, and a second call from the cache.
t tests/test_mixture.py -k "stats_kernel_matches_twin or gibbs_component_kernels_match_twins \
or cpu_and_gpu_gibbs_agree or gpu_chunked_same_draws" | tee "$OUT/cut4_mixture_stats.log"
# 2b. ops._posterior_kernel allocates its four outputs in one expression (the same order): the component
#    kernels against their twins, and Gibbs on CuPy against NumPy.
t tests/test_mixture.py -k "gibbs_component_kernels_match_twins or cpu_and_gpu_gibbs_agree" \
    | tee -a "$OUT/cut4_mixture_stats.log"
# 3. sharded.bem(): its init is a lambda with the parameter starts (was a nested def), and the estimator's
#    Gibbs fit sets trace_ in the tuple that fills the trace: the sharded fits on one GPU against one
#    device, and a Gibbs fit's attributes.
t tests/test_mixture.py -k "gpu_sharded_bem_matches_one_device or gpu_sharded_gibbs_gives_the_draws_of_one_device \
or gpu_gibbs_fit_gives_the_attributes" | tee "$OUT/cut4_mixture_sharded.log"
t tests/test_protocol.py -k "gpu_mixture_sharded_over_one_shard" | tee -a "$OUT/cut4_mixture_sharded.log"
# 3b. DPGaussianMixture.fit makes one device's start and step itself and hands them to _fit_gibbs/_fit_bem,
#    as the sharded branch does (their "state is None" branches are gone): one-GPU fits of both methods.
t tests/test_mixture.py -k "cpu_and_gpu_gibbs_agree or cpu_and_gpu_bem_agree or gpu_recovers_planted \
or gpu_gibbs_fit_gives_the_attributes or gpu_bem_prunes_as_numpy" | tee "$OUT/cut4_mixture_fit.log"
# 4. nested: _NestedSteps._init checks the first live points itself (_check_init is gone) on every CuPy run;
#    _GpuProgress allocates its mapped slots through cp.cuda.runtime directly.
t tests/test_nested.py -k "cpu_gpu_agree or gpu_run_twice_and_bad_value or progress_kernel_matches_twin \
or gpu_masked_rounds_match" | tee "$OUT/cut4_nested.log"
# 5. SinusoidModel._loglike_expr is ops.sinusoid_loglike_tiles bound as a method (was a method calling it):
#    the sinusoid kernel against the expression on CuPy, and the fused step against the generic path.
t tests/test_nested.py -k "sinusoid_kernel_vs_twin or fused_kernel_matches" | tee "$OUT/cut4_nested_sinusoid.log"

# Every GPU test of the two models, each launch's arguments checked.
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu -q -p no:cacheprovider tests/test_mixture.py \
    tests/test_protocol.py tests/test_nested.py 2>&1 | tail -20 | tee "$OUT/cut4_all.log"
# On two GPUs (nvidia-h100-x2): the NCCL paths of the two models.
# GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu -q -p no:cacheprovider tests/test_nccl.py -k "mixture or nested"
