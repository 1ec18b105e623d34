#!/usr/bin/env bash
# GPU checks of the sampler protocol (gpumcmc.sampling.sharded) and the DP mixture's Gibbs sweep on it
# (gibbs_local + make_gibbs_update, composed over Shards), from the repository root on a GPU machine.
set -x
# The protocol on CuPy: the normal model on one_device(3) against one shard; the mixture's sweep through
# sharded(gibbs(), Shards(0)) against make_step bit for bit; one device's mean log-likelihood (now the rows'
# sum over n) equal to _mean_rows in the one-pass and two-pass ranges (one device's draws unchanged).
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu tests/test_protocol.py -q -p no:cacheprovider 2>&1 | tail -20
# Every mixture GPU test, sharded fits on one_device(2, 3) against one device among them.
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu tests/test_mixture.py -q -p no:cacheprovider 2>&1 | tail -20
# On 2 or more GPUs (nvidia-h100-x2): the mixture over NCCL, Shards([0, 1]) and devices="all", Gibbs and BEM,
# and through dask-cuda (one process per GPU) where dask_cuda is installed; skips on one GPU.
python -m pytest tests/test_nccl.py -q -p no:cacheprovider -k "mixture or allreduce or replica" -rs 2>&1 | tail -20
# The public calls per iteration: one device (the mixture section; must not move) and, on 2+ GPUs, the
# mixture's fit(devices=...) at n = 10^7, k = 256 (every GPU now makes the global draws itself; NOTES has
# 0.95 / 0.89 efficiency on 2 / 4 H100s at 82e4a2d, before this change).
python ../shared/bench/user_path.py mixture --out "$OUT/user_path_mixture.json"
python scripts/gpu-checks/protocol_scaling.py --out "$OUT/protocol_mixture_scaling.json"
