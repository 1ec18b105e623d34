#!/usr/bin/env bash
# GPU checks of nested sampling, the package gpumcmc/models/nested (run from the repository root on a GPU
# machine; $OUT collects JSON and logs).
set -x
# Every nested GPU test, with each kernel argument checked against its C parameter (ops.py's four launches:
# nested_progress and nested_argsort_rows against their twins, sinusoid_ssq against the tiled expression,
# the fused sinusoid_slice against the generic slice path of algorithm.py and the NumPy twin), run() twice,
# a +inf found mid-run. Then the same as users run it (no per-launch check).
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu tests/test_nested.py -q -p no:cacheprovider 2>&1 \
    | tee "$OUT/nested_gpu.log" | tail -40
python -m pytest -m "gpu and not slow" tests/test_nested.py -q -p no:cacheprovider 2>&1 | tail -5
# The public call (run, defaults, progress=False) per iteration against its bare iteration (_step), on
# user_path's sinusoid configuration and the 2-D shells; then the whole suite, small.
python -m benchmarks nested --small --out "$OUT/nested-small" 2>&1 | tail -40
python ../shared/bench/user_path.py nested --out "$OUT/user_path_nested.json"
# Issue 37, item 5: the equal-width two-mode mixture on CuPy (slow): 5 runs of 50 live points flagged (at least
# 3 of 8 seeds; NumPy flags 8), and at the default 500 the 0.3 mode's merged weight within 0.16.
python -m pytest -m "gpu and slow" tests/test_nested.py -q -p no:cacheprovider -k "issue_modes" 2>&1 | tail -15
