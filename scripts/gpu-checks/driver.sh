#!/usr/bin/env bash
# GPU checks of the run driver (gpumcmc/sampling/_driver.py) and of the loops that now run on it (mixture BEM,
# nested sampling); from the repository root on a GPU machine ($OUT collects logs and JSON).
set -x
# The driver on CuPy: the stop condition read every `every` iterations and honoured, the store that grows by
# doubling on the device (and by reference) against a preallocated run's draws, a stopped run resumed from its
# checkpoint bit for bit, and the CUDA-graph tests.
python -m pytest -m gpu tests/test_sampling.py -q -p no:cacheprovider 2>&1 | tee "$OUT/driver_gpu.log" | tail -20
