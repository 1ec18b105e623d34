#!/usr/bin/env bash
# GPU checks of the GLM area (run from the repository root on a GPU machine; $OUT receives the JSON).
set -euo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
# loglik_and_grad's checks through the status word, the kernels against the twin, the samplers.
python -m pytest -m gpu tests/test_glm.py tests/test_glm_devices.py -q -p no:cacheprovider 2>&1 | tail -30
# The default check against check=False (goal: default <= 1.05x check=False, N = 4M, K = 50, float32),
# and BayesianGLM.fit's per-sweep cost, through the public calls.
python ../shared/bench/user_path.py glm --out "$OUT/user_path_glm.json"
