#!/usr/bin/env bash
# The GPU tests owed before the last issue-40 run: the shorter nested, Bayesian-network, Ising and RBM
# packages (line-cut-2.sh's files), and LDA's draws from the counts, side by side on a host of 4 GPUs (one
# file group a GPU, every launch's arguments checked), then the NCCL Bayesian-network tests. $OUT gets the logs.
set -u
out=${OUT:-out}; mkdir -p "$out"
export GPUMCMC_CHECK_KERNEL_ARGS=1
n=$(nvidia-smi -L | wc -l)
pt() { CUDA_VISIBLE_DEVICES=$(( $1 % n )) timeout -s INT 240 python -m pytest -m gpu -q -p no:cacheprovider -rf \
           "${@:3}" > "$out/$2.log" 2>&1; }
pt 0 bayesnet tests/test_bayesnet.py tests/test_bayesnet_devices.py &
pt 1 ising-rbm tests/test_ising.py tests/test_rbm.py &
pt 2 nested tests/test_nested.py &
pt 3 lda-sklearn tests/test_lda.py tests/test_sklearn.py &
wait
unset GPUMCMC_CHECK_KERNEL_ARGS
[ "$n" -ge 2 ] && timeout -s INT 120 python -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_nccl.py \
    -k "bayesnet or lda" > "$out/nccl.log" 2>&1
for f in bayesnet ising-rbm nested lda-sklearn nccl; do echo "== $f"; tail -n 3 "$out/$f.log"; done
