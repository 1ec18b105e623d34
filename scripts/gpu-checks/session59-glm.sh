#!/usr/bin/env bash
# One GPU, under 10 minutes: the GLM GPU tests with every launch's arguments checked (f+g's bernoulli rows in
# float, GLM_FG_FLOAT_ROW); the f+g kernel with the rows in float and in double, alternating, in one process
# (benchmarks/probes/glm_fg_shape.py --define); user_path.py's glm and mixture sections.
set -u
D=${OUT:-out}/run; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T="timeout -s INT -k 10"
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
GPUMCMC_CHECK_KERNEL_ARGS=1 $T ${TESTS_S:-200} python -m pytest -q -m gpu -p no:cacheprovider tests/test_glm.py \
  > "$D/tests.log" 2>&1; echo "tests rc=$?"
grep -E "^FAILED|^ERROR" "$D/tests.log" | head; tail -n 1 "$D/tests.log"
$T ${PROBE_S:-150} python -m benchmarks.probes.glm_fg_shape "$D/fg_float_row.json" --define GLM_FG_FLOAT_ROW=1,0,1,0 \
  > "$D/fg_float_row.log" 2>&1; echo "probe rc=$?"; tail -n 5 "$D/fg_float_row.log"
for s in ${SECTIONS:-glm mixture}; do
  $T ${UP_S:-130} python scripts/user_path.py $s --out "$D/user_path-$s.json" > "$D/user_path-$s.log" 2>&1
  echo "user_path $s rc=$?"; grep -E "_ms|flips|per_s|_s\"" "$D/user_path-$s.json" | head -8
done
tar -czf "${OUT:-out}/run.tgz" -C "$D" . && rm -rf "$D"
echo done
