#!/usr/bin/env bash
# One GPU, about 5 minutes: the GLM GPU tests with every launch's arguments checked (glm_fg_rows as now,
# its loops unrolled 8 steps), and user_path.py's glm, bayesnet and ising sections, each in a process of its own.
set -u
D=${OUT:-out}/run; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T="timeout -s INT -k 10"
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 200 python -m pytest -q -m gpu -p no:cacheprovider tests/test_glm.py \
  > "$D/tests.log" 2>&1; echo "tests rc=$?"
grep -E "^FAILED|^ERROR" "$D/tests.log" | head; tail -n 1 "$D/tests.log"
for s in glm bayesnet ising; do
  $T 120 python scripts/user_path.py $s --out "$D/user_path-$s.json" > "$D/user_path-$s.log" 2>&1
  echo "user_path $s rc=$?"; grep -E "_ms|flips|per_s" "$D/user_path-$s.json" | head -8
done
tar -czf "${OUT:-out}/run.tgz" -C "$D" . && rm -rf "$D"
echo done
