#!/usr/bin/env bash
# GPU checks of nested sampling (run from the repository root on a GPU machine; $OUT collects JSON and logs).
set -x
# Every nested GPU test: the per-iteration bookkeeping kernel (nested_progress) against its twin, the fused
# slice kernel against the generic path and the NumPy twin, run() twice, a +inf found mid-run.
python -m pytest -m gpu tests/test_nested.py -q -p no:cacheprovider 2>&1 | tail -40
# The public call (run, defaults, progress=False) per iteration against its bare iteration (_iterate), on
# user_path's sinusoid configuration and the 2-D shells; then the whole suite, small.
python -m benchmarks nested --small --out "$OUT/nested-small" 2>&1 | tail -40
python ../shared/bench/user_path.py nested --out "$OUT/user_path_nested.json"
