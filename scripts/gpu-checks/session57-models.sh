#!/usr/bin/env bash
# One GPU, under 10 minutes: `pytest -m gpu` of the files whose code this session changed (the run driver,
# the estimators' pickles and all-or-nothing fits; no kernel changed since the whole suite passed at
# d62df4f), with every launch's arguments checked; then user_path.py's mixture and bayesnet sections alone.
set -u
D=${OUT:-out}; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
FILES="tests/test_pickle.py tests/test_sampling.py tests/test_protocol.py tests/test_shards.py tests/test_sklearn.py
  tests/test_nested.py tests/test_mixture.py tests/test_glm.py tests/test_bayesnet.py tests/test_rbm.py
  tests/test_ising.py tests/test_lda.py"
GPUMCMC_CHECK_KERNEL_ARGS=1 timeout -s INT -k 10 ${TESTS_S:-400} python -m pytest -q -m gpu -p no:cacheprovider -rs \
  $FILES > "$D/tests.log" 2>&1; echo "tests rc=$?"
grep -E "^FAILED|^ERROR" "$D/tests.log" | head -20; tail -n 2 "$D/tests.log"
for s in mixture bayesnet; do
  timeout -s INT -k 10 90 python scripts/user_path.py $s --out "$D/user_path-$s.json" > "$D/user_path-$s.log" 2>&1
  echo "user_path $s rc=$?"; grep -v '"docs"\|setup\|^ *}\|^{' "$D/user_path-$s.json" | head -6
done
