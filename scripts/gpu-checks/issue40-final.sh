#!/usr/bin/env bash
# Every figure of issue 40's goals table and every loop of its item 7, measured in one call on a host of
# 4 GPUs (H100), by user_path.py (the reference measurement of the public calls) and by the suites' public
# rows with their bare steps ("kernel only") beside them; then benchmarks.compare_public sets them side by
# side. From the repository root, user_path.py copied to scripts/user_path.py:
#
#     bash scripts/gpu-checks/issue40-final.sh        # $OUT gets issue40-final.tgz and compare.md
#
# Phase 1, one lane per GPU (CUDA_VISIBLE_DEVICES=k, one process at a time on each, every part under its own
# timeout), each lane pinned to its own CPU cores so that one lane's host work (the corpus builds use a pool
# of processes) does not slow another lane's launches. All four GPUs are of one host and one kind, so a
# model's user_path.py section and its suite's rows run on the same kind of GPU:
#   GPU 0: user_path.py lda (LDA(256|1024).fit on the 29 M-token text and the paper's shape; fit's set-up);
#          user_path.py bayesnet; benchmarks.bayesnet --user-path (BayesianNetwork.fit against its step)
#   GPU 1: user_path.py mixture (Gibbs and BEM fits, n = 2^20, k = 256); benchmarks.mixture --profile-fit
#          (the same fits against their steps); user_path.py glm (loglik_and_grad N = 4 M, K = 50;
#          BayesianGLM.fit); the GLM suite's cases public,f+g (BayesianGLM.fit and HierarchicalGLM.fit
#          against their graph-replayed steps, loglik_and_grad with its defaults beside check=False)
#   GPU 2: user_path.py nested; the nested suite's public rows (NestedSampler.run per iteration against
#          its bare iteration); user_path.py ising (L = 16,384, runs of 405 sweeps); benchmarks.ising
#          --user-path (Ising.sample and RBM.fit against their bare loops)
#   GPU 3: benchmarks.lda --user-path (LDA.fit against its step on user_path.py's text and the paper's
#          shape, at K = 256 and 1024; fit's set-up in pieces)
# Phase 2, alone on the host (all 4 GPUs): user_path.py scaling (LDA K = 1024 on the text, the mixture at
# n = 10^7, the GLM at N = 2e7 through fit(devices=...) on 1, 2 and 4 GPUs), then the scaling suite (the
# bare sweeps of the same models over 1, 2 and 4 GPUs; LDA on user_path.py's text, GPUMCMC_SCALING_LDA_TEXT,
# and the GLM's N 4e7: the suite has no public-call rows, so its efficiencies are the "kernel only" ones), then
# the Bayesian network's fit(devices=...) against its bare step over the same shards (bn_scaling.py), at 10^6
# and 10^7 cases.
#
# Peers are skipped: the GLM suite's JAX row (JAX_PLATFORMS=cpu: bench.jax finds no GPU), the LDA suite's
# and the others' peer rows are not in the parts run here. The goals are absolute.
# Sizes are the goals' own; where a part runs out of time its rows stay missing in compare.md (the
# suites' JSON lines and user_path.py's lines in the logs stand in for files a timeout stopped).
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s)
NGPU=$(nvidia-smi -L | wc -l)
# On a host of 2 GPUs the four lanes run two by two (lanes 0 and 2 on GPU 0, 1 and 3 on GPU 1), unpinned,
# and the scaling runs stop at 2 GPUs: more time for phase 1, less for phase 2.
if [ "$NGPU" -ge 4 ]; then B=520 P1=200; else B=560 P1=330; fi
END=$((T0 + ${ISSUE40_BUDGET_S:-$B}))            # everything but the archive
PHASE1_END=$((T0 + ${ISSUE40_PHASE1_S:-$P1}))
D=${ISSUE40_DIR:-/tmp/issue40-final}
FINAL=${OUT:-out}
UP=scripts/user_path.py
mkdir -p "$D" "$FINAL"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export GPUMCMC_GIT_COMMIT=${GPUMCMC_GIT_COMMIT:-$(cat scripts/.commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)}
[ -f "$UP" ] || cp ../shared/bench/user_path.py "$UP" 2>/dev/null || echo "no $UP: its parts will fail" >&2
{ date -u; echo "commit $GPUMCMC_GIT_COMMIT"; nvidia-smi -L; nvidia-smi topo -m; nproc
  python -c "import sys, cupy, numpy; print(sys.version.split()[0], 'cupy', cupy.__version__, 'numpy', numpy.__version__)"
} > "$D/host.txt" 2>&1
printf 'part\tgpus\tstart_s\tseconds\trc\n' > "$D/parts.tsv"

# part NAME CAP_S DEADLINE CMD...: run CMD under a timeout of CAP_S (less if DEADLINE comes first), its
# output in $D/NAME.log, pinned to $LANE_CPUS where set; one line of parts.tsv says where, when, how long.
part() {
  local name=$1 cap=$2 deadline=$3; shift 3
  local start t rc pin=()
  start=$(date +%s); t=$((deadline - start)); [ "$t" -gt "$cap" ] && t=$cap
  if [ "$t" -lt 10 ]; then
    echo "skipped: $((deadline - start)) s left before the deadline" > "$D/$name.log"; rc=skipped
  else
    [ -n "${LANE_CPUS:-}" ] && pin=(taskset -c "$LANE_CPUS")
    timeout -s INT -k 20 "$t" ${pin[@]+"${pin[@]}"} "$@" > "$D/$name.log" 2>&1; rc=$?
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "${CUDA_VISIBLE_DEVICES:-all}" "$((start - T0))" \
    "$(($(date +%s) - start))" "$rc" >> "$D/parts.tsv"
  echo "[$(($(date +%s) - T0)) s] $name on GPU ${CUDA_VISIBLE_DEVICES:-all}: rc=$rc"
}

# Cores per lane: GPUs 0 and 3 build the 29 M-token text (a pool of processes), the others launch kernels.
read -r -a CPUS <<< "$(python -c 'import os; print(*sorted(os.sched_getaffinity(0)))')"
n=${#CPUS[@]}; few=$((n / 5)); big=$(((n - 2 * few) / 2))
lane_cpus() {  # the comma-separated cores of lane $1 (none where taskset is missing or the host small)
  command -v taskset > /dev/null && [ "$few" -ge 2 ] || return 0
  local lo len
  case $1 in 0) lo=0; len=$big ;; 1) lo=$big; len=$few ;; 2) lo=$((big + few)); len=$few ;;
             3) lo=$((big + 2 * few)); len=$((n - big - 2 * few)) ;; esac
  echo "${CPUS[@]:lo:len}" | tr ' ' ','
}

NESTED_PUBLIC='import sys
from pathlib import Path
from benchmarks import nested as suite
from benchmarks.harness import Bench
from gpumcmc import nested
bench = Bench()
bench.suite, bench.out_dir = "nested-public", Path(sys.argv[1])  # each row written as it is recorded
suite._public_vs_step(bench, nested)
print(bench.write("nested-public", bench.out_dir))'

lane0() {
  part user_path-lda 150 "$PHASE1_END" python "$UP" lda --out "$D/user_path-lda.json"
  part user_path-bayesnet 45 "$PHASE1_END" python "$UP" bayesnet --out "$D/user_path-bayesnet.json"
  part bayesnet-user-path 45 "$PHASE1_END" python -m benchmarks.bayesnet "$D" --user-path
}
lane1() {
  part user_path-mixture 60 "$PHASE1_END" python "$UP" mixture --out "$D/user_path-mixture.json"
  part mixture-profile-fit 120 "$PHASE1_END" python -m benchmarks.mixture --profile-fit --out "$D/mixture-profile-fit.json"
  part user_path-glm 50 "$PHASE1_END" python "$UP" glm --out "$D/user_path-glm.json"
  part glm-public-fg 90 "$PHASE1_END" env GPUMCMC_GLM_CASES=public,f+g JAX_PLATFORMS=cpu \
    python -m benchmarks glm --out "$D"
}
lane2() {
  part user_path-nested 70 "$PHASE1_END" python "$UP" nested --out "$D/user_path-nested.json"
  part nested-public 60 "$PHASE1_END" python -c "$NESTED_PUBLIC" "$D"
  part user_path-ising 40 "$PHASE1_END" python "$UP" ising --out "$D/user_path-ising.json"
  part ising-user-path 60 "$PHASE1_END" python -m benchmarks.ising "$D" --user-path
}
lane3() {
  part lda-fit-vs-step 170 "$PHASE1_END" python -m benchmarks.lda --user-path "$UP" --out "$D/lda-fit-vs-step.json"
}

if [ "$NGPU" -ge 4 ]; then
  echo "phase 1: one lane per GPU (cores: $(for k in 0 1 2 3; do printf '%s ' "[$(lane_cpus $k)]"; done))"
  for k in 0 1 2 3; do
    (export CUDA_VISIBLE_DEVICES=$k LANE_CPUS=$(lane_cpus $k); "lane$k") &
  done
else
  echo "phase 1: lanes 0 then 2 on GPU 0, lanes 1 then 3 on GPU 1"
  (export CUDA_VISIBLE_DEVICES=0; lane0; lane2) &
  (export CUDA_VISIBLE_DEVICES=$((NGPU > 1 ? 1 : 0)); lane1; lane3) &
fi
wait

echo "phase 2: alone on the host, every GPU"
unset CUDA_VISIBLE_DEVICES
left=$((END - $(date +%s) - 80))                  # keep 80 s or more for the scaling suite
part user_path-scaling "$(( left < 240 ? left : 240 ))" "$END" python "$UP" scaling --out "$D/user_path-scaling.json"
part scaling-suite 240 "$END" env GPUMCMC_BENCH_WARMUP=1 GPUMCMC_BENCH_REPEAT=5 GPUMCMC_SCALING_LDA_TEXT="$UP" \
  python -m benchmarks scaling --out "$D"
part bn-scaling 90 "$END" python scripts/gpu-checks/bn_scaling.py "$D"
part bn-scaling-1e7 200 "$END" python scripts/gpu-checks/bn_scaling.py "$D" --cases 1e7

python -m benchmarks.compare_public "$D" > "$D/compare.log" 2>&1
cat "$D/parts.tsv"; echo; cat "$D/compare.md" 2>/dev/null || tail -n 20 "$D/compare.log"
for f in "$D"/*.log; do  # a failing part's last lines, for the output's tail
  grep -q -E "Traceback|Error|error:" "$f" && { echo "== $(basename "$f")"; grep -E "Error|error:" "$f" | tail -n 3; }
done
cp "$D/compare.md" "$FINAL/" 2>/dev/null
tar czf "$FINAL/issue40-final.tgz" -C "$D" .
echo "wall $(($(date +%s) - T0)) s; archive $FINAL/issue40-final.tgz"
