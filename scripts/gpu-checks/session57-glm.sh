#!/usr/bin/env bash
# One GPU, about 5 minutes: glm_fg_rows with wide shared-memory reads (GLM_ROWS_VEC) against one element a
# read, bit for bit and timed (benchmarks/probes/glm_rows_vec.py); the GLM GPU tests with every launch's
# arguments checked; user_path.py's glm section (loglik_and_grad through its defaults).
set -u
D=${OUT:-out}; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
timeout -s INT -k 10 150 python -m benchmarks.probes.glm_rows_vec "$D/glm_rows_vec.json" > "$D/probe.log" 2>&1
echo "probe rc=$?"; cat "$D/probe.log" | cut -c1-400
GPUMCMC_CHECK_KERNEL_ARGS=1 timeout -s INT -k 10 ${TESTS_S:-200} python -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_glm.py tests/test_glm_devices.py > "$D/tests.log" 2>&1; echo "tests rc=$?"
grep -E "^FAILED|^ERROR" "$D/tests.log" | head; tail -n 1 "$D/tests.log"
timeout -s INT -k 10 90 python scripts/user_path.py glm --out "$D/user_path-glm.json" > "$D/user_path-glm.log" 2>&1
echo "user_path glm rc=$?"; grep "loglik_and_grad" "$D/user_path-glm.json"
