#!/usr/bin/env bash
# 2 GPUs, about 4 minutes: LDA's running sums of the posterior means given the counts, formed in the column
# normalisation's kernels: the LDA GPU tests (one device, two, the CUDA graph, NCCL), then user_path.py's LDA.
set -u
D=${OUT:-out}; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
T="timeout -s INT -k 10"
PT="python -m pytest -q -m gpu -p no:cacheprovider -rs"
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 200 $PT tests/test_lda.py tests/test_lda_quality.py tests/test_kernel_args.py \
  tests/test_lda_devices.py > "$D/tests.log" 2>&1
echo "tests rc=$?"; grep -E "^FAILED|^ERROR" "$D/tests.log" | head -8; tail -n 1 "$D/tests.log"
CUDA_VISIBLE_DEVICES=0 $T 200 python scripts/user_path.py lda --out "$D/user_path-lda.json" > "$D/user_path-lda.log" 2>&1
echo "user_path lda rc=$?"
python -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: v for k, v in d.items() if 'Mtokens' in k})" "$D/user_path-lda.json"
cd "$D" && tar czf logs.tgz *.log host.txt && rm -f *.log host.txt
