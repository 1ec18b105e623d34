#!/usr/bin/env bash
# Every GPU check owed by the code changed since the last GPU run (8466ba3's fixes, and the shorter model
# packages after it), in one call: run from the repository root on a host of 2 or 4 GPUs
# (nvidia-h100-x4 where lent). Logs go to $OUT.
#   1. `pytest -m gpu` over every test file, every launch's arguments checked, the files split over the
#      visible GPUs and run side by side (one pytest a GPU);
#   2. the NCCL tests on every GPU;
#   3. optionally (OWED_TIMINGS=1) user_path.py's rows of every model, alone on the host.
# The per-area scripts beside this one say which test covers which moved function.
set -u
out=${OUT:-out}
mkdir -p "$out"
n=$(nvidia-smi -L | wc -l)
groups=(
    "tests/test_lda.py tests/test_lda_devices.py tests/test_lda_quality.py tests/test_token_order.py tests/test_protocol.py"
    "tests/test_glm.py tests/test_glm_devices.py tests/test_sklearn.py"
    "tests/test_mixture.py tests/test_sampling.py tests/test_nested.py tests/test_ising.py tests/test_rbm.py"
    "tests/test_bayesnet.py tests/test_bayesnet_devices.py tests/test_gamma.py tests/test_dirichlet_beta.py tests/test_wishart.py tests/test_categorical.py tests/test_butterfly.py tests/test_philox.py tests/test_shards.py tests/test_deferred.py tests/test_backend.py tests/test_kernel_args.py tests/test_distributed.py tests/test_loader.py tests/test_products_base.py tests/test_readme.py"
)
export GPUMCMC_CHECK_KERNEL_ARGS=1
pids=()
for i in "${!groups[@]}"; do
    gpu=$(( i % n ))
    # shellcheck disable=SC2086
    CUDA_VISIBLE_DEVICES=$gpu timeout -s INT 540 python -m pytest -m gpu -q -p no:cacheprovider -rf \
        ${groups[$i]} > "$out/owed-gpu-$i.log" 2>&1 &
    pids+=($!)
    # one GPU: run the groups one after another
    [ "$n" -eq 1 ] && wait "${pids[-1]}"
done
wait
for i in "${!groups[@]}"; do echo "== group $i: ${groups[$i]}"; tail -n 4 "$out/owed-gpu-$i.log"; done
unset GPUMCMC_CHECK_KERNEL_ARGS
if [ "$n" -ge 2 ]; then
    timeout -s INT 300 python -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_nccl.py \
        > "$out/owed-nccl.log" 2>&1
    echo "== NCCL on $n GPUs"; tail -n 4 "$out/owed-nccl.log"
fi
if [ "${OWED_TIMINGS:-0}" = 1 ] && [ -f scripts/user_path.py ]; then
    for part in mixture bayesnet ising glm lda nested; do
        timeout 300 python scripts/user_path.py "$part" --out "$out/user_path_$part.json" > "$out/user_path_$part.log" 2>&1
        tail -n 3 "$out/user_path_$part.log"
    done
fi
