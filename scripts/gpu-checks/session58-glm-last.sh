#!/usr/bin/env bash
# One GPU, about 2 minutes: the GLM GPU tests with every launch's arguments checked, after glm_fg_rows' cap
# on phase 2's row subsets (two columns and eight chains among the shapes).
set -u
D=${OUT:-out}; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; } > "$D/host.txt" 2>&1
GPUMCMC_CHECK_KERNEL_ARGS=1 timeout -s INT -k 10 ${TESTS_S:-200} python -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_glm.py > "$D/tests.log" 2>&1; echo "tests rc=$?"
grep -E "^FAILED|^ERROR" "$D/tests.log" | head; tail -n 1 "$D/tests.log"
