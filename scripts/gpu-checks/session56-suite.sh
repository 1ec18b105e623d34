#!/usr/bin/env bash
# 2 or 4 GPUs, under 10 minutes: the whole `pytest -m gpu` with every launch's arguments checked, the
# single-GPU files first (one lane a GPU, which fills the kernel cache), then the multi-GPU files with every
# GPU visible. Covers what no GPU has run yet: the categorical bad-row cases, LDA's tidied sums, the Bayesian
# network's counts kept beside its draws (cpts_ from them, in and out of the CUDA graph), the nested start.
set -u
D=${OUT:-out}; mkdir -p "$D"; N=$(nvidia-smi -L | wc -l)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
T="timeout -s INT -k 10"
PT="python -m pytest -q -m gpu -p no:cacheprovider -rs"
MULTI="tests/test_nccl.py tests/test_lda_devices.py tests/test_glm_devices.py tests/test_bayesnet_devices.py tests/test_distributed.py"
files=""; for f in tests/test_*.py; do case " $MULTI " in *" $f "*) ;; *) files="$files $f" ;; esac; done
k=0; lanes=$(( N >= 4 ? 4 : N )); LIM=$(( N >= 4 ? 330 : 400 ))
for i in $(seq 0 $((lanes - 1))); do eval "L$i=''"; done
for f in $files; do eval "L$((k % lanes))=\"\$L$((k % lanes)) $f\""; k=$((k + 1)); done
for i in $(seq 0 $((lanes - 1))); do
  eval "fl=\$L$i"
  (CUDA_VISIBLE_DEVICES=$i GPUMCMC_CHECK_KERNEL_ARGS=1 $T $LIM $PT $fl > "$D/tests-lane$i.log" 2>&1; echo "lane $i rc=$?") &
done
wait
GPUMCMC_CHECK_KERNEL_ARGS=1 $T $(( 570 - LIM )) $PT $MULTI > "$D/tests-multi.log" 2>&1; echo "multi-GPU files rc=$?"
for f in "$D"/tests-*.log; do echo "== $(basename "$f")"; grep -E "^FAILED|^ERROR" "$f" | head -8; tail -n 1 "$f"; done
cd "$D" && tar czf logs.tgz *.log host.txt && rm -f *.log host.txt
