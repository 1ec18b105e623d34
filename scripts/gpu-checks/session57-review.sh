#!/usr/bin/env bash
# One GPU, about 4 minutes: `pytest -m gpu` of the files the review fixes touched (the sampler layer, the
# mixture's chain pooling, Shards, the sharded statistics' checks, the GLM's predictions), every launch's
# arguments checked.
set -u
D=${OUT:-out}; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
GPUMCMC_CHECK_KERNEL_ARGS=1 timeout -s INT -k 10 ${TESTS_S:-420} python -m pytest -q -m gpu -p no:cacheprovider -rs \
  tests/test_mixture.py tests/test_shards.py tests/test_protocol.py tests/test_pickle.py tests/test_sampling.py \
  tests/test_glm.py > "$D/tests.log" 2>&1; echo "tests rc=$?"
grep -E "^FAILED|^ERROR" "$D/tests.log" | head -20; tail -n 2 "$D/tests.log"
cd "$D" && tar czf logs.tgz tests.log install.log host.txt && rm -f tests.log install.log
