#!/usr/bin/env bash
# 4 GPUs (2 work, slower), about 6 minutes: config.compile_kernels_alone before it becomes the default.
# 1. Each model's first call with an empty kernel cache, with the knob off and on (GPUMCMC_LOG_COMPILES=1 logs
#    each compilation), one lane a GPU (the compilations run on the host's CPU cores).
# 2. The whole `pytest -m gpu` with the knob on (set in this copy of the tree), every launch's arguments
#    checked: the multi-GPU files with every GPU visible, then the rest in a lane a GPU.
set -u
D=${OUT:-out}; mkdir -p "$D"; N=$(nvidia-smi -L | wc -l)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
T="timeout -s INT -k 10"
cold() {  # model, GPU
  for alone in False True; do
    C=$(mktemp -d)
    r=$(CUDA_VISIBLE_DEVICES=$2 CUPY_CACHE_DIR=$C GPUMCMC_LOG_COMPILES=1 timeout 150 python -c "
import sys, runpy; from gpumcmc._config import config; config.compile_kernels_alone = $alone
sys.argv = ['coldstart.py', '$1']; runpy.run_path('scripts/gpu-checks/coldstart.py', run_name='__main__')" \
      2> "$D/cold-$1-$alone.err" | tail -n 1)
    echo "alone=$alone $r"
  done
}
lanes=$(( N >= 4 ? 4 : N )); i=0
for m in primitives lda mixture bayesnet glm ising nested rbm; do
  cold $m $((i % lanes)) > "$D/cold-$m.txt" &
  i=$((i + 1)); [ $((i % lanes)) = 0 ] && wait
done; wait
cat "$D"/cold-*.txt | tee "$D/coldstart.txt"
sed -i 's/"compile_kernels_alone": False/"compile_kernels_alone": True/' gpumcmc/_config.py
grep -n '"compile_kernels_alone"' gpumcmc/_config.py
PT="python -m pytest -q -m gpu -p no:cacheprovider -rs"
MULTI="tests/test_nccl.py tests/test_lda_devices.py tests/test_glm_devices.py tests/test_bayesnet_devices.py tests/test_distributed.py"
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 240 $PT $MULTI > "$D/tests-multi.log" 2>&1; echo "multi-GPU files rc=$?"
files=""; for f in tests/test_*.py; do case " $MULTI " in *" $f "*) ;; *) files="$files $f" ;; esac; done
k=0
for i in $(seq 0 $((lanes - 1))); do eval "L$i=''"; done
for f in $files; do eval "L$((k % lanes))=\"\$L$((k % lanes)) $f\""; k=$((k + 1)); done
for i in $(seq 0 $((lanes - 1))); do
  eval "fl=\$L$i"
  (CUDA_VISIBLE_DEVICES=$i GPUMCMC_CHECK_KERNEL_ARGS=1 $T 330 $PT $fl > "$D/tests-lane$i.log" 2>&1; echo "lane $i rc=$?") &
done
wait
for f in "$D"/tests-*.log; do echo "== $(basename "$f")"; grep -E "^FAILED|^ERROR" "$f" | head -8; tail -n 1 "$f"; done
cd "$D" && tar czf logs.tgz *.log *.err *.txt && rm -f *.log *.err *.txt
