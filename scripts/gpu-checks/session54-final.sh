#!/usr/bin/env bash
# 2 GPUs, about 7 minutes: the GPU tests of what changed since session54-alone.sh (LDA's running sums of the
# posterior means given the counts, on one GPU, over two and in a CUDA graph; a negative categorical weight;
# RBM's BernoulliRBM names; info; the inverse Wishart), then user_path.py's LDA section (the public fit).
set -u
D=${OUT:-out}; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
T="timeout -s INT -k 10"
PT="python -m pytest -q -m gpu -p no:cacheprovider -rs"
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 220 $PT tests/test_lda_devices.py tests/test_nccl.py > "$D/tests-multi.log" 2>&1
echo "multi-GPU files rc=$?"
(export CUDA_VISIBLE_DEVICES=0; GPUMCMC_CHECK_KERNEL_ARGS=1 $T 240 $PT tests/test_lda.py tests/test_lda_quality.py \
   > "$D/tests-lane0.log" 2>&1; echo "lane 0 rc=$?") &
(export CUDA_VISIBLE_DEVICES=1; GPUMCMC_CHECK_KERNEL_ARGS=1 $T 240 $PT tests/test_categorical.py tests/test_rbm.py \
   tests/test_backend.py tests/test_wishart.py tests/test_sklearn.py > "$D/tests-lane1.log" 2>&1; echo "lane 1 rc=$?") &
wait
for f in "$D"/tests-*.log; do echo "== $(basename "$f")"; grep -E "^FAILED|^ERROR" "$f" | head -8; tail -n 1 "$f"; done
CUDA_VISIBLE_DEVICES=0 $T 200 python scripts/user_path.py lda --out "$D/user_path-lda.json" > "$D/user_path-lda.log" 2>&1
echo "user_path lda rc=$?"
python -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: v for k, v in d.items() if 'Mtokens' in k})" "$D/user_path-lda.json"
cd "$D" && tar czf logs.tgz *.log host.txt && rm -f *.log host.txt
