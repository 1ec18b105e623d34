#!/usr/bin/env bash
# One GPU, under 10 minutes, after the review of this stop's changes: the GLM and nested GPU tests with every
# launch's arguments checked (f+g's float row as fixed; the nested rounds' capture checked at the second round
# and dropped after the run, with likelihoods that must not be replayed); the f+g kernel with the rows in float
# and in double, alternating; the nested defaults against dynesty. Wheels: .whl/dynesty-*.whl, carried.
set -u
D=${OUT:-out}/run; mkdir -p "$D"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$D/wheels.log" 2>&1 && export PYTHONPATH=/tmp/site:$PWD
export PYTHONUNBUFFERED=1
T="timeout -s INT -k 10"
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
GPUMCMC_CHECK_KERNEL_ARGS=1 $T ${TESTS_S:-260} python -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_glm.py \
  tests/test_nested.py tests/test_pickle.py > "$D/tests.log" 2>&1; echo "tests rc=$?"
grep -E "^FAILED|^ERROR" "$D/tests.log" | head; tail -n 1 "$D/tests.log"
$T ${PROBE_S:-100} python -m benchmarks.probes.glm_fg_shape "$D/fg_float_row.json" --define GLM_FG_FLOAT_ROW=1,0,1,0 \
  > "$D/fg_float_row.log" 2>&1; echo "fg probe rc=$?"
python3 -c "
import json
for r in json.load(open('$D/fg_float_row.json'))[1:]:
    print(r['B'], r['define'], round(r['ms'], 4), round(r['fraction'], 3), r['max_rel_diff_from_default'])"
$T ${NESTED_S:-150} python benchmarks/probes/nested_default.py "$D/nested_default.json" cupy > "$D/nested_default.log" 2>&1
echo "nested probe rc=$?"; grep '^{' "$D/nested_default.log"
tar -czf "${OUT:-out}/run.tgz" -C "$D" . && rm -rf "$D"
echo done
