#!/usr/bin/env bash
# GPU checks of the GLM area (run from the repository root on a GPU machine; $OUT receives the JSON).
set -euo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
# loglik_and_grad's checks through the status word (every kernel, both dtypes, deferred mode, one wait a
# call), the kernels against the twin, the samplers, the sharded sweep (one GPU, two shards).
python -m pytest -m gpu tests/test_glm.py tests/test_glm_devices.py -q -p no:cacheprovider 2>&1 | tail -30
# The suite's f+g rows (defaults = check=True against check=False; goal <= 1.05x) and the public fit
# against its bare step loop (goal <= 1.1x), JSON into $OUT.
GPUMCMC_GLM_CASES="f+g,public" python -m benchmarks glm --out "$OUT"
# The reference measurement of the same, through the public calls.
python ../shared/bench/user_path.py glm --out "$OUT/user_path_glm.json"
# On a machine with 2 and 4 GPUs (nvidia-h100-x4): BayesianGLM(devices=...) efficiency.
# python ../shared/bench/user_path.py scaling --out "$OUT/user_path_scaling.json"
