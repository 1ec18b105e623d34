#!/usr/bin/env bash
# 2 GPUs, after session54-kernels-alone.sh ALONE=0 (whose 120 s limit on the multi-GPU files was too short for a
# cold kernel cache): the multi-GPU test files with every GPU visible, then user_path.py (the public calls with
# their defaults) for the models whose GPU paths changed in session 53 (lda, ising, mixture), one lane a GPU.
set -u
D=${OUT:-out}; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
T="timeout -s INT -k 10"
MULTI="tests/test_nccl.py tests/test_lda_devices.py tests/test_glm_devices.py tests/test_bayesnet_devices.py tests/test_distributed.py"
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 330 python -m pytest -q -m gpu -p no:cacheprovider -rs $MULTI > "$D/tests-multi.log" 2>&1
echo "multi-GPU files rc=$?"; grep -E "^FAILED|^ERROR" "$D/tests-multi.log" | head; tail -n 1 "$D/tests-multi.log"
(export CUDA_VISIBLE_DEVICES=0
 $T 200 python scripts/user_path.py lda --out "$D/user_path-lda.json" > "$D/user_path-lda.log" 2>&1; echo "lda rc=$?") &
(export CUDA_VISIBLE_DEVICES=1
 for s in ising mixture; do $T 100 python scripts/user_path.py $s --out "$D/user_path-$s.json" > "$D/user_path-$s.log" 2>&1
   echo "$s rc=$?"; done) &
wait
python - "$D" <<'PY'
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/user_path-*.json")):
    d = json.load(open(f))
    print(f.rsplit("/", 1)[1], {k: (round(v, 4) if isinstance(v, float) else v) for k, v in d.items() if k != "setup"})
PY
cd "$D" && tar czf logs.tgz *.log host.txt && rm -f *.log host.txt
