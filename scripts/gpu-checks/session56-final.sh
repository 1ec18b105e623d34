#!/usr/bin/env bash
# 4 GPUs, about 7 minutes: the whole `pytest -m gpu` at the session's last code (the inverse Wishart's
# finiteness check on CuPy, the Ising state's lattice record, RBM's [0, 1] inputs, the generator's scalars,
# besides everything before), then user_path.py, every section, one a GPU (glm and nested after lda and ising).
set -u
D=${OUT:-out}; mkdir -p "$D"
bash scripts/gpu-checks/session56-suite.sh
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T="timeout -s INT -k 10"
run_up() { CUDA_VISIBLE_DEVICES=$1 $T 200 python scripts/user_path.py $2 --out "$D/user_path-$2.json" \
             > "$D/user_path-$2.log" 2>&1; echo "user_path $2 rc=$?"; }
(run_up 0 lda; run_up 0 glm) & (run_up 1 ising; run_up 1 nested) & run_up 2 mixture & run_up 3 bayesnet &
wait
for s in lda glm ising nested mixture bayesnet; do
  echo "== $s"; grep -v '"docs"\|"words"\|"tokens"\|setup\|^ *}\|^{' "$D/user_path-$s.json" | cut -c1-160 | head -12
done
cd "$D" && tar czf logs2.tgz user_path-*.log && rm -f user_path-*.log
