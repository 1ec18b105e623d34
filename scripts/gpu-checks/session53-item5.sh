#!/usr/bin/env bash
# One GPU: loglik_and_grad's GPU tests after its device and stream are looked up once before the first launch,
# then user_path.py's glm section five times (the default against check=False, issue 40 item 5) and its
# mixture section alone on the GPU and host (BEM's public row, 5.49 ms at 45331d8 beside another lane's work).
set -u
D=${OUT:-out}; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
T="timeout -s INT -k 10"
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 240 python -m pytest -q -m gpu -p no:cacheprovider tests/test_glm.py > "$D/tests.log" 2>&1
echo "tests rc=$?"; grep -E "^FAILED|^ERROR" "$D/tests.log" | head; tail -n 1 "$D/tests.log"
for i in 1 2 3 4 5; do $T 90 python scripts/user_path.py glm --out "$D/glm-$i.json" > "$D/glm-$i.log" 2>&1; echo "glm-$i rc=$?"; done
$T 150 python scripts/user_path.py mixture --out "$D/mixture.json" > "$D/mixture.log" 2>&1; echo "mixture rc=$?"
python - "$D" <<'PY'
import glob, json, sys
r = []
for f in sorted(glob.glob(sys.argv[1] + "/glm-*.json")):
    d = json.load(open(f)); a, b = d["glm_loglik_and_grad_N4M_K50_default_ms"], d["glm_loglik_and_grad_N4M_K50_check_False_ms"]
    r.append(a / b); print(f.rsplit("/", 1)[1], round(a, 4), round(b, 4), round(a / b, 4))
r.sort(); print("ratios sorted", [round(x, 4) for x in r], "median", round(r[len(r) // 2], 4))
print(json.load(open(sys.argv[1] + "/mixture.json")))
PY
cd "$D" && tar czf logs.tgz *.log host.txt && rm -f *.log host.txt
