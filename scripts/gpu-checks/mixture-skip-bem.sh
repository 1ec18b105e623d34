#!/usr/bin/env bash
# One GPU: the mixture with MIX_SKIP in mode RESP by default (Bayesian EM's E-step): the mixture's GPU tests,
# the Gibbs and BEM steps and fits at the suite's shape with the defaults against MIX_SKIP = 0 everywhere
# (two rounds each), user_path.py's mixture section; then the Bayesian network's suite row against
# user_path.py's (after the counts in registers).
OUT=${OUT:-out}; mkdir -p "$OUT"
pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T="timeout -s INT -k 10"
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 200 python -m pytest -q -m gpu -p no:cacheprovider tests/test_mixture.py \
  > "$OUT/tests-mixture.log" 2>&1; echo "mixture tests rc=$?"; tail -n 1 "$OUT/tests-mixture.log"
$T 200 python - "$OUT" > "$OUT/mixture-skip-bem.log" 2>&1 <<'PY'
import json, sys
from pathlib import Path
from benchmarks.mixture import profile_fit
from gpumcmc._config import config
out = {}
for tune in ((), (("MIX_SKIP", 0),), (), (("MIX_SKIP", 0),)):
    with config.override(mixture_defines=tune):
        r = profile_fit(a=5, b=305)
    row = {k: r[k] for k in ("gibbs_step_ms", "gibbs_fit_ms", "bem_step_ms", "bem_fit_ms")}
    out.setdefault("default" if not tune else "no_skip", []).append(row)
    print(json.dumps({str(tune): row}), flush=True)
Path(sys.argv[1], "mixture-skip-bem.json").write_text(json.dumps(out, indent=1))
PY
echo "timing rc=$?"; grep '^{' "$OUT/mixture-skip-bem.log"
$T 120 python scripts/user_path.py mixture --out "$OUT/user_path_mixture.json" > "$OUT/user_path_mixture.log" 2>&1
echo "user_path mixture rc=$?"; tail -n 4 "$OUT/user_path_mixture.log"
$T 150 python -m benchmarks.bayesnet "$OUT" --user-path > "$OUT/bayesnet-user-path.log" 2>&1
echo "bn suite rc=$?"; tail -n 4 "$OUT/bayesnet-user-path.log"
$T 120 python scripts/user_path.py bayesnet --out "$OUT/user_path_bayesnet.json" > "$OUT/user_path_bayesnet.log" 2>&1
echo "user_path bn rc=$?"; tail -n 4 "$OUT/user_path_bayesnet.log"
nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/device.txt"; cat scripts/.commit > "$OUT/commit.txt"
