#!/usr/bin/env bash
# GPU checks of the run driver (gpumcmc/sampling/_driver.py) and of the loops that now run on it (mixture BEM,
# nested sampling); from the repository root on a GPU machine ($OUT collects logs and JSON).
set -x
# The driver on CuPy: the stop condition read every `every` iterations and honoured, the store that grows by
# doubling on the device (and by reference) against a preallocated run's draws, a stopped run resumed from its
# checkpoint bit for bit, and the CUDA-graph tests.
python -m pytest -m gpu tests/test_sampling.py -q -p no:cacheprovider 2>&1 | tee "$OUT/driver_gpu.log" | tail -20
# Mixture BEM on the driver: CuPy against NumPy (the same stop at the same iteration), the sharded BEM, and the
# rule read every 10 iterations only.
python -m pytest -m gpu tests/test_mixture.py -q -p no:cacheprovider -k "bem" 2>&1 | tee "$OUT/driver_bem_gpu.log" | tail -10
# Nested sampling on the driver: every nested GPU test (the run twice, a bad value mid-run, the fused kernel,
# the stopping rule read once an iteration after the lag on CuPy: test_run_reads_the_stopping_rule...[cupy]),
# then the public run against its bare iteration (_step) per iteration, which must not have grown.
python -m pytest -m gpu tests/test_nested.py -q -p no:cacheprovider 2>&1 | tee "$OUT/driver_nested_gpu.log" | tail -10
python -m benchmarks nested --small --out "$OUT/driver-nested-small" 2>&1 | tail -30
# HierarchicalGLM.fit on the driver (graph replay included): its GPU tests.
python -m pytest -m gpu tests/test_glm.py -q -p no:cacheprovider -k "hierarchical" 2>&1 | tail -5
# The public calls, per iteration (the reference measurement, where it is beside the repository).
for f in ../shared/bench/user_path.py shared/bench/user_path.py; do
  if [ -f "$f" ]; then
    python "$f" nested --out "$OUT/driver_user_path_nested.json"
    python "$f" mixture --out "$OUT/driver_user_path_mixture.json"
    python "$f" glm --out "$OUT/driver_user_path_glm.json"
    break
  fi
done
