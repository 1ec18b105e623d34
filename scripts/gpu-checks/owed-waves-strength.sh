#!/usr/bin/env bash
# The GPU checks owed by LDA's 16-wave z-draw grid (lda-waves.sh) and by the strengthened tests
# (test-strength.sh), run side by side on a host of 4 GPUs: one pytest or probe per GPU, then the NCCL
# tests and the scaling run on all of them. From the repository root, scripts/user_path.py copied in; $OUT
# gets them all in one archive.
set -u
out=/tmp/o47; final=${OUT:-out}
mkdir -p "$out"
CUDA_VISIBLE_DEVICES=0 bash -c "
  python -m benchmarks.probes.lda_launch --variants 4x16,4x32,4x64,4x16 --out $out/lda_launch_k1024.json > $out/probe-k1024.log 2>&1
  python -m benchmarks.probes.lda_launch --k 256 --variants 4x16 --out $out/lda_launch_k256_two_pass.json > $out/probe-k256.log 2>&1
  python -m benchmarks.probes.lda_launch --k 256 --fused-min-k 256 --variants 4x16,4x32 --out $out/lda_launch_k256_fused.json >> $out/probe-k256.log 2>&1
  python -m benchmarks.probes.sweep_kernels --iters 3 --out $out lda > $out/probe-sweep-kernels.log 2>&1" &
CUDA_VISIBLE_DEVICES=1 GPUMCMC_CHECK_KERNEL_ARGS=1 timeout -s INT 500 python -m pytest -m gpu -q -p no:cacheprovider -rf \
    tests/test_lda.py tests/test_lda_devices.py tests/test_token_order.py > "$out/pytest-lda.log" 2>&1 &
CUDA_VISIBLE_DEVICES=2 timeout -s INT 500 python -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_philox.py \
    tests/test_sampling.py tests/test_categorical.py tests/test_lda_quality.py tests/test_glm.py tests/test_protocol.py \
    > "$out/pytest-strength.log" 2>&1 &
CUDA_VISIBLE_DEVICES=3 timeout -s INT 500 python -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_loader.py \
    tests/test_backend.py tests/test_config.py tests/test_kernel_args.py tests/test_sklearn.py \
    > "$out/pytest-structure.log" 2>&1 &
wait
for f in pytest-lda pytest-strength pytest-structure; do echo "== $f"; tail -n 3 "$out/$f.log"; done
tail -n 8 "$out/probe-k1024.log"; tail -n 6 "$out/probe-k256.log"; tail -n 12 "$out/probe-sweep-kernels.log"
timeout -s INT 200 python -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_nccl.py -k lda > "$out/pytest-nccl-lda.log" 2>&1
echo "== nccl lda"; tail -n 3 "$out/pytest-nccl-lda.log"
timeout 240 python scripts/user_path.py scaling --out "$out/user_path_scaling.json" 2>&1 | grep -i scaling
mkdir -p "$final"; tar czf "$final/owed-waves-strength.tgz" -C "$out" .
