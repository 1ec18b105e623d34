#!/usr/bin/env bash
# The GPU tests owed by the gamma launch plan's refactor (every launch's arguments checked), the relabelling
# probe, then LDA over the host's GPUs with the settled scaling suite beside user_path.py's public fit.
set -u
out=${OUT:-out}; mkdir -p "$out/logs"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$out/logs/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$out/logs/host.txt" 2>&1
(CUDA_VISIBLE_DEVICES=0 GPUMCMC_CHECK_KERNEL_ARGS=1 timeout 240 python -m pytest -q -m gpu -p no:cacheprovider \
   tests/test_gamma.py tests/test_dirichlet_beta.py > "$out/logs/tests-gamma.log" 2>&1; echo "gamma rc=$?") &
(CUDA_VISIBLE_DEVICES=1,2 GPUMCMC_CHECK_KERNEL_ARGS=1 timeout 240 python -m pytest -q -m gpu -p no:cacheprovider \
   tests/test_lda.py > "$out/logs/tests-lda.log" 2>&1; echo "lda rc=$?") &
(CUDA_VISIBLE_DEVICES=3 OUT=$out timeout 200 python scripts/gpu-checks/align_probe.py > "$out/logs/align_probe.log" 2>&1; echo "probe rc=$?") &
wait
tail -n 3 "$out"/logs/tests-*.log; tail -c 3000 "$out/logs/align_probe.log"
OUT=$out/lda-scaling bash scripts/gpu-checks/lda-scaling-settled.sh
tar czf "$out/session48-first.tgz" -C "$out" logs lda-scaling align_probe.json 2>/dev/null
