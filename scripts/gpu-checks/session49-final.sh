#!/usr/bin/env bash
# The whole `pytest -m gpu` at the final code on a host of 4 GPUs, every launch's arguments checked: the test
# files in four lanes (one GPU each), then the multi-GPU files (and the mixture's test over two GPUs, which a
# one-GPU lane skips) with every GPU visible. $OUT gets session49-final.tgz. With --tests-only (as
# session48-final.sh calls it) the logs stay in $GPU_TESTS_DIR and nothing is archived.
set -u
out=${OUT:-out}; D=${GPU_TESTS_DIR:-/tmp/s49f}; mkdir -p "$out" "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
T="timeout -s INT -k 10"
PT="python -m pytest -q -m gpu -p no:cacheprovider -rs"
MULTI="tests/test_nccl.py tests/test_lda_devices.py tests/test_glm_devices.py tests/test_bayesnet_devices.py tests/test_distributed.py"
L0="tests/test_categorical.py tests/test_gamma.py tests/test_dirichlet_beta.py tests/test_philox.py tests/test_wishart.py tests/test_products_base.py tests/test_deferred.py tests/test_backend.py tests/test_loader.py"
L1="tests/test_mixture.py tests/test_nested.py tests/test_sampling.py tests/test_protocol.py tests/test_shards.py"
L2="tests/test_lda.py tests/test_lda_quality.py tests/test_sklearn.py tests/test_rbm.py tests/test_ising.py"
L3=""
for f in tests/test_*.py; do
  case " $MULTI $L0 $L1 $L2 " in *" $f "*) ;; *) L3="$L3 $f" ;; esac
done
echo "lane 3: $L3" > "$D/lanes.txt"
for k in 0 1 2 3; do
  eval "files=\$L$k"
  (CUDA_VISIBLE_DEVICES=$k GPUMCMC_CHECK_KERNEL_ARGS=1 $T 300 $PT $files > "$D/tests-lane$k.log" 2>&1
   echo "lane $k rc=$?") &
done
wait
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 200 $PT $MULTI tests/test_mixture.py::test_nccl_sharded_gibbs_gives_the_draws_of_one_device > "$D/tests-multi.log" 2>&1; echo "multi-GPU files rc=$?"
[ "${1:-}" = --tests-only ] && exit 0
for f in "$D"/tests-*.log; do echo "== $(basename "$f")"; grep -E "^FAILED|^ERROR" "$f" | head -8; tail -n 1 "$f"; done
tar czf "$out/session49-final.tgz" -C "$D" .
