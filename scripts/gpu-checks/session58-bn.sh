#!/usr/bin/env bash
# One GPU, about 5 minutes: the Bayesian network's GPU tests with the sweep's cell indices read ahead
# (BN_PREFETCH = 2, the default), benchmarks/probes/bn_prefetch.py (with and without, the same tables), and
# user_path.py's bayesnet section.
set -u
D=${OUT:-out}/run; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T="timeout -s INT -k 10"
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 200 python -m pytest -q -m gpu -p no:cacheprovider tests/test_bayesnet.py \
  > "$D/tests.log" 2>&1; echo "tests rc=$?"
grep -E "^FAILED|^ERROR" "$D/tests.log" | head; tail -n 1 "$D/tests.log"
$T 200 python -m benchmarks.probes.bn_prefetch "$D/bn_prefetch.json" 2,1,0,2,1,0 > "$D/bn_prefetch.log" 2>&1
echo "probe rc=$?"; cat "$D/bn_prefetch.log" | cut -c1-300
$T 100 python scripts/user_path.py bayesnet --out "$D/user_path-bayesnet.json" > "$D/user_path-bayesnet.log" 2>&1
echo "user_path rc=$?"; grep -E "_ms" "$D/user_path-bayesnet.json"
tar -czf "${OUT:-out}/run.tgz" -C "$D" . && rm -rf "$D"
echo done
