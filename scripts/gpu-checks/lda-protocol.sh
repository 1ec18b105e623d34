#!/usr/bin/env bash
# GPU checks of LDA's sweep on the sampler protocol (issue 35, item 1): gibbs_local + gibbs_update, one
# device's step the two in turn, LDA(devices=...) the two through gpumcmc.sampling.sharded (sharded_gibbs),
# with the protocol's Overlap (the word counts all-reduced beside the theta draws). From the repository root
# on a GPU machine; $OUT collects the logs and JSON.
#
# What only a GPU shows (NumPy's draws are unchanged, bit for bit, for 1, 2 and 3 virtual shards):
# - one device's step is now gibbs_local then gibbs_update: the same launches in the same order, captured and
#   replayed from a CUDA graph below config.lda_graph_max_tokens (tests/test_lda.py's graph tests);
# - the sharded sweep on one_device(k) and on NCCL: each shard's z-draw queued before any theta draw, the
#   counts (int32) and, on monitored sweeps, the log-likelihoods (float64) all-reduced on the side streams
#   beside the theta draws, phi drawn once per device from the shared phi_sum (tests/test_lda_devices.py,
#   tests/test_nccl.py -k lda); the phi stores reach the kernels through cupy.ascontiguousarray, which must
#   not copy them (it returns a C-contiguous array as it is);
# - the mixture on the restructured protocol (tests/test_protocol.py, tests/test_nccl.py -k mixture);
# - speed: the host now queues shard 0's phi and running sum before shard 1's phi (each GPU's own order is
#   unchanged), and the log-likelihoods' all-reduce moved from the monitor into the monitored sweep.
set -x
# One GPU: every LDA GPU test (one device's draws, graph replay and monitor unchanged; one_device(1, 2, 3)
# against one device bit for bit with each z-draw; the loglik sums now all-reduced inside the sweep), with
# every kernel argument checked, then unchecked; and the protocol's GPU tests (the mixture on it unchanged).
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu tests/test_lda.py tests/test_lda_devices.py tests/test_protocol.py \
    -q -p no:cacheprovider 2>&1 | tee "$OUT/lda_protocol_gpu.log" | tail -30
python -m pytest -m gpu tests/test_lda_devices.py tests/test_protocol.py -q -p no:cacheprovider -x 2>&1 | tail -5
# One device's public fit against its bare sweep (must not move: the step is the same launches).
python ../shared/bench/user_path.py lda --out "$OUT/user_path_lda.json"
# On 2 GPUs (nvidia-h100-x2): the NCCL tests (LDA on Shards([0, 1]) and devices="all" against one device, bit
# for bit; the mixture, whose protocol path changed shape but not its launches), then fit(devices=...)'s speed
# (NOTES: LDA's sharded fit at 2dda1dd, before this change, for comparison).
python -m pytest -m gpu tests/test_nccl.py -q -p no:cacheprovider -rs 2>&1 | tee "$OUT/lda_protocol_nccl.log" | tail -20
python ../shared/bench/user_path.py scaling --out "$OUT/user_path_scaling.json"
python -m benchmarks scaling --out "$OUT" 2>&1 | tail -20      # the suite: LDA, mixture and GLM sweeps over the GPUs
