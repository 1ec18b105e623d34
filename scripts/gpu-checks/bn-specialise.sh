#!/usr/bin/env bash
# The Bayesian network with its structure written into the sweep and the counts (config.bayesnet_specialise,
# issue 38) and its iteration replayed from a CUDA graph on one GPU (config.bayesnet_graph), and its fit over GPUs with each fit's sampling loop timed inside the call (issue 40 item 6):
#   1. the Bayesian network's GPU tests, each launch's arguments checked (the specialised kernels against the
#      generic ones and the twin, the set-up's new cell lists, the counts kernel's refactor);
#   2. the bare step, the public fit with and without the graph, and each kernel, generic and specialised
#      (Koller, 10^6 cases, half missing, m = 10);
#   3. bn_scaling.py at 10^7 and 10^6 cases over every GPU (at most 4).
# JSON and logs under $OUT.
OUT=${OUT:-out}; mkdir -p "$OUT"
pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ date -u; cat scripts/.commit; nvidia-smi -L; } > "$OUT/host.txt"
T="timeout -s INT -k 10"
NGPU=$(nvidia-smi -L | wc -l)
tests() {
  CUDA_VISIBLE_DEVICES=$1 GPUMCMC_CHECK_KERNEL_ARGS=1 $T 240 python -m pytest -q -m gpu -p no:cacheprovider \
    tests/test_bayesnet.py > "$OUT/tests-bayesnet.log" 2>&1; echo "bayesnet tests rc=$?"
}
timing() {
  CUDA_VISIBLE_DEVICES=$1 $T 240 python - "$OUT" > "$OUT/bn-specialise-timing.log" 2>&1 <<'PY'
import json, sys
from pathlib import Path
from benchmarks import bayesnet as B
from benchmarks.harness import Bench, format_table, per_iteration_ms
from gpumcmc._config import config
from gpumcmc.models.bayesnet import BayesianNetwork
bench, koller = Bench(), BayesianNetwork.koller()
bench.suite = "bayesnet"
X = B._data(koller, 1_000_000, 0.5)
out = {}
fit = lambda n: BayesianNetwork(koller.parents, koller.states, n_iter=n, same=10, random_state=0,  # noqa: E731
                                progress=False).fit(X)
for on in (False, True, False, True):
    with config.override(bayesnet_specialise=on):
        out.setdefault(f"bare_step_ms_specialise_{on}", []).append(B._bare_step_ms(X, 10, 405))
        for graph in (False, True):
            with config.override(bayesnet_graph=graph):
                out.setdefault(f"public_fit_ms_specialise_{on}_graph_{graph}", []).append(
                    per_iteration_ms(fit, 5, 1005, repeats=3))
        B._parts(bench, "koller-1M-50%-m10", koller, X, 10)
    print(json.dumps(out), flush=True)
with open(Path(sys.argv[1]) / "bn-specialise-graph.json", "w") as f:
    json.dump(out, f, indent=1)
print(format_table(bench.rows))
print("# wrote", bench.write("bayesnet-specialise", Path(sys.argv[1])))
PY
  echo "timing rc=$?"
}
if [ "$NGPU" -ge 2 ]; then tests 0 & timing 1; wait; else tests 0; timing 0; fi
[ "$NGPU" -ge 2 ] && CUDA_VISIBLE_DEVICES=0,1 GPUMCMC_CHECK_KERNEL_ARGS=1 $T 120 python -m pytest -q -m gpu \
  -p no:cacheprovider tests/test_bayesnet_devices.py > "$OUT/tests-bayesnet-devices.log" 2>&1
if [ "$NGPU" -ge 2 ]; then   # the scaling over GPUs means nothing on one
  $T 200 python scripts/gpu-checks/bn_scaling.py "$OUT" --cases 1e7 > "$OUT/bn-scaling-1e7.log" 2>&1
  $T 90 python scripts/gpu-checks/bn_scaling.py "$OUT" > "$OUT/bn-scaling.log" 2>&1
fi
tail -n 2 "$OUT"/tests-*.log; grep '^{' "$OUT/bn-specialise-timing.log"; grep ' part:\| specialised' "$OUT/bn-specialise-timing.log" | head -20
grep '^{"cases' "$OUT"/bn-scaling*.log
