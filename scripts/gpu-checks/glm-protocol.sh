#!/usr/bin/env bash
# GPU checks of the GLM's sweeps over split rows and groups on the sampler protocol (branch glm-protocol):
# BayesianGLM(devices=...) and HierarchicalGLM(devices=...) now run sampling.sharded(over_rows(...)) and
# sharded(over_groups(...)), Collective algorithms whose steps sum through the reduce that sharded hands
# them (Shards.allreduce; the identity over one shard of one). Run from the repository root on a GPU
# machine; $OUT receives the logs and JSON.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
# One GPU: the touched test files' GPU tests, every launch's arguments checked against the C parameters.
# test_glm_devices: one_device(1) against devices=None bit for bit (its one-shard sum is now the identity,
# where _OneDevice.allreduce made a copy on the device), one_device(3) against the NumPy twin and against
# devices=None, the fit on one_device(2), the groups on one_device(3) bit for bit; test_protocol: the
# protocol on CuPy; test_glm: the single-device sweeps (algorithm.init now builds its data in _init_data).
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu tests/test_glm_devices.py tests/test_protocol.py tests/test_glm.py \
    -q -p no:cacheprovider -rs 2>&1 | tee "$OUT/pytest-gpu-glm-protocol.log" | tail -30
# Two GPUs (nvidia-h100-x2): every NCCL test; the GLM's are rows on GPUs 0 and 1 against two shards on
# GPU 0 bit for bit, devices="all" against one GPU, and the groups over GPUs bit for bit.
python -m pytest -m gpu tests/test_nccl.py -q -p no:cacheprovider -rs 2>&1 | tee "$OUT/pytest-nccl-glm-protocol.log" \
    | tail -30
# The speed of fit(devices=...) on every GPU against one (the glm row: 118.0 ms a sweep on 2 x H100 against
# 238.6 ms on one, efficiency 1.01, at 58a2046; the sweep's host loop now calls the local part and the update
# through the shared pass loop, a few function calls more a pass).
python ../shared/bench/user_path.py scaling --out "$OUT/user_path_scaling.json"
# The scaling suite's GLM rows (benchmarks/scaling.py now builds the sweep as sharded(over_rows(...)) over
# row_parts), small sizes as a smoke run of the changed set-up.
GPUMCMC_SCALING_MODELS=glm python -m benchmarks scaling --small --out "$OUT"
