#!/usr/bin/env bash
# One GPU, under 10 minutes: `pytest -m gpu` of the files whose code changed after session57-models.sh
# (the mixture's chain pooling and design blocks, Shards' pickling and GPU checks, the sharded statistics'
# checks, pickles and runs), with every launch's arguments checked; then user_path.py's mixture section.
set -u
D=${OUT:-out}; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
GPUMCMC_CHECK_KERNEL_ARGS=1 timeout -s INT -k 10 ${TESTS_S:-380} python -m pytest -q -m gpu -p no:cacheprovider -rs \
  tests/test_mixture.py tests/test_shards.py tests/test_protocol.py tests/test_pickle.py tests/test_sampling.py \
  > "$D/tests.log" 2>&1; echo "tests rc=$?"
grep -E "^FAILED|^ERROR" "$D/tests.log" | head -20; tail -n 2 "$D/tests.log"
timeout -s INT -k 10 100 python scripts/user_path.py mixture --out "$D/user_path-mixture.json" > "$D/user_path-mixture.log" 2>&1
echo "user_path mixture rc=$?"; grep -v '"docs"\|setup\|^ *}\|^{' "$D/user_path-mixture.json" | head -6
