#!/bin/sh
# Bayesian networks on a GPU: the GPU tests (every kernel argument checked against its C type), then the
# public fit, which runs on gpumcmc.sampling.run, against the sampler's bare step loop (algorithm.collective on one shard)
# (issue 40 item 7: Koller, 10^6 cases, half missing, same=10; goal ratio <= 1.1).
set -e
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu -q -p no:cacheprovider tests/test_bayesnet.py \
    tests/test_bayesnet_devices.py
python -m benchmarks.bayesnet "$OUT" --user-path          # writes $OUT/bayesnet-user-path.json
for f in ../shared/bench/user_path.py shared/bench/user_path.py; do  # the reference measurement, where present
  if [ -f "$f" ]; then python "$f" bayesnet --out "$OUT/user_path_bayesnet.json"; break; fi
done
# On two GPUs (nvidia-h100-x2), the data-parallel fit against one device:
#   python -m pytest -m gpu -q -p no:cacheprovider tests/test_nccl.py -k bayesnet
# Fewer lines, same draws (issue 35), for the small models' packages. Code that runs on CuPy and was moved or
# reshaped (the same statements in the same order), with the GPU tests that reach it:
#   bayesnet: algorithm._start (the launchers and status words made in one loop), _impute, collective, _Batch,
#     BayesianNetwork._fit (shards), BayesianNetwork._gibbs_impute (now fit's own _start and step with the CPTs
#     fixed) -> test_gpu_fit_matches_cpu, test_gpu_gibbs_imputation_matches_twin, test_gpu_sharded_fit_gives_the_
#     draws_of_one_device, test_gpu_part_uniforms_match_the_twin
#   ising: _CheckerboardGibbs.init / _info / _sweep, pack / unpack (one _halves generator), Ising.sample's
#     progress figure, Ising._configure -> test_ising.py's gpu tests and test_spins_of_a_seed_are_unchanged[cupy]
#   rbm: RBM.sample (check_int), RBM._fit (settings) -> test_rbm.py's gpu tests
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu -q -p no:cacheprovider tests/test_bayesnet.py \
    tests/test_bayesnet_devices.py tests/test_ising.py tests/test_rbm.py
# Second pass at fewer lines (issue 35), the same draws. CuPy-reaching code that changed shape, with the GPU tests
# that run it:
#   bayesnet: algorithm._start now draws the first imputations itself (the former _impute, the same statements in
#     the same order); _Plan's parent/child arrays come from _csr (checked equal on all pgmpy example networks);
#     BayesianNetwork._imputations reads case_parts' layout -> test_gpu_fit_matches_cpu (batch_size cases),
#     test_gpu_sharded_fit_gives_the_draws_of_one_device, test_gpu_gibbs_imputation_matches_twin, test_gpu_runs
#   ising: init copies a given start (was a read-only view on NumPy), ops.bond_sum's open boundary via moveaxis ->
#     test_a_start_of_one_state_per_chain_runs_as_the_same_start_broadcast[cupy-*], test_gpu_matches_numpy_twin
#   rbm: init copies a given start -> test_a_start_of_one_state_per_chain_runs_as_the_same_start_broadcast[cupy],
#     test_gpu_visible_distribution_matches_enumeration
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu -q -p no:cacheprovider tests/test_bayesnet.py \
    tests/test_bayesnet_devices.py tests/test_ising.py tests/test_rbm.py  # every GPU test, the new [cupy] ones too
# Last review: impute's Gibbs branch runs fit's sharded collective (sharded(collective(...)) on one shard) instead of
# calling _start and step itself; algorithm.step takes the Collective's reduce (never called there: the CPTs are
# fixed). Same statements on CuPy -> test_gpu_gibbs_imputation_matches_twin, test_gpu_fit_matches_cpu.
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu -q -p no:cacheprovider tests/test_bayesnet.py \
    tests/test_bayesnet_devices.py -k "gibbs or impute or fit_matches"
# The probes now wait through benchmarks.harness.sync_all_gpus (host_profile's copy gone); a smoke run of each:
#   python -m benchmarks.probes.host_profile bayesnet1 --out "$OUT"
#   python -m benchmarks.probes.kernel_floor ising --out "$OUT" --count 1   # needs ncu on the PATH
# Issue 38, the sweep closer to its floor (run from here): bn_sweep multiplies the CPTs' probabilities in float64
# (no exponential a cell; log space only where the products fall below 2^-960) and takes four cells' 32-bit
# uniforms from one Philox call (BN_GROUP > 1: a lane's cells of one node share their parent and child lists);
# bn_counts takes BN_COUNT_ROWS = 4 rows a thread. The draws changed, the twin with
# them: the GPU tests check the kernels against the twin bit for bit, the exact conditional of a cell (tables of
# 1e-30 entries too), the fit against NumPy's and every launch's arguments.
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu -q -p no:cacheprovider tests/test_bayesnet.py \
    tests/test_bayesnet_devices.py
bash scripts/gpu-checks/bn-timing.sh "$OUT"   # the public fit, user_path.py, and each kernel with its variants
