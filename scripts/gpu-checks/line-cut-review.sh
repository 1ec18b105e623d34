#!/usr/bin/env bash
# GPU checks after the review of the line cuts since 8466ba3 (mixture, glm, nested, bayesnet, ising, rbm and
# gpumcmc/glm.py): the CuPy paths those commits moved or reshaped, most at risk first. Every launch's
# arguments are checked against the kernel's C parameters. Run from the repository root on one GPU; each
# block stands alone (no -x across blocks), and the logs go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export GPUMCMC_CHECK_KERNEL_ARGS=1
t() { python -m pytest -m gpu -q -p no:cacheprovider "$@" 2>&1 | tail -15; }

# 1. BayesianNetwork.impute's Gibbs branch now runs fit's _start and step with the CPTs held fixed (dd5a265):
#    the GPU imputation against the NumPy one, bit for bit (the NumPy draws are those of 8466ba3).
t tests/test_bayesnet.py -k "gibbs_imputation or gpu_fit_matches_cpu" | tee "$OUT/review_bayesnet.log"
t tests/test_bayesnet_devices.py | tee -a "$OUT/review_bayesnet.log"
# 2. BayesianGLM(devices=...) on the GPU (5886ed4): row_parts now builds each shard through _init_data
#    (gid None, starts/ends by xp.asarray), over_rows' GPU branch no longer shares init/step with the NumPy
#    twin, _device_states makes its int32 pass state directly; and HierarchicalGLM over groups.
t tests/test_glm_devices.py | tee "$OUT/review_glm_devices.log"
# 3. The one-device GLM sweep (be3a328, 653338d): _sweep_coefs' CuPy branch (copies, then the kernels; a flat
#    model's data.gid is now None), _prior_terms/_tuned_width in _slice_kernel_coordinate, the graph replay,
#    the NIW kernel, the family codes from gpumcmc.glm._CODE (655e810), _GLMBase._sample.
t tests/test_glm.py -k "slice_kernel_matches_numpy_sweep or slice_pass_kernel or graph_gives or niw_kernel \
or cpu_gpu_agree or sharded_glm_one_gpu or kernel_many_columns" | tee "$OUT/review_glm.log"
# 4. loglik_and_grad (34e7522): check_y/_first_bad through _outside, results shaped by _shaped.
t tests/test_glm.py -k "loglik_bad or kernel_matches_twin or tiled or rows_kernel" | tee -a "$OUT/review_glm.log"
# 5. The mixture (04040be, cdd4cf6, 3debbaf, b6798ee): BEM's update with _sticks/_logdet/_multi and
#    cupyx.scipy.special loaded through importlib (_special), _unpack_stats' dtype from the packed sums,
#    the one fit for one device and shards, _prepare's rows per launch, _weighted_mean on the device.
t tests/test_mixture.py -k "bem or gibbs or chunked or recovers or sharded or predict or relabel" \
    | tee "$OUT/review_mixture.log"
t tests/test_protocol.py -k "mixture or gibbs or bem" | tee -a "$OUT/review_mixture.log"
# 6. Nested sampling (33a4e23, 1df9caa, 759e017): _loader/_kernel_args imported at module level in ops.py,
#    the round word's per-thread dict, the sinusoid twin through SinusoidModel.model on CuPy (kernel=False).
t tests/test_nested.py | tee "$OUT/review_nested.log"
# 7. Ising pack/unpack through one _halves generator and init's spin check; RBM.sample's check_int.
t tests/test_ising.py tests/test_rbm.py | tee "$OUT/review_ising_rbm.log"
# On two GPUs (nvidia-h100-x2): the NCCL paths of the same packages.
# python -m pytest -m gpu -q -p no:cacheprovider tests/test_nccl.py -k "glm or mixture or bayesnet"
