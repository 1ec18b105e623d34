#!/usr/bin/env bash
# GPU checks owed by LDA's z-draw grid of 16 waves (config.lda_zwaves, 5ad2d44) and the follow-up
# measurements it suggests. Run from the repository root on a host of 2 or 4 GPUs, with user_path.py
# copied to scripts/user_path.py; $OUT collects the JSON and logs.
set -u
out=${OUT:-out}
mkdir -p "$out"
# 1. Every LDA GPU test with each launch's arguments checked, and the data-parallel fit over 2 and 4 GPUs
#    (each shard's z-draw takes the new grid; its draws must stay those of one device).
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_lda.py \
    tests/test_lda_devices.py tests/test_token_order.py > "$out/pytest-lda.log" 2>&1
tail -n 3 "$out/pytest-lda.log"
python -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_nccl.py -k lda > "$out/pytest-nccl-lda.log" 2>&1
tail -n 3 "$out/pytest-nccl-lda.log"
# 2. More waves on K = 1024 (16 is the default; 32 gained a further 2% on the text in one run).
CUDA_VISIBLE_DEVICES=0 python -m benchmarks.probes.lda_launch --variants 4x16,4x32,4x64,4x16 \
    --out "$out/lda_launch_k1024.json" 2>&1 | tail -n 8
# 3. K = 256 takes the two-pass z-draw (below config.lda_fused_min_k = 512), chosen when the fused kernel ran
#    2 waves. With 16 it may win at K = 256 too: time both (the fused kernel moves a draw only where a prefix
#    sum lies within rounding of its target, so the draws differ between the methods, not between waves).
CUDA_VISIBLE_DEVICES=0 python -m benchmarks.probes.lda_launch --k 256 --variants 4x16 \
    --out "$out/lda_launch_k256_two_pass.json" 2>&1 | tail -n 3
CUDA_VISIBLE_DEVICES=0 python -m benchmarks.probes.lda_launch --k 256 --fused-min-k 256 --variants 4x16,4x32 \
    --out "$out/lda_launch_k256_fused.json" 2>&1 | tail -n 3
# 4. The data-parallel fits' efficiency with the new grid (LDA, the mixture, the GLM on 1, 2 and 4 GPUs).
python scripts/user_path.py scaling --out "$out/user_path_scaling.json" 2>&1 | grep scaling
