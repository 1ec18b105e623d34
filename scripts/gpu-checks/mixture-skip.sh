#!/usr/bin/env bash
# One GPU: mixture.cu's MIX_SKIP (a tile of components left out where no row of a warp can choose or feel any
# of them; the same bits; Gibbs and Bayesian EM): the mixture's GPU tests with it (the new tests compare it with
# the full kernel), then the Gibbs step and fit with and without it at the suite's shape (n = 2^20, p = 14,
# k = 256), two rounds each. If it is faster, make it the default in ops._defines and run user_path.py's
# mixture section.
OUT=${OUT:-out}; mkdir -p "$OUT"
pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T="timeout -s INT -k 10"
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 200 python -m pytest -q -m gpu -p no:cacheprovider tests/test_mixture.py \
  > "$OUT/tests-mixture.log" 2>&1; echo "mixture tests rc=$?"; tail -n 1 "$OUT/tests-mixture.log"
$T 300 python - "$OUT" > "$OUT/mixture-skip.log" 2>&1 <<'PY'
import json, sys
from pathlib import Path
from benchmarks.mixture import profile_fit
from gpumcmc._config import config
out = {}
for tune in ((), (("MIX_SKIP", 1),), (), (("MIX_SKIP", 1),)):
    with config.override(mixture_defines=tune):
        r = profile_fit(a=5, b=305)
    row = {k: r[k] for k in ("gibbs_step_ms", "gibbs_fit_ms", "bem_step_ms", "bem_fit_ms")}
    out.setdefault("skip" if tune else "full", []).append(row)
    print(json.dumps({str(tune): row}), flush=True)
Path(sys.argv[1], "mixture-skip.json").write_text(json.dumps(out, indent=1))
PY
echo "timing rc=$?"; grep '^{' "$OUT/mixture-skip.log"
