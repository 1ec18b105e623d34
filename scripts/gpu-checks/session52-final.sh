#!/usr/bin/env bash
# 2 or 4 GPUs, after issue40-final.sh at 22cba09: issue 40's item-5 and item-7 rows again (the mixture's fits
# against their steps, BEM's bare loop now from the start as each fit runs; NestedSampler.run against its
# iteration over 34 iterations, median of five; loglik_and_grad's default against check=False by
# user_path.py and by the GLM suite), two parts a GPU on two GPUs; then the multi-GPU test files with every GPU visible and the rest of
# `pytest -m gpu` in a lane a GPU (every launch's arguments checked) until the deadline. $OUT gets it all.
set -u
T0=$(date +%s); END=$((T0 + ${BUDGET_S:-500})); N=$(nvidia-smi -L | wc -l)
D=${OUT:-out}; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
T="timeout -s INT -k 10"
NESTED='import sys
from pathlib import Path
from benchmarks import nested as suite
from benchmarks.harness import Bench
from gpumcmc import nested
bench = Bench()
bench.suite, bench.out_dir = "nested-public", Path(sys.argv[1])
suite._public_vs_step(bench, nested)
print(bench.write("nested-public", bench.out_dir))'
(export CUDA_VISIBLE_DEVICES=0
 $T 90 python -m benchmarks.mixture --profile-fit --out "$D/mixture-profile-fit.json" > "$D/mixture-profile-fit.log" 2>&1
 echo "mixture-profile-fit rc=$?"
 $T 60 python scripts/user_path.py glm --out "$D/user_path-glm.json" > "$D/user_path-glm.log" 2>&1
 echo "user_path-glm rc=$?") &
(export CUDA_VISIBLE_DEVICES=1
 $T 90 python -c "$NESTED" "$D" > "$D/nested-public.log" 2>&1; echo "nested-public rc=$?"
 GPUMCMC_GLM_CASES=public,f+g JAX_PLATFORMS=cpu $T 90 python -m benchmarks glm --out "$D" > "$D/glm-public-fg.log" 2>&1
 echo "glm-public-fg rc=$?") &
wait
grep -hE "_(ms|step)" "$D/mixture-profile-fit.log"; grep -h "bare\|public\|kernel only" "$D/nested-public.log" | head -8
PT="python -m pytest -q -m gpu -p no:cacheprovider -rs"
MULTI="tests/test_nccl.py tests/test_lda_devices.py tests/test_glm_devices.py tests/test_bayesnet_devices.py tests/test_distributed.py"
L0="tests/test_categorical.py tests/test_gamma.py tests/test_dirichlet_beta.py tests/test_philox.py tests/test_wishart.py tests/test_products_base.py tests/test_deferred.py tests/test_backend.py tests/test_loader.py"
L1="tests/test_mixture.py tests/test_nested.py tests/test_sampling.py tests/test_protocol.py tests/test_shards.py"
L2="tests/test_lda.py tests/test_lda_quality.py tests/test_sklearn.py tests/test_rbm.py tests/test_ising.py"
L3=""
for f in tests/test_*.py; do
  case " $MULTI $L0 $L1 $L2 " in *" $f "*) ;; *) L3="$L3 $f" ;; esac
done
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 100 $PT $MULTI tests/test_mixture.py::test_nccl_sharded_gibbs_gives_the_draws_of_one_device \
  > "$D/tests-multi.log" 2>&1; echo "multi-GPU files rc=$?"
[ "$N" -ge 4 ] || { L0="$L0 $L2"; L1="$L1 $L3"; }
left=$((END - $(date +%s)))
for k in $(seq 0 $(( N >= 4 ? 3 : 1 ))); do
  eval "files=\$L$k"
  (CUDA_VISIBLE_DEVICES=$k GPUMCMC_CHECK_KERNEL_ARGS=1 $T $left $PT $files > "$D/tests-lane$k.log" 2>&1
   echo "lane $k rc=$?") &
done
wait
for f in "$D"/tests-*.log; do echo "== $(basename "$f")"; grep -E "^FAILED|^ERROR" "$f" | head -8; tail -n 1 "$f"; done
