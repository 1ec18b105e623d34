#!/usr/bin/env bash
# One GPU, a few minutes: the two tests the review run failed on their data (session59-review.sh), and the
# rest of the nested capture tests, every launch's arguments checked.
set -u
D=${OUT:-out}/run; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; } > "$D/host.txt" 2>&1
GPUMCMC_CHECK_KERNEL_ARGS=1 timeout -s INT -k 10 ${TESTS_S:-200} python -m pytest -q -m gpu -p no:cacheprovider -rs \
  ${TESTS_FILES:-tests/test_glm.py tests/test_nested.py tests/test_pickle.py} -k "${TESTS_K:-fitted_well or captur or cycle or kernel_matches_twin}" \
  > "$D/tests.log" 2>&1; echo "tests rc=$?"
grep -E "^FAILED|^ERROR|^E  " "$D/tests.log" | head -20; tail -n 1 "$D/tests.log"
tar -czf "${OUT:-out}/run.tgz" -C "$D" . && rm -rf "$D"
