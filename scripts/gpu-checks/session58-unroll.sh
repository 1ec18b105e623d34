#!/usr/bin/env bash
# One GPU, about 5 minutes: glm_fg_rows with its phases' inner loops unrolled 1, 2, 4 (the default) and 8
# steps, and the kernel of the commit before (a copy in _base/), at the default shape, twice each; the GLM
# GPU tests; user_path.py's glm section.
set -u
D=${OUT:-out}/run; mkdir -p "$D"
export PYTHONUNBUFFERED=1
T="timeout -s INT -k 10"
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
for round in 1 2; do
  PYTHONPATH=$PWD/_base:$PWD $T 100 python -m benchmarks.probes.glm_fg_shape "$D/before-$round.json" --default-only \
    > "$D/before-$round.log" 2>&1; echo "before $round rc=$?"
  PYTHONPATH=$PWD $T 150 python -m benchmarks.probes.glm_fg_shape "$D/unroll-$round.json" --define GLM_ROWS_UNROLL=4,1,2,8 \
    > "$D/unroll-$round.log" 2>&1; echo "unroll $round rc=$?"
  for f in before unroll; do python - "$D/$f-$round.json" "$f" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))[1:]:
    print(sys.argv[2], r["B"], "unroll", r.get("unroll"), "ms", round(r.get("ms", -1), 4), "fraction",
          round(r.get("fraction", -1), 3), "rel", r.get("max_rel_diff_from_default"), r.get("error", ""))
PY
  done
done
export PYTHONPATH=$PWD
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 200 python -m pytest -q -m gpu -p no:cacheprovider tests/test_glm.py \
  > "$D/tests.log" 2>&1; echo "tests rc=$?"
grep -E "^FAILED|^ERROR" "$D/tests.log" | head; tail -n 1 "$D/tests.log"
$T 90 python scripts/user_path.py glm --out "$D/user_path-glm.json" > "$D/user_path-glm.log" 2>&1
echo "user_path glm rc=$?"; grep "loglik_and_grad" "$D/user_path-glm.json"
tar -czf "${OUT:-out}/run.tgz" -C "$D" . && rm -rf "$D"
echo done
