#!/usr/bin/env bash
# 2 GPUs, after session53-first.sh: user_path.py (the public calls with their defaults) for the models whose
# input checks changed in the last stop (glm, mixture, nested, bayesnet, lda), one lane a GPU; the glm
# section three times, for the spread of loglik_and_grad's default over check=False (issue 40 item 5).
set -u
D=${OUT:-out}; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
T="timeout -s INT -k 10"
(export CUDA_VISIBLE_DEVICES=0
 for i in 1 2 3; do $T 90 python scripts/user_path.py glm --out "$D/user_path-glm-$i.json" > "$D/user_path-glm-$i.log" 2>&1
   echo "glm-$i rc=$?"; done
 $T 150 python scripts/user_path.py mixture --out "$D/user_path-mixture.json" > "$D/user_path-mixture.log" 2>&1
 echo "mixture rc=$?") &
(export CUDA_VISIBLE_DEVICES=1
 for s in bayesnet nested lda; do $T 170 python scripts/user_path.py $s --out "$D/user_path-$s.json" > "$D/user_path-$s.log" 2>&1
   echo "$s rc=$?"; done) &
wait
python - "$D" <<'PY'
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/user_path-*.json")):
    d = json.load(open(f))
    print(f.rsplit("/", 1)[1], {k: (round(v, 4) if isinstance(v, float) else v) for k, v in d.items() if k != "setup"})
PY
cd "$D" && tar czf logs.tgz *.log host.txt && rm -f *.log host.txt
