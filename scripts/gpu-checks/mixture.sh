#!/usr/bin/env bash
# GPU checks of the mixture, from the repository root on a GPU machine ($OUT collects the JSON).
set -x
# the GPU tests: kernels against twins (ops.py), the Gibbs fit's device-side draws and relabelling against the
# host path (test_gpu_gibbs_fit_gives_the_attributes_of_the_per_draw_path), BEM on CuPy against NumPy
# (test_gpu_bem_prunes_as_numpy; test_gpu_bem_matches_numpy_and_chunks, which also checks that the GEMM knobs
# reach the E-step), sharded fits; every launch's arguments checked against the kernel's C types
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu tests/test_mixture.py -q -p no:cacheprovider 2>&1 | tail -40
# the named kernel arguments and the configuration object on the mixture's side (CPU tests, quick)
python -m pytest tests/test_kernel_args.py tests/test_config.py tests/test_layers.py -q -p no:cacheprovider 2>&1 | tail -5
# the public calls per iteration (defaults, progress off): goal Gibbs <= 4.0 ms at n = 2^20, k = 256
python ../shared/bench/user_path.py mixture --out "$OUT/user_path_mixture.json"
# fit against its bare sweep in one process: Gibbs (relabel on / off), align_draws per draw, BEM
python benchmarks/mixture.py --profile-fit --out "$OUT/mixture_fit_profile.json"
# on a machine of 2 or 4 GPUs: the sharded tests and fit(devices=...) efficiency (mixture row of the scaling section)
# python -m pytest -m gpu tests/test_mixture.py -q -p no:cacheprovider -k shard
# python ../shared/bench/user_path.py scaling --out "$OUT/user_path_scaling.json"
# --- the Gibbs sweep's host work (fewer launches per sweep, the same values bit for bit) ---
# the GPU tests of the mixture and the protocol with every launch's arguments checked: the one-chain statistics
# against the twin (test_stats_kernel_matches_twin[...-1]), the Bartlett factor and invwishart against their
# previous construction, the Beta/Gamma device fast paths against the general path, sharded fits against one device
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu tests/test_mixture.py tests/test_protocol.py -q -p no:cacheprovider 2>&1 | tail -40
# the variates the sweep draws through (Wishart, Gamma, Beta) on the GPU against their twins
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu tests/test_wishart.py tests/test_gamma.py -q -p no:cacheprovider 2>&1 | tail -10
# per-iteration ms of the public fit against its bare step (goal: fit_default_ms <= 4.0 at n = 2^20, k = 256)
python -m benchmarks.probes.mixture_fit_overhead --out "$OUT/mixture_fit_overhead.json"
python ../shared/bench/user_path.py mixture --out "$OUT/user_path_mixture_host.json"
# --- the mixture package made shorter (the same statements in the same order; no kernel changed) ---
# GPU paths moved or merged without a GPU here: ops.assign (use_kernel through _use_component_kernel),
# ops._defines (built where memoised), ops._gibbs_acc (one-hot twin inlined; runs on CuPy for q > 1024),
# ops._unpack/_unpack_stats/_safe_cholesky/kernel_params, algorithm.init/_start_rows/_init_from_means,
# algorithm._make_bem_stats (scratch buffers), algorithm._bem_vb_update/_bem_kl with _sticks/_logdet/_multi/_special
# (cupyx.scipy.special through importlib), estimator.fit (one fit for one device and shards), _prepare/predict/
# predict_proba/score_samples, _fit_gibbs with relabel._weighted_mean, relabel.align_draws, and sharded.py's
# make_sharded_models/_gibbs_starts/bem_parts/_bem_starts through Shards.each. These tests exercise all of them:
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu tests/test_mixture.py tests/test_protocol.py tests/test_sklearn.py -q -p no:cacheprovider -k "mixture or Mixture or bem or gibbs or relabel or shard or kernel or stats or mean_rows" 2>&1 | tail -30
# on 2 GPUs: the sharded fits (make_sharded_models, _gibbs_starts, _bem_starts, bem_parts over NCCL)
# python -m pytest -m gpu tests/test_mixture.py tests/test_protocol.py tests/test_nccl.py -q -p no:cacheprovider -k "shard or nccl or mixture" 2>&1 | tail -20
# the public call per iteration, to compare with the last run's user_path_mixture.json (no per-iteration work added)
python ../shared/bench/user_path.py mixture --out "$OUT/user_path_mixture_lines.json"
# --- second pass at fewer lines (docstrings, __all__ lists; no kernel and no CuPy statement changed) ---
# the one GPU-reached line that moved: _bem_vb_update's prune threshold, written inline (the same Python float)
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu tests/test_mixture.py -q -p no:cacheprovider -k "bem" 2>&1 | tail -10
