#!/usr/bin/env bash
# One GPU, about 3 minutes: nested sampling after the finite start (a likelihood -inf on part of the prior):
# its GPU tests (the new one among them), then user_path.py's nested section (the public run with defaults).
set -u
D=${OUT:-out}; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
T="timeout -s INT -k 10"
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 200 python -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_nested.py > "$D/tests-nested.log" 2>&1
echo "nested GPU tests rc=$?"; grep -E "^FAILED|^ERROR" "$D/tests-nested.log" | head; tail -n 1 "$D/tests-nested.log"
$T 200 python scripts/user_path.py nested --out "$D/user_path-nested.json" > "$D/user_path-nested.log" 2>&1
echo "user_path nested rc=$?"
python -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: v for k, v in d.items() if k != 'setup'})" "$D/user_path-nested.json"
cd "$D" && tar czf logs.tgz *.log host.txt && rm -f *.log host.txt
